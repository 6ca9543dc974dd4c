//! Approvals bound to arguments (#27), on the one call path every front shares: before `Proxy::call_tool_response`
//! calls a child, the tool's policy is resolved from the server's rules (`ad_registry::approval`). `allow` goes on,
//! `deny` refuses at once ([`Error::ApprovalDenied`] by `policy`), and `ask` puts the call to a person, bound to the
//! SHA-256 of (server, tool, canonical arguments), in the way the caller can take:
//!
//! - a 2026-07-28 caller that declared elicitation gets an input-required result asking `approval` (an elicitation
//!   form) with a `requestState` this process signs (`held/store.rs`, prefix `adap1`), bound to the digest and the
//!   deadline; its retry carries the answer, and a forged, altered, foreign or expired token, or other arguments,
//!   are refused. Once approved, an input-required result the child itself sends back gets its `requestState` sealed
//!   into a `go` token bound to the same digest, so the rounds that follow are not asked again;
//! - a legacy caller whose client declared elicitation is sent `elicitation/create` with the same form;
//! - anyone else (REST, the CLI, MCP clients without elicitation) waits on a pending approval that a person decides
//!   with `agent-discover approvals`, REST or the dashboard, in this process or another one (noticed through the
//!   event bus and `ad_store::watch`), until the call's deadline.
//!
//! The deadline of an approval is the server's call timeout (`call_timeout_ms`, default 60 s), counted from the call;
//! the child then gets its own full call timeout. An approval holds once, or, when the person picks "for this
//! session", for the same digest for the rest of the caller's session ([`Caller::session`]). Each request and
//! decision is an event (`approval:requested`, `approval:decided`) and is noted in the call's call-log entry; a
//! refused call is logged as a failed call with its kind.
//!
//! The fast lane (`relay.rs`) never relays a tool whose policy is not `allow`: [`Inner::gate_approvals`] keeps each
//! child's set of such tools, computed when its tools are gated and when rules change here ([`Proxy::reload_approvals`],
//! also called by the feed when another process commits).

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolResponse, ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitResult,
    ElicitationAction, ElicitationSchema, InputRequest, InputRequiredResult,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value, json};

use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_registry::approval::{ApprovalPolicy, Scope, canonical_arguments, digest};
use ad_store::NewApproval;

use crate::caller::Caller;
use crate::held::store::{ApprovalClaims, Refusal};
use crate::state::{Child, Inner, Proxy};
use crate::sync::lock;

mod ask;
use ask::with_id;

/// The key of the approval question in an input-required result, and of its answer in the retry.
pub const INPUT_KEY: &str = "approval";

/// Arguments larger than this are not put in an elicitation message: the call waits for the dashboard or the CLI,
/// which show them whole (a person must see everything the approval is bound to).
const SHOWN_MAX: usize = 64 * 1024;

/// What the approval step lets through. Made once per call and taken apart at once: the size of `Go` costs nothing
/// worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Gate {
    /// Call the child with this caller (an approval token it carried taken off). `wrap`: the digest an input-required
    /// result of the child is to be sealed under, so the retry passes as approved. `note`: what the call log says about
    /// the approval.
    Go {
        caller: Caller,
        wrap: Option<String>,
        note: Option<String>,
    },
    /// The caller is asked (an input-required result for a 2026-07-28 caller).
    Asked(CallToolResponse),
}

