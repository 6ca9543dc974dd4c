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
use crate::proxy::Caller;

pub const NAME: &str = "registry";

/// Every action this build implements; the tool schema's `action` enum is exactly this list.
pub const ACTIONS: &[&str] = &[
    "find_tool",
    "find_tools",
    "browse",
    "list",
    "install",
    "uninstall",
    "activate",
    "deactivate",
    "proxy_call",
    "get_schema",
    "set_secret",
    "delete_secret",
    "list_secrets",
    "status",
    "apply_config",
    "enable",
    "disable",
];

/// Arguments and the actions that use them; the schema only shows arguments of implemented actions.
fn parameters() -> Vec<(&'static str, Value, &'static [&'static str])> {
    vec![
        (
            "query",
            json!({"type": "string", "description": "[find_tool] What you want to do, in plain words; [list] full-text search over server names, descriptions and tags"}),
            &["find_tool", "list"],
        ),
        (
            "intents",
            json!({"type": "array", "items": {"type": "string"}, "description": "[find_tools] One plain-words intent per tool you need, answered in one round trip"}),
            &["find_tools"],
        ),
        (
            "limit",
            json!({"type": "integer", "description": "[find_tool/find_tools] How many matches to consider (default 5); [browse] results per source (default 20)"}),
            &["find_tool", "find_tools", "browse"],
        ),
        (
            "auto_activate",
            json!({"type": "boolean", "description": "[find_tool/find_tools] Start the owning server so the tool appears in your tool list (default true); false: use proxy_call"}),
            &["find_tool", "find_tools"],
        ),
        (
            "source",
            json!({"type": "string", "enum": ["manual", "local", "registry", "npm", "pypi", "smithery"], "description": "[list] Only servers from this source; [install] `registry` (or npm, pypi) installs `name` from the marketplace"}),
            &["list", "install"],
        ),
        (
            "installed_only",
            json!({"type": "boolean", "description": "[list] Only installed servers"}),
            &["list"],
        ),
        (
            "name",
            json!({"type": "string", "description": "[install/uninstall/activate/deactivate/enable/disable] Server name: 1-64 letters, digits, '.', '_' or '-'"}),
            &["install", "uninstall", "enable", "disable"],
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
        (
            "activate_timeout_ms",
            json!({"type": "integer", "description": "[install] Activation time limit for this server (default 30000)"}),
            &["install"],
        ),
        (
            "call_timeout_ms",
            json!({"type": "integer", "description": "[install] Tool-call time limit for this server, reset by progress (default 60000)"}),
            &["install"],
        ),
        (
            "config",
            json!({"type": "object", "description": "[apply_config] A client config file's content (e.g. {\"mcpServers\": {...}}); needs `format`"}),
            &["apply_config"],
        ),
        (
            "format",
            json!({"type": "string", "enum": ["claude-desktop", "claude-code", "claude-user", "cursor", "vscode", "windsurf", "codex", "gemini"], "description": "[apply_config] The client format of `config` (detected from `path` when omitted)"}),
            &["apply_config"],
        ),
        (
            "path",
            json!({"type": "string", "description": "[apply_config] A client config file on this machine, instead of `config`"}),
            &["apply_config"],
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
        "Registry and proxy of MCP servers. list: registered servers. install/uninstall: register or remove one. \
         activate/deactivate: start or stop it (its tools appear as server__tool). proxy_call: call any active server's tool \
         (call_as or server+tool, plus arguments). get_schema: a tool's full input schema. set_secret/delete_secret/list_secrets: \
         per-server secrets (masked). status: what is running. apply_config: import an MCP client's config (config+format, or path). Pass `action` plus that action's arguments.",
        Arc::new(schema),
    )
}

pub async fn call(app: &Arc<App>, args: Args, caller: Caller) -> Result<CallToolResult, McpError> {
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
        "install" => match args::opt_str(&args, "source")?.as_deref() {
            Some(s) if s != "manual" => market_install(app, &args, &caller).await,
            _ => install(app, &args),
        },
        "browse" => browse(app, &args).await,
        "uninstall" => uninstall(app, &args).await,
        "activate" => {
            let name = server_name(&args, "activate")?;
            return activate(app, &name).await;
        }
        "enable" => {
            let name = server_name(&args, "enable")?;
            return lifecycle_result(app.enable(&name).await);
        }
        "disable" => {
            let name = server_name(&args, "disable")?;
            Ok(app.disable(&name).await.map(|changed| {
                json!({"status": if changed { "disabled" } else { "already_disabled" }, "name": name})
            }))
        }
        "deactivate" => deactivate(app, &args).await,
        "proxy_call" => {
            let (server, tool) = target(app, &args, "proxy_call")?;
            let arguments = args::opt_object(&args, "arguments")?;
            return super::proxy_call(app, &server, &tool, arguments, caller).await;
        }
        "get_schema" => get_schema(app, &args),
        "set_secret" => set_secret(app, &args),
        "delete_secret" => delete_secret(app, &args),
        "list_secrets" => list_secrets(app, &args),
        "status" => status(app),
        "apply_config" => apply_config(app, &args, &caller).await,
        "find_tool" => {
            let query = args::req_str(&args, "query", "find_tool")?;
            let limit = args::opt_u64(&args, "limit")?.unwrap_or(5) as usize;
            let auto = args::opt_bool(&args, "auto_activate")?.unwrap_or(true);
            if query.len() > crate::model::limits::QUERY {
                return Err(McpError::invalid_params(
                    format!(
                        "`query` is {} bytes, over the limit of {}",
                        query.len(),
                        crate::model::limits::QUERY
                    ),
                    None,
                ));
            }
            Ok(app
                .find_tool(&query, limit, auto)
                .await
                .map(|o| serde_json::to_value(o).unwrap_or_default()))
        }
        "find_tools" => {
            let intents = args::opt_str_list(&args, "intents")?
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    McpError::invalid_params(
                        "action `find_tools` needs `intents`, a non-empty array of strings",
                        None,
                    )
                })?;
            if intents.len() > 20 {
                return Err(McpError::invalid_params(
                    "`intents` takes at most 20 entries",
                    None,
                ));
            }
            let limit = args::opt_u64(&args, "limit")?.unwrap_or(5) as usize;
            let auto = args::opt_bool(&args, "auto_activate")?.unwrap_or(true);
            let mut results = Vec::new();
            for intent in &intents {
                let mut v = match app.find_tool(intent, limit, auto).await {
                    Ok(o) => serde_json::to_value(o).unwrap_or_default(),
                    Err(e) => {
                        json!({"found": false, "error": e.to_string(), "code": e.code().as_str()})
                    }
                };
                v["intent"] = Value::String(intent.clone());
                results.push(v);
            }
            Ok(Ok(json!({"results": results})))
        }
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
                        "installed": s.installed, "active": s.active, "status": s.status, "origin": s.origin, "transport": s.transport,
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
    let patch = crate::model::ServerPatch {
        activate_timeout_ms: args::opt_u64(a, "activate_timeout_ms")?,
        call_timeout_ms: args::opt_u64(a, "call_timeout_ms")?,
        ..Default::default()
    };
    for (what, v) in [
        ("activate_timeout_ms", patch.activate_timeout_ms),
        ("call_timeout_ms", patch.call_timeout_ms),
    ] {
        if v.is_some_and(|ms| ms == 0 || ms > 3_600_000) {
            return Err(McpError::invalid_params(
                format!("`{what}` must be between 1 and 3600000 milliseconds"),
                None,
            ));
        }
    }
    let registered = app.registry.register(spec).and_then(|s| {
        if patch.activate_timeout_ms.is_some() || patch.call_timeout_ms.is_some() {
            app.registry.update(&s.name, &patch)
        } else {
            Ok(s)
        }
    });
    Ok(registered.map(|s| {
        json!({"status": "installed", "server": s.name, "id": s.id, "transport": s.transport, "command": s.command, "args": s.args, "url": s.url,
               "activate_timeout_ms": s.activate_timeout_ms, "call_timeout_ms": s.call_timeout_ms})
    }))
}

fn server_name(a: &Args, action: &str) -> Result<String, McpError> {
    let name = args::req_str(a, "name", action)?;
    name.parse::<crate::model::ServerName>()
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    Ok(name)
}

async fn uninstall(app: &App, a: &Args) -> Outcome {
    let name = server_name(a, "uninstall")?;
    Ok(app
        .uninstall(&name)
        .await
        .map(|()| json!({"status": "uninstalled", "name": name})))
}

/// `activate`: an `AddServerResult`, plus (when ready) `status` and the tools as clients call them.
async fn activate(app: &App, name: &str) -> Result<CallToolResult, McpError> {
    if let Err(e) = app.registry.get(name) {
        return map_error(e);
    }
    match app.proxy.activate(name).await {
        Ok(act) => Ok(json_result(&json!({
            "state": "ready",
            "id": act.name,
            "toolCount": act.tools.len(),
            "status": act.status,
            "name": act.name,
            "tools": act.tools.iter().map(|t| json!({"name": crate::proxy::names::expose(&act.name, &t.name), "description": t.description})).collect::<Vec<_>>(),
        }))),
        Err(e) => lifecycle_result(Ok(crate::lifecycle::AddServerResult::from_error(name, &e))),
    }
}

/// An `AddServerResult` (activate, enable): `isError` when its state is `error`. A running server's tools are listed
/// with the names clients call them by.
fn lifecycle_result(
    r: crate::error::Result<crate::lifecycle::AddServerResult>,
) -> Result<CallToolResult, McpError> {
    let r = match r {
        Ok(r) => r,
        Err(e) => return map_error(e),
    };
    let failed = matches!(r.state, crate::lifecycle::ServerState::Error { .. });
    let value = serde_json::to_value(&r).unwrap_or_default();
    let mut out = json_result(&value);
    if failed {
        out.is_error = Some(true);
    }
    Ok(out)
}

async fn deactivate(app: &App, a: &Args) -> Outcome {
    let name = server_name(a, "deactivate")?;
    Ok(app
        .proxy
        .deactivate(&name)
        .await
        .map(|was| json!({"status": if was { "deactivated" } else { "not_active" }, "name": name})))
}

/// The (server, tool) an action names: `call_as` (`server__tool`, `mcp__server__tool`) or `server` + `tool`.
fn target(app: &App, a: &Args, action: &str) -> Result<(String, String), McpError> {
    if let Some(call_as) = args::opt_str(a, "call_as")? {
        return app.proxy.resolve(&call_as).ok_or_else(|| {
            McpError::invalid_params(
                format!("`call_as` {:?} names no known server; use `server__tool` with a registered server name", crate::model::truncate_for_message(&call_as)),
                None,
            )
        });
    }
    match (args::opt_str(a, "server")?, args::opt_str(a, "tool")?) {
        (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => Ok((s, t)),
        _ => Err(McpError::invalid_params(
            format!("action `{action}` needs `call_as` (server__tool) or both `server` and `tool`"),
            None,
        )),
    }
}

fn get_schema(app: &App, a: &Args) -> Outcome {
    let (server, tool) = target(app, a, "get_schema")?;
    Ok(match app.registry.store().tool(&server, &tool) {
        Ok(Some(t)) => Ok(json!({
            "call_as": crate::proxy::names::expose(&server, &tool), "server": server, "tool": tool,
            "description": t.description, "input_schema": t.input_schema,
        })),
        Ok(None) => Err(Error::not_found(
            "tool",
            format!("{server}__{tool} (activate the server once so its tools are known)"),
        )),
        Err(e) => Err(e),
    })
}

fn set_secret(app: &App, a: &Args) -> Outcome {
    let name = server_name(a, "set_secret")?;
    let key = args::req_str(a, "key", "set_secret")?;
    let value = args::req_str(a, "value", "set_secret")?;
    crate::model::validate_key("secret key", &key)
        .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
    Ok(app.secrets.set(&name, &key, &value).map(|()| {
        json!({"status": "set", "name": name, "key": key, "masked_value": crate::secrets::mask(&value),
               "note": "takes effect the next time the server is activated"})
    }))
}

fn delete_secret(app: &App, a: &Args) -> Outcome {
    let name = server_name(a, "delete_secret")?;
    let key = args::req_str(a, "key", "delete_secret")?;
    Ok(app.secrets.delete(&name, &key).map(|existed| json!({"status": if existed { "deleted" } else { "not_found" }, "name": name, "key": key})))
}

fn list_secrets(app: &App, a: &Args) -> Outcome {
    let name = server_name(a, "list_secrets")?;
    Ok(app
        .secrets
        .list(&name)
        .map(|s| json!({"name": name, "secrets": s})))
}

fn status(app: &App) -> Outcome {
    let store = app.registry.store();
    let summary = (|| -> crate::error::Result<Value> {
        let children = app.proxy.children();
        let servers: Vec<Value> = children
            .iter()
            .map(|c| {
                let description = app.registry.get(&c.name).map(|s| s.description).unwrap_or_default();
                json!({"name": c.name, "description": description, "status": c.status, "transport": c.transport, "pid": c.pid,
                       "tool_count": c.tool_count, "tools": c.tools, "stderr_tail": c.stderr_tail, "last_error": c.last_error,
                       "started_at": c.started_at, "restarts": c.restarts})
            })
            .collect();
        let (recent, logged) = app.calllog.entries(10, 0);
        Ok(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "active_count": servers.len(),
            "servers": servers,
            "calls": {"logged": logged, "recent": recent},
            "metrics": store.metrics_overview()?,
            "search": app.search.status(),
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

async fn browse(app: &App, a: &Args) -> Outcome {
    let query = args::opt_str(a, "query")?.unwrap_or_default();
    if query.len() > 1000 {
        return Err(McpError::invalid_params("`query` is over 1000 bytes", None));
    }
    let limit = args::opt_u64(a, "limit")?.unwrap_or(20).clamp(1, 100) as usize;
    let cursor = args::opt_str(a, "cursor")?;
    let market = match app.marketplace() {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    let res = market.browse(&query, limit, cursor.as_deref()).await;
    let servers: Vec<Value> = res
        .servers
        .iter()
        .map(|e| {
            json!({"name": e.name, "title": e.title, "description": e.description, "version": e.version, "source": e.source,
                   "runtime": e.runtime, "install_method": e.install_method, "repository": e.repository, "key": e.key})
        })
        .collect();
    let prereqs = app.prereqs().await;
    Ok(Ok(
        json!({"servers": servers, "next_cursor": res.next_cursor, "sources": res.sources, "prereqs": prereqs}),
    ))
}

/// Installs from the marketplace; missing required values are asked of the user through elicitation when the client
/// supports it, else returned as `needs_input` for a second call with `inputs`.
async fn market_install(app: &App, a: &Args, caller: &Caller) -> Outcome {
    let name = args::req_str(a, "name", "install")?;
    if name.len() > 214 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(McpError::invalid_params(
            format!(
                "invalid package name {:?}",
                crate::model::truncate_for_message(&name)
            ),
            None,
        ));
    }
    let mut inputs = args::opt_str_map(a, "inputs")?.unwrap_or_default();
    let mut outcome = crate::install::install(app, &name, &inputs).await;
    if let (Ok(crate::install::InstallOutcome::NeedsInput { missing, .. }), Some(peer)) =
        (&outcome, &caller.peer)
        && peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some())
        && let Some(answers) = elicit_inputs(peer, &name, missing).await
    {
        inputs.extend(answers);
        outcome = crate::install::install(app, &name, &inputs).await;
    }
    Ok(outcome.map(|o| serde_json::to_value(o).unwrap_or_default()))
}

/// Asks the connected user for the missing values in one form; `None` if they decline or the request fails.
async fn elicit_inputs(
    peer: &rmcp::Peer<rmcp::RoleServer>,
    name: &str,
    missing: &[crate::marketplace::MissingInput],
) -> Option<std::collections::BTreeMap<String, String>> {
    let mut props = serde_json::Map::new();
    for m in missing {
        props.insert(
            m.name.clone(),
            json!({"type": "string", "title": m.name, "description": m.description}),
        );
    }
    let required: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    let schema = serde_json::from_value(
        json!({"type": "object", "properties": props, "required": required}),
    )
    .ok()?;
    let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Installing `{name}` needs these values (secret ones are stored encrypted)"
        ),
        requested_schema: schema,
    };
    let res = peer.create_elicitation(params).await.ok()?;
    if res.action != rmcp::model::ElicitationAction::Accept {
        return None;
    }
    let content = res.content?;
    let map = content.as_object()?;
    Some(
        map.iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
            .collect(),
    )
}

/// Imports a client config; values it references but the environment lacks are asked of the user through
/// elicitation when the client supports it (answers stored as secrets), else returned as `needs_input`.
async fn apply_config(app: &App, a: &Args, caller: &Caller) -> Outcome {
    let req = crate::configimport::ApplyConfigRequest {
        config: a.get("config").cloned(),
        format: args::opt_str(a, "format")?,
        path: args::opt_str(a, "path")?,
    };
    let mut report = match app.apply_client_config(&req) {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    if !report.needs_input.is_empty()
        && let Some(peer) = &caller.peer
        && peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some())
    {
        let mut props = serde_json::Map::new();
        for n in &report.needs_input {
            let description = n.description.clone().unwrap_or_else(|| {
                format!("{} of server `{}` ({})", n.reference, n.server, n.field)
            });
            props.insert(
                format!("{}.{}", n.server, n.key),
                json!({"type": "string", "title": n.key, "description": description}),
            );
        }
        let schema = serde_json::from_value(json!({"type": "object", "properties": props}));
        if let Ok(schema) = schema {
            let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!(
                    "The servers imported from {} need these values (stored encrypted)",
                    report.file
                ),
                requested_schema: schema,
            };
            if let Ok(res) = peer.create_elicitation(params).await
                && res.action == rmcp::model::ElicitationAction::Accept
                && let Some(Value::Object(answers)) = res.content
            {
                let mut stored = std::collections::BTreeSet::new();
                for n in &report.needs_input {
                    let field = format!("{}.{}", n.server, n.key);
                    if let Some(Value::String(v)) = answers.get(&field)
                        && !v.is_empty()
                    {
                        if let Err(e) = app.secrets.set(&n.server, &n.key, v) {
                            return Ok(Err(e));
                        }
                        stored.insert(field);
                    }
                }
                report
                    .needs_input
                    .retain(|n| !stored.contains(&format!("{}.{}", n.server, n.key)));
            }
        }
    }
    Ok(Ok(serde_json::to_value(report).unwrap_or_default()))
}
