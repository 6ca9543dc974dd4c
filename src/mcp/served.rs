//! Trace spans of the MCP requests we serve (OpenTelemetry's MCP conventions, server side): one `SERVER` span for
//! every request on stdio, `/mcp` and the per-server endpoints, in both protocol eras, whatever its method (`ping`,
//! `server/discover`, `subscriptions/listen`, the skills, a custom or unknown method) and whichever handler answers
//! it (ours, or rmcp's default for a method ours leave alone): [`Traced`] wraps the handler, so none can miss its
//! span. Named `{mcp.method.name}`, or `{mcp.method.name} {tool or prompt}`. Its parent is the client's span:
//! `params._meta.traceparent` (SEP-414; how 2026-07-28 requests carry it), else the HTTP request's `traceparent`
//! header; without either a new trace starts.
//!
//! Off unless tracing is on: the wrapper is then one branch per request. rmcp's Streamable HTTP service needs a
//! `ServerHandler` (not any `Service`), so the wrapper is one, overriding every method of the trait. What rmcp
//! refuses before calling any handler (a method the negotiated era lacks, such as `ping` in 2026-07-28; a request
//! without the `_meta` its era requires) has no span.

use std::borrow::Cow;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::trace::{Kind, SpanContext, Started};

/// A `ServerHandler` (our aggregated front or a per-server view) whose every request is served under a span. It
/// passes every method on, the notifications and the synchronous ones unchanged.
#[derive(Clone)]
pub struct Traced<H>(pub H);

/// The served request's span context, put in the request's extensions for the handler: the parent of the proxied
/// calls it makes.
#[derive(Clone)]
struct ServedSpan(SpanContext);

/// The served span's context of this request (tracing on only): the parent of its proxied calls.
pub(crate) fn parent(context: &RequestContext<RoleServer>) -> Option<SpanContext> {
    context.extensions.get::<ServedSpan>().map(|s| s.0.clone())
}

/// What a request's span records beyond its context: its method, the tool or prompt it names, the resource URI.
struct What<'a> {
    method: &'a str,
    target: Option<&'a str>,
    uri: Option<&'a str>,
    meta: Option<&'a RequestMetaObject>,
}

impl<'a> What<'a> {
    fn method(method: &'a str) -> Self {
        Self {
            method,
            target: None,
            uri: None,
            meta: None,
        }
    }
}

/// Starts a served span and hands its context to the handler; `None` while tracing is off (one branch).
fn begin(context: &mut RequestContext<RoleServer>, what: What<'_>) -> Option<Started> {
    if !crate::trace::enabled() {
        return None;
    }
    let span = start(context, what);
    context
        .extensions
        .insert(ServedSpan(span.context().clone()));
    Some(span)
}

/// Ends a served span: a JSON-RPC error sets `error.type` and `rpc.response.status_code` to its code.
fn finish<T>(span: Option<Started>, res: &Result<T, McpError>) {
    let Some(mut span) = span else { return };
    if let Err(e) = res {
        let code = e.code.0.to_string();
        span.set("rpc.response.status_code", code.clone());
        span.fail(code, e.message.to_string());
    }
    span.end();
}

/// Passes a request on to the handler under a span: `pass!(self, method(request, context), what)`.
macro_rules! pass {
    ($self:ident, $f:ident($($arg:expr),*), $context:ident, $what:expr) => {{
        let mut $context = $context;
        let span = begin(&mut $context, $what);
        let res = $self.0.$f($($arg,)* $context).await;
        finish(span, &res);
        res
    }};
}

/// Handlers whose requests carry nothing more than their method (paginated lists, and the like).
macro_rules! plain {
    ($($f:ident($p:ty) -> $o:ty = $m:expr;)*) => {$(
        async fn $f(&self, request: $p, context: RequestContext<RoleServer>) -> Result<$o, McpError> {
            pass!(self, $f(request), context, What::method($m))
        }
    )*};
}