/// A person's answer.
struct Decision {
    approved: bool,
    scope: Scope,
    by: String,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

fn ms_i64(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// Whether a client that declared `caps` takes a form elicitation.
fn takes_forms(caps: &ClientCapabilities) -> bool {
    caps.elicitation
        .as_ref()
        .is_some_and(|e| e.form.is_some() || e.url.is_none())
}

/// The form a person answers: approve once, approve for the session (when the caller has one), deny.
fn form(session: bool) -> ElicitationSchema {
    let mut choices = vec![json!({"const": "approve", "title": "Approve this call once"})];
    if session {
        choices.push(json!({"const": "approve_session", "title": "Approve this exact call for the rest of this session"}));
    }
    choices.push(json!({"const": "deny", "title": "Deny"}));
    serde_json::from_value(json!({
        "type": "object",
        "properties": {"decision": {
            "type": "string",
            "title": "Decision",
            "description": "The approval holds for these exact arguments only: other arguments ask again.",
            "oneOf": choices,
        }},
        "required": ["decision"],
    }))
    .expect("a valid elicitation schema")
}

/// What the person is shown: the server, the tool and the exact arguments.
fn message(server: &str, tool: &str, args: &str, digest: &str) -> String {
    let pretty = serde_json::from_str::<Value>(args)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| args.to_owned());
    format!(
        "agent-discover asks you to approve a tool call.\nServer: {server}\nTool: {tool}\nArguments (exact JSON):\n{pretty}\n\
         Approval bound to sha256:{digest}"
    )
}

/// A person's answer in an elicitation result: only `accept` with `decision` `approve` or `approve_session`
/// approves; decline, cancel, `deny` or anything else denies.
fn decision_of(result: &ElicitResult, session: bool, by: &str) -> Decision {
    let choice = result
        .content
        .as_ref()
        .and_then(|c| c.get("decision"))
        .and_then(Value::as_str);
    let (approved, scope) = match (&result.action, choice) {
        (ElicitationAction::Accept, Some("approve")) => (true, Scope::Once),
        (ElicitationAction::Accept, Some("approve_session")) if session => (true, Scope::Session),
        (ElicitationAction::Accept, Some("approve_session")) => (true, Scope::Once),
        _ => (false, Scope::Once),
    };
    Decision {
        approved,
        scope,
        by: by.to_owned(),
    }
}

/// The call log's note on an approved call.
fn note(scope: Scope, by: &str) -> String {
    match scope {
        Scope::Once => format!("[approval: approved once by {by}] "),
        Scope::Session => format!("[approval: approved for the session by {by}] "),
    }
}

/// Marks a pending approval expired (`cancelled`) if its waiter goes away before it is decided (a REST client that
/// disconnects drops the call's future).
struct ExpireOnDrop<'a> {
    inner: &'a Inner,
    id: String,
    server: String,
    tool: String,
    armed: bool,
}

impl Drop for ExpireOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed
            && self
                .inner
                .registry
                .store()
                .expire_approval(&self.id, "cancelled")
                .unwrap_or(false)
        {
            self.inner.events.emit(Event::ApprovalDecided {
                id: self.id.clone(),
                server: self.server.clone(),
                tool: self.tool.clone(),
                decision: "expired",
                scope: None,
                by: "cancelled".into(),
            });
        }
    }
}

impl Proxy {
    /// The session key of an MCP connection of this process (`client_id` is the front's own number for it).
    pub fn mcp_session(&self, client_id: u64) -> String {
        format!("mcp:{}:{client_id}", self.inner.held.process())
    }

    /// Recomputes which tools of `server`'s child (every child without `server`) ask or refuse, after their rules
    /// changed here or in another process; the servers whose set changed.
    pub fn reload_approvals(&self, server: Option<&str>) -> Vec<String> {
        let children: Vec<Arc<Child>> = lock(&self.inner.children)
            .iter()
            .filter(|(name, _)| server.is_none_or(|s| s == name.as_str()))
            .filter_map(|(_, slot)| match slot {
                crate::state::Slot::Running(c) => Some(c.clone()),
                crate::state::Slot::Crashed { .. } => None,
            })
            .collect();
        children
            .into_iter()
            .filter(|child| self.inner.gate_approvals(child))
            .map(|child| child.name.clone())
            .collect()
    }

    /// The running children's tools whose policy is not `allow` here, as exposed (`server__tool`), sorted: the fast
    /// lane leaves them to the normal path (`status`).
    pub fn approval_gated(&self) -> Vec<String> {
        let children = lock(&self.inner.children);
        let mut out: Vec<String> = children
            .iter()
            .filter_map(|(name, slot)| match slot {
                crate::state::Slot::Running(c) => Some((name, c)),
                crate::state::Slot::Crashed { .. } => None,
            })
            .flat_map(|(name, c)| {
                lock(&c.gated.tools)
                    .iter()
                    .map(|t| crate::names::expose(name, t))
                    .collect::<Vec<_>>()
            })
            .collect();
        out.sort();
        out
    }

