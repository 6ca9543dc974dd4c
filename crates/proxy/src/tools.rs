//! Tools across children: the exposed list, names resolved back to (server, tool), the proxied `tools/call` (the
//! normal path, and the target the fast lane takes instead), and a call of a tool not exposed told apart (withheld,
//! approved meanwhile, unknown). Re-listing after a change is `relist.rs`; a failed call's body, with suggestions for
//! a name that matches nothing, `failure_body.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value};

use ad_core::error::{Error, Result};

use crate::approval::Gate;
use crate::caller::Caller;
use crate::names;
use crate::state::{Child, ChildLane, Proxy, Slot};
use crate::sync::lock;

impl Proxy {
    /// The exposed tools of every running (or crashed, restartable) child, and of every server flagged active that
    /// is still starting since this process began (its stored tools, `restore.rs`).
    pub fn tools(&self) -> Vec<Tool> {
        self.tools_for(None)
    }

    /// [`Proxy::tools`], only those `principal` may see (`visibility.rs`).
    pub fn tools_for(&self, principal: Option<&ad_core::identity::Principal>) -> Vec<Tool> {
        self.tools_within(principal, |_, _| true)
    }

    /// [`Proxy::tools_for`], only the (server, tool) pairs `within` keeps (a profile's).
    pub fn tools_within(
        &self,
        principal: Option<&ad_core::identity::Principal>,
        within: impl Fn(&str, &str) -> bool,
    ) -> Vec<Tool> {
        let mut out = Vec::new();
        for (name, tools) in self.listed(Tool::clone) {
            if !self.visible_to(principal, &name, None) {
                continue;
            }
            for mut t in tools {
                if !within(&name, &t.name) || !self.visible_to(principal, &name, Some(&t.name)) {
                    continue;
                }
                t.name = names::expose(&name, &t.name).into();
                expose_app_resource(&name, &mut t);
                out.push(t);
            }
        }
        out
    }

    /// What `each` takes from every listed server's tools, by server name: children, then servers still being
    /// restored. Only what `each` returns is copied out (a tool list's schemas are not cloned for its names).
    pub(crate) fn listed<T>(&self, each: impl Fn(&Tool) -> T) -> Vec<(String, Vec<T>)> {
        // The built-in server's (`local.rs`), read before the children are locked.
        let local = self.local_tools();
        let children = lock(&self.inner.children);
        let mut out: Vec<(String, Vec<T>)> = children
            .iter()
            .map(|(name, slot)| {
                let tools = match slot {
                    Slot::Running(c) => lock(&c.tools).iter().map(&each).collect(),
                    Slot::Crashed { tools, .. } => tools.iter().map(&each).collect(),
                };
                (name.clone(), tools)
            })
            .collect();
        // A server that has just come up is in both maps for a moment: the child wins.
        out.extend(
            lock(&self.inner.restoring)
                .iter()
                .filter(|(name, _)| !children.contains_key(*name))
                .map(|(name, r)| (name.clone(), r.tools.iter().map(&each).collect())),
        );
        drop(children);
        out.extend(local.map(|(name, tools)| (name, tools.iter().map(&each).collect())));
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// [`Proxy::resolve`] among running children only (no registry lookup).
    pub fn resolve_running(&self, name: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        if let Some((server, tool)) = names::split(name, children.keys().map(String::as_str))
            && children[server].has_tool(tool)
        {
            return Some((server.to_owned(), tool.to_owned()));
        }
        let wanted = names::strip_mcp(name);
        children.iter().find_map(|(server, slot)| {
            slot.find_tool(|t| names::expose(server, t) == wanted)
                .map(|tool| (server.clone(), tool))
        })
    }

    /// Resolves an exposed or qualified tool name (`server__tool`, `mcp__server__tool`) to (server, tool).
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        // The usual case, on every proxied call: `server__tool` with the tool's own name, no allocation.
        if let Some((server, tool)) = names::split(name, children.keys().map(String::as_str))
            && children[server].has_tool(tool)
        {
            return Some((server.to_owned(), tool.to_owned()));
        }
        // A shortened name (too long or with characters a client may not see): compare exposed names.
        let wanted = names::strip_mcp(name);
        for (server, slot) in children.iter() {
            if let Some(tool) = slot.find_tool(|t| names::expose(server, t) == wanted) {
                return Some((server.clone(), tool));
            }
        }
        drop(children);
        let servers = self.inner.registry.list(&Default::default()).ok()?;
        names::split(name, servers.iter().map(|s| s.server.name.as_str()))
            .map(|(s, t)| (s.to_owned(), t.to_owned()))
    }

