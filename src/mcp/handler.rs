//! The one MCP handler of every endpoint: `ServerHandler` for [`McpServer`], whatever its [`View`]. The aggregated
//! front and a profile share every line (a profile narrows what is listed, found and called); one server as itself
//! differs in shape (its own names, the child's capabilities and answers passed on), which `single.rs` supplies as
//! the `own_*` methods this handler calls for a server view.

// Logging and resources/subscribe are deprecated by SEP-2577 / 2026-07-28, but legacy clients and children use them.
#![allow(deprecated)]

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::json;

use super::calls::{own_task, proxy_call_response, unknown_tool};
use super::served::served;
use super::shape::{
    forwarded_error, resource_not_found_2164, stream_gone, takes_2026_errors, unserved_request,
};
use super::view::{View, keeps_prompt, keeps_uri, profile_of, spawn_list_changed_forwarder};
use super::{McpServer, ToolsMode, agent_tools, registry_resource, registry_tool, scripts, skills};
use crate::error::Error;
use crate::proxy::Caller;

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        match &self.view {
            View::Server(server) => self.own_info(server),
            _ => self.aggregated_info(),
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        served!(context, "initialize", None, async {
            context.peer.set_peer_info(request.clone());
            match &self.view {
                View::Server(server) => {
                    self.register_scoped(&context.peer, server);
                    // Activated before answering, so the client sees the child's own capabilities.
                    self.ready(server).await?;
                }
                _ => self
                    .app
                    .proxy
                    .register_client(self.client_id, context.peer.clone()),
            }
            self.negotiate_initialize(&request)
        })
    }

    /// `server/discover` (2026-07-28): a server view activates its server first, so the client sees the child's
    /// capabilities.
    async fn discover(&self, _c: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        served!(_c, "server/discover", None, async {
            if let View::Server(server) = &self.view {
                self.ready(server).await?;
            }
            Ok(DiscoverResult::from_server_info(
                self.supported_protocol_versions().into_owned(),
                self.get_info(),
            ))
        })
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // HTTP sessions forward list_changed from here; stdio starts its own forwarder (a server view always did).
        if self.forward_on_initialized || matches!(self.view, View::Server(_)) {
            spawn_list_changed_forwarder(self.app.clone(), context.peer.clone(), self.view.clone());
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_list_tools(server, _context).await;
        }
        let principal = Caller::principal_of(&_context);
        served!(_context, "tools/list", None, async {
            let profile = profile_of(&self.app, &self.view)?;
            let mut tools = vec![registry_tool::definition_with(&self.app.catalog_summary())];
            // Seed 003's agent tools, once there is an agent to delegate to (agents are not in profiles).
            if self.app.agents.has_agents() && profile.is_none() {
                tools.extend(agent_tools::definitions());
            }
            if self.view.mode() == ToolsMode::Dynamic {
                // Code mode (#28) on top, where clients that rank top-level tools see it; static mode keeps it an action.
                tools.push(scripts::definition());
                // Only what the caller's groups may see (issue 30), within the profile, as it shows them.
                tools.extend(match &profile {
                    Some(p) => self.app.proxy.tools_in_profile(principal.as_deref(), p),
                    None => self.app.proxy.tools_for(principal.as_deref()),
                });
            }
            Ok(ListToolsResult::with_all_items(tools))
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_call_tool(server, request, context).await;
        }
        let mut caller = Caller::of_call(&request, &context);
        // The served span (`served.rs`) is the parent of the proxied call's.
        caller.trace = super::served::parent(&context);
        caller.session = super::calls::session_of(&self.app, &context, self.client_id);
        caller.profile = profile_of(&self.app, &self.view)?;
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
            if request.name == scripts::NAME && self.view.mode() == ToolsMode::Dynamic {
                return Box::pin(scripts::call(
                    &self.app,
                    request.arguments.unwrap_or_default(),
                    caller,
                ))
                .await;
            }
            if agent_tools::is_agent_tool(&request.name) && caller.profile.is_none() {
                return Box::pin(agent_tools::call(
                    &self.app,
                    &request.name,
                    request.arguments.unwrap_or_default(),
                    caller,
                ))
                .await
                .map(Into::into);
            }
            // A tool the caller may not see is as unknown as one that does not exist (issue 30); one outside the
            // caller's profile is refused by the proxy with its own error (`outside_profile`).
            let Some((server, tool)) = self.app.proxy.resolve(&request.name).filter(|(s, t)| {
                self.app
                    .proxy
                    .visible_to(caller.principal.as_deref(), s, Some(t))
            }) else {
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

    /// SEP-2640: every running child's skills, their URIs namespaced (`skills.rs`); a server view passes its
    /// child's on.
    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_list_skills(server, request).await;
        }
        let profile = profile_of(&self.app, &self.view)?;
        let mut res = skills::list(&self.app).await;
        res.skills.retain(|s| keeps_uri(profile.as_deref(), &s.uri));
        Ok(res)
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_get_skill(server, request).await;
        }
        self.within_profile(&request.uri)?;
        skills::get(&self.app, request).await
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_read_directory(server, request).await;
        }
        self.within_profile(&request.uri)?;
        skills::directory(&self.app, request).await
    }

    /// SEP-2663: routed by the task id's `server__` prefix on an aggregated view (rmcp has already refused a client
    /// without the extension); a server view's ids are the child's own.
    async fn get_task(
        &self,
        mut request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        served!(context, "tasks/get", None, async {
            request.meta = None;
            let exposed = request.task_id.clone();
            let (server, id) = self.task_route(&exposed)?;
            request.task_id = id;
            let mut res = Box::pin(self.app.proxy.task_get(
                &server,
                request,
                &Caller::of_tasks(&context),
            ))
            .await
            .map_err(|e| self.task_error(e))?;
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
            request.meta = None;
            let (server, id) = self.task_route(&request.task_id)?;
            request.task_id = id;
            Box::pin(
                self.app
                    .proxy
                    .task_update(&server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(|e| self.task_error(e))
        })
    }

    async fn cancel_task(
        &self,
        mut request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "tasks/cancel", None, async {
            request.meta = None;
            let (server, id) = self.task_route(&request.task_id)?;
            request.task_id = id;
            Box::pin(
                self.app
                    .proxy
                    .task_cancel(&server, request, &Caller::of_tasks(&context)),
            )
            .await
            .map_err(|e| self.task_error(e))
        })
    }

    /// The tool a 2026-07-28 tools/call names, for rmcp's HTTP front to validate its `Mcp-Param-*` headers against
    /// its `x-mcp-header` annotations (SEP-2243): the registry tool, or a proxied tool by the name this view shows.
    fn get_tool(&self, name: &str) -> Option<Tool> {
        if let View::Server(server) = &self.view {
            return self.app.proxy.server_tool(server, name);
        }
        if name == registry_tool::NAME {
            return Some(registry_tool::definition());
        }
        if name == scripts::NAME && self.view.mode() == ToolsMode::Dynamic {
            return Some(scripts::definition());
        }
        if let View::Profile { name: profile, .. } = &self.view {
            return super::view::profile_tool(&self.app, profile, name);
        }
        let (server, tool) = self.app.proxy.resolve_running(name)?;
        let mut t = self.app.proxy.server_tool(&server, &tool)?;
        t.name = name.to_owned().into();
        Some(t)
    }

    /// rmcp hands over a request whose params do not fit its method's schema (say `tools/call` with a string for
    /// `arguments`) as a custom request, and by default answers "method not found" with only the method name; a
    /// server view keeps that default, as the child would answer.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _c: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        match &self.view {
            View::Server(_) => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            )),
            _ => Err(unserved_request(&request.method, request.params.as_ref())),
        }
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_list_resources(server, _c).await;
        }
        served!(_c, "resources/list", None, async {
            let profile = profile_of(&self.app, &self.view)?;
            // Boxed like every handler that awaits the proxy: rmcp moves the handler future into a task per request,
            // so the largest branch sets the cost of every call.
            let mut all = vec![registry_resource::resource()];
            let principal = Caller::principal_of(&_c);
            let mut proxied = Box::pin(self.app.proxy.list_resources(principal.as_deref())).await;
            proxied.retain(|r| keeps_uri(profile.as_deref(), &r.uri));
            all.extend(proxied);
            Ok(ListResourcesResult::with_all_items(all))
        })
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_list_resource_templates(server, _c).await;
        }
        served!(_c, "resources/templates/list", None, async {
            let profile = profile_of(&self.app, &self.view)?;
            let mut all = Box::pin(
                self.app
                    .proxy
                    .list_resource_templates(Caller::principal_of(&_c).as_deref()),
            )
            .await;
            all.retain(|t| keeps_uri(profile.as_deref(), &t.uri_template));
            Ok(ListResourceTemplatesResult::with_all_items(all))
        })
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_read_resource(server, request, context).await;
        }
        served!(context, "resources/read", None, async {
            if request.uri == registry_resource::URI {
                return Ok(registry_resource::read(&self.app).into());
            }
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            // A resource of a server outside the profile is as unknown as a missing one (the proxy checks).
            caller.profile = profile_of(&self.app, &self.view)?;
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
                Err(Error::Child { server, error }) => {
                    let mut error = *error;
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
        if let View::Server(server) = &self.view {
            return self.own_list_prompts(server, _c).await;
        }
        served!(_c, "prompts/list", None, async {
            let profile = profile_of(&self.app, &self.view)?;
            let mut all = Box::pin(
                self.app
                    .proxy
                    .list_prompts(Caller::principal_of(&_c).as_deref()),
            )
            .await;
            if profile.is_some() {
                all.retain(|p| keeps_prompt(&self.app, profile.as_deref(), &p.name));
            }
            Ok(ListPromptsResult::with_all_items(all))
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_get_prompt(server, request, context).await;
        }
        served!(context, "prompts/get", Some(&*request.name), async {
            let name = request.name.clone();
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            caller.profile = profile_of(&self.app, &self.view)?;
            match Box::pin(self.app.proxy.get_prompt(request, &caller)).await {
                Ok(r) => Ok(r),
                Err(Error::NotFound { .. }) => Err(McpError::invalid_params(
                    format!(
                        "no prompt {}; prompts are named SERVER__PROMPT",
                        crate::model::truncate_for_message(&name)
                    ),
                    None,
                )),
                Err(Error::Child { error, .. }) => Err(*error),
                Err(e) => Err(McpError::internal_error(e.to_string(), None)),
            }
        })
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "logging/setLevel", None, async {
            if let View::Server(server) = &self.view {
                self.register_scoped(&context.peer, server);
                self.ready(server).await?;
            }
            Box::pin(self.app.proxy.set_log_level(request.level)).await;
            Ok(())
        })
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        if let View::Server(server) = &self.view {
            return self.own_complete(server, request, _c).await;
        }
        served!(_c, "completion/complete", None, async {
            // A hidden server's prompt or resource template is as unknown as a missing one (issue 30), and so is
            // one outside the profile.
            let principal = Caller::principal_of(&_c);
            let profile = profile_of(&self.app, &self.view)?;
            if !self.app.proxy.sees_all(principal.as_deref()) || profile.is_some() {
                let hidden = match &request.r#ref {
                    Reference::Prompt(p) => {
                        (!Box::pin(self.app.proxy.list_prompts(principal.as_deref()))
                            .await
                            .iter()
                            .any(|v| v.name == p.name)
                            || !keeps_prompt(&self.app, profile.as_deref(), &p.name))
                        .then(|| Error::not_found("prompt", p.name.as_str()))
                    }
                    Reference::Resource(r) => crate::proxy::names::split_uri(&r.uri)
                        .filter(|(server, _)| {
                            !self
                                .app
                                .proxy
                                .visible_to(principal.as_deref(), server, None)
                                || !keeps_uri(profile.as_deref(), &r.uri)
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

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let View::Server(server) = &self.view {
            return self.own_subscribe(server, request, context).await;
        }
        served!(context, "resources/subscribe", None, async {
            if request.uri == registry_resource::URI {
                registry_resource::subscribe(&self.app, self.client_id, context.peer.clone());
                return Ok(());
            }
            // A hidden server's resource is as unknown as a missing one (issue 30), and so is one outside the
            // profile.
            let profile = profile_of(&self.app, &self.view)?;
            if let Some((server, _)) = crate::proxy::names::split_uri(&request.uri)
                && (!self.app.proxy.visible_to(
                    Caller::principal_of(&context).as_deref(),
                    server,
                    None,
                ) || !keeps_uri(profile.as_deref(), &request.uri))
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

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(_c, "resources/unsubscribe", None, async {
            let uri = match &self.view {
                View::Server(server) => crate::proxy::Proxy::exposed_uri(server, &request.uri),
                _ if request.uri == registry_resource::URI => {
                    registry_resource::unsubscribe(self.client_id);
                    return Ok(());
                }
                _ => request.uri.clone(),
            };
            Box::pin(self.app.proxy.unsubscribe(self.client_id, &uri))
                .await
                .map_err(|e| match &self.view {
                    View::Server(_) => self.error(e),
                    _ => forwarded_error(e),
                })
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
                    if !self.view.changes_lists(&received) {
                        continue;
                    }
                    // The sink refuses what the client did not ask for; a closed stream ends the loop.
                    let sink = context.sink();
                    let mut sent = Vec::with_capacity(3);
                    if self.view.mode() == ToolsMode::Dynamic {
                        sent.push(sink.notify_tool_list_changed().await);
                    }
                    sent.push(sink.notify_resource_list_changed().await);
                    sent.push(sink.notify_prompt_list_changed().await);
                    if sent.iter().any(stream_gone) {
                        return Ok(());
                    }
                }
            }
        }
    }
}