    /// The approval step of a call of `tool` on `child` (see the module comment).
    pub(crate) async fn approve_call(
        &self,
        child: &Arc<Child>,
        tool: &str,
        args: Option<&Map<String, Value>>,
        mut caller: Caller,
        asked_by: Option<String>,
    ) -> Result<Gate> {
        let inner = &self.inner;
        let server = child.name.as_str();
        // A retry carrying one of our approval tokens: opened first, whatever the policy is now.
        let mut asked: Option<(ApprovalClaims, String)> = None;
        // The next round of an approved call (a `go` token): the child's own state, to hand back to it.
        let mut resumed: Option<Option<String>> = None;
        if let Some(token) = caller
            .request_state
            .as_deref()
            .filter(|t| t.starts_with(crate::held::store::APPROVAL_PREFIX))
        {
            let claims = inner
                .held
                .open_approval(token)
                .map_err(|r| r.error(server))?;
            let digest = digest(server, tool, args);
            if claims.d != digest {
                return Err(Refusal::Mismatched.error(server));
            }
            if claims.k == "go" {
                let now = now_ms();
                if now >= claims.e {
                    return Err(Refusal::Expired.error(server));
                }
                // Each round of an approved call once: replaying it would run the call again unasked.
                if !inner.held.spend(&claims.i, claims.e, now) {
                    return Err(Refusal::Gone.error(server));
                }
                resumed = Some(claims.s);
            } else {
                asked = Some((claims, token.to_owned()));
            }
            caller.request_state = None;
        }
        let answer = asked.as_ref().and_then(|_| {
            let answers = caller.input_responses.as_mut()?;
            answers.remove(INPUT_KEY)
        });
        if caller
            .input_responses
            .as_ref()
            .is_some_and(|r| r.is_empty())
        {
            caller.input_responses = None;
        }
        let rules = inner.registry.approval_rules(child.server_id)?;
        // A policy whose outcome is `ask` (`policy.rs`) asks whatever the tool's approval rules say, but a `deny`.
        if !rules.restricts() && asked_by.is_none() {
            if let Some(state) = resumed {
                caller.request_state = state;
            }
            return Ok(Gate::Go {
                caller,
                wrap: None,
                note: None,
            });
        }
        let resolved = {
            let tools = lock(&child.tools);
            match tools.iter().find(|t| t.name == tool) {
                Some(t) => rules.resolve(t),
                None => rules.resolve_with(tool, |_| false),
            }
        };
        match resolved.policy {
            ApprovalPolicy::Allow if asked_by.is_none() => {
                if let Some(state) = resumed {
                    caller.request_state = state;
                }
                return Ok(Gate::Go {
                    caller,
                    wrap: None,
                    note: None,
                });
            }
            ApprovalPolicy::Deny => {
                inner.events.emit(Event::ApprovalDecided {
                    id: String::new(),
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    decision: "denied",
                    scope: None,
                    by: "policy".into(),
                });
                return Err(Error::ApprovalDenied {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    by: "policy".into(),
                    approval: None,
                });
            }
            ApprovalPolicy::Ask | ApprovalPolicy::Allow => {}
        }
        let digest = digest(server, tool, args);
        // An input-required result of the child during an approved call is sealed with the digest for the retry.
        let wrap = |caller: &Caller| caller.takes_input_required().then(|| digest.clone());
        // The next round of a call approved earlier goes on (a `deny` set since refuses it, above).
        if let Some(state) = resumed {
            caller.request_state = state;
            return Ok(Gate::Go {
                wrap: wrap(&caller),
                caller,
                note: None,
            });
        }
        let arguments = canonical_arguments(args);
        let store = inner.registry.store();
        if let Some(session) = caller.session.as_deref()
            && let Some(granted) = store.session_approval(&digest, session)?
        {
            let by = granted.decided_by.unwrap_or_default();
            return Ok(Gate::Go {
                wrap: wrap(&caller),
                caller,
                note: Some(note(Scope::Session, &by)),
            });
        }
        let offered = caller.session.is_some();
        let started = now_ms();
        let deadline_ms = started + child.call_timeout.as_millis() as u64;
        let takes_input = caller.takes_input_required()
            && caller.capabilities.as_ref().is_some_and(takes_forms)
            && arguments.len() <= SHOWN_MAX;
        // The retry of an input-required approval question.
        if let Some((claims, token)) = asked {
            if now_ms() >= claims.e {
                self.decided(&claims.i, server, tool, "expired", None, "timeout");
                return Err(Error::ApprovalTimeout {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    ms: child.call_timeout.as_millis() as u64,
                    approval: Some(claims.i),
                });
            }
            let Some(answer) = answer else {
                // Asked again, same token (SEP-2322 re-requests missing input).
                return Ok(Gate::Asked(
                    self.asking(server, tool, &arguments, &claims.d, token, claims.o),
                ));
            };
            let result: ElicitResult =
                serde_json::from_value(answer).map_err(|e| Error::Child {
                    server: server.to_owned(),
                    error: Box::new(rmcp::ErrorData::invalid_params(
                        format!("inputResponses.{INPUT_KEY} does not answer what was asked: {e}"),
                        Some(json!({"inputResponse": INPUT_KEY})),
                    )),
                })?;
            let decision = decision_of(&result, claims.o, "input");
            // Recorded under the token's id: a token answered twice finds its id taken.
            if !self.record(
                &claims.i, child, tool, &arguments, &digest, &caller, "input", &decision, claims.e,
            )? {
                return Err(Refusal::Gone.error(server));
            }
            return self.outcome(
                &claims.i,
                server,
                tool,
                caller,
                decision,
                Some(digest),
                false,
            );
        }
        if takes_input {
            let id = inner.held.new_id();
            let token = inner.held.seal_approval(&ApprovalClaims {
                p: inner.held.process().to_owned(),
                k: "ask".into(),
                i: id.clone(),
                e: deadline_ms,
                d: digest.clone(),
                s: None,
                o: offered,
            });
            inner.events.emit(Event::ApprovalRequested {
                id,
                server: server.to_owned(),
                tool: tool.to_owned(),
                via: "input",
            });
            return Ok(Gate::Asked(
                self.asking(server, tool, &arguments, &digest, token, offered),
            ));
        }
        let deadline = std::time::Instant::now() + child.call_timeout;
        let peer = caller
            .peer
            .clone()
            .filter(|_| !caller.takes_input_required() && arguments.len() <= SHOWN_MAX)
            .filter(|p| p.peer_info().is_some_and(|i| takes_forms(&i.capabilities)));
        let id = inner.held.new_id();
        // A person's decision on a waiting call was announced by the use case that recorded it (in any process).
        let announced = peer.is_none();
        let decision = match peer {
            Some(peer) => {
                inner.events.emit(Event::ApprovalRequested {
                    id: id.clone(),
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    via: "elicitation",
                });
                let decision = self
                    .elicit(
                        &peer, server, tool, &arguments, &digest, offered, deadline, &caller,
                    )
                    .await;
                let decision = match decision {
                    Ok(d) => d,
                    Err(e) => {
                        if matches!(e, Error::ApprovalTimeout { .. }) {
                            self.decided(&id, server, tool, "expired", None, "timeout");
                        }
                        return Err(with_id(e, &id));
                    }
                };
                self.record(
                    &id,
                    child,
                    tool,
                    &arguments,
                    &digest,
                    &caller,
                    "elicitation",
                    &decision,
                    deadline_ms,
                )?;
                decision
            }
            None => {
                self.wait(
                    &id,
                    child,
                    tool,
                    &arguments,
                    &digest,
                    &caller,
                    deadline_ms,
                    deadline,
                )
                .await?
            }
        };
        let wrap = wrap(&caller);
        self.outcome(&id, server, tool, caller, decision, wrap, announced)
    }

