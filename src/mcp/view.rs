//! Which part of the registry one MCP endpoint shows, and in which name shape: the one thing that differs between
//! the aggregated front (`/mcp`, `agent-discover mcp`), a profile (`/mcp/profiles/NAME`, `mcp --profile NAME`) and
//! one server as itself (`/mcp/servers/NAME`, `mcp --server NAME`). The handler (`handler.rs`) is the same for all
//! three; it asks its view what is visible, what `find_tool` searches, and whose list changes concern it.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::{Peer, RoleServer};
use serde_json::Value;

use super::ToolsMode;
use crate::app::App;
use crate::events::{Event, Received};
use crate::profiles::Profile;

/// What one endpoint shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum View {
    /// Every server: the `registry` tool, code mode, agents and every active server's tools as `server__tool`.
    All(ToolsMode),
    /// A profile: as [`View::All`], only the profile's servers and tools (its resources and prompts too), `find_tool`
    /// searching only its tools; the `registry` tool and code mode stay, agents do not.
    Profile { name: String, mode: ToolsMode },
    /// One server as itself: its own tool and prompt names and resource URIs, its capabilities and instructions.
    Server(String),
}

impl View {
    /// The tools mode of an aggregated view (a server's own view lists its tools always).
    pub fn mode(&self) -> ToolsMode {
        match self {
            View::All(m) | View::Profile { mode: m, .. } => *m,
            View::Server(_) => ToolsMode::Dynamic,
        }
    }

    /// The server of a server's own view.
    pub fn server(&self) -> Option<&str> {
        match self {
            View::Server(s) => Some(s),
            _ => None,
        }
    }

    /// Whether a registry event changes the lists this view shows.
    pub fn changes_lists(&self, received: &Received) -> bool {
        match received {
            Received::Event(ev) => {
                ev.changes_tool_list()
                    && match self {
                        View::Server(server) => names_server(ev, server),
                        _ => true,
                    }
            }
            Received::Lagged(_) => true,
        }
    }
}

/// The profile of a profile view, read at each request (a change applies to the next request); a profile removed
/// meanwhile is an invalid-params error naming it.
pub(super) fn profile_of(app: &App, view: &View) -> Result<Option<Arc<Profile>>, McpError> {
    match view {
        View::Profile { name, .. } => app
            .profile(name)
            .map(|p| Some(Arc::new(p)))
            .map_err(|e| McpError::invalid_params(e.to_string(), None)),
        _ => Ok(None),
    }
}

/// The tool a profile's clients call `name` (`server__tool` as the profile shows it), when the profile holds it.
pub(super) fn profile_tool(app: &App, profile: &str, name: &str) -> Option<rmcp::model::Tool> {
    let p = app.profile(profile).ok()?;
    let (server, tool) = app.proxy.resolve(name)?;
    let (mut t, server_name) = app.proxy.profile_tool(&p, &server, &tool)?;
    if !p.allows(&server, Some(&server_name)) {
        return None;
    }
    t.name = name.to_owned().into();
    Some(t)
}

/// Whether an `agent-discover://SERVER/...` URI (a resource, a template, a skill) is of a server the profile holds.
pub(super) fn keeps_uri(profile: Option<&Profile>, uri: &str) -> bool {
    let Some(p) = profile else { return true };
    crate::proxy::names::split_uri(uri).is_some_and(|(server, _)| p.allows(server, None))
}

/// Whether a `SERVER__PROMPT` name is of a server the profile holds.
pub(super) fn keeps_prompt(app: &App, profile: Option<&Profile>, name: &str) -> bool {
    let Some(p) = profile else { return true };
    let servers = app.registry.list(&Default::default()).unwrap_or_default();
    crate::proxy::names::split(name, servers.iter().map(|s| s.server.name.as_str()))
        .is_some_and(|(server, _)| p.allows(server, None))
}

/// Drops the suggestions (`did_you_mean`) of a failure body that are outside the profile.
pub(crate) fn suggestions_within(body: &mut Value, profile: Option<&Profile>) {
    let (Some(p), Some(list)) = (
        profile,
        body.get_mut("did_you_mean").and_then(Value::as_array_mut),
    ) else {
        return;
    };
    list.retain(|s| match (s["server"].as_str(), s["tool"].as_str()) {
        (Some(server), Some(tool)) => p.allows(server, Some(tool)),
        _ => false,
    });
}

/// Sends list_changed notifications to one connected client whenever the lists its view shows change; ends with the
/// connection. A view with tools mode static has no tool list to change.
pub fn spawn_list_changed_forwarder(app: Arc<App>, peer: Peer<RoleServer>, view: View) {
    let mut sub = app.events.subscribe("server:*");
    tokio::spawn(async move {
        while let Some(received) = sub.recv().await {
            if !view.changes_lists(&received) {
                continue;
            }
            if peer.is_transport_closed() {
                break;
            }
            if view.mode() == ToolsMode::Dynamic && peer.notify_tool_list_changed().await.is_err() {
                break;
            }
            let _ = peer.notify_resource_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
    });
}

fn names_server(ev: &Event, server: &str) -> bool {
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
