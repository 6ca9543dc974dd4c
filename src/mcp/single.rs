//! One registered server as itself (`/mcp/servers/{name}`, `agent-discover mcp --server NAME`): its own tool and
//! prompt names and resource URIs, its capabilities and instructions; logging, completions, subscriptions,
//! sampling/elicitation/roots, progress and cancellation forwarded. The server is activated on first use.

// Logging and resources/subscribe are deprecated by SEP-2577 / 2026-07-28, but legacy clients and children use them.
#![allow(deprecated)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt};

use super::clients::NEXT_CLIENT;
use super::served::served;
use crate::app::App;
use crate::error::Error;
use crate::proxy::{Caller, Proxy, ServerError};

/// The MCP face of one registered server; one per connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct ServerView {
    app: Arc<App>,
    server: String,
    client_id: u64,
}

impl ServerView {
    pub fn new(app: Arc<App>, server: impl Into<String>) -> ServerView {
        ServerView {
            app,
            server: server.into(),
            client_id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
        }
    }

    async fn ready(&self) -> Result<(), McpError> {
        Box::pin(self.app.proxy.ensure_active(&self.server))
            .await
            .map_err(|e| self.error(e))
    }

    fn error(&self, e: Error) -> McpError {
        match e {
            Error::NotFound { .. } | Error::Invalid { .. } => {
                McpError::invalid_params(e.to_string(), None)
            }
            // A limit's refusal (`limits/`): here, where agent-discover stands in for the server, a JSON-RPC error
            // with the kind and when to retry; a rate limit with the code peers use for it.
            Error::RateLimited { .. }
            | Error::ServerBusy { .. }
            | Error::ServerUnavailable { .. } => {
                let data = serde_json::json!({"kind": e.call_kind(), "retry_after_ms": e.retry_after_ms()});
                let code = match e {
                    Error::RateLimited { .. } => super::calls::RATE_LIMITED,
                    _ => rmcp::model::ErrorCode::INTERNAL_ERROR,
                };
                McpError::new(code, e.to_string(), Some(data))
            }
            e => McpError::internal_error(e.to_string(), None),
        }
    }

    fn server_error(&self, e: ServerError) -> McpError {
        match e {
            ServerError::Child(data) => data,
            ServerError::Proxy(e) => self.error(e),
        }
    }

    fn register(&self, peer: &Peer<RoleServer>) {
        self.app
            .proxy
            .register_scoped_client(self.client_id, peer.clone(), &self.server);
    }
}

impl ServerHandler for ServerView {
    /// The child's own capabilities and instructions once it runs; before that, everything we can forward.
    fn get_info(&self) -> ServerConfig {
        if let Some(info) = self.app.proxy.server_info(&self.server) {
            let mut config = ServerConfig::new(info.capabilities);
            if let Some(i) = info.server_info {
                config = config.with_server_info(i);
            }
            if let Some(text) = info.instructions {
                config = config.with_instructions(text);
            }
            return config;
        }
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_logging()
            .enable_completions()
            .build();
        ServerConfig::new(caps).with_server_info(Implementation::new(
            self.server.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        served!(context, "initialize", None, async {
            context.peer.set_peer_info(request.clone());
            self.register(&context.peer);
            // Activated before answering, so the client sees the child's own capabilities.
            self.ready().await?;
            self.negotiate_initialize(&request)
        })
    }

    /// `server/discover` (2026-07-28) activates the server first too, so the client sees the child's capabilities.
    async fn discover(&self, _c: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        served!(_c, "server/discover", None, async {
            self.ready().await?;
            Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                self.get_info(),
            ))
        })
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        spawn_list_changed_forwarder(self.app.clone(), context.peer.clone(), self.server.clone());
    }

