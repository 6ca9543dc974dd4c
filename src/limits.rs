//! The limits use cases: show a server's rate limits, concurrency cap and circuit breaker with their state, change
//! them, close an open breaker. What the fronts call (`agent-discover limits`, `/api/servers/{id}/limits` and
//! `/api/limits`, the `registry` tool's `limits` action, the dashboard). Settings are stored by `ad_registry::limits`;
//! enforcing them and their state are the proxy's (`ad_proxy`'s `limits/`).

use serde_json::Value;

use crate::app::App;
use ad_core::error::Result;
pub use ad_core::limits::{LimitSettings, LimitsPatch};

impl App {
    /// A server's limits: `{server, settings, tokens?, concurrency?, breaker: {state, ...}, refused}`. The live
    /// fields are this process's (the one serving the calls, for REST and the dashboard); the breaker's state is
    /// shared through the registry, so another process shows it too.
    pub fn limits_view(&self, name: &str) -> Result<Value> {
        self.proxy.limits_of(name)
    }

    /// Every server's limits, by name.
    pub fn limits_list(&self) -> Result<Vec<Value>> {
        self.proxy.limits_all()
    }

    /// Changes a server's limits (the fields `patch` has; `reset` first goes back to the defaults) and answers the
    /// new view. Applies to the server's next call.
    pub fn set_limits(&self, name: &str, patch: LimitsPatch) -> Result<Value> {
        let current = self.registry.limit_settings(name)?;
        let settings = patch.apply(current)?;
        self.proxy.set_limits(name, Some(settings))
    }

    /// [`App::set_limits`] only when the result is at least as strict as what applies now (the `registry` tool: an
    /// agent may tighten its limits, never loosen them).
    pub fn tighten_limits(&self, name: &str, patch: LimitsPatch) -> Result<Value> {
        let current = self.registry.limit_settings(name)?;
        let settings = patch.apply(current.clone())?;
        if let Err(what) = settings.at_least_as_strict_as(&current) {
            return Err(ad_core::error::Error::invalid(
                "limits",
                format!(
                    "this would loosen the {what} of server `{name}`; only a person may (`agent-discover limits set`, REST or the dashboard)"
                ),
            ));
        }
        self.proxy.set_limits(name, Some(settings))
    }

    /// Closes a server's open circuit breaker at once (its next call goes through).
    pub fn reset_breaker(&self, name: &str) -> Result<Value> {
        self.proxy.reset_breaker(name)
    }
}
