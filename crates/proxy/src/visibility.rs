//! Visibility per user (issue 30): which servers and tools the caller's principal may list and call. The rule is
//! the application's (groups from its identity settings), set once; the proxy applies it to calls, reads and lists
//! made for a caller with a principal. A caller without one (a single user, stdio, the CLI) sees everything.

use ad_core::error::Error;
use ad_core::identity::Principal;

use crate::caller::Caller;
use crate::state::Proxy;
pub use crate::state::{Rule, Visibility};
use crate::sync::lock;

impl Proxy {
    /// Sets the rule [`Proxy::visible`] applies.
    pub fn set_visibility(&self, rule: Visibility) {
        *lock(&self.inner.visibility) = Some(rule);
    }

    /// Whether `principal` may see `server` (and its `tool`): always without a principal or without a rule.
    pub fn visible_to(
        &self,
        principal: Option<&Principal>,
        server: &str,
        tool: Option<&str>,
    ) -> bool {
        let Some(p) = principal else { return true };
        let rule = lock(&self.inner.visibility).clone();
        rule.is_none_or(|r| r.allows(p, server, tool))
    }

    /// Whether a caller with `principal` may do everything (none: a single user; or an admin).
    pub fn sees_all(&self, principal: Option<&Principal>) -> bool {
        let Some(p) = principal else { return true };
        let rule = lock(&self.inner.visibility).clone();
        rule.is_none_or(|r| r.is_admin(p))
    }

    /// [`Proxy::visible_to`] for a caller, within the caller's profile when it has one.
    pub fn visible(&self, caller: &Caller, server: &str, tool: Option<&str>) -> bool {
        caller
            .profile
            .as_ref()
            .is_none_or(|p| p.allows(server, tool))
            && self.visible_to(caller.principal.as_deref(), server, tool)
    }

    /// The refusal of a tool outside the caller's profile (none without a profile, or for a tool inside it).
    pub fn outside_profile(&self, caller: &Caller, server: &str, tool: &str) -> Option<Error> {
        let p = caller.profile.as_ref()?;
        (!p.allows(server, Some(tool))).then(|| Error::OutsideProfile {
            profile: p.name.clone(),
            server: server.to_owned(),
            tool: tool.to_owned(),
        })
    }
}
