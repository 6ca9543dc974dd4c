//! The sandbox use cases: show a server's sandbox (its settings, whether its next start is confined, every path it
//! would be granted and where each comes from, what the kernel offers) and change its settings. What the fronts call
//! (`agent-discover sandbox`, `GET`/`PUT /api/servers/{id}/sandbox`, the `registry` tool's `sandbox` action), and the
//! summary listings and `status` carry.
//!
//! The settings are stored by `ad_registry::sandbox`; the grants and the kernel probe are the proxy's
//! (`ad_proxy::sandbox`), the same code a start of the server runs. A change restarts nothing: it applies at the
//! server's next start.

pub mod net;
pub mod types;

use serde_json::{Value, json};

use crate::app::App;
use crate::model::{Server, Transport};
use ad_core::error::{Error, Result};
/// The sandbox vocabulary (`ad_core::sandbox`), under the application's path as the other lower crates are.
pub use ad_core::sandbox::{Grant, GrantSource, Network, SandboxSettings};
pub use types::{SandboxBrief, SandboxPatch, grant_json};

/// What a changed setting says of when it takes effect.
pub const APPLIES: &str = "at the next start of the server";

impl App {
    /// A server's sandbox: `{server, enabled, effective, network, read, write, grants, kernel}`.
    pub fn sandbox_view(&self, name: &str) -> Result<Value> {
        let s = self.registry.get(name)?;
        let settings = self.registry.sandbox_settings(s.id)?;
        Ok(self.sandbox_json(&s, &settings))
    }

    /// Changes a server's sandbox settings (the fields `patch` has) and answers the new view with `applies`. A remote
    /// server starts no process here, so it has nothing to confine: refused.
    pub fn set_sandbox(&self, name: &str, patch: SandboxPatch) -> Result<Value> {
        let s = self.registry.get(name)?;
        if s.transport != Transport::Stdio {
            return Err(Error::invalid(
                "name",
                format!(
                    "server `{}` is remote ({}): the sandbox confines the processes of stdio servers only",
                    s.name,
                    s.transport.as_str()
                ),
            ));
        }
        let settings = patch.apply(self.registry.sandbox_settings(s.id)?)?;
        let stored = self.registry.set_sandbox_settings(&s.name, settings)?;
        let mut view = self.sandbox_json(&s, &stored);
        view["applies"] = json!(APPLIES);
        Ok(view)
    }

    /// What a listing shows of a server's sandbox; `None` for a remote server.
    pub fn sandbox_brief(&self, server: &Server) -> Result<Option<SandboxBrief>> {
        if server.transport != Transport::Stdio {
            return Ok(None);
        }
        let settings = self.registry.sandbox_settings(server.id)?;
        Ok(Some(SandboxBrief {
            enabled: settings.enabled,
            effective: settings.enabled && self.sandbox_globally_enabled(),
            network: settings.network,
        }))
    }

