//! Our MCP server: one rmcp `ServerHandler` that serves the built-in `registry` tool, over stdio (and later HTTP).
//!
//! A thin adapter: arguments are parsed and checked in `registry_tool`, the work is done by the domain layer.

mod args;
mod registry_tool;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};

use crate::app::App;
use crate::error::{Error, ErrorCode};

pub use registry_tool::ACTIONS;

pub const SERVER_NAME: &str = "agent-discover";

/// The MCP face of one `App`; cheap to clone (one per connection).
#[derive(Clone)]
pub struct McpServer {
    app: Arc<App>,
}

impl McpServer {
    pub fn new(app: Arc<App>) -> McpServer {
        McpServer { app }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build())
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agent-discover is a registry of MCP servers. Use the `registry` tool: `list` to see registered servers, \
                 `install` to register one (name + command + args), `uninstall` to remove it, `status` for what is running.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![
            registry_tool::definition(),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        match request.name.as_ref() {
            registry_tool::NAME => {
                registry_tool::call(&self.app, request.arguments.unwrap_or_default())
                    .await
                    .map(Into::into)
            }
            other => Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`; this server offers: {}",
                    crate::model::truncate_for_message(other),
                    registry_tool::NAME
                ),
                None,
            )),
        }
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == registry_tool::NAME).then(registry_tool::definition)
    }
}

/// Renders a domain value as the JSON text block agent-discover's tools return.
pub(crate) fn json_result(value: &serde_json::Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(
        serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string()),
    )])
}

/// Maps a domain error once: bad input is a protocol error (invalid params); anything else is a tool result
/// with `isError: true` whose text says what happened and what to do.
pub(crate) fn map_error(err: Error) -> Result<CallToolResult, McpError> {
    match err.code() {
        ErrorCode::InvalidInput => Err(McpError::invalid_params(err.to_string(), None)),
        code => {
            let body = serde_json::json!({ "error": err.to_string(), "code": code.as_str() });
            Ok(CallToolResult::error(vec![ContentBlock::text(
                body.to_string(),
            )]))
        }
    }
}

/// Serves MCP on stdin/stdout until the client disconnects. Nothing else may write to stdout.
pub async fn serve_stdio(app: Arc<App>) -> anyhow::Result<()> {
    let service = McpServer::new(app).serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
