//! Trace spans of proxied calls (OpenTelemetry's MCP conventions, client side): one `CLIENT` span per call of a
//! child's tool, a child of the served request's span, named `tools/call {tool}`; and the trace context handed to
//! the child, in the request's `_meta` (`call.rs`) and, for HTTP children, as the `traceparent` header
//! ([`TracedHttp`] for Streamable HTTP, [`trace_headers`] for legacy HTTP+SSE). A call refused before it reaches
//! the child has its span too, failed ([`refused`]). Nothing here runs while tracing is off: every entry point is behind `ad_core::trace::enabled`.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolResponse, ClientJsonRpcMessage, GetMeta};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use ad_core::error::{Error, Result};
use ad_core::model::Transport;
use ad_core::trace::{Kind, SpanContext, Started};

use crate::state::{Child, FastSpans};

/// Starts the span of one proxied call (only called while tracing is on), before anything is known of the child.
pub(crate) fn start_call(server: &str, tool: &str, parent: Option<&SpanContext>) -> Started {
    let mut span = Started::new(format!("tools/call {tool}"), Kind::Client, parent);
    span.set("mcp.method.name", "tools/call");
    span.set("gen_ai.tool.name", tool);
    span.set("gen_ai.operation.name", "execute_tool");
    span.set("agent_discover.server", server);
    span
}

/// What the span knows once the child is running: the protocol revision spoken with it and the transport.
pub(crate) fn describe(span: &mut Started, child: &Child) {
    span.set("mcp.protocol.version", child.protocol.as_str());
    span.set(
        "network.transport",
        match child.transport {
            Transport::Stdio => "pipe",
            Transport::StreamableHttp | Transport::Sse => "tcp",
        },
    );
}

/// Ends the span of a call refused before it reached the child (OpenTelemetry's "recording errors": the attempted
/// operation's span, failed): outcome `refused`, `agent_discover.refused` the stage that refused it (`server`: not
/// active, cannot start, waits for an authorization; `tool`: unknown, filtered out, withheld by pinning or the
/// scanner; `approval`: a policy or a person said no, or no one answered in time), `error.type` the failure's kind.
pub(crate) fn refused(span: Option<Started>, stage: &'static str, e: &Error) {
    let Some(mut span) = span else { return };
    let kind = match e {
        Error::Unavailable(_) => "server_unavailable",
        Error::AuthRequired { .. } => "auth_required",
        e => e.call_kind(),
    };
    span.set("agent_discover.outcome", "refused");
    span.set("agent_discover.refused", stage);
    span.set("agent_discover.error.kind", e.call_kind());
    if let Some(ms) = e.retry_after_ms() {
        span.set("agent_discover.retry_after_ms", ms as i64);
    }
    span.fail(kind, e.to_string());
    span.end();
}

/// Ends the span of a call held for a person's approval (an input-required result or an elicitation in flight):
/// the child has not been called; `agent_discover.approval` says so.
pub(crate) fn asked(mut span: Started, res: &Result<CallToolResponse>) {
    span.set("agent_discover.approval", "asked");
    end_call(span, res);
}

tokio::task_local! {
    /// The id of the last request sent to the child in the proxied call this task is making (tracing on only).
    static SENT: std::cell::RefCell<Option<String>>;
}

/// Runs a proxied call, then gives its span the id of the request sent to the child (`jsonrpc.request.id`, as the
/// MCP conventions ask of client spans), noted by [`sent`].
pub(crate) async fn noting_request_id<T>(
    span: &mut Started,
    call: impl std::future::Future<Output = T>,
) -> T {
    let (res, id) = SENT
        .scope(std::cell::RefCell::new(None), async {
            let res = call.await;
            (res, SENT.with(|id| id.take()))
        })
        .await;
    if let Some(id) = id {
        span.set("jsonrpc.request.id", id);
    }
    res
}

/// Notes the id of a request sent to a child, for the span of the call being made (nothing outside one).
pub(crate) fn sent(id: &rmcp::model::RequestId) {
    let _ = SENT.try_with(|slot| *slot.borrow_mut() = Some(id_text(id)));
}

/// Ends a proxied call's span with its outcome: `error.type` is the JSON-RPC code of a child's error, `tool_error`
/// for a result with `isError`, else the failure's kind as agents see it (`timeout`, `transport_error`, ...).
pub(crate) fn end_call(mut span: Started, res: &Result<CallToolResponse>) {
    let outcome = match res {
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => {
            span.fail("tool_error", "the tool returned an error result");
            "tool_error"
        }
        Ok(CallToolResponse::Complete(_)) => "ok",
        Ok(CallToolResponse::Task(_)) => "task",
        Ok(_) => "input_required",
        Err(Error::Child { error, .. }) => {
            let code = error.code.0.to_string();
            span.set("rpc.response.status_code", code.clone());
            span.set("agent_discover.error.kind", "server_error");
            span.fail(code, error.message.to_string());
            "error"
        }
        Err(e) => {
            span.set("agent_discover.error.kind", e.call_kind());
            span.fail(e.call_kind(), e.to_string());
            "error"
        }
    };
    span.set("agent_discover.outcome", outcome);
    span.end();
}

/// The `traceparent` and `tracestate` headers for a message to an HTTP child: the request's trace context as
/// `call.rs` put it in `_meta` (nothing while tracing is off, or for a message without one).
pub(crate) fn trace_headers(message: &ClientJsonRpcMessage) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if !ad_core::trace::enabled() {
        return out;
    }
    if let ClientJsonRpcMessage::Request(r) = message {
        let meta = r.request.get_meta();
        for (name, value) in [
            ("traceparent", meta.get_traceparent()),
            ("tracestate", meta.get_tracestate()),
        ] {
            if let Some(v) = value {
                out.push((name, v.to_owned()));
            }
        }
    }
    out
}

