//! Policies on the one call path every front shares (`crates/policy`): before the approval step, a call of a tool
//! some policy is scoped to is put to the policy set in force, with who makes it (the principal's user and groups, the
//! client) and its arguments. `deny` refuses with [`Error::PolicyDenied`] naming the deciding policy; `ask` makes the
//! approval step ask a person whatever the tool's approval rules say (`approval.rs`); `allow` leaves the call to
//! those rules. The fast lane (`relay.rs`) relays a call of a tool some policy is scoped to only when the policies
//! allow it at once for the front's caller (`relay/policed.rs`); one atomic load decides while no policy is in force.

use serde_json::{Map, Value};

use ad_core::error::{Error, Result};
use ad_policy::{Call, Outcome, Policies};

use crate::caller::Caller;
use crate::state::Proxy;

impl Proxy {
    /// Puts `policies` in force for every call through this proxy (once, by the application at start).
    pub fn set_policies(&self, policies: Policies) {
        let _ = self.inner.policies.set(policies);
    }

    /// The policies in force, when the application set them.
    pub fn policies(&self) -> Option<&Policies> {
        self.inner.policies.get()
    }

    /// The policy step of a call: `Ok(None)` goes on, `Ok(Some(policy))` asks a person (the policy's id), `Err`
    /// refuses.
    pub(crate) fn police(
        &self,
        server: &str,
        tool: &str,
        args: Option<&Map<String, Value>>,
        caller: &Caller,
    ) -> Result<Option<String>> {
        police(self.inner.policies.get(), server, tool, args, caller)
    }
}

/// The policy step of a call as the call path takes it (public for the benchmark): who calls, from the caller; the
/// decision of the policies in force. `Ok(None)` goes on, `Ok(Some(policy))` asks a person, `Err` refuses.
pub fn police(
    policies: Option<&Policies>,
    server: &str,
    tool: &str,
    args: Option<&Map<String, Value>>,
    caller: &Caller,
) -> Result<Option<String>> {
    let Some(policies) = policies.filter(|p| p.active()) else {
        return Ok(None);
    };
    let client = client_of(caller);
    let principal = caller.principal.as_deref();
    let call = Call {
        user: principal.map(|p| p.sub.as_str()),
        groups: principal.map(|p| p.groups.as_slice()).unwrap_or_default(),
        client: client.as_deref(),
        script: caller.script,
        server,
        tool,
        args,
    };
    let Some(decision) = policies.evaluate_call(&call) else {
        return Ok(None);
    };
    match decision.outcome {
        Outcome::Allow => Ok(None),
        Outcome::Ask => Ok(Some(decision.policy().to_owned())),
        Outcome::Deny => Err(Error::PolicyDenied {
            server: server.to_owned(),
            tool: tool.to_owned(),
            policy: decision.policy().to_owned(),
            reason: decision.reason.into(),
        }),
    }
}

/// The calling client as policies name it (`context.client`): its MCP `clientInfo.name`, else the OAuth client the
/// principal's token was issued to, else `rest` or `cli` from the caller's session.
pub fn client_of(caller: &Caller) -> Option<String> {
    if let Some(info) = caller.peer.as_ref().and_then(|p| p.peer_info()) {
        return Some(info.client_info.name.clone());
    }
    if let Some(id) = caller.principal.as_ref().and_then(|p| p.client_id.clone()) {
        return Some(id);
    }
    let session = caller.session.as_deref()?;
    ["rest", "cli"]
        .into_iter()
        .find(|k| session.starts_with(&format!("{k}:")))
        .map(str::to_owned)
}
