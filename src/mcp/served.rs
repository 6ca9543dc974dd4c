//! Trace spans of the MCP requests we serve (OpenTelemetry's MCP conventions, server side): one `SERVER` span per
//! request on stdio, `/mcp` and the per-server endpoints, in both protocol eras, named `{mcp.method.name}` or
//! `{mcp.method.name} {tool or prompt}`. Its parent is the client's span: `params._meta.traceparent` (SEP-414; how
//! 2026-07-28 requests carry it), else the HTTP request's `traceparent` header; without either a new trace starts.
//!
//! Off unless tracing is on: [`start`] is then one branch and returns `None`.

use rmcp::model::{CallToolResponse, NumberOrString, RequestMetaObject};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};

use crate::trace::{Kind, SpanContext, Started};

/// The trace context the client sent with a request, if any: the params' `_meta` (as typed params hold it, or as
/// rmcp hands it over in the context), then the HTTP header.
pub(crate) fn incoming(
    context: &RequestContext<RoleServer>,
    params_meta: Option<&RequestMetaObject>,
) -> Option<SpanContext> {
    for meta in params_meta.into_iter().chain([&context.meta]) {
        if let Some(tp) = meta.get_traceparent() {
            return SpanContext::parse(tp, meta.get_tracestate());
        }
    }
    let parts = context.extensions.get::<axum::http::request::Parts>()?;
    let tp = parts.headers.get("traceparent")?.to_str().ok()?;
    let state = parts
        .headers
        .get("tracestate")
        .and_then(|v| v.to_str().ok());
    SpanContext::parse(tp, state)
}

/// Starts the span of one served request; `None` while tracing is off.
pub(crate) fn start(
    context: &RequestContext<RoleServer>,
    method: &'static str,
    target: Option<&str>,
    params_meta: Option<&RequestMetaObject>,
) -> Option<Started> {
    if !crate::trace::enabled() {
        return None;
    }
    let parent = incoming(context, params_meta);
    let name = match target {
        Some(t) => format!("{method} {t}"),
        None => method.to_owned(),
    };
    let mut span = Started::new(name, Kind::Server, parent.as_ref());
    span.set("mcp.method.name", method);
    span.set(
        "jsonrpc.request.id",
        match &context.id {
            NumberOrString::Number(n) => n.to_string(),
            NumberOrString::String(s) => s.to_string(),
        },
    );
    if let Some(v) = context.protocol_version() {
        span.set("mcp.protocol.version", v.as_str());
    }
    let http = context.extensions.get::<axum::http::request::Parts>();
    span.set(
        "network.transport",
        if http.is_some() { "tcp" } else { "pipe" },
    );
    if let Some(session) = http
        .and_then(|p| p.headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
    {
        span.set("mcp.session.id", session);
    }
    match (method, target) {
        ("tools/call", Some(tool)) => {
            span.set("gen_ai.tool.name", tool);
            span.set("gen_ai.operation.name", "execute_tool");
        }
        ("prompts/get", Some(prompt)) => span.set("gen_ai.prompt.name", prompt),
        _ => {}
    }
    Some(span)
}

/// Ends a served request's span: a JSON-RPC error sets `error.type` and `rpc.response.status_code` to its code.
pub(crate) fn end<T>(span: Option<Started>, res: &Result<T, McpError>) {
    let Some(mut span) = span else { return };
    if let Err(e) = res {
        let code = e.code.0.to_string();
        span.set("rpc.response.status_code", code.clone());
        span.fail(code, e.message.to_string());
    }
    span.end();
}

/// [`end`] for `tools/call`: a result with `isError` is `error.type` `tool_error`.
pub(crate) fn end_call(span: Option<Started>, res: &Result<CallToolResponse, McpError>) {
    let Some(mut span) = span else { return };
    if let Ok(CallToolResponse::Complete(r)) = res
        && r.is_error == Some(true)
    {
        span.fail("tool_error", "the tool returned an error result");
    }
    end(Some(span), res);
}

/// Wraps a handler's body in a served span: `served!(context, "tools/list", None, async { ... })`.
macro_rules! served {
    ($context:expr, $method:expr, $target:expr, $body:expr) => {{
        let span = $crate::mcp::served::start(&$context, $method, $target, None);
        let res = $body.await;
        $crate::mcp::served::end(span, &res);
        res
    }};
}
pub(crate) use served;