/// Starts a fast-lane call's spans: the client's `tools/call` of `exposed` (under `parent`, the trace context it
/// sent, if any) and the call of the child's `tool`.
pub(crate) fn fast_call(
    server: &str,
    exposed: &str,
    tool: &str,
    id: &rmcp::model::RequestId,
    parent: Option<SpanContext>,
    client_protocol: Option<&str>,
    child_protocol: Option<&str>,
) -> Box<FastSpans> {
    let mut served = Started::new(
        format!("tools/call {exposed}"),
        Kind::Server,
        parent.as_ref(),
    );
    served.set("mcp.method.name", "tools/call");
    served.set("jsonrpc.request.id", id_text(id));
    served.set("network.transport", "pipe");
    if let Some(v) = client_protocol {
        served.set("mcp.protocol.version", v);
    }
    served.set("gen_ai.tool.name", exposed);
    served.set("gen_ai.operation.name", "execute_tool");
    let mut call = start_call(server, tool, Some(served.context()));
    // The fast lane serves legacy stdio children only.
    call.set("network.transport", "pipe");
    if let Some(v) = child_protocol {
        call.set("mcp.protocol.version", v);
    }
    Box::new(FastSpans { served, call })
}

impl FastSpans {
    /// The request sent to the child is numbered `number`: the call's span records it, and its context is what the
    /// child is given (`traceparent`, `tracestate`).
    pub(crate) fn sent(&mut self, number: i64) -> (Option<String>, Option<String>) {
        self.call.set("jsonrpc.request.id", number.to_string());
        let context = self.call.context();
        (Some(context.traceparent()), context.state.clone())
    }

    /// The child answered with a plain tool result (`ok`: not `isError`), passed to the client as written.
    pub(crate) fn end_plain(self, ok: bool) {
        let FastSpans {
            mut served,
            mut call,
        } = self;
        for span in [&mut served, &mut call] {
            if !ok {
                span.fail("tool_error", "the tool returned an error result");
            }
        }
        call.set(
            "agent_discover.outcome",
            if ok { "ok" } else { "tool_error" },
        );
        call.end();
        served.end();
    }

    /// Ends the proxied call's span with the call's outcome; the served span is left to end with the answer.
    pub(crate) fn end_call(self, res: &Result<CallToolResponse>) -> Started {
        end_call(self.call, res);
        self.served
    }
}

/// Ends a fast-lane call's served span with the client's answer, as shaped by the front.
pub(crate) fn end_fast_shaped(
    served: Started,
    shaped: &std::result::Result<CallToolResponse, rmcp::ErrorData>,
) {
    match shaped {
        Ok(CallToolResponse::Complete(r)) if r.is_error == Some(true) => end_fast_served(
            served,
            Err(("tool_error", "the tool returned an error result")),
        ),
        Ok(_) => end_fast_served(served, Ok(())),
        Err(e) => {
            let code = e.code.0.to_string();
            let mut served = served;
            served.set("rpc.response.status_code", code.clone());
            served.fail(code, e.message.to_string());
            served.end();
        }
    }
}

/// Ends a fast-lane call's served span: `Err((error.type, message))` marks it failed.
pub(crate) fn end_fast_served(mut served: Started, res: std::result::Result<(), (&str, &str)>) {
    if let Err((kind, message)) = res {
        served.fail(kind, message);
    }
    served.end();
}

fn id_text(id: &rmcp::model::RequestId) -> String {
    match id {
        rmcp::model::NumberOrString::Number(n) => n.to_string(),
        rmcp::model::NumberOrString::String(s) => s.to_string(),
    }
}

/// An HTTP child's client that sends the request's trace context (`_meta.traceparent`, put there by `call.rs`) as
/// the `traceparent` and `tracestate` headers too (without a traceparent in the message it adds nothing), and hands
/// rmcp a tool list streamed alone as one JSON answer (`whole_list.rs`).
#[derive(Clone)]
pub(crate) struct TracedHttp<C>(pub(crate) C);

type Headers = HashMap<HeaderName, HeaderValue>;

fn with_trace_headers(message: &ClientJsonRpcMessage, mut headers: Headers) -> Headers {
    for (name, value) in trace_headers(message) {
        if let Ok(v) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), v);
        }
    }
    headers
}

impl<C> StreamableHttpClient for TracedHttp<C>
where
    C: StreamableHttpClient<Error = reqwest::Error> + Clone + Send + Sync + 'static,
{
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> std::result::Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let custom_headers = with_trace_headers(&message, custom_headers);
        let list = crate::whole_list::tool_list_id(&message);
        let response = self
            .0
            .post_message(uri, message, session_id, auth_header, custom_headers)
            .await;
        crate::whole_list::whole(list, response).await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> std::result::Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let custom_headers = with_trace_headers(&message, custom_headers);
        let list = crate::whole_list::tool_list_id(&message);
        let response = self
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        crate::whole_list::whole(list, response).await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: Headers,
        limits: StreamableHttpResponseLimits,
    ) -> std::result::Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let custom_headers = with_trace_headers(&message, custom_headers);
        let list = crate::whole_list::tool_list_id(&message);
        let response = self
            .0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        crate::whole_list::whole(list, response).await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> std::result::Result<(), StreamableHttpError<Self::Error>> {
        self.0
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
    ) -> std::result::Result<
        BoxStream<'static, std::result::Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: Headers,
        max_sse_event_size: usize,
    ) -> std::result::Result<
        BoxStream<'static, std::result::Result<sse_stream::Sse, sse_stream::Error>>,
        StreamableHttpError<Self::Error>,
    > {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
