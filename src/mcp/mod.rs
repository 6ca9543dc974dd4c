//! Our MCP server: one rmcp `ServerHandler` (`handler.rs`) over a [`View`] of the registry: the aggregated front
//! (the built-in `registry` tool plus every active child's tools, resources and prompts), a profile (the same,
//! narrowed to the profile's servers and tools), or one server as itself (`single.rs`); over stdio and (through the
//! HTTP layer) Streamable HTTP, for both protocol eras.
//!
//! A thin adapter: arguments are typed and checked in `actions`, the work is done by the domain layer.

mod actions;
mod agent_tools;
mod aggregated;
pub(crate) mod calls;
mod clients;
pub mod front;
mod handler;
mod registry_resource;
mod registry_tool;
pub(crate) mod scripts;
pub(crate) mod served;
pub(crate) mod shape;
mod single;
mod skills;
pub mod view;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::ServiceExt;

use crate::app::App;
use calls::shape_fast_lane_error;
use clients::NEXT_CLIENT;

pub use clients::shutdown_signal;
pub use registry_tool::actions;
pub use served::Traced;
pub use single::serve_stdio_server;
pub use view::{View, spawn_list_changed_forwarder};

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

/// The MCP face of one `App` through one [`View`]; one per connection (stdio) or session (HTTP).
#[derive(Clone)]
pub struct McpServer {
    app: Arc<App>,
    view: View,
    client_id: u64,
    /// Whether `on_initialized` should start a list_changed forwarder (HTTP sessions; stdio starts its own).
    forward_on_initialized: bool,
}

impl McpServer {
    /// The aggregated front.
    pub fn new(app: Arc<App>, mode: ToolsMode) -> McpServer {
        McpServer::with_view(app, View::All(mode))
    }

    pub fn with_view(app: Arc<App>, view: View) -> McpServer {
        McpServer {
            app,
            view,
            client_id: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
            forward_on_initialized: false,
        }
    }

    /// For Streamable HTTP sessions: list_changed is forwarded once the session is initialized.
    pub fn for_http(app: Arc<App>, view: View) -> McpServer {
        McpServer {
            forward_on_initialized: true,
            ..McpServer::with_view(app, view)
        }
    }
}

/// `off`: `agent-discover mcp` relays every tool call through rmcp's handler, none through the fast lane.
pub const ENV_FAST_LANE: &str = "AGENT_DISCOVER_FAST_LANE";

/// Tool names our front serves itself, which the fast lane (stdio and HTTP) never relays.
pub(crate) fn served_here(name: &str) -> bool {
    name == registry_tool::NAME || agent_tools::is_agent_tool(name)
}

/// Serves MCP on stdin/stdout until the client disconnects, then stops every child. Nothing else writes to stdout.
pub async fn serve_stdio(app: Arc<App>, mode: ToolsMode) -> anyhow::Result<()> {
    serve_stdio_view(app, View::All(mode)).await
}

/// Serves a profile on stdin/stdout (`agent-discover mcp --profile NAME`); an unknown profile is refused before the
/// handshake.
pub async fn serve_stdio_profile(
    app: Arc<App>,
    name: String,
    mode: ToolsMode,
) -> anyhow::Result<()> {
    app.profile(&name)?;
    serve_stdio_view(app, View::Profile { name, mode }).await
}

async fn serve_stdio_view(app: Arc<App>, view: View) -> anyhow::Result<()> {
    let profiled = matches!(view, View::Profile { .. });
    let server = McpServer::with_view(app.clone(), view.clone());
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
    // A profile's calls all go through the handler, which holds them to the profile (the lane relays by name).
    if std::env::var(ENV_FAST_LANE).as_deref() != Ok("off") && !profiled {
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
    spawn_list_changed_forwarder(app.clone(), service.peer().clone(), view);
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
