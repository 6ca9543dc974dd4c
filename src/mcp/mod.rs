//! Our MCP server: one rmcp `ServerHandler` serving the built-in `registry` tool plus every active child's tools,
//! resources and prompts, over stdio and (through the HTTP layer) Streamable HTTP, for both protocol eras.
//!
//! A thin adapter: arguments are typed and checked in `actions`, the work is done by the domain layer.

mod actions;
mod agent_tools;
pub(crate) mod calls;
mod clients;
pub mod front;
mod registry_resource;
mod registry_tool;
pub(crate) mod scripts;
pub(crate) mod served;
pub(crate) mod shape;
mod single;
mod skills;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::*;
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServerHandler, ServiceExt};
use serde_json::json;

use crate::app::App;
use crate::error::Error;
use crate::events::Received;
use crate::proxy::Caller;
use calls::{own_task, proxy_call_response, shape_fast_lane_error, unknown_tool};
use clients::NEXT_CLIENT;
use served::served;
use shape::{
    forwarded_error, resource_not_found_2164, stream_gone, takes_2026_errors, unserved_request,
};

pub use clients::shutdown_signal;
pub use registry_tool::actions;
pub use served::Traced;
pub use single::{ServerView, serve_stdio_server};

pub const SERVER_NAME: &str = "agent-discover";

/// What `tools/list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ToolsMode {
    /// The `registry` tool plus every active server's tools as `server__tool` (updated with list_changed).
    #[default]
    Dynamic,
    /// Only the `registry` tool; proxied tools are reached with `proxy_call` (for clients that ignore list_changed).
    Static,
}

/// The MCP face of one `App`; one per connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct McpServer {
    app: Arc<App>,
    mode: ToolsMode,
    client_id: u64,
    /// Whether `on_initialized` should start a list_changed forwarder (HTTP sessions; stdio starts its own).
    forward_on_initialized: bool,
}

impl McpServer {
    pub fn new(app: Arc<App>, mode: ToolsMode) -> McpServer {
        McpServer {
            app,
            mode,
            client_id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            forward_on_initialized: false,
        }
    }

    /// For Streamable HTTP sessions: list_changed is forwarded once the session is initialized.
    pub fn for_http(app: Arc<App>, mode: ToolsMode) -> McpServer {
        McpServer {
            forward_on_initialized: true,
            ..McpServer::new(app, mode)
        }
    }
}