    /// The child's tool by its own name: rmcp's HTTP front validates a 2026-07-28 tools/call's `Mcp-Param-*`
    /// headers against its `x-mcp-header` annotations (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.app.proxy.server_tool(&self.server, name)
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        served!(_c, "tools/list", None, async {
            self.ready().await?;
            let mut tools = Box::pin(self.app.proxy.server_tools(&self.server))
                .await
                .map_err(|e| self.error(e))?;
            // Only the tools the caller's groups may see (issue 30).
            let principal = Caller::principal_of(&_c);
            tools.retain(|t| {
                self.app
                    .proxy
                    .visible_to(principal.as_deref(), &self.server, Some(&t.name))
            });
            Ok(ListToolsResult::with_all_items(tools))
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // The served span (`served.rs`) is the parent of the proxied call's.
        let trace = super::served::parent(&context);
        async {
            self.ready().await?;
            let mut caller = Caller::of_call(&request, &context);
            caller.scoped = true;
            caller.trace = trace;
            caller.session = super::calls::session_of(&self.app, &context, self.client_id);
            match Box::pin(self.app.proxy.call_tool_response(
                &self.server,
                &request.name,
                request.arguments,
                caller,
            ))
            .await
            {
                Ok(CallToolResponse::Task(created)) => {
                    let id = created.task.task_id.clone();
                    super::calls::own_task(&self.app, &context, &self.server, &id, &id);
                    Ok(CallToolResponse::Task(created))
                }
                Ok(r) => Ok(r),
                // Like the aggregated front (and the TypeScript SDK): an unknown tool is a tool error the model sees.
                Err(Error::NotFound { .. }) => {
                    Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "unknown tool `{}`: server `{}` does not offer it",
                        crate::model::truncate_for_message(&request.name),
                        self.server
                    ))])
                    .into())
                }
                // A tool withheld by pinning or the scanner, a call an approval policy or a person refused, or no approval
                // in time (#27): a tool error saying why, as on the aggregated front.
                Err(
                    e @ (Error::ToolChanged { .. }
                    | Error::ToolFlagged { .. }
                    | Error::ApprovalDenied { .. }
                    | Error::ApprovalTimeout { .. }
                    | Error::PolicyDenied { .. }),
                ) => Ok(CallToolResult::error(vec![ContentBlock::text(
                    {
                        let mut body = serde_json::json!({"error": e.to_string(), "code": e.code().as_str(),
                        "kind": e.call_kind(), "reasons": e.reasons()});
                        if let Error::PolicyDenied { policy, reason, .. } = &e {
                            body["policy"] = policy.as_str().into();
                            body["reason"] = serde_json::json!(reason);
                        }
                        body
                    }
                    .to_string(),
                )])
                .into()),
                // The child's JSON-RPC error, with its own code, message and data.
                Err(Error::Child { error, .. }) => Err(error),
                Err(e) => Err(self.error(e)),
            }
        }
        .await
    }

    /// SEP-2640: the child's `skills/list`, `skills/get` and `resources/directory/read`, passed on unchanged (rmcp
    /// has answered -32601 already unless the child declared the extension, whose capabilities are ours here).
    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        self.ready().await?;
        Box::pin(self.app.proxy.server_list_skills(&self.server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        self.ready().await?;
        Box::pin(self.app.proxy.server_get_skill(&self.server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        self.ready().await?;
        Box::pin(self.app.proxy.server_read_directory(&self.server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    /// SEP-2663: the child's own task ids, to the child (rmcp has already refused a client without the extension,
    /// and answers -32601 when the child does not declare it).
    async fn get_task(
        &self,
        mut request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        served!(context, "tasks/get", None, async {
            request.meta = None;
            Box::pin(
                self.app
                    .proxy
                    .task_get(&self.server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(|e| self.server_error(e.into()))
        })
    }

    async fn update_task(
        &self,
        mut request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "tasks/update", None, async {
            request.meta = None;
            Box::pin(
                self.app
                    .proxy
                    .task_update(&self.server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(|e| self.server_error(e.into()))
        })
    }

    async fn cancel_task(
        &self,
        mut request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "tasks/cancel", None, async {
            request.meta = None;
            Box::pin(
                self.app
                    .proxy
                    .task_cancel(&self.server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(|e| self.server_error(e.into()))
        })
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        served!(_c, "resources/list", None, async {
            self.ready().await?;
            Box::pin(self.app.proxy.server_resources(&self.server))
                .await
                .map(ListResourcesResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        served!(_c, "resources/templates/list", None, async {
            self.ready().await?;
            Box::pin(self.app.proxy.server_resource_templates(&self.server))
                .await
                .map(ListResourceTemplatesResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        served!(context, "resources/read", None, async {
            self.ready().await?;
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            caller.scoped = true;
            Box::pin(
                self.app
                    .proxy
                    .server_read_resource(&self.server, &request.uri, &caller),
            )
            .await
            .map_err(|e| {
                let e = self.server_error(e);
                // A 2026-07-28 client gets SEP-2164's shape; a legacy one the child's error unchanged.
                if super::shape::takes_2026_errors(&context) {
                    super::shape::resource_not_found_2164(e, &request.uri)
                } else {
                    e
                }
            })
        })
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        served!(_c, "prompts/list", None, async {
            self.ready().await?;
            Box::pin(self.app.proxy.server_prompts(&self.server))
                .await
                .map(ListPromptsResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        served!(context, "prompts/get", Some(&*request.name), async {
            self.ready().await?;
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            caller.scoped = true;
            Box::pin(
                self.app
                    .proxy
                    .server_get_prompt(&self.server, request, &caller),
            )
            .await
            .map_err(|e| self.server_error(e))
        })
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        served!(_c, "completion/complete", None, async {
            self.ready().await?;
            Box::pin(self.app.proxy.server_complete(&self.server, request))
                .await
                .map_err(|e| self.server_error(e))
        })
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "logging/setLevel", None, async {
            self.register(&context.peer);
            self.ready().await?;
            Box::pin(self.app.proxy.set_log_level(request.level)).await;
            Ok(())
        })
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "resources/subscribe", None, async {
            self.ready().await?;
            let uri = Proxy::exposed_uri(&self.server, &request.uri);
            let caller = Caller {
                principal: Caller::principal_of(&context),
                ..Caller::default()
            };
            Box::pin(self.app.proxy.subscribe(
                self.client_id,
                context.peer.clone(),
                &uri,
                true,
                &caller,
            ))
            .await
            .map_err(|e| self.error(e))
        })
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(_c, "resources/unsubscribe", None, async {
            let uri = Proxy::exposed_uri(&self.server, &request.uri);
            Box::pin(self.app.proxy.unsubscribe(self.client_id, &uri))
                .await
                .map_err(|e| self.error(e))
        })
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    /// 2026-07-28 clients get this server's list_changed through `subscriptions/listen` (no session to push to).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut sub = self.app.events.subscribe("server:*");
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                next = sub.recv() => {
                    let Some(received) = next else { return Ok(()) };
                    if !self.changes_lists(&received) {
                        continue;
                    }
                    // The sink refuses what the client did not ask for; a closed stream ends the loop.
                    let sink = context.sink();
                    let sent = [
                        sink.notify_tool_list_changed().await,
                        sink.notify_resource_list_changed().await,
                        sink.notify_prompt_list_changed().await,
                    ];
                    if sent.iter().any(super::shape::stream_gone) {
                        return Ok(());
                    }
                }
            }
        }
    }
}

impl ServerView {
    /// Whether an event changes the lists this endpoint shows.
    fn changes_lists(&self, received: &crate::events::Received) -> bool {
        match received {
            crate::events::Received::Event(ev) => {
                ev.changes_tool_list() && names_server(ev, &self.server)
            }
            crate::events::Received::Lagged(_) => true,
        }
    }
}

/// Sends list_changed notifications to one client of a per-server endpoint when that server's lists change.
fn spawn_list_changed_forwarder(app: Arc<App>, peer: Peer<RoleServer>, server: String) {
    let mut sub = app.events.subscribe("server:*");
    tokio::spawn(async move {
        while let Some(received) = sub.recv().await {
            let relevant = match &received {
                crate::events::Received::Event(ev) => {
                    ev.changes_tool_list() && names_server(ev, &server)
                }
                crate::events::Received::Lagged(_) => true,
            };
            if !relevant {
                continue;
            }
            if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err() {
                break;
            }
            let _ = peer.notify_resource_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
    });
}

fn names_server(ev: &crate::events::Event, server: &str) -> bool {
    use crate::events::Event::*;
    match ev {
        ServerActivated { name, .. }
        | ServerDeactivated { name }
        | ServerError { name, .. }
        | ToolsChanged { name }
        | ServerRemoved { name } => name == server,
        _ => false,
    }
}

/// Serves one registered server as itself on stdin/stdout until the client disconnects, then stops every child.
pub async fn serve_stdio_server(app: Arc<App>, server: String) -> anyhow::Result<()> {
    app.registry.get(&server)?;
    let view = ServerView::new(app.clone(), server.clone());
    let client_id = view.client_id;
    // Every request with an id is answered with it, even one rmcp cannot type (`front.rs`).
    let service = super::served::Traced(view)
        .serve(super::front::StdioFront::new(rmcp::transport::stdio_pipes()))
        .await?;
    spawn_list_changed_forwarder(app.clone(), service.peer().clone(), server);
    let res = tokio::select! {
        r = service.waiting() => r.map(|_| ()).map_err(anyhow::Error::from),
        _ = super::clients::shutdown_signal() => Ok(()),
    };
    app.proxy.unregister_client(client_id);
    app.proxy.shutdown().await;
    res
}
