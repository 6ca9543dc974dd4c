//! Proxied tool calls as the MCP fronts make them: the call through the proxy, its failure shaped for agents (a typed
//! error with a kind and tools to try, SEP-1303), the input-required and authorization cases, and a task's owner.

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use crate::app::App;
use crate::error::Error;
use crate::proxy::Caller;

/// The JSON-RPC code of a call a rate limit refused where the refusal is a protocol error (the per-server endpoint,
/// where agent-discover stands in for the server); the aggregated front and `proxy_call` answer a tool error with
/// `kind: "rate_limited"` instead, which the agent reads.
pub(crate) const RATE_LIMITED: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32029);

/// Records the session that created a child's task, when it is one that can be told of the task's status later
/// (a handshake-era session; a 2026-07-28 request has no stream once answered).
pub(crate) fn own_task(
    app: &App,
    context: &RequestContext<RoleServer>,
    server: &str,
    id: &str,
    exposed: &str,
) {
    if context
        .protocol_version()
        .is_some_and(|v| v.has_initialize())
    {
        app.proxy
            .own_task(server, id, context.peer.clone(), exposed.to_owned());
    }
}

/// Calls a proxied tool for the registry's `proxy_call`. A child's question during the call goes to this caller
/// alone: a 2026-07-28 client gets the input-required result as the `registry` call's own, and answers it by
/// retrying that call (same arguments, plus `inputResponses` and `requestState`); a legacy client is asked it if it
/// declared the capability; otherwise the call fails with the typed error `kind: input_required`.
pub(crate) async fn proxy_call(
    app: &App,
    server: &str,
    tool: &str,
    args: Option<serde_json::Map<String, serde_json::Value>>,
    mut caller: Caller,
) -> Result<CallToolResponse, McpError> {
    caller.questions_to_caller = true;
    let takes = caller.takes_input_required();
    match proxy_call_response(app, server, tool, args, caller).await? {
        r @ CallToolResponse::InputRequired(_) if takes => Ok(r),
        CallToolResponse::Complete(r) => Ok(r.into()),
        // SEP-2663: the child made a task (the client declared the extension); it is followed by its front id.
        CallToolResponse::Task(created) => Ok(CallToolResult::success(vec![ContentBlock::text(
            json!({
                "task_id": crate::proxy::Proxy::expose_task_id(server, &created.task.task_id),
                "status": created.task.status,
                "note": "the tool runs as a task: follow it with tasks/get, answer it with tasks/update, stop it with tasks/cancel",
            })
            .to_string(),
        )])
        .into()),
        // A 2026-07-28 child asked a caller that cannot take input-required results (rmcp answers a legacy
        // client's questions before this; this is the case of a caller without a client).
        _ => Ok(CallToolResult::error(vec![ContentBlock::text(
            app.proxy
                .failure_body(
                    server,
                    tool,
                    &Error::InputRequired {
                        server: server.to_owned(),
                        what: "input".into(),
                    },
                )
                .to_string(),
        )])
        .into()),
    }
}

/// Calls a proxied tool and shapes failures for agents: a typed error with a kind and similar tools to try. A
/// child's refusal for a capability the client did not declare (-32021), and any child error on the retry of an
/// input-required result (a tampered or stale `requestState`), stay JSON-RPC errors as the child sent them.
pub(crate) async fn proxy_call_response(
    app: &App,
    server: &str,
    tool: &str,
    args: Option<serde_json::Map<String, serde_json::Value>>,
    caller: Caller,
) -> Result<CallToolResponse, McpError> {
    let peer = caller.peer.clone();
    let principal = caller.principal.clone();
    let profile = caller.profile.clone();
    let retry = caller.input_responses.is_some() || caller.request_state.is_some();
    match app
        .proxy
        .call_tool_response(server, tool, args, caller)
        .await
    {
        Ok(r) => Ok(r),
        Err(e) => {
            if let (Error::AuthRequired { auth_url, .. }, Some(peer)) = (&e, peer) {
                ask_to_authorize(peer, server, auth_url);
            }
            let mut shaped =
                shape_call_error(&app.proxy, server, tool, e, retry, principal.as_deref());
            // Suggestions stay within the caller's profile.
            if let (Some(_), Ok(CallToolResponse::Complete(r))) = (&profile, &mut shaped) {
                within_profile(r, profile.as_deref());
            }
            shaped
        }
    }
}

