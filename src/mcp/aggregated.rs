//! The aggregated views' part of the one handler (`handler.rs`): the front's capabilities and instructions (a
//! profile's name it), task ids routed by their `SERVER__` prefix within the profile, and the profile's refusal of
//! another server's URI. `single.rs` is the server view's part.

use rmcp::ErrorData as McpError;
use rmcp::model::*;

use super::shape::forwarded_error;
use super::view::{View, keeps_uri, profile_of};
use super::{McpServer, skills};
use crate::error::Error;

impl McpServer {
    /// The aggregated views' capabilities and instructions (a profile's name them).
    #[allow(deprecated)] // logging is deprecated by SEP-2577; legacy clients and children still use it.
    pub(super) fn aggregated_info(&self) -> ServerConfig {
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
        let scope = match &self.view {
            View::Profile { name, .. } => format!(
                "This endpoint serves the profile `{name}`: only its servers' and tools are listed, found and called. "
            ),
            _ => String::new(),
        };
        ServerConfig::new(caps).with_server_info(Implementation::new(super::SERVER_NAME, env!("CARGO_PKG_VERSION"))).with_instructions(
            format!(
                "agent-discover is a registry and proxy of MCP servers. {scope}{}\nUse the `registry` tool: `find_tool` for a task, \
                 `list` registered servers, `install` one (name + command + args), `activate` it to get its tools as \
                 `server__tool`, or call any active server's tool with `proxy_call`; `status` shows what is running.",
                self.app.catalog_summary()
            ),
        )
    }

    /// The server and the child's id of a task id: an aggregated view's `SERVER__ID` (within the profile), or a
    /// server view's own; unknown (invalid params, SEP-2663) otherwise.
    pub(super) fn task_route(&self, exposed: &str) -> Result<(String, String), McpError> {
        if let View::Server(server) = &self.view {
            return Ok((server.clone(), exposed.to_owned()));
        }
        let profile = profile_of(&self.app, &self.view)?;
        self.app
            .proxy
            .task_route(exposed)
            .filter(|(server, _)| profile.as_ref().is_none_or(|p| p.allows(server, None)))
            .ok_or_else(|| {
                McpError::invalid_params(
                    format!(
                        "unknown task: {}; task ids here look like SERVER__ID",
                        crate::model::truncate_for_message(exposed)
                    ),
                    None,
                )
            })
    }

    /// A task request's failure: the child's error as it sent it on a server view, shaped for agents elsewhere.
    pub(super) fn task_error(&self, e: Error) -> McpError {
        match &self.view {
            View::Server(_) => self.server_error(e.into()),
            _ => forwarded_error(e),
        }
    }

    /// Refuses a URI (a skill, a directory) of a server outside the profile as unknown.
    pub(super) fn within_profile(&self, uri: &str) -> Result<(), McpError> {
        let profile = profile_of(&self.app, &self.view)?;
        if keeps_uri(profile.as_deref(), uri) {
            Ok(())
        } else {
            Err(McpError::invalid_params(
                format!("unknown: {}", crate::model::truncate_for_message(uri)),
                None,
            ))
        }
    }
}
