//! The registry tool's `proxy_call` on the fast lane (stdio front): a legacy client's `tools/call` of `registry`
//! with `action: "proxy_call"` naming a tool the lane may call (a running legacy stdio child's tool, exposed now,
//! allowed and approved, visible) is relayed as a direct call of that tool would be. Its answer is the child's
//! result as written, which is what `proxy_call` answers on the normal path (`mcp/calls.rs`), and its failures are
//! shaped by the same function. A child's question mid-call goes to this client alone, as `proxy_call` puts it
//! (`Caller::questions_to_caller`): the call is handed to an exchange of `held.rs` (`relay/handover.rs`), which asks
//! the client if it declared the capability and otherwise ends the call with the typed `input_required` error.
//! Anything else (other keys, a 2026-07-28 client, tracing on, a target the lane does not take) goes the normal way.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::state::{ChildLane, FrontLane};

/// The front's registry tool (`mcp/registry_tool`).
const REGISTRY_TOOL: &str = "registry";

/// The registry tool's arguments for a `proxy_call` the lane reads (borrowed, the tool's arguments left as written):
/// any other key makes the parse fail and leaves the call to the normal path.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyCallArgs<'a> {
    #[serde(borrow)]
    action: Cow<'a, str>,
    #[serde(default, borrow)]
    call_as: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    server: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    tool: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

impl FrontLane {
    /// The child lane, the tool's own name and its arguments when the call `name(args)` is a `proxy_call` the lane
    /// takes; `None` sends it the normal way.
    pub(super) fn proxy_call<'a>(
        &self,
        name: &str,
        args: Option<&'a RawValue>,
    ) -> Option<(Arc<ChildLane>, String, Option<&'a RawValue>)> {
        if name != REGISTRY_TOOL || self.peer.get().is_none() || ad_core::trace::enabled() {
            return None;
        }
        let call: ProxyCallArgs<'a> = serde_json::from_str(args?.get()).ok()?;
        // The registry tool types the arguments as an object (or none, `null` included).
        if call.action != "proxy_call" || call.arguments.is_some_and(|a| !a.get().starts_with('{'))
        {
            return None;
        }
        // As `registry_tool::names::target` resolves them, in the unambiguous cases only.
        let (server, tool) = match (&call.call_as, &call.server, &call.tool) {
            (Some(call_as), None, None) => self.proxy.resolve(call_as)?,
            (None, Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => {
                (s.to_string(), t.to_string())
            }
            _ => return None,
        };
        // What the registry tool and the proxied call check (a stdio caller has no principal).
        if !self.proxy.visible_to(None, &server, Some(&tool)) {
            return None;
        }
        let (lane, tool, _) = self.proxy.fast_target_of(&server, &tool)?;
        Some((lane, tool, call.arguments))
    }
}