    /// The `requestState` of an input-required result a child sent back during an approved call: the child's own
    /// state sealed with the approval's digest, so the retry passes as approved and hands the child its state.
    pub(crate) fn continuation(
        &self,
        digest: &str,
        state: Option<String>,
        child: &Child,
    ) -> String {
        let held = &self.inner.held;
        held.seal_approval(&ApprovalClaims {
            p: held.process().to_owned(),
            k: "go".into(),
            i: held.new_id(),
            e: now_ms() + child.call_timeout.as_millis() as u64,
            d: digest.to_owned(),
            s: state,
            o: false,
        })
    }

    /// The approval decided: an event (unless the person's use case announced it: `announced`), and the call goes on
    /// or is refused.
    #[allow(clippy::too_many_arguments)]
    fn outcome(
        &self,
        id: &str,
        server: &str,
        tool: &str,
        caller: Caller,
        decision: Decision,
        wrap: Option<String>,
        announced: bool,
    ) -> Result<Gate> {
        if decision.approved {
            if !announced {
                self.decided(
                    id,
                    server,
                    tool,
                    "approved",
                    Some(decision.scope),
                    &decision.by,
                );
            }
            Ok(Gate::Go {
                caller,
                wrap,
                note: Some(note(decision.scope, &decision.by)),
            })
        } else {
            if !announced {
                self.decided(id, server, tool, "denied", None, &decision.by);
            }
            Err(Error::ApprovalDenied {
                server: server.to_owned(),
                tool: tool.to_owned(),
                by: decision.by,
                approval: Some(id.to_owned()),
            })
        }
    }

