//! The `registry` tool's definition: its name, description and input schema (from the typed actions).

use std::sync::Arc;

use rmcp::model::Tool;

use crate::mcp::actions::{names, tool_schema};

pub const NAME: &str = "registry";

/// Every action this build implements, in the order of the tool schema's `action` enum.
pub fn actions() -> Vec<&'static str> {
    names()
}

pub fn definition() -> Tool {
    definition_with("")
}

/// The tool with `summary` (what is installed, `App::catalog_summary`) ahead of the actions.
pub fn definition_with(summary: &str) -> Tool {
    let mut tool = base_definition();
    if !summary.is_empty() {
        let text = format!(
            "{summary} {}",
            tool.description.as_deref().unwrap_or_default()
        );
        tool.description = Some(text.into());
    }
    tool
}

fn base_definition() -> Tool {
    Tool::new(
        NAME,
        "Registry and proxy of MCP servers. find_tool/find_tools: the tool for a need, across every known server. \
         list: registered servers. browse: the marketplaces. install/uninstall: register or remove one. \
         activate/deactivate: start or stop it (its tools appear as server__tool). proxy_call: call any active server's tool \
         (call_as or server+tool, plus arguments). get_schema: a tool's full input schema. set_secret/delete_secret/list_secrets: \
         per-server secrets (masked). status: what is running. apply_config: import an MCP client's config (config+format, \
         or path; applied per file: servers that left it are removed). enable/disable: resume or pause a server. \
         tools_pending/tool_diff/approve_tools: tools withheld \
         because their definition changed since approval (rug-pull defence). tool_filter: a server's allow/deny patterns. \
         tool_override: what the agent sees of a tool (name, description, fixed or hidden parameters). \
         tool_policy: a server's approval policy (allow, ask: a person approves each call with its exact arguments, \
         deny; per server, tool or annotation; only tightened from here). \
         sandbox: a stdio server's confinement (network, granted paths, on/off). \
         guards: a server's guards on calls (credentials in arguments, credentials and instructions in results; \
         only tightened from here). \
         finish_auth/reauthorize: a remote server's OAuth authorization (a server waiting for one shows authUrl). \
         run_script/script_api: code mode (a script that calls tools here; only its result returns) and its API. \
         Pass `action` plus that action's arguments.",
        Arc::new(tool_schema()),
    )
}
