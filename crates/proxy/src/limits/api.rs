//! The proxy's limits as the fronts reach them: read a server's settings and state, set or reset them, close an
//! open breaker, and the `/metrics` text.

use serde_json::Value;

use ad_core::error::Result;
use ad_core::limits::LimitSettings;

use crate::state::Proxy;

impl Proxy {
    /// A server's limits and their state in this process (tokens, calls in flight and queued, the breaker).
    pub fn limits_of(&self, server: &str) -> Result<Value> {
        let s = self.inner.registry.get(server)?;
        Ok(self.inner.limits.of(&s.name).view())
    }

    /// Every registered server's limits and state, by name.
    pub fn limits_all(&self) -> Result<Vec<Value>> {
        let names: Vec<String> = self
            .inner
            .registry
            .list(&Default::default())?
            .into_iter()
            .map(|s| s.server.name)
            .collect();
        Ok(self.inner.limits.views(&names))
    }

    /// Replaces a server's limits (`None`: back to the defaults); they apply to the next call here at once, and in
    /// other processes after their next look at the registry (a quarter second on SQLite; on PostgreSQL once the
    /// change's notification arrives).
    pub fn set_limits(&self, server: &str, settings: Option<LimitSettings>) -> Result<Value> {
        self.inner.registry.set_limit_settings(server, settings)?;
        self.inner.limits.refresh(true);
        self.limits_of(server)
    }

    /// Closes a server's open breaker (here and, in team mode, for every replica).
    pub fn reset_breaker(&self, server: &str) -> Result<Value> {
        let s = self.inner.registry.get(server)?;
        self.inner.limits.reset(&s.name);
        self.limits_of(&s.name)
    }

    /// The breaker's state of a server (`closed`, `open`, `half_open`, `off`), for `status`.
    pub fn breaker_state(&self, server: &str) -> &'static str {
        self.inner.limits.of(server).breaker_state()
    }

    /// Refusals by limit and breaker states, in Prometheus' text format (appended to `/metrics`).
    pub fn limits_prometheus(&self) -> String {
        self.inner.limits.prometheus()
    }
}