    fn decided(
        &self,
        id: &str,
        server: &str,
        tool: &str,
        decision: &'static str,
        scope: Option<Scope>,
        by: &str,
    ) {
        self.inner.events.emit(Event::ApprovalDecided {
            id: id.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            decision,
            scope: scope.map(Scope::as_str),
            by: by.to_owned(),
        });
    }

    /// Records an approval decided by the caller's client (elicitation, input): `used` when approved once (its call
    /// runs now), `approved` for the session, or `denied`. False when the id was recorded before.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        id: &str,
        child: &Child,
        tool: &str,
        arguments: &str,
        digest: &str,
        caller: &Caller,
        via: &str,
        decision: &Decision,
        deadline_ms: u64,
    ) -> Result<bool> {
        let (status, scope) = match (decision.approved, decision.scope) {
            (true, Scope::Once) => ("used", Some("once")),
            (true, Scope::Session) => ("approved", Some("session")),
            (false, _) => ("denied", None),
        };
        self.inner.registry.store().insert_approval(
            &NewApproval {
                id,
                server_id: child.server_id,
                tool,
                arguments,
                digest,
                session: caller.session.as_deref(),
                via,
                status,
                scope,
                deadline_ms: ms_i64(deadline_ms),
                decided_by: Some(&decision.by),
            },
            ms_i64(now_ms()),
        )
    }

    /// The input-required result asking a 2026-07-28 caller for its approval.
    fn asking(
        &self,
        server: &str,
        tool: &str,
        arguments: &str,
        digest: &str,
        token: String,
        session: bool,
    ) -> CallToolResponse {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message(server, tool, arguments, digest),
            requested_schema: form(session),
        };
        let request = InputRequest::Elicitation(ElicitRequest::new(params));
        InputRequiredResult::new(
            Some([(INPUT_KEY.to_owned(), request)].into_iter().collect()),
            Some(token),
        )
        .into()
    }
}

