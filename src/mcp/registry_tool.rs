//! The built-in `registry` tool: its schema (listing only implemented actions) and the dispatch of each action.
//!
//! Action and argument names are agent-discover's (TypeScript original), so agents switch without changes.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, Tool};
use serde_json::{Value, json};

use super::args::{self, Args};
use super::{json_result, map_error};
use crate::app::App;
use crate::error::Error;
use crate::model::{ListFilter, ServerSpec, Source, Transport};

pub const NAME: &str = "registry";

/// Every action this build implements; the tool schema's `action` enum is exactly this list.
pub const ACTIONS: &[&str] = &["list", "install", "uninstall", "status"];

/// Arguments and the actions that use them; the schema only shows arguments of implemented actions.
fn parameters() -> Vec<(&'static str, Value, &'static [&'static str])> {
    vec![
        (
            "query",
            json!({"type": "string", "description": "[list] Full-text search over server names, descriptions and tags"}),
            &["list"],
        ),
        (
            "source",
            json!({"type": "string", "enum": ["manual", "local", "registry", "npm", "pypi", "smithery"], "description": "[list] Only servers from this source"}),
            &["list"],
        ),
        (
            "installed_only",
            json!({"type": "boolean", "description": "[list] Only installed servers"}),
            &["list"],
        ),
        (
            "name",
            json!({"type": "string", "description": "[install/uninstall] Server name: 1-64 letters, digits, '.', '_' or '-'"}),
            &["install", "uninstall"],
        ),
        (
            "command",
            json!({"type": "string", "description": "[install] Program to start the server (run directly, never through a shell), e.g. npx"}),
            &["install"],
        ),
        (
            "args",
            json!({"type": "array", "items": {"type": "string"}, "description": "[install] Command arguments"}),
            &["install"],
        ),
        (
            "env",
            json!({"type": "object", "additionalProperties": {"type": "string"}, "description": "[install] Environment variables for the server"}),
            &["install"],
        ),
        (
            "description",
            json!({"type": "string", "description": "[install] What the server is for"}),
            &["install"],
        ),
        (
            "tags",
            json!({"type": "array", "items": {"type": "string"}, "description": "[install] Tags for search and filtering"}),
            &["install"],
        ),
        (
            "transport",
            json!({"type": "string", "enum": ["stdio", "streamable-http", "sse"], "description": "[install] How to reach the server (default stdio)"}),
            &["install"],
        ),
        (
            "url",
            json!({"type": "string", "description": "[install] URL of a remote (streamable-http or sse) server"}),
            &["install"],
        ),
        (
            "headers",
            json!({"type": "object", "additionalProperties": {"type": "string"}, "description": "[install] HTTP headers for a remote server"}),
            &["install"],
        ),
    ]
}

pub fn definition() -> Tool {
    let mut props = serde_json::Map::new();
    props.insert(
        "action".into(),
        json!({"type": "string", "enum": ACTIONS, "description": format!("What to do: {}", ACTIONS.join(", "))}),
    );
    for (name, schema, used_by) in parameters() {
        if used_by.iter().any(|a| ACTIONS.contains(a)) {
            props.insert(name.into(), schema);
        }
    }
    let schema = json!({"type": "object", "properties": props, "required": ["action"]});
    let Value::Object(schema) = schema else {
        unreachable!("literal object")
    };
    Tool::new(
        NAME,
        "Registry of MCP servers: list registered servers, install (register) or uninstall one, and show status. \
         Pass `action` plus that action's arguments.",
        Arc::new(schema),
    )
}

pub async fn call(app: &Arc<App>, args: Args) -> Result<CallToolResult, McpError> {
    let action = match args.get("action") {
        Some(Value::String(a)) => a.clone(),
        Some(_) => {
            return Err(McpError::invalid_params(
                "argument `action` must be a string",
                None,
            ));
        }
        None => {
            return Err(McpError::invalid_params(
                format!(
                    "argument `action` is required; one of: {}",
                    ACTIONS.join(", ")
                ),
                None,
            ));
        }
    };
    let result = match action.as_str() {
        "list" => list(app, &args),
        "install" => install(app, &args),
        "uninstall" => uninstall(app, &args),
        "status" => status(app),
        other => {
            return Err(McpError::invalid_params(
                format!(
                    "unknown action `{}`; valid actions: {}",
                    crate::model::truncate_for_message(other),
                    ACTIONS.join(", ")
                ),
                None,
            ));
        }
    };
    match result {
        Ok(Ok(value)) => Ok(json_result(&value)),
        Ok(Err(domain)) => map_error(domain),
        Err(protocol) => Err(protocol),
    }
}

/// An action's outcome: a protocol error for malformed arguments, else the domain result.
type Outcome = Result<Result<Value, Error>, McpError>;

fn list(app: &App, a: &Args) -> Outcome {
    let source = match args::opt_str(a, "source")? {
        Some(s) => Some(
            s.parse::<Source>()
                .map_err(|e| McpError::invalid_params(e.to_string(), None))?,
        ),
        None => None,
    };
    let filter = ListFilter {
        query: args::opt_str(a, "query")?,
        source,
        installed_only: args::opt_bool(a, "installed_only")?.unwrap_or(false),
    };
    Ok(app.registry.list(&filter).map(|rows| {
        Value::Array(
            rows.into_iter()
                .map(|r| {
                    let s = r.server;
                    json!({
                        "id": s.id, "name": s.name, "description": s.description, "source": s.source, "tags": s.tags,
                        "installed": s.installed, "active": s.active, "transport": s.transport,
                        "health_status": s.health_status, "last_health_check": s.last_health_check,
                        "error_count": s.error_count, "tool_count": r.tool_count,
                    })
                })
                .collect(),
        )
    }))
}

fn install(app: &App, a: &Args) -> Outcome {
    let name = args::req_str(a, "name", "install")?;
    let transport = match args::opt_str(a, "transport")? {
        Some(t) => t
            .parse::<Transport>()
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?,
        None => Transport::Stdio,
    };
    if let Some(source) = args::opt_str(a, "source")? {
        if source != "manual" {
            return Err(McpError::invalid_params(
                format!(
                    "install with source `{}` is not available in this build; give `command` (and `args`) to register a server manually",
                    crate::model::truncate_for_message(&source)
                ),
                None,
            ));
        }
    }
    let spec = ServerSpec {
        name,
        description: args::opt_str(a, "description")?.unwrap_or_default(),
        source: Source::Manual,
        command: args::opt_str(a, "command")?,
        args: args::opt_str_list(a, "args")?.unwrap_or_default(),
        env: args::opt_str_map(a, "env")?.unwrap_or_default(),
        tags: args::opt_str_list(a, "tags")?.unwrap_or_default(),
        transport,
        url: args::opt_str(a, "url")?,
        headers: args::opt_str_map(a, "headers")?.unwrap_or_default(),
        ..Default::default()
    };
    // Validation failures are bad arguments (a protocol error), not a failed action.
    spec.validate()
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    Ok(app.registry.register(spec).map(|s| {
        json!({"status": "installed", "server": s.name, "id": s.id, "transport": s.transport, "command": s.command, "args": s.args, "url": s.url})
    }))
}

fn uninstall(app: &App, a: &Args) -> Outcome {
    let name = args::req_str(a, "name", "uninstall")?;
    name.parse::<crate::model::ServerName>()
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    Ok(app
        .registry
        .remove(&name)
        .map(|()| json!({"status": "uninstalled", "name": name})))
}

fn status(app: &App) -> Outcome {
    let store = app.registry.store();
    let summary = (|| -> crate::error::Result<Value> {
        let active: Vec<Value> = app
            .registry
            .list(&ListFilter::default())?
            .into_iter()
            .filter(|r| r.server.active)
            .map(|r| json!({"name": r.server.name, "description": r.server.description, "tool_count": r.tool_count}))
            .collect();
        Ok(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "active_count": active.len(),
            "servers": active,
            "registry": {
                "db_path": app.config.db_path,
                "schema_version": store.schema_version()?,
                "server_count": store.count_servers()?,
                "tool_count": store.count_tools()?,
            },
            "actions": super::ACTIONS,
        }))
    })();
    Ok(summary)
}