    /// Calls `tool` on `server` with the server's call timeout (reset by progress), forwarding progress and
    /// cancellation, and recording metrics and the call log. A child that dies mid-call fails the call at once.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResult> {
        match self.call_tool_response(server, tool, args, caller).await? {
            CallToolResponse::Complete(r) => Ok(r),
            _ => Err(Error::InputRequired {
                server: server.to_owned(),
                what: "input".into(),
            }),
        }
    }

    /// Calls a tool of a running (or restartable) server, for an MCP client: an input-required result of a
    /// 2026-07-28 child is passed on to a 2026-07-28 caller as it is (its `requestState` untouched).
    pub async fn call_tool_response(
        &self,
        server: &str,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResponse> {
        // A tool by the name the caller's profile shows: the server's name for it and its arguments
        // (`profile_view.rs`).
        let (profiled, args) = self.profile_inbound(&caller, server, tool, args)?;
        let tool: &str = &profiled;
        // A tool outside the caller's profile is refused as such; a hidden server's tool is answered as a server that
        // is not there (`visibility.rs`).
        if let Some(e) = self.outside_profile(&caller, server, tool) {
            return Err(e);
        }
        if !self.visible(&caller, server, Some(tool)) {
            return Err(Error::Unavailable(format!(
                "server `{server}` is not active; activate it first (registry action `activate`)"
            )));
        }
        // The built-in server (saved scripts) answers itself (`local.rs`).
        if let Some(local) = self.local_named(server) {
            return self.call_local(local, tool, args, caller).await;
        }
        let started = Instant::now();
        // Who made the call, for the call log's audit (issue 30).
        let who = caller.principal.clone();
        let script = caller.script;
        let mark = |note: Option<&str>| -> Option<String> {
            match (script, note) {
                (false, note) => note.map(str::to_owned),
                (true, note) => Some(format!("[script] {}", note.unwrap_or_default())),
            }
        };
        // The proxied call's span (tracing on only): under the served request's, and what the child is given. A call
        // refused before it reaches the child has one too, saying why (`spans.rs`).
        let mut caller = caller;
        let mut span = ad_core::trace::enabled()
            .then(|| crate::spans::start_call(server, tool, caller.trace.as_ref()));
        if let Some(span) = &span {
            caller.trace = Some(span.context().clone());
        }
        // The shared child, or the caller's own when they have their own keys (`personal.rs`).
        let child = match self.inner.child_for(server, &caller).await {
            Ok(c) => c,
            // Not running because it waits for an OAuth authorization: say where to give it.
            Err(e) => {
                let waiting = self
                    .inner
                    .registry
                    .get(server)
                    .ok()
                    .and_then(|s| self.inner.oauth.auth_url(s.id));
                let e = match waiting {
                    Some(auth_url) => Error::AuthRequired {
                        server: server.to_owned(),
                        auth_url,
                    },
                    None => e,
                };
                crate::spans::refused(span, "server", &e);
                return Err(e);
            }
        };
        if let Some(span) = &mut span {
            crate::spans::describe(span, &child);
        }
        if !lock(&child.tools).iter().any(|t| t.name == tool)
            && let Err(e) = self.tool_missing(&child, tool).await
        {
            crate::spans::refused(span, "tool", &e);
            return Err(e);
        }
        // The argument guard: credentials that are not the server's own refuse the call (`callguard.rs`). The call
        // log keeps no credential (masked there; the child gets the arguments as they came).
        let mut guarded: Vec<crate::callguard::Decision> = Vec::new();
        match self.inner.guard_arguments(
            server,
            child.server_id,
            tool,
            args.as_ref(),
            caller.trace.as_ref(),
        ) {
            Ok(d) => guarded.extend(d),
            Err(e) => {
                let note = mark(crate::callguard::blocked_note(&e).as_deref());
                let args = crate::callguard::masked_arguments(args);
                return self.refuse_call(
                    span,
                    "guard",
                    &child,
                    tool,
                    args,
                    started,
                    e,
                    note,
                    who.as_deref(),
                );
            }
        }
        let masks = !guarded.is_empty();
        let logged = |args: Option<Map<String, Value>>| match masks {
            true => crate::callguard::masked_arguments(args),
            false => args,
        };
        // The policies (`policy.rs`): refused here, or asked by the approval step below.
        let asked_by = match self.police(server, tool, args.as_ref(), &caller) {
            Ok(asked_by) => asked_by,
            Err(e) => {
                return self.refuse_call(
                    span,
                    "policy",
                    &child,
                    tool,
                    logged(args),
                    started,
                    e,
                    mark(None),
                    who.as_deref(),
                );
            }
        };
        // Its server's limits (`limits/`): the breaker, then the rate limits; the concurrency cap once approved.
        let mut admission = match self.inner.limits.admit(
            server,
            tool,
            crate::limits::caller_key(&caller).as_deref(),
        ) {
            Ok(a) => a,
            Err(e) => {
                return self.refuse_call(
                    span,
                    "limit",
                    &child,
                    tool,
                    logged(args),
                    started,
                    e,
                    mark(None),
                    who.as_deref(),
                );
            }
        };
        // An overridden tool: the child's own name, fixed and default values merged in (`overrides.rs`).
        let (own, args) = match self.inner.inbound(&child, tool, args) {
            Ok(x) => x,
            Err(e) => {
                crate::spans::refused(span, "arguments", &e);
                return Err(e);
            }
        };
        // The tool's approval policy (#27): go on, ask a person first, or refuse (`approval.rs`).
        let (caller, wrap, note) = match self
            .approve_call(&child, tool, args.as_ref(), caller, asked_by)
            .await
        {
            Ok(Gate::Go { caller, wrap, note }) => (caller, wrap, note),
            Ok(Gate::Asked(asking)) => {
                let res = Ok(asking);
                if let Some(span) = span {
                    crate::spans::asked(span, &res);
                }
                self.inner.account(
                    server,
                    child.server_id,
                    tool,
                    logged(args),
                    started.elapsed(),
                    &res,
                    mark(Some(
                        &(crate::callguard::notes(&guarded).unwrap_or_default()
                            + "[approval: asked] "),
                    ))
                    .as_deref(),
                    who.as_deref(),
                );
                return res;
            }
            Err(e) => {
                return self.refuse_call(
                    span,
                    "approval",
                    &child,
                    tool,
                    logged(args),
                    started,
                    e,
                    mark(None),
                    who.as_deref(),
                );
            }
        };
        if let Err(e) = admission.enter().await {
            return self.refuse_call(
                span,
                "limit",
                &child,
                tool,
                logged(args),
                started,
                e,
                mark(None),
                who.as_deref(),
            );
        }
        let call = async {
            if caller.holds_questions(&child) {
                // A legacy child asks the client with requests of its own: minted into input-required results for a
                // 2026-07-28 caller, or put to this caller alone (`held.rs`).
                self.call_held(&child, &own, args.clone(), &caller).await
            } else {
                self.inner.call(&child, &own, args.clone(), &caller).await
            }
        };
        // With a span, the id of the request sent to the child is noted for it (`spans.rs`).
        let mut res = match &mut span {
            Some(span) => crate::spans::noting_request_id(span, call).await,
            None => call.await,
        };
        if let (Err(_), Some(session)) = (&res, &child.auth)
            && let Err(e) = res
        {
            // A 401 (the token is gone) or 403 insufficient_scope: start the authorization, answer with its URL.
            let server = self.inner.registry.get_by_id(child.server_id)?;
            res = Err(match &caller.principal {
                // A server each user authorizes for themselves: this user's own authorization.
                Some(p) if session.per_user() => {
                    self.inner.user_auth_failure(&server, session, p, e).await
                }
                _ => self.inner.auth_failure(&server, Some(session), e).await,
            });
        }
        // An approved call whose child asks for input: its retry must pass as approved, so the child's own state is
        // sealed into a token bound to the approval's digest (`approval.rs`).
        if let (Some(digest), Ok(CallToolResponse::InputRequired(asked))) = (&wrap, &mut res) {
            asked.request_state =
                Some(self.continuation(digest, asked.request_state.take(), &child));
        }
        // The result guards: credentials masked, instructions to the agent marked or withheld (`callguard.rs`).
        if let Ok(CallToolResponse::Complete(r)) = &mut res {
            guarded.extend(self.inner.guard_result(
                server,
                child.server_id,
                tool,
                r,
                span.as_ref().map(|s| s.context()),
            ));
        }
        // The breaker hears how it went (a call its client cancelled is no failure of the server).
        let cancelled = caller.cancel.as_ref().is_some_and(|c| c.is_cancelled());
        admission.finish(!cancelled && matches!(&res, Err(e) if crate::limits::breaks(e)));
        if let Some(span) = span {
            crate::spans::end_call(span, &res);
        }
        let latency = started.elapsed();
        // A result over its paging limit: its head and a link to the whole (`pages.rs`), noted in the call log.
        let paged = match &mut res {
            Ok(CallToolResponse::Complete(r)) => {
                let keep = lock(&child.tools)
                    .iter()
                    .any(|t| t.name == tool && t.output_schema.is_some());
                self.inner
                    .page_result(child.server_id, caller.page_bytes, keep, who.as_deref(), r)
            }
            _ => None,
        };
        let note = match crate::callguard::notes(&guarded) {
            Some(g) => Some(g + note.as_deref().unwrap_or_default()),
            None => note,
        };
        let note = match paged {
            Some(p) => Some(p.note() + note.as_deref().unwrap_or_default()),
            None => note,
        };
        self.inner.account(
            server,
            child.server_id,
            tool,
            logged(args),
            latency,
            &res,
            mark(note.as_deref()).as_deref(),
            who.as_deref(),
        );
        res
    }

    /// A call refused before it reached the child, at `step` (`guard`, `policy`, `limit`, `approval`): its span and
    /// call-log entry say so, and the refusal is the answer.
    #[allow(clippy::too_many_arguments)]
    fn refuse_call(
        &self,
        span: Option<ad_core::trace::Started>,
        step: &'static str,
        child: &crate::state::Child,
        tool: &str,
        args: Option<Map<String, Value>>,
        started: Instant,
        e: Error,
        note: Option<String>,
        who: Option<&ad_core::identity::Principal>,
    ) -> Result<CallToolResponse> {
        crate::spans::refused(span, step, &e);
        let res = Err(e);
        self.inner.account(
            &child.name,
            child.server_id,
            tool,
            args,
            started.elapsed(),
            &res,
            note.as_deref(),
            who,
        );
        res
    }

    /// [`Proxy::call_tool_response`] as a boxed future that owns its arguments: a caller in another crate (code mode's
    /// host) does not instantiate the call's large state machine (its drop glue alone took a minute to compile there).
    pub fn call_tool_boxed(
        &self,
        server: String,
        tool: String,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> futures::future::BoxFuture<'static, Result<CallToolResponse>> {
        let proxy = self.clone();
        Box::pin(async move { proxy.call_tool_response(&server, &tool, args, caller).await })
    }

    /// The fast lane's target for an exposed tool name (`relay.rs`): the lane of a running, legacy stdio child that
    /// exposes the tool now (allowed and approved), the tool's own name, and (tracing on) the child's revision. `None` sends the call the normal way.
    /// With `headerless`, only a tool whose input schema has no `x-mcp-header` annotation (SEP-2243): rmcp checks a
    /// 2026-07-28 HTTP request's `Mcp-Param-*` headers against them, which the HTTP lane leaves to it.
    pub(crate) fn fast_target(
        &self,
        name: &str,
        headerless: bool,
    ) -> Option<(Arc<ChildLane>, String, Option<rmcp::model::ProtocolVersion>)> {
        let children = lock(&self.inner.children);
        let (server, tool) = names::split(name, children.keys().map(String::as_str))?;
        self.fast_target_in(&children, server, tool, headerless)
    }

    /// [`Proxy::fast_target`] for a tool named by its server and its own name (the registry's `proxy_call`).
    pub(crate) fn fast_target_of(
        &self,
        server: &str,
        tool: &str,
    ) -> Option<(Arc<ChildLane>, String, Option<rmcp::model::ProtocolVersion>)> {
        let children = lock(&self.inner.children);
        self.fast_target_in(&children, server, tool, false)
    }

    fn fast_target_in(
        &self,
        children: &std::collections::HashMap<String, Slot>,
        server: &str,
        tool: &str,
        headerless: bool,
    ) -> Option<(Arc<ChildLane>, String, Option<rmcp::model::ProtocolVersion>)> {
        let Slot::Running(child) = children.get(server)? else {
            return None;
        };
        if child.exited.borrow().is_some() {
            return None;
        }
        let lane = child.lane.clone()?;
        // A 2026-07-28 child's calls carry the envelope rmcp would put on them (`relay/crossing.rs`).
        if !child.protocol.has_initialize() {
            lane.envelope_of(&child.protocol, || child.capabilities.supports_tasks());
        }
        // A tool that asks a person or is refused takes the normal path, where `approval.rs` decides; so does an
        // overridden one, whose arguments are merged there (`overrides.rs`). One some policy is scoped to is the
        // lane's to check with the call's caller and arguments (`relay/policed.rs`).
        if !self.inner.lane_allows(child, tool) || self.inner.overridden(child, tool) {
            return None;
        }
        lock(&child.tools)
            .iter()
            .any(|t| t.name == tool && !(headerless && names_param_headers(&t.input_schema)))
            .then(|| {
                // The child's revision, for the call's span (tracing on only).
                let protocol = ad_core::trace::enabled().then(|| child.protocol.clone());
                (lane, tool.to_owned(), protocol)
            })
    }

    /// The fast lanes of the running children.
    pub(crate) fn fast_lanes(&self) -> Vec<Arc<ChildLane>> {
        lock(&self.inner.children)
            .values()
            .filter_map(|s| match s {
                Slot::Running(c) => c.lane.clone(),
                Slot::Crashed { .. } => None,
            })
            .collect()
    }

    /// How many tool calls went through the fast lane since this process started (`relay.rs`).
    pub fn fast_lane_calls(&self) -> u64 {
        self.inner.fast_calls.load(Ordering::Relaxed)
    }

    /// Lists a running server's tools again (after an approval or a filter change) so exposure follows at once.
    pub async fn relist_tools(&self, name: &str) {
        self.inner.refresh_tools(name).await;
    }

    /// A call named a tool the child does not expose: withheld since it changed (`ToolChanged`), approved meanwhile
    /// by another process (listed again, then it is there), or unknown or filtered (`NotFound`, alike).
    async fn tool_missing(&self, child: &Child, tool: &str) -> Result<()> {
        let server = child.name.as_str();
        let registry = &self.inner.registry;
        // A renamed tool is pinned under its own name, and is not there under it.
        if registry.renamed(child.server_id, tool) {
            return Err(Error::not_found("tool", format!("{server}__{tool}")));
        }
        let own = registry.upstream_name(child.server_id, tool);
        let own = own.as_deref().unwrap_or(tool);
        match registry.store().pin(server, own)? {
            Some(pin) if registry.tool_allowed(server, own) => {
                if pin.pending() {
                    return Err(ad_registry::pinning::scan::flagged_error(server, &pin)
                        .unwrap_or_else(|| Error::ToolChanged {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                        }));
                }
                self.inner.refresh_tools(server).await;
                if lock(&child.tools).iter().any(|t| t.name == tool) {
                    return Ok(());
                }
            }
            _ => {}
        }
        Err(Error::not_found("tool", format!("{server}__{tool}")))
    }

    /// The exposed tools of every listed server as (server, the tool's own name, its exposed name), in the order of
    /// [`Proxy::tools`].
    pub fn exposed_tools(&self) -> Vec<(String, String, String)> {
        self.exposed_tools_for(None)
    }

    /// [`Proxy::exposed_tools`], only those `principal` may see (`visibility.rs`).
    pub fn exposed_tools_for(
        &self,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Vec<(String, String, String)> {
        let mut out = Vec::new();
        for (server, tools) in self.listed(|t| t.name.to_string()) {
            for tool in tools {
                if !self.visible_to(principal, &server, Some(&tool)) {
                    continue;
                }
                let exposed = names::expose(&server, &tool);
                out.push((server.clone(), tool, exposed));
            }
        }
        out
    }
}

impl Slot {
    fn has_tool(&self, tool: &str) -> bool {
        self.find_tool(|t| t == tool).is_some()
    }

    /// The name of the first tool for which `pred` holds.
    fn find_tool(&self, pred: impl Fn(&str) -> bool) -> Option<String> {
        let found = |tools: &[Tool]| {
            tools
                .iter()
                .find(|t| pred(&t.name))
                .map(|t| t.name.to_string())
        };
        match self {
            Slot::Running(c) => found(&lock(&c.tools)),
            Slot::Crashed { tools, .. } => found(tools),
        }
    }
}

/// MCP Apps (SEP-1865): a tool's `_meta.ui.resourceUri` names a `ui://` resource of its server; on the aggregated
/// front it becomes the exposed URI that `resources/read` routes back to that server, as its resource list shows it.
pub(crate) fn expose_app_resource(server: &str, tool: &mut Tool) {
    if let Some(meta) = tool.meta.as_mut()
        && let Some(Value::Object(ui)) = meta.get_mut("ui")
        && let Some(Value::String(uri)) = ui.get_mut("resourceUri")
    {
        *uri = names::expose_uri(server, uri);
    }
}

/// Marks an error result's text for agents (`isError: true` with a message).
pub fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// Whether an input schema has an `x-mcp-header` key anywhere (SEP-2243's annotation of an argument that a
/// 2026-07-28 HTTP request repeats in an `Mcp-Param-*` header). Anywhere, not only where rmcp reads annotations:
/// a tool it would check is never missed.
fn names_param_headers(schema: &Map<String, Value>) -> bool {
    fn within(value: &Value) -> bool {
        match value {
            Value::Object(o) => names_param_headers(o),
            Value::Array(a) => a.iter().any(within),
            _ => false,
        }
    }
    schema.iter().any(|(k, v)| k == "x-mcp-header" || within(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn param_header_annotations_are_found_anywhere_in_a_schema() {
        let plain = json!({"type": "object", "properties": {"text": {"type": "string"}}});
        let nested = json!({"type": "object", "properties": {"a": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}});
        let in_list = json!({"anyOf": [{"properties": {"r": {"x-mcp-header": "R"}}}]});
        let at_root = json!({"type": "object", "x-mcp-header": "X"});
        let of = |v: Value| names_param_headers(v.as_object().unwrap());
        assert!(!of(plain));
        assert!(of(nested));
        assert!(of(in_list));
        assert!(of(at_root));
    }
}
