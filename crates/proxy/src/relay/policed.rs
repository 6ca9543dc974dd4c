//! The policies in the fast lane: a call of a tool some policy is scoped to stays in the lane when the policies allow
//! it at once for this front's caller, decided as the normal path decides it (`policy.rs`); a call they refuse or put
//! to a person, or whose caller the lane cannot name as the normal path would, takes the normal path, which decides
//! again and answers.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use ad_policy::{Call, Outcome};

use crate::state::FrontLane;

impl FrontLane {
    /// Whether the policies let a lane call of `server`'s `tool` with `args` go on in the lane. The caller is the
    /// one the normal path names: no principal (no lane runs with the identity front on), not a script, and the
    /// session's client (its `clientInfo.name`); a stateless 2026-07-28 request names its own client, so it goes the
    /// normal way, as does a call of a front whose client has not initialized.
    pub(super) fn policies_pass(
        &self,
        server: &str,
        tool: &str,
        args: Option<&RawValue>,
        stateless: bool,
    ) -> bool {
        let Some(policies) = self
            .proxy
            .policies()
            .filter(|p| p.active() && p.covers(server, tool))
        else {
            return true;
        };
        if stateless {
            return false;
        }
        let Some(info) = self.peer.get().and_then(|p| p.peer_info()) else {
            return false;
        };
        // The arguments as the normal path has them (rmcp's object); the lane took only objects or none.
        let args: Option<Map<String, Value>> = match args {
            None => None,
            Some(raw) => match serde_json::from_str(raw.get()) {
                Ok(m) => Some(m),
                Err(_) => return false,
            },
        };
        let call = Call {
            user: None,
            groups: &[],
            client: Some(info.client_info.name.as_str()),
            script: false,
            server,
            tool,
            args: args.as_ref(),
        };
        policies
            .evaluate_call(&call)
            .is_none_or(|d| d.outcome == Outcome::Allow)
    }
}