impl Inner {
    /// Recomputes which of `child`'s tools ask or refuse (the fast lane leaves them to the normal path); whether that
    /// changed. Fails closed: rules that cannot be read keep every tool off the fast lane.
    pub(super) fn gate_approvals(&self, child: &Child) -> bool {
        // Before the rules: a commit after this read moves the marker, and the fast lane stops trusting the set.
        let marker = self.registry.rules_marker();
        let gated = self.gated_now(child);
        let any = !gated.is_empty();
        let mut tools = lock(&child.gated.tools);
        let changed = *tools != gated;
        *tools = gated;
        child.gated.any.store(any, Ordering::Release);
        *lock(&child.gated.marker) = marker;
        changed
    }

    /// `child`'s tools whose policy is not `allow` under the rules in force (every tool when they cannot be read).
    fn gated_now(&self, child: &Child) -> HashSet<String> {
        match self.registry.approval_rules(child.server_id) {
            Ok(rules) if !rules.restricts() => HashSet::new(),
            Ok(rules) => lock(&child.tools)
                .iter()
                .filter(|t| rules.resolve(t).policy != ApprovalPolicy::Allow)
                .map(|t| t.name.to_string())
                .collect(),
            Err(e) => {
                tracing::warn!(server = %child.name, error = %e, "cannot read approval rules; no tool of it takes the fast lane");
                lock(&child.tools)
                    .iter()
                    .map(|t| t.name.to_string())
                    .collect()
            }
        }
    }

    /// Whether the fast lane may relay `tool` of `child` without asking: its policy is `allow` under the rules in
    /// force now. The child's gated set answers while no commit happened since it was computed; after one (a rule
    /// another process set, which the change feed reports only later) the set is computed again from the
    /// registry's rules (cached, read again after any commit) and answers; when it came out the same, it holds
    /// under the new marker (a changed set is left to [`Proxy::reload_approvals`], which announces it). A store
    /// that cannot tell at once (PostgreSQL) has its rules read on every call.
    pub(super) fn lane_allows(&self, child: &Child, tool: &str) -> bool {
        let now = self.registry.rules_marker();
        if now.is_some() && *lock(&child.gated.marker) == now {
            return !(child.gated.any.load(Ordering::Acquire)
                && lock(&child.gated.tools).contains(tool));
        }
        let fresh = self.gated_now(child);
        let allowed = !fresh.contains(tool);
        if now.is_some() {
            let tools = lock(&child.gated.tools);
            if *tools == fresh {
                *lock(&child.gated.marker) = now;
            }
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(decision: &str) -> ElicitResult {
        ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": decision}))
    }

    #[test]
    fn only_an_accepted_approve_approves() {
        let d = decision_of(&accept("approve"), true, "elicitation");
        assert!(d.approved && d.scope == Scope::Once);
        let d = decision_of(&accept("approve_session"), true, "elicitation");
        assert!(d.approved && d.scope == Scope::Session);
        // Without a session to hold it, "for the session" is once.
        let d = decision_of(&accept("approve_session"), false, "input");
        assert!(d.approved && d.scope == Scope::Once);
        for denied in [
            accept("deny"),
            accept("yes"),
            ElicitResult::new(ElicitationAction::Accept),
            ElicitResult::new(ElicitationAction::Decline)
                .with_content(json!({"decision": "approve"})),
            ElicitResult::new(ElicitationAction::Cancel),
        ] {
            assert!(!decision_of(&denied, true, "x").approved, "{denied:?}");
        }
    }

    #[test]
    fn the_form_offers_the_session_only_to_a_caller_with_one() {
        let with = serde_json::to_value(form(true)).unwrap();
        let choices = |v: &Value| -> Vec<String> {
            v["properties"]["decision"]["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["const"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(choices(&with), ["approve", "approve_session", "deny"]);
        assert_eq!(
            choices(&serde_json::to_value(form(false)).unwrap()),
            ["approve", "deny"]
        );
        assert_eq!(with["required"], json!(["decision"]));
        let m = message("fx", "rm", r#"{"path":"/tmp/x"}"#, "ab12");
        assert!(m.contains("Server: fx") && m.contains("Tool: rm"), "{m}");
        assert!(
            m.contains("\"path\": \"/tmp/x\"") && m.contains("sha256:ab12"),
            "{m}"
        );
    }
}