/// A failed proxied call as its caller gets it: a tool error result with `{error, code, kind, server, tool,
/// did_you_mean}` (SEP-1303), or the child's own JSON-RPC error where it must stay one.
fn shape_call_error(
    proxy: &crate::proxy::Proxy,
    server: &str,
    tool: &str,
    e: Error,
    retry: bool,
    principal: Option<&ad_core::identity::Principal>,
) -> Result<CallToolResponse, McpError> {
    match e {
        Error::Child { error, .. }
            if retry
                || error.code == rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY =>
        {
            Err(*error)
        }
        e => Ok(CallToolResult::error(vec![ContentBlock::text(
            proxy
                .failure_body_for(server, tool, &e, principal)
                .to_string(),
        )])
        .into()),
    }
}

/// [`shape_call_error`] for the fast lane's calls (never a retry; they are only ever first calls).
pub(crate) fn shape_fast_lane_error(
    proxy: &crate::proxy::Proxy,
    server: &str,
    tool: &str,
    e: Error,
) -> Result<CallToolResponse, McpError> {
    shape_call_error(proxy, server, tool, e, false, None)
}

/// A client that supports URL-mode elicitation is sent the authorize URL of a server waiting for OAuth (in the
/// background: the call's answer, with the same URL, does not wait for the person).
fn ask_to_authorize(peer: rmcp::Peer<rmcp::RoleServer>, server: &str, url: &str) {
    let supports_url = peer.peer_info().is_some_and(|i| {
        i.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.url.is_some())
    });
    if !supports_url {
        return;
    }
    let params = rmcp::model::ElicitRequestParams::UrlElicitationParams {
        meta: None,
        message: format!("Authorize agent-discover to use the server `{server}`"),
        url: url.to_owned(),
        elicitation_id: format!("auth-{server}-{}", crate::oauth::now_secs()),
    };
    tokio::spawn(async move {
        if let Err(e) = peer.create_elicitation(params).await {
            tracing::debug!(error = %e, "the client did not take the authorization URL");
        }
    });
}

/// The session of an MCP caller for approvals "for this session" (#27): the connection, a stdio one or a legacy
/// Streamable HTTP session (the front is one handler per connection or session, numbered `client_id`). A 2026-07-28
/// request over HTTP has no session (SEP-2567 removed them), so it gets none.
pub(crate) fn session_of(
    app: &App,
    context: &RequestContext<RoleServer>,
    client_id: u64,
) -> Option<String> {
    let http = context
        .extensions
        .get::<axum::http::request::Parts>()
        .is_some();
    let sessionless = http
        && context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
    (!sessionless).then(|| app.proxy.mcp_session(client_id))
}

/// A tool error body's suggestions, only those within `profile`.
fn within_profile(r: &mut CallToolResult, profile: Option<&ad_core::profile::Profile>) {
    for c in &mut r.content {
        if let Some(t) = c.as_text()
            && let Ok(mut body) = serde_json::from_str::<serde_json::Value>(&t.text)
        {
            super::view::suggestions_within(&mut body, profile);
            *c = ContentBlock::text(body.to_string());
        }
    }
}

/// Its suggestions only among the tools `caller` may see (issue 30), within its profile.
pub(crate) fn unknown_tool(app: &App, name: &str, caller: &Caller) -> CallToolResult {
    let mut suggested =
        json!({"did_you_mean": app.proxy.did_you_mean_for(name, 3, caller.principal.as_deref())});
    super::view::suggestions_within(&mut suggested, caller.profile.as_deref());
    let did_you_mean = suggested["did_you_mean"].take();
    let body = json!({
        "error": format!("unknown tool `{}`: no active server offers it", crate::model::truncate_for_message(name)),
        "code": "not_found",
        "kind": "tool_not_found",
        "hint": "activate the server that has it (registry action `activate`), or call it with `proxy_call`",
        "did_you_mean": did_you_mean,
    });
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}