// Logging and legacy subscriptions are deprecated in rmcp (SEP-2577, SEP-2575), still served to legacy clients.
#[allow(deprecated)]
impl<H: ServerHandler> ServerHandler for Traced<H> {
    fn get_info(&self) -> ServerConfig {
        self.0.get_info()
    }
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        self.0.supported_protocol_versions()
    }
    fn negotiate_initialize(
        &self,
        request: &InitializeRequestParams,
    ) -> Result<InitializeResult, McpError> {
        self.0.negotiate_initialize(request)
    }
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.0.get_tool(name)
    }
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.0.accepted_subscription_filter(requested)
    }

    async fn ping(&self, context: RequestContext<RoleServer>) -> Result<(), McpError> {
        pass!(self, ping(), context, What::method("ping"))
    }
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        pass!(self, discover(), context, What::method("server/discover"))
    }

    plain! {
        initialize(InitializeRequestParams) -> InitializeResult = "initialize";
        complete(CompleteRequestParams) -> CompleteResult = "completion/complete";
        set_level(SetLevelRequestParams) -> () = "logging/setLevel";
        list_prompts(Option<PaginatedRequestParams>) -> ListPromptsResult = "prompts/list";
        list_resources(Option<PaginatedRequestParams>) -> ListResourcesResult = "resources/list";
        list_resource_templates(Option<PaginatedRequestParams>) -> ListResourceTemplatesResult = "resources/templates/list";
        list_tools(Option<PaginatedRequestParams>) -> ListToolsResult = "tools/list";
        get_task(GetTaskParams) -> GetTaskResult = "tasks/get";
        update_task(UpdateTaskParams) -> () = "tasks/update";
        cancel_task(CancelTaskParams) -> () = "tasks/cancel";
        list_skills(Option<PaginatedRequestParams>) -> ListSkillsResult = "skills/list";
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let name = request.name.clone();
        let what = What {
            target: Some(&name),
            ..What::method("prompts/get")
        };
        pass!(self, get_prompt(request), context, what)
    }
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        let what = What {
            uri: Some(&uri),
            ..What::method("resources/read")
        };
        pass!(self, read_resource(request), context, what)
    }
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        let what = What {
            uri: Some(&uri),
            ..What::method("resources/subscribe")
        };
        pass!(self, subscribe(request), context, what)
    }
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        let what = What {
            uri: Some(&uri),
            ..What::method("resources/unsubscribe")
        };
        pass!(self, unsubscribe(request), context, what)
    }
    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let uri = request.uri.clone();
        let what = What {
            uri: Some(&uri),
            ..What::method("skills/get")
        };
        pass!(self, get_skill(request), context, what)
    }
    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let uri = request.uri.clone();
        let what = What {
            uri: Some(&uri),
            ..What::method("resources/directory/read")
        };
        pass!(self, read_resource_directory(request), context, what)
    }

    /// A tool call's span is named after the tool; a result with `isError` is `error.type` `tool_error`.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut context = context;
        let span = if crate::trace::enabled() {
            let meta = request.meta.clone();
            let what = What {
                target: Some(&request.name),
                meta: meta.as_ref(),
                ..What::method("tools/call")
            };
            begin(&mut context, what)
        } else {
            None
        };
        let res = self.0.call_tool(request, context).await;
        if let Some(mut span) = span {
            if let Ok(CallToolResponse::Complete(r)) = &res
                && r.is_error == Some(true)
            {
                span.fail("tool_error", "the tool returned an error result");
            }
            finish(Some(span), &res);
        }
        res
    }

    /// A custom or unknown method: the span is named by the method the client sent.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let method = request.method.clone();
        let meta = request.get_meta().clone();
        let what = What {
            meta: Some(&meta),
            ..What::method(&method)
        };
        pass!(self, on_custom_request(request), context, what)
    }

    /// A 2026-07-28 subscription: its span lasts as long as the subscription.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let span = crate::trace::enabled().then(|| {
            start(
                context.request_context(),
                What::method("subscriptions/listen"),
            )
        });
        let res = self.0.listen(context).await;
        finish(span, &res);
        res
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.0.on_cancelled(notification, context).await
    }
    async fn on_progress(
        &self,
        notification: ProgressNotificationParam,
        context: NotificationContext<RoleServer>,
    ) {
        self.0.on_progress(notification, context).await
    }
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.0.on_initialized(context).await
    }
    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        self.0.on_roots_list_changed(context).await
    }
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        context: NotificationContext<RoleServer>,
    ) {
        self.0.on_custom_notification(notification, context).await
    }
}

/// The trace context the client sent with a request, if any: the params' `_meta` (as typed params hold it, or as
/// rmcp hands it over in the context), then the HTTP header.
fn incoming(
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

/// The request's id as the span records it (`jsonrpc.request.id`: a number or a string, as text).
fn request_id(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// Starts the span of one served request (tracing on only).
fn start(context: &RequestContext<RoleServer>, what: What<'_>) -> Started {
    let parent = incoming(context, what.meta);
    let method = what.method;
    let name = match what.target {
        Some(t) => format!("{method} {t}"),
        None => method.to_owned(),
    };
    let mut span = Started::new(name, Kind::Server, parent.as_ref());
    span.set("mcp.method.name", method);
    span.set("jsonrpc.request.id", request_id(&context.id));
    if let Some(v) = context
        .protocol_version()
        .or_else(|| context.meta.protocol_version())
    {
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
    if let Some(uri) = what.uri {
        span.set("mcp.resource.uri", uri);
    }
    match (method, what.target) {
        ("tools/call", Some(tool)) => {
            span.set("gen_ai.tool.name", tool);
            span.set("gen_ai.operation.name", "execute_tool");
        }
        ("prompts/get", Some(prompt)) => span.set("gen_ai.prompt.name", prompt),
        _ => {}
    }
    span
}

/// What a handler's body was wrapped in when each handler made its own span: now [`Traced`] makes every request's
/// span, and this only awaits the body (kept so the handlers read as before).
macro_rules! served {
    ($context:expr, $method:expr, $target:expr, $body:expr) => {{
        let _ = &$context;
        $body.await
    }};
}
pub(crate) use served;