impl ServerHandler for McpServer {
    #[allow(deprecated)] // logging is deprecated by SEP-2577; legacy clients and children still use it.
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources_subscribe()
            .enable_logging()
            .enable_completions()
            .build();
        // SEP-2663: declared only while some running child can serve tasks (`proxy/tasks.rs`).
        let mut caps = caps;
        if self.app.proxy.serves_tasks() {
            caps.extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        }
        // SEP-2640: declared only while some running child declares it (`skills.rs`).
        skills::declare(&self.app, &mut caps);
        ServerConfig::new(caps).with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))).with_instructions(
            format!(
                "agent-discover is a registry and proxy of MCP servers. {}\nUse the `registry` tool: `find_tool` for a task, \
                 `list` registered servers, `install` one (name + command + args), `activate` it to get its tools as \
                 `server__tool`, or call any active server's tool with `proxy_call`; `status` shows what is running.",
                self.app.catalog_summary()
            ),
        )
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        served!(context, "initialize", None, async {
            context.peer.set_peer_info(request.clone());
            self.app
                .proxy
                .register_client(self.client_id, context.peer.clone());
            self.negotiate_initialize(&request)
        })
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        if self.forward_on_initialized {
            spawn_list_changed_forwarder(self.app.clone(), context.peer.clone(), self.mode);
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let principal = Caller::principal_of(&_context);
        served!(_context, "tools/list", None, async {
            let mut tools = vec![registry_tool::definition_with(&self.app.catalog_summary())];
            // Seed 003's agent tools, once there is an agent to delegate to.
            if self.app.agents.has_agents() {
                tools.extend(agent_tools::definitions());
            }
            if self.mode == ToolsMode::Dynamic {
                // Code mode (#28) on top, where clients that rank top-level tools see it; static mode keeps it an action.
                tools.push(scripts::definition());
                // Only what the caller's groups may see (issue 30).
                tools.extend(self.app.proxy.tools_for(principal.as_deref()));
            }
            Ok(ListToolsResult::with_all_items(tools))
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut caller = Caller::of_call(&request, &context);
        // The served span (`served.rs`) is the parent of the proxied call's.
        caller.trace = served::parent(&context);
        caller.session = calls::session_of(&self.app, &context, self.client_id);
        async {
            if request.name == registry_tool::NAME {
                // Boxed: the registry tool's future is large (every action's state), and rmcp moves the handler's
                // future into a task for each request, proxied calls included.
                return Box::pin(registry_tool::call(
                    &self.app,
                    request.arguments.unwrap_or_default(),
                    caller,
                ))
                .await;
            }
            if request.name == scripts::NAME && self.mode == ToolsMode::Dynamic {
                return Box::pin(scripts::call(
                    &self.app,
                    request.arguments.unwrap_or_default(),
                    caller,
                ))
                .await;
            }
            if agent_tools::is_agent_tool(&request.name) {
                return Box::pin(agent_tools::call(
                    &self.app,
                    &request.name,
                    request.arguments.unwrap_or_default(),
                    caller,
                ))
                .await
                .map(Into::into);
            }
            // A tool the caller may not see is as unknown as one that does not exist (issue 30).
            let Some((server, tool)) = self
                .app
                .proxy
                .resolve(&request.name)
                .filter(|(s, t)| self.app.proxy.visible(&caller, s, Some(t)))
            else {
                return Ok(unknown_tool(&self.app, &request.name, &caller).into());
            };
            let res = Box::pin(proxy_call_response(
                &self.app,
                &server,
                &tool,
                request.arguments,
                caller,
            ))
            .await;
            // A child's task is known here as `server__id` (`proxy/tasks.rs`).
            match res {
                Ok(CallToolResponse::Task(mut created)) => {
                    let id = std::mem::take(&mut created.task.task_id);
                    created.task.task_id = crate::proxy::Proxy::expose_task_id(&server, &id);
                    own_task(&self.app, &context, &server, &id, &created.task.task_id);
                    Ok(CallToolResponse::Task(created))
                }
                other => other,
            }
        }
        .await
    }

    /// SEP-2640: every running child's skills, their URIs namespaced (`skills.rs`).
    async fn list_skills(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        Ok(skills::list(&self.app).await)
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        skills::get(&self.app, request).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        skills::directory(&self.app, request).await
    }

    /// SEP-2663, routed by the task id's `server__` prefix (rmcp has already refused a client without the extension).
    async fn get_task(
        &self,
        mut request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        served!(context, "tasks/get", None, async {
            let exposed = request.task_id.clone();
            let (server, id) = self.task_route(&exposed)?;
            request.task_id = id;
            request.meta = None;
            let mut res = Box::pin(self.app.proxy.task_get(
                &server,
                request,
                &Caller::of_tasks(&context),
            ))
            .await
            .map_err(forwarded_error)?;
            res.task.task.task_id = exposed;
            Ok(res)
        })
    }

    async fn update_task(
        &self,
        mut request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "tasks/update", None, async {
            let (server, id) = self.task_route(&request.task_id)?;
            request.task_id = id;
            request.meta = None;
            Box::pin(
                self.app
                    .proxy
                    .task_update(&server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(forwarded_error)
        })
    }

    async fn cancel_task(
        &self,
        mut request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "tasks/cancel", None, async {
            let (server, id) = self.task_route(&request.task_id)?;
            request.task_id = id;
            request.meta = None;
            Box::pin(
                self.app
                    .proxy
                    .task_cancel(&server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(forwarded_error)
        })
    }

    /// The registry tool, or a proxied tool by its exposed name: rmcp's HTTP front validates a 2026-07-28
    /// tools/call's `Mcp-Param-*` headers against its `x-mcp-header` annotations (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if name == registry_tool::NAME {
            return Some(registry_tool::definition());
        }
        if name == scripts::NAME && self.mode == ToolsMode::Dynamic {
            return Some(scripts::definition());
        }
        let (server, tool) = self.app.proxy.resolve_running(name)?;
        let mut t = self.app.proxy.server_tool(&server, &tool)?;
        t.name = name.to_owned().into();
        Some(t)
    }

    /// rmcp hands over a request whose params do not fit its method's schema (say `tools/call` with a string for
    /// `arguments`) as a custom request, and by default answers "method not found" with only the method name.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _c: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(unserved_request(&request.method, request.params.as_ref()))
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        served!(_c, "resources/list", None, async {
            // Boxed like every handler that awaits the proxy: rmcp moves the handler future into a task per request,
            // so the largest branch sets the cost of every call.
            let mut all = vec![registry_resource::resource()];
            let principal = Caller::principal_of(&_c);
            all.extend(Box::pin(self.app.proxy.list_resources(principal.as_deref())).await);
            Ok(ListResourcesResult::with_all_items(all))
        })
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        served!(_c, "resources/templates/list", None, async {
            Ok(ListResourceTemplatesResult::with_all_items(
                Box::pin(
                    self.app
                        .proxy
                        .list_resource_templates(Caller::principal_of(&_c).as_deref()),
                )
                .await,
            ))
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        served!(context, "resources/read", None, async {
            if request.uri == registry_resource::URI {
                return Ok(registry_resource::read(&self.app).into());
            }
            let caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            match Box::pin(self.app.proxy.read_resource(&request.uri, &caller)).await {
                Ok(r) => Ok(r),
                // SEP-2164: an unknown resource (or one of a server that is not running) is invalid params naming the
                // URI.
                Err(Error::NotFound { .. }) => Err(McpError::invalid_params(
                    format!(
                        "Resource not found: {}; resource URIs look like agent-discover://SERVER/URI",
                        crate::model::truncate_for_message(&request.uri)
                    ),
                    Some(json!({"uri": request.uri})),
                )),
                Err(e @ Error::Unavailable(_)) => Err(McpError::invalid_params(
                    format!("Resource not found: {e}"),
                    Some(json!({"uri": request.uri})),
                )),
                // The child's own error (resource not found, ...), its URI under the name clients know.
                Err(Error::Child { server, mut error }) => {
                    if takes_2026_errors(&context) {
                        error = resource_not_found_2164(error, &request.uri);
                    }
                    if let Some(serde_json::Value::Object(data)) = &mut error.data
                        && let Some(serde_json::Value::String(uri)) = data.get_mut("uri")
                        && !uri.starts_with("agent-discover://")
                    {
                        *uri = crate::proxy::names::expose_uri(&server, uri);
                    }
                    Err(error)
                }
                Err(e) => Err(McpError::internal_error(e.to_string(), None)),
            }
        })
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        served!(_c, "prompts/list", None, async {
            Ok(ListPromptsResult::with_all_items(
                Box::pin(
                    self.app
                        .proxy
                        .list_prompts(Caller::principal_of(&_c).as_deref()),
                )
                .await,
            ))
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        served!(context, "prompts/get", Some(&*request.name), async {
            let name = request.name.clone();
            let caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            match Box::pin(self.app.proxy.get_prompt(request, &caller)).await {
                Ok(r) => Ok(r),
                Err(Error::NotFound { .. }) => Err(McpError::invalid_params(
                    format!(
                        "no prompt {}; prompts are named SERVER__PROMPT",
                        crate::model::truncate_for_message(&name)
                    ),
                    None,
                )),
                Err(Error::Child { error, .. }) => Err(error),
                Err(e) => Err(McpError::internal_error(e.to_string(), None)),
            }
        })
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(_c, "logging/setLevel", None, async {
            Box::pin(self.app.proxy.set_log_level(request.level)).await;
            Ok(())
        })
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        served!(_c, "completion/complete", None, async {
            // A hidden server's prompt or resource template is as unknown as a missing one (issue 30).
            let principal = Caller::principal_of(&_c);
            if !self.app.proxy.sees_all(principal.as_deref()) {
                let hidden = match &request.r#ref {
                    Reference::Prompt(p) => {
                        (!Box::pin(self.app.proxy.list_prompts(principal.as_deref()))
                            .await
                            .iter()
                            .any(|v| v.name == p.name))
                        .then(|| Error::not_found("prompt", p.name.as_str()))
                    }
                    Reference::Resource(r) => crate::proxy::names::split_uri(&r.uri)
                        .filter(|(server, _)| {
                            !self
                                .app
                                .proxy
                                .visible_to(principal.as_deref(), server, None)
                        })
                        .map(|_| Error::not_found("resource template", r.uri.as_str())),
                    _ => None,
                };
                if let Some(e) = hidden {
                    return Err(forwarded_error(e));
                }
            }
            let caller = Caller {
                principal,
                ..Caller::default()
            };
            Box::pin(self.app.proxy.complete_as(request, &caller))
                .await
                .map_err(forwarded_error)
        })
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "resources/subscribe", None, async {
            if request.uri == registry_resource::URI {
                registry_resource::subscribe(&self.app, self.client_id, context.peer.clone());
                return Ok(());
            }
            // A hidden server's resource is as unknown as a missing one (issue 30).
            if let Some((server, _)) = crate::proxy::names::split_uri(&request.uri)
                && !self.app.proxy.visible_to(
                    Caller::principal_of(&context).as_deref(),
                    server,
                    None,
                )
            {
                return Err(forwarded_error(Error::not_found(
                    "resource",
                    request.uri.as_str(),
                )));
            }
            let caller = Caller {
                principal: Caller::principal_of(&context),
                ..Caller::default()
            };
            Box::pin(self.app.proxy.subscribe(
                self.client_id,
                context.peer.clone(),
                &request.uri,
                false,
                &caller,
            ))
            .await
            .map_err(forwarded_error)
        })
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(_c, "resources/unsubscribe", None, async {
            if request.uri == registry_resource::URI {
                registry_resource::unsubscribe(self.client_id);
                return Ok(());
            }
            Box::pin(self.app.proxy.unsubscribe(self.client_id, &request.uri))
                .await
                .map_err(forwarded_error)
        })
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    /// 2026-07-28 clients get list_changed through `subscriptions/listen` (they have no session to push to).
    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let mut sub = self.app.events.subscribe("server:*");
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                next = sub.recv() => {
                    let Some(received) = next else { return Ok(()) };
                    if !changes_lists(&received) {
                        continue;
                    }
                    // The sink refuses what the client did not ask for; a closed stream ends the loop.
                    let sink = context.sink();
                    let mut sent = vec![
                        sink.notify_resource_list_changed().await,
                        sink.notify_prompt_list_changed().await,
                    ];
                    if self.mode == ToolsMode::Dynamic {
                        sent.push(sink.notify_tool_list_changed().await);
                    }
                    if sent.iter().any(stream_gone) {
                        return Ok(());
                    }
                }
            }
        }
    }
}

