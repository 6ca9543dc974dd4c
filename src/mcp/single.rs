//! One registered server as itself (`/mcp/servers/{name}`, `agent-discover mcp --server NAME`): the server view's
//! part of the one handler (`handler.rs`): its own tool and prompt names and resource URIs, its capabilities and
//! instructions; logging, completions, subscriptions, sampling/elicitation/roots, progress and cancellation
//! forwarded. The server is activated on first use.

// Logging and resources/subscribe are deprecated by SEP-2577 / 2026-07-28, but legacy clients and children use them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, Peer, RoleServer, ServiceExt};

use super::McpServer;
use super::served::served;
use super::view::{View, spawn_list_changed_forwarder};
use crate::app::App;
use crate::error::Error;
use crate::proxy::{Caller, Proxy, ServerError};

impl McpServer {
    pub(super) async fn ready(&self, server: &str) -> Result<(), McpError> {
        Box::pin(self.app.proxy.ensure_active(server))
            .await
            .map_err(|e| self.error(e))
    }

    pub(super) fn error(&self, e: Error) -> McpError {
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

    pub(super) fn server_error(&self, e: ServerError) -> McpError {
        match e {
            ServerError::Child(data) => data,
            ServerError::Proxy(e) => self.error(e),
        }
    }

    pub(super) fn register_scoped(&self, peer: &Peer<RoleServer>, server: &str) {
        self.app
            .proxy
            .register_scoped_client(self.client_id, peer.clone(), server);
    }

    /// The child's own capabilities and instructions once it runs; before that, everything we can forward.
    pub(super) fn own_info(&self, server: &str) -> ServerConfig {
        if let Some(info) = self.app.proxy.server_info(server) {
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
            server.to_owned(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    pub(super) async fn own_list_tools(
        &self,
        server: &str,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        served!(_c, "tools/list", None, async {
            self.ready(server).await?;
            let mut tools = Box::pin(self.app.proxy.server_tools(server))
                .await
                .map_err(|e| self.error(e))?;
            // Only the tools the caller's groups may see (issue 30).
            let principal = Caller::principal_of(&_c);
            tools.retain(|t| {
                self.app
                    .proxy
                    .visible_to(principal.as_deref(), server, Some(&t.name))
            });
            Ok(ListToolsResult::with_all_items(tools))
        })
    }

    pub(super) async fn own_call_tool(
        &self,
        server: &str,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // The served span (`served.rs`) is the parent of the proxied call's.
        let trace = super::served::parent(&context);
        async {
            self.ready(server).await?;
            let mut caller = Caller::of_call(&request, &context);
            caller.scoped = true;
            caller.trace = trace;
            caller.session = super::calls::session_of(&self.app, &context, self.client_id);
            match Box::pin(self.app.proxy.call_tool_response(
                server,
                &request.name,
                request.arguments,
                caller,
            ))
            .await
            {
                Ok(CallToolResponse::Task(created)) => {
                    let id = created.task.task_id.clone();
                    super::calls::own_task(&self.app, &context, server, &id, &id);
                    Ok(CallToolResponse::Task(created))
                }
                Ok(r) => Ok(r),
                // Like the aggregated front (and the TypeScript SDK): an unknown tool is a tool error the model sees.
                Err(Error::NotFound { .. }) => {
                    Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "unknown tool `{}`: server `{}` does not offer it",
                        crate::model::truncate_for_message(&request.name),
                        server
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
                Err(Error::Child { error, .. }) => Err(*error),
                Err(e) => Err(self.error(e)),
            }
        }
        .await
    }

    /// SEP-2640: the child's `skills/list`, `skills/get` and `resources/directory/read`, passed on unchanged (rmcp
    /// has answered -32601 already unless the child declared the extension, whose capabilities are ours here).
    pub(super) async fn own_list_skills(
        &self,
        server: &str,
        request: Option<PaginatedRequestParams>,
    ) -> Result<ListSkillsResult, McpError> {
        self.ready(server).await?;
        Box::pin(self.app.proxy.server_list_skills(server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    pub(super) async fn own_get_skill(
        &self,
        server: &str,
        request: GetSkillRequestParams,
    ) -> Result<GetSkillResult, McpError> {
        self.ready(server).await?;
        Box::pin(self.app.proxy.server_get_skill(server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    pub(super) async fn own_read_directory(
        &self,
        server: &str,
        request: ReadResourceDirectoryRequestParams,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        self.ready(server).await?;
        Box::pin(self.app.proxy.server_read_directory(server, request))
            .await
            .map_err(|e| self.server_error(e))
    }

    pub(super) async fn own_list_resources(
        &self,
        server: &str,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        served!(_c, "resources/list", None, async {
            self.ready(server).await?;
            Box::pin(self.app.proxy.server_resources(server))
                .await
                .map(ListResourcesResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    pub(super) async fn own_list_resource_templates(
        &self,
        server: &str,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        served!(_c, "resources/templates/list", None, async {
            self.ready(server).await?;
            Box::pin(self.app.proxy.server_resource_templates(server))
                .await
                .map(ListResourceTemplatesResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    pub(super) async fn own_read_resource(
        &self,
        server: &str,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        served!(context, "resources/read", None, async {
            self.ready(server).await?;
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            caller.scoped = true;
            Box::pin(
                self.app
                    .proxy
                    .server_read_resource(server, &request.uri, &caller),
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

    pub(super) async fn own_list_prompts(
        &self,
        server: &str,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        served!(_c, "prompts/list", None, async {
            self.ready(server).await?;
            Box::pin(self.app.proxy.server_prompts(server))
                .await
                .map(ListPromptsResult::with_all_items)
                .map_err(|e| self.server_error(e))
        })
    }

    pub(super) async fn own_get_prompt(
        &self,
        server: &str,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        served!(context, "prompts/get", Some(&*request.name), async {
            self.ready(server).await?;
            let mut caller = Caller::of_request(
                &context,
                request.input_responses.clone(),
                request.request_state.clone(),
            );
            caller.scoped = true;
            Box::pin(self.app.proxy.server_get_prompt(server, request, &caller))
                .await
                .map_err(|e| self.server_error(e))
        })
    }

    pub(super) async fn own_complete(
        &self,
        server: &str,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        served!(_c, "completion/complete", None, async {
            self.ready(server).await?;
            Box::pin(self.app.proxy.server_complete(server, request))
                .await
                .map_err(|e| self.server_error(e))
        })
    }

    pub(super) async fn own_subscribe(
        &self,
        server: &str,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        served!(context, "resources/subscribe", None, async {
            self.ready(server).await?;
            let uri = Proxy::exposed_uri(server, &request.uri);
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
}

/// Serves one registered server as itself on stdin/stdout until the client disconnects, then stops every child.
pub async fn serve_stdio_server(app: Arc<App>, server: String) -> anyhow::Result<()> {
    app.registry.get(&server)?;
    let view = McpServer::with_view(app.clone(), View::Server(server.clone()));
    let client_id = view.client_id;
    // Every request with an id is answered with it, even one rmcp cannot type (`front.rs`).
    let service = super::served::Traced(view)
        .serve(super::front::StdioFront::new(rmcp::transport::stdio_pipes()))
        .await?;
    spawn_list_changed_forwarder(app.clone(), service.peer().clone(), View::Server(server));
    let res = tokio::select! {
        r = service.waiting() => r.map(|_| ()).map_err(anyhow::Error::from),
        _ = super::clients::shutdown_signal() => Ok(()),
    };
    app.proxy.unregister_client(client_id);
    app.proxy.shutdown().await;
    res
}