    /// Starts a stdio server once, confined as its next start will be, and reports what happened:
    /// `{server, confined, ok, tool_count, error, error_kind, refused: [{path, access, credential, evidence}], advice}`.
    /// `refused` lists what the sandbox refused it, read from what it printed (on success too: a server may go on
    /// without a file it wanted); `advice` is the command that grants them. Its status is left as it was.
    pub async fn sandbox_check(&self, name: &str) -> Result<Value> {
        let s = self.registry.get(name)?;
        if s.transport != Transport::Stdio {
            return Err(Error::invalid(
                "name",
                format!(
                    "server `{}` is remote ({}): it starts no process here, there is nothing to check",
                    s.name,
                    s.transport.as_str()
                ),
            ));
        }
        let settings = self.registry.sandbox_settings(s.id)?;
        let timeout = s
            .activate_timeout_ms
            .map(std::time::Duration::from_millis)
            .unwrap_or(self.config.timeouts.activate);
        let outcome = self.proxy.check(&s.name, timeout).await;
        let (ok, tool_count, error, kind, lines) = match outcome {
            Ok((n, lines)) => (true, Some(n), None, None, lines),
            Err(e @ (Error::NotFound { .. } | Error::Store(_))) => return Err(e),
            Err(e) => {
                let text = e.to_string();
                let lines = text.lines().map(str::to_owned).collect();
                (false, None, Some(text), Some(e.call_kind()), lines)
            }
        };
        let mut env = s.env.clone();
        env.extend(self.secrets.env_for(s.id).unwrap_or_default());
        let refused = ad_proxy::sandbox::explain::Start {
            config: &self.config.sandbox,
            server: &s.name,
            program: s.command.as_deref().unwrap_or_default(),
            args: &s.args,
            env: &env,
            settings: &settings,
        }
        .refusals(&lines);
        let paths = (!refused.is_empty())
            .then(|| ad_proxy::sandbox::explain::advice(&s.name, &refused, &settings));
        let hosts = net::advice(&s.name, &settings);
        let advice = match (paths, hosts) {
            (Some(p), Some(h)) => Some(format!("{p}; {h}")),
            (p, h) => p.or(h),
        };
        Ok(json!({
            "server": s.name,
            "confined": settings.enabled && self.sandbox_globally_enabled(),
            "ok": ok,
            "tool_count": tool_count,
            "error": error,
            "error_kind": kind,
            "refused": refused,
            "refused_hosts": net::refused_hosts(&s.name),
            "network": ad_core::sandbox::network_text(settings.network, &settings.hosts),
            "advice": advice,
        }))
    }

    /// Adds `sandbox` (the [`SandboxBrief`]) to a listing's JSON object for `server`, when it is a stdio server.
    pub fn add_sandbox_brief(&self, v: &mut Value, server: &Server) -> Result<()> {
        if let (Some(brief), Some(obj)) = (self.sandbox_brief(server)?, v.as_object_mut()) {
            obj.insert("sandbox".into(), json!(brief));
        }
        Ok(())
    }

    /// What the kernel offers the sandbox: `{landlock_abi, user_namespaces, missing}` (`missing`: why children cannot
    /// be confined here, or null), plus whether `AGENT_DISCOVER_SANDBOX` leaves confinement on (`enabled`).
    pub fn sandbox_kernel(&self) -> Value {
        let k = ad_proxy::sandbox::kernel();
        json!({
            "enabled": self.sandbox_globally_enabled(),
            "landlock_abi": k.landlock_abi,
            "user_namespaces": k.user_namespaces,
            "missing": k.missing(),
        })
    }

    fn sandbox_globally_enabled(&self) -> bool {
        ad_proxy::sandbox::globally_enabled(&self.config.sandbox)
    }

    fn sandbox_json(&self, s: &Server, settings: &SandboxSettings) -> Value {
        let stdio = s.transport == Transport::Stdio;
        let raw = if stdio {
            self.sandbox_grants(s, settings)
        } else {
            Vec::new()
        };
        let grants: Vec<Value> = raw.iter().map(grant_json).collect();
        let mut view = json!({
            "server": s.name,
            "enabled": settings.enabled,
            "effective": stdio && settings.enabled && self.sandbox_globally_enabled(),
            "network": settings.network,
            "read": settings.read,
            "write": settings.write,
            "grants": grants,
            "kernel": self.sandbox_kernel(),
        });
        if stdio {
            self.add_network_view(&mut view, s, settings, &raw);
        } else {
            view["note"] =
                json!("a remote server starts no process here: there is nothing to confine");
        }
        view
    }

    /// The paths a start of `s` would be granted: the same computation its start runs, over its configured
    /// environment and its secrets (a secret that names an existing path is granted, so it is shown too).
    fn sandbox_grants(&self, s: &Server, settings: &SandboxSettings) -> Vec<Grant> {
        let mut env = s.env.clone();
        env.extend(self.secrets.env_for(s.id).unwrap_or_default());
        ad_proxy::sandbox::grants(
            &self.config.sandbox,
            &s.name,
            s.command.as_deref().unwrap_or_default(),
            &s.args,
            &env,
            settings,
        )
    }
}