impl McpServer {
    /// The server and the child's id of an aggregated task id; unknown (invalid params, SEP-2663) without one.
    fn task_route(&self, exposed: &str) -> Result<(String, String), McpError> {
        self.app.proxy.task_route(exposed).ok_or_else(|| {
            McpError::invalid_params(
                format!(
                    "unknown task: {}; task ids here look like SERVER__ID",
                    crate::model::truncate_for_message(exposed)
                ),
                None,
            )
        })
    }
}

fn changes_lists(r: &Received) -> bool {
    match r {
        Received::Event(ev) => ev.changes_tool_list(),
        Received::Lagged(_) => true,
    }
}

/// Sends list_changed notifications to one connected client whenever the proxied lists change; ends with the connection.
pub fn spawn_list_changed_forwarder(app: Arc<App>, peer: Peer<RoleServer>, mode: ToolsMode) {
    let mut sub = app.events.subscribe("server:*");
    tokio::spawn(async move {
        while let Some(received) = sub.recv().await {
            if !changes_lists(&received) {
                continue;
            }
            if peer.is_transport_closed() {
                break;
            }
            if mode == ToolsMode::Dynamic && peer.notify_tool_list_changed().await.is_err() {
                break;
            }
            let _ = peer.notify_resource_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
    });
}

/// `off`: `agent-discover mcp` relays every tool call through rmcp's handler, none through the fast lane.
pub const ENV_FAST_LANE: &str = "AGENT_DISCOVER_FAST_LANE";

/// Tool names our front serves itself, which the fast lane (stdio and HTTP) never relays.
pub(crate) fn served_here(name: &str) -> bool {
    name == registry_tool::NAME || agent_tools::is_agent_tool(name)
}

/// Serves MCP on stdin/stdout until the client disconnects, then stops every child. Nothing else writes to stdout.
pub async fn serve_stdio(app: Arc<App>, mode: ToolsMode) -> anyhow::Result<()> {
    let server = McpServer::new(app.clone(), mode);
    let client_id = server.client_id;
    // Pipes (how MCP clients start us) are driven by the IO reactor; anything else falls back to blocking stdio.
    // Our transport over rmcp's codec answers every request with an id, even one rmcp cannot type (`front.rs`).
    // Servers flagged active are listed (their stored tools) and calls to them wait for them from the first request
    // on; they start once the handshake is done (`restore_in_background` below).
    app.proxy.expect_restore();
    let front = front::StdioFront::new(rmcp::transport::stdio_pipes());
    let fast_lane = front.fast_lane_slot();
    let service = served::Traced(server).serve(front).await?;
    // After the handshake, proxied tool calls of legacy stdio children take the fast lane (`proxy/relay.rs`), unless
    // `AGENT_DISCOVER_FAST_LANE=off` (every call through rmcp's handler: a fallback, and the bench's comparison).
    // With tracing on, the lane makes each call's spans itself (`proxy/spans.rs`).
    if std::env::var(ENV_FAST_LANE).as_deref() != Ok("off") {
        let protocol = crate::trace::enabled()
            .then(|| service.peer().peer_info())
            .flatten()
            .map(|info| info.protocol_version.to_string());
        fast_lane.install(
            app.proxy.clone(),
            shape_fast_lane_error,
            served_here,
            protocol,
            service.peer().clone(),
        );
    }
    // Over stdio one forwarder serves both protocol eras (an unscoped notification reaches 2026-07-28 clients too).
    spawn_list_changed_forwarder(app.clone(), service.peer().clone(), mode);
    // The registry feed: snapshots for subscribers, and children stopped when another process disables them.
    app.feed();
    app.proxy.restore_in_background(app.config.team);
    crate::footprint::release_startup_code_soon();
    let res = tokio::select! {
        r = service.waiting() => r.map(|_| ()).map_err(anyhow::Error::from),
        _ = shutdown_signal() => Ok(()),
    };
    app.proxy.unregister_client(client_id);
    registry_resource::unsubscribe(client_id);
    app.proxy.shutdown().await;
    res
}
