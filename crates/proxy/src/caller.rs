//! Who is calling: the connected client's peer, its progress token, cancellation and protocol revision, and the
//! retry fields of an input-required result, read from one request; and whether a legacy child's questions during
//! that request go to this caller alone (`held.rs`).

use rmcp::model::ProgressToken;
use rmcp::{Peer, RoleServer};

#[cfg(doc)]
use ad_core::error::Error;

use crate::pages::store::META_KEY;

/// Who is calling: the connected client's peer (to route progress and child requests back) and its progress token.
#[derive(Clone, Default)]
pub struct Caller {
    pub peer: Option<Peer<RoleServer>>,
    pub progress_token: Option<ProgressToken>,
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// The protocol revision of the calling request (2026-07-28 clients take input-required results themselves).
    pub protocol: Option<rmcp::model::ProtocolVersion>,
    /// What the calling client declared it can do (passed on to 2026-07-28 children in the request's `_meta`).
    pub capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A retry after an input-required result (SEP-2322): the client's answers and the echoed state, for the child.
    pub input_responses: Option<rmcp::model::InputResponses>,
    pub request_state: Option<String>,
    /// The request's `_meta` logLevel (2026-07-28, SEP-2575): passed on to 2026-07-28 children, which log nothing
    /// for a request without one.
    #[allow(deprecated)]
    pub log_level: Option<rmcp::model::LoggingLevel>,
    /// The caller is on a per-server endpoint: the child's log messages reach it with their own `logger` (the
    /// aggregated front names the server in it).
    pub scoped: bool,
    /// A legacy child's question (sampling, elicitation, roots) during this call is put to this caller only: asked of
    /// its client if it declared the capability, else the call ends with [`Error::InputRequired`]; never forwarded
    /// to another client. Set for the registry's `proxy_call`; implied for a caller without a client (REST, CLI).
    pub questions_to_caller: bool,
    /// The caller's session, for approvals given "for this session" (#27): `mcp:PROCESS:CLIENT` for an MCP connection
    /// (stdio, or a legacy Streamable HTTP session; see `Proxy::mcp_session`), `rest:NAME` and `cli:NAME` when the
    /// caller named one; `None` for a caller without one (a 2026-07-28 request over HTTP, which has no session).
    pub session: Option<String>,
    /// The call is made by a code-mode script (issue 28): its call-log entry says so (`[script]`).
    pub script: bool,
    /// The trace context of the request this call serves (the front's span), when tracing is on: the parent of the
    /// proxied call's span. Inside the proxy, the proxied call's own span, which the child is given (`spans.rs`).
    pub trace: Option<ad_core::trace::SpanContext>,
    /// The child call `held.rs` makes within an exchange: the child's questions during it belong to that exchange,
    /// while those asked during any other call of the same child go to that call's client (`client.rs`).
    pub in_exchange: bool,
    /// The authenticated user behind the request when the front validates OAuth access tokens (issue 30); `None`
    /// for a single user (static token, stdio, CLI).
    pub principal: Option<std::sync::Arc<ad_core::identity::Principal>>,
    /// The call's own paging limit in bytes (`_meta["agent-discover/page_bytes"]`, or `proxy_call`'s `page_bytes`;
    /// 0: off), over the server's and the default (`pages.rs`).
    pub page_bytes: Option<usize>,
    /// The profile the caller is connected through (`/mcp/profiles/NAME`, `mcp --profile NAME`): a tool outside it
    /// is refused with [`Error::OutsideProfile`] on every path (a front's call, `proxy_call`, a script's inner calls).
    pub profile: Option<std::sync::Arc<ad_core::profile::Profile>>,
}

impl Caller {
    /// The client making one `tools/call`: its peer, its progress token (the request's `_meta` first, then the
    /// context's) and the request's cancellation.
    pub fn of_call(
        request: &rmcp::model::CallToolRequestParams,
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> Caller {
        let progress_token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        Caller {
            peer: Some(context.peer.clone()),
            progress_token,
            cancel: Some(context.ct.clone()),
            protocol: context.protocol_version(),
            capabilities: context.client_capabilities(),
            input_responses: request.input_responses.clone(),
            request_state: request.request_state.clone(),
            log_level: request
                .meta
                .as_ref()
                .and_then(|m| m.log_level())
                .or_else(|| context.meta.log_level()),
            scoped: false,
            questions_to_caller: false,
            session: None,
            script: false,
            trace: None,
            in_exchange: false,
            principal: Caller::principal_of(context),
            page_bytes: request
                .meta
                .as_ref()
                .and_then(|m| m.0.0.get(META_KEY))
                .or_else(|| context.meta.0.0.get(META_KEY))
                .and_then(serde_json::Value::as_u64)
                .map(|b| b as usize),
            profile: None,
        }
    }

    /// The authenticated user of an MCP request over HTTP: what the front's guard put on the HTTP request, which
    /// rmcp hands on in the request's extensions (issue 30).
    pub fn principal_of(
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> Option<std::sync::Arc<ad_core::identity::Principal>> {
        context
            .extensions
            .get::<http::request::Parts>()?
            .extensions
            .get::<std::sync::Arc<ad_core::identity::Principal>>()
            .cloned()
    }

    /// The client making a tasks request (`tasks/get`, `tasks/update`, `tasks/cancel`): its capabilities and its user.
    pub fn of_tasks(context: &rmcp::service::RequestContext<RoleServer>) -> Caller {
        Caller {
            capabilities: context.client_capabilities(),
            principal: Caller::principal_of(context),
            ..Caller::default()
        }
    }

    /// The client making a `prompts/get` or `resources/read`: as [`Caller::of_call`], with that request's retry
    /// fields (SEP-2322).
    pub fn of_request(
        context: &rmcp::service::RequestContext<RoleServer>,
        input_responses: Option<rmcp::model::InputResponses>,
        request_state: Option<String>,
    ) -> Caller {
        Caller {
            peer: Some(context.peer.clone()),
            progress_token: context.meta.get_progress_token(),
            cancel: Some(context.ct.clone()),
            protocol: context.protocol_version(),
            capabilities: context.client_capabilities(),
            input_responses,
            request_state,
            log_level: context.meta.log_level(),
            scoped: false,
            questions_to_caller: false,
            session: None,
            script: false,
            trace: None,
            in_exchange: false,
            principal: Caller::principal_of(context),
            page_bytes: None,
            profile: None,
        }
    }

    /// Whether the caller speaks 2026-07-28 or later, and so takes input-required results itself.
    pub fn takes_input_required(&self) -> bool {
        self.protocol.as_ref().is_some_and(|v| !v.has_initialize())
    }
}
