//! The built-in `registry` tool: its definition (schema from the typed actions in `actions.rs`) and one match arm per
//! action calling the domain layer. Argument problems and failed actions are `isError: true` results (SEP-1303).
//!
//! Action and argument names are agent-discover's (TypeScript original), so agents switch without changes.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Tool};
use serde_json::{Value, json};

use super::actions::{self, Action, ArgError};
use super::json_result;
use crate::app::App;
use crate::error::Error;
use crate::model::{ListFilter, ServerSpec, Source, Transport};
use crate::proxy::Caller;

pub const NAME: &str = "registry";

/// Every action this build implements, in the order of the tool schema's `action` enum.
pub fn actions() -> Vec<&'static str> {
    actions::names()
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
         finish_auth/reauthorize: a remote server's OAuth authorization (a server waiting for one shows authUrl). \
         Pass `action` plus that action's arguments.",
        Arc::new(actions::tool_schema()),
    )
}

/// Why an action did not succeed: its arguments (with the field to blame) or the domain's refusal.
enum Failure {
    Arg(ArgError),
    Domain(Error),
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Self {
        Failure::Arg(e)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Domain(e)
    }
}

type Outcome = Result<Value, Failure>;

/// The argument a domain validation error is about, when it is one of this action's arguments.
fn blamed_field(e: &Error) -> Option<String> {
    match e {
        Error::Invalid { what, .. } => Some(match *what {
            "server name" => "name".to_owned(),
            "secret key" => "key".to_owned(),
            w if !w.contains(' ') => w.to_owned(),
            _ => return None,
        }),
        _ => None,
    }
}

fn error_result(body: Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

/// Renders a failure: `{error, code, field}` for bad input, `{error, code}` for anything else.
fn failure_result(f: Failure) -> CallToolResult {
    match f {
        Failure::Arg(e) => error_result(e.body()),
        Failure::Domain(e) if e.code() == crate::error::ErrorCode::InvalidInput => error_result(
            json!({"error": e.to_string(), "code": e.code().as_str(), "field": blamed_field(&e)}),
        ),
        Failure::Domain(e) => {
            let mut body = json!({"error": e.to_string(), "code": e.code().as_str()});
            // A server waiting for OAuth: where a person authorizes it.
            if let Error::AuthRequired { auth_url, .. } = &e {
                body["kind"] = json!("auth_unavailable");
                body["authUrl"] = json!(auth_url);
            }
            error_result(body)
        }
    }
}

/// What an action produced: a JSON value to render, or a proxied tool's own result.
enum Reply {
    Json(Value),
    Relayed(Result<CallToolResponse, McpError>),
}

impl From<Value> for Reply {
    fn from(v: Value) -> Self {
        Reply::Json(v)
    }
}

pub async fn call(
    app: &Arc<App>,
    args: serde_json::Map<String, Value>,
    caller: Caller,
) -> Result<CallToolResponse, McpError> {
    let action = match actions::parse(args) {
        Ok(a) => a,
        Err(e) => return Ok(error_result(e.body()).into()),
    };
    match run(app, action, caller).await {
        Ok(Reply::Json(value)) => Ok(json_result(&value).into()),
        Ok(Reply::Relayed(r)) => r,
        Err(f) => Ok(failure_result(f).into()),
    }
}

/// One arm per action: turn its typed arguments into one domain call.
async fn run(app: &Arc<App>, action: Action, caller: Caller) -> Result<Reply, Failure> {
    let result: Outcome = match action {
        Action::List {
            query,
            source,
            installed_only,
        } => list(app, query, source, installed_only),
        Action::Install {
            source: Some(source),
            name,
            inputs,
            ..
        } if source != "manual" => market_install(app, name, inputs, &caller).await,
        // A catalog entry (introspected, not installed) named alone: install it as it was introspected.
        Action::Install {
            name,
            command: None,
            url: None,
            inputs,
            ..
        } if crate::catalog::is_entry(app, &name)? => {
            catalog_install(app, name, inputs, &caller).await
        }
        Action::Install {
            name,
            command,
            args,
            env,
            description,
            tags,
            transport,
            url,
            headers,
            activate_timeout_ms,
            call_timeout_ms,
            ..
        } => {
            let spec = ServerSpec {
                name,
                description: description.unwrap_or_default(),
                source: Source::Manual,
                command,
                args: args.unwrap_or_default(),
                env: env.unwrap_or_default(),
                tags: tags.unwrap_or_default(),
                transport: match transport {
                    Some(t) => t.parse::<Transport>()?,
                    None => Transport::Stdio,
                },
                url,
                headers: headers.unwrap_or_default(),
                ..Default::default()
            };
            install(app, spec, activate_timeout_ms, call_timeout_ms)
        }
        Action::Browse {
            query,
            limit,
            cursor,
        } => browse(app, query, limit, cursor).await,
        Action::Uninstall { name } => {
            let name = server_name(name)?;
            app.uninstall(&name)
                .await
                .map(|()| json!({"status": "uninstalled", "name": name}))
                .map_err(Into::into)
        }
        Action::Activate { name } => return activate(app, server_name(name)?).await,
        Action::Deactivate { name } => {
            let name = server_name(name)?;
            app.proxy
                .deactivate(&name)
                .await
                .map(|was| json!({"status": if was { "deactivated" } else { "not_active" }, "name": name}))
                .map_err(Into::into)
        }
        Action::ProxyCall {
            call_as,
            server,
            tool,
            arguments,
        } => {
            let (server, tool) = target(app, call_as, server, tool)?;
            return Ok(Reply::Relayed(
                super::proxy_call(app, &server, &tool, arguments, caller).await,
            ));
        }
        Action::GetSchema {
            call_as,
            server,
            tool,
        } => match target(app, call_as, server, tool) {
            Ok((server, tool)) => get_schema(app, server, tool),
            Err(e) => Err(e.into()),
        },
        Action::SetSecret { name, key, value } => set_secret(app, server_name(name)?, key, value),
        Action::DeleteSecret { name, key } => {
            let name = server_name(name)?;
            app.secrets
                .delete(&name, &key)
                .map(|existed| json!({"status": if existed { "deleted" } else { "not_found" }, "name": name, "key": key}))
                .map_err(Into::into)
        }
        Action::ListSecrets { name } => {
            let name = server_name(name)?;
            app.secrets
                .list(&name)
                .map(|s| json!({"name": name, "secrets": s}))
                .map_err(Into::into)
        }
        Action::Status {} => status(app).map_err(Into::into),
        Action::ApplyConfig {
            config,
            format,
            path,
        } => {
            let req = crate::configimport::ApplyConfigRequest {
                config: config.map(Value::Object),
                format,
                path,
            };
            apply_config(app, &req, &caller).await
        }
        Action::ToolsPending { name } => app
            .pending_tools(name.as_deref())
            .map(|p| json!({"pending": p}))
            .map_err(Into::into),
        Action::ApproveTools { name, tool } => {
            let name = server_name(name)?;
            app.approve_tools(&name, tool.as_deref())
                .await
                .map_err(Into::into)
        }
        Action::ToolDiff { name, tool } => app
            .tool_diff(&server_name(name)?, &tool)
            .map_err(Into::into),
        Action::ToolFilter { name, allow, deny } => {
            let name = server_name(name)?;
            let filter = if allow.is_some() || deny.is_some() {
                let filter = crate::pinning::ToolFilter {
                    allow: allow.unwrap_or_default(),
                    deny: deny.unwrap_or_default(),
                };
                app.set_tool_filter(&name, filter).await?
            } else {
                app.tool_filter(&name)?
            };
            Ok(json!({"name": name, "allow": filter.allow, "deny": filter.deny}))
        }
        Action::FinishAuth { name, callback } => app
            .finish_auth(&server_name(name)?, &callback)
            .await
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .map_err(Into::into),
        Action::Reauthorize { name } => app
            .reauthorize(&server_name(name)?)
            .await
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .map_err(Into::into),
        Action::Enable { name } => {
            let r = app.enable(&server_name(name)?).await?;
            return Ok(lifecycle_reply(&r));
        }
        Action::Disable { name } => {
            let name = server_name(name)?;
            app.disable(&name)
                .await
                .map(|changed| json!({"status": if changed { "disabled" } else { "already_disabled" }, "name": name}))
                .map_err(Into::into)
        }
        Action::FindTool {
            query,
            limit,
            auto_activate,
        } => {
            let auto = auto_activate.unwrap_or(true);
            let found = app
                .find_tool(&query, limit.unwrap_or(5) as usize, auto)
                .await?;
            let mut v = serde_json::to_value(found).unwrap_or_default();
            if auto {
                offer_install(app, &mut v, &caller).await;
            }
            Ok(v)
        }
        Action::FindTools {
            intents,
            limit,
            auto_activate,
        } => {
            let (limit, auto) = (limit.unwrap_or(5) as usize, auto_activate.unwrap_or(true));
            let mut results = Vec::new();
            for intent in &intents {
                let mut v = match app.find_tool(intent, limit, auto).await {
                    Ok(o) => {
                        let mut v = serde_json::to_value(o).unwrap_or_default();
                        if auto {
                            offer_install(app, &mut v, &caller).await;
                        }
                        v
                    }
                    Err(e) => {
                        json!({"found": false, "error": e.to_string(), "code": e.code().as_str()})
                    }
                };
                v["intent"] = Value::String(intent.clone());
                results.push(v);
            }
            Ok(json!({"results": results}))
        }
    };
    result.map(Reply::Json)
}

fn list(
    app: &App,
    query: Option<String>,
    source: Option<String>,
    installed_only: Option<bool>,
) -> Outcome {
    let filter = ListFilter {
        query,
        source: source.map(|s| s.parse::<Source>()).transpose()?,
        installed_only: installed_only.unwrap_or(false),
    };
    let rows = app.registry.list(&filter)?;
    Ok(Value::Array(
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
    ))
}

fn install(
    app: &App,
    spec: ServerSpec,
    activate_timeout_ms: Option<u64>,
    call_timeout_ms: Option<u64>,
) -> Outcome {
    spec.validate()?;
    let patch = crate::model::ServerPatch {
        activate_timeout_ms,
        call_timeout_ms,
        ..Default::default()
    };
    let s = app.registry.register(spec)?;
    let s = if activate_timeout_ms.is_some() || call_timeout_ms.is_some() {
        app.registry.update(&s.name, &patch)?
    } else {
        s
    };
    Ok(
        json!({"status": "installed", "server": s.name, "id": s.id, "transport": s.transport, "command": s.command, "args": s.args, "url": s.url,
               "activate_timeout_ms": s.activate_timeout_ms, "call_timeout_ms": s.call_timeout_ms}),
    )
}

/// A server name argument, checked before anything is looked up (so a hostile name is blamed on `name`).
fn server_name(name: String) -> Result<String, ArgError> {
    name.parse::<crate::model::ServerName>()
        .map_err(|e| ArgError::new("name", e.to_string()))?;
    Ok(name)
}

/// `activate`: an `AddServerResult`, plus (when ready) `status` and the tools as clients call them; `isError` when
/// the server failed to start.
async fn activate(app: &App, name: String) -> Result<Reply, Failure> {
    app.registry.get(&name)?;
    match app.proxy.activate(&name).await {
        Ok(act) => Ok(Reply::Json(json!({
            "state": "ready",
            "id": act.name,
            "toolCount": act.tools.len(),
            "status": act.status,
            "name": act.name,
            "tools": act.tools.iter().map(|t| json!({"name": crate::proxy::names::expose(&act.name, &t.name), "description": t.description})).collect::<Vec<_>>(),
        }))),
        Err(e) => Ok(lifecycle_reply(
            &crate::lifecycle::AddServerResult::from_error(&name, &e),
        )),
    }
}

/// An `AddServerResult` (activate, enable), `isError` when its state is `error`.
fn lifecycle_reply(r: &crate::lifecycle::AddServerResult) -> Reply {
    let value = serde_json::to_value(r).unwrap_or_default();
    if matches!(r.state, crate::lifecycle::ServerState::Error { .. }) {
        Reply::Relayed(Ok(error_result(value).into()))
    } else {
        Reply::Json(value)
    }
}

/// The (server, tool) an action names: `call_as` (`server__tool`, `mcp__server__tool`) or `server` + `tool`.
fn target(
    app: &App,
    call_as: Option<String>,
    server: Option<String>,
    tool: Option<String>,
) -> Result<(String, String), ArgError> {
    if let Some(call_as) = call_as {
        return app.proxy.resolve(&call_as).ok_or_else(|| {
            ArgError::new(
                "call_as",
                format!(
                    "`call_as` {:?} names no known server; use `server__tool` with a registered server name",
                    crate::model::truncate_for_message(&call_as)
                ),
            )
        });
    }
    match (server, tool) {
        (Some(s), Some(t)) if !s.is_empty() && !t.is_empty() => Ok((s, t)),
        (Some(s), _) if !s.is_empty() => Err(ArgError::new(
            "tool",
            "give `tool` with `server` (or `call_as` as server__tool)",
        )),
        _ => Err(ArgError::new(
            "call_as",
            "needs `call_as` (server__tool) or both `server` and `tool`",
        )),
    }
}

fn get_schema(app: &App, server: String, tool: String) -> Outcome {
    let stored = app.registry.store().tool(&server, &tool)?;
    match stored.filter(|_| app.registry.tool_allowed(&server, &tool)) {
        Some(t) => Ok(json!({
            "call_as": crate::proxy::names::expose(&server, &tool), "server": server, "tool": tool,
            "description": t.description, "input_schema": t.input_schema,
        })),
        None => Err(Error::not_found(
            "tool",
            format!("{server}__{tool} (activate the server once so its tools are known)"),
        )
        .into()),
    }
}

fn set_secret(app: &App, name: String, key: String, value: String) -> Outcome {
    crate::model::validate_key("secret key", &key)?;
    app.secrets.set(&name, &key, &value)?;
    Ok(
        json!({"status": "set", "name": name, "key": key, "masked_value": crate::secrets::mask(&value),
               "note": "takes effect the next time the server is activated"}),
    )
}

fn status(app: &App) -> crate::error::Result<Value> {
    let store = app.registry.store();
    let children = app.proxy.children();
    let servers: Vec<Value> = children
        .iter()
        .map(|c| {
            let description = app.registry.get(&c.name).map(|s| s.description).unwrap_or_default();
            json!({"name": c.name, "description": description, "status": c.status, "transport": c.transport, "pid": c.pid,
                   "tool_count": c.tool_count, "tools": c.tools, "stderr_tail": c.stderr_tail, "last_error": c.last_error,
                   "started_at": c.started_at, "restarts": c.restarts, "protocol": c.protocol})
        })
        .collect();
    let (recent, logged) = app.calllog.entries(10, 0);
    // Remote servers waiting for a person to authorize them (OAuth), with the URL to open: as REST's status.
    let authenticating: Vec<Value> = app
        .registry
        .list(&ListFilter::default())?
        .into_iter()
        .filter_map(|r| {
            r.auth_url
                .map(|u| json!({"name": r.server.name, "state": "authenticating", "authUrl": u}))
        })
        .collect();
    Ok(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "active_count": servers.len(),
        "servers": servers,
        "authenticating": authenticating,
        "calls": {"logged": logged, "recent": recent},
        "metrics": store.metrics_overview()?,
        "search": app.search.status(),
        // Proxied tool calls this process relayed by its fast lane (`proxy/relay.rs`).
        "relay": {"fast_lane_calls": app.proxy.fast_lane_calls()},
        "registry": {
            "db_path": app.config.db_path,
            "schema_version": store.schema_version()?,
            "server_count": store.count_servers()?,
            "tool_count": store.count_tools()?,
        },
        "actions": actions(),
    }))
}

async fn browse(
    app: &App,
    query: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
) -> Outcome {
    let query = query.unwrap_or_default();
    let limit = limit.unwrap_or(20).clamp(1, 100) as usize;
    let market = app.marketplace()?;
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
    Ok(
        json!({"servers": servers, "next_cursor": res.next_cursor, "sources": res.sources, "prereqs": prereqs}),
    )
}

/// Installs from the marketplace; missing required values are asked of the user through elicitation when the client
/// supports it, else returned as `needs_input` for a second call with `inputs`.
async fn market_install(
    app: &App,
    name: String,
    inputs: Option<std::collections::BTreeMap<String, String>>,
    caller: &Caller,
) -> Outcome {
    if name.len() > 214 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ArgError::new(
            "name",
            format!(
                "invalid package name {:?}",
                crate::model::truncate_for_message(&name)
            ),
        )
        .into());
    }
    let mut inputs = inputs.unwrap_or_default();
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
    Ok(serde_json::to_value(outcome?).unwrap_or_default())
}

/// find_tool's best match is a catalog entry (introspected, not installed) and the agent asked for activation: ask the
/// user's consent by elicitation (with the values installing needs in the same form), then install and activate it.
/// Catalog entries are never installed without that consent; a client without elicitation is told to call
/// `install` explicitly. The outcome is `install_consent`: `accepted`, `declined`, `cancelled`, `failed` (the
/// request failed) or `not_asked` (the client did not declare elicitation).
async fn offer_install(app: &App, v: &mut Value, caller: &Caller) {
    use crate::catalog::{EntryInstall, entry_inputs, install_entry};
    if v["found"] != true || v["installed"] != false {
        return;
    }
    let (Some(server), Some(call_as)) = (
        v["server"].as_str().map(str::to_owned),
        v["call_as"].as_str().map(str::to_owned),
    ) else {
        return;
    };
    let explicit = v["install"]["install"].clone();
    let Some(peer) = caller.peer.as_ref().filter(|p| declares_elicitation(p)) else {
        v["install_consent"] = json!("not_asked");
        v["next_step"] = json!(format!(
            "`{server}` is not installed and this client cannot be asked for consent (it did not declare \
             elicitation): ask the user, and if they agree call the registry tool with {explicit} (filling `inputs` \
             with real values), then activate `{server}` and call `{call_as}`"
        ));
        return;
    };
    let missing = match entry_inputs(app, &server) {
        Ok(m) => m,
        Err(e) => {
            v["install_consent"] = json!("failed");
            v["install_error"] = json!(e.to_string());
            return;
        }
    };
    let mut props = serde_json::Map::new();
    for m in &missing {
        props.insert(
            m.name.clone(),
            json!({"type": "string", "title": m.name, "description": m.description}),
        );
    }
    let required: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    let placeholders = if v["install"]["listed_under_placeholders"] == true {
        " Its tools were listed with placeholder values, so it may need real ones to work."
    } else {
        ""
    };
    let version = v["install"]["version"]
        .as_str()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let message = format!(
        "The tool `{}` ({}) belongs to `{server}`{version}, which is not installed. Install and start it?{placeholders}",
        v["tool"].as_str().unwrap_or_default(),
        crate::model::truncate_for_message(v["description"].as_str().unwrap_or_default()),
    );
    let schema = serde_json::from_value(
        json!({"type": "object", "properties": props, "required": required}),
    );
    let answer = match schema {
        Ok(requested_schema) => peer
            .create_elicitation(rmcp::model::ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            })
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            v["install_consent"] = json!("failed");
            v["install_error"] = json!(e);
            v["next_step"] = json!(format!(
                "asking the user failed; if they agree, call the registry tool with {explicit}, then activate `{server}`"
            ));
            return;
        }
    };
    match answer.action {
        rmcp::model::ElicitationAction::Accept => {}
        other => {
            let word = if other == rmcp::model::ElicitationAction::Decline {
                "declined"
            } else {
                "cancelled"
            };
            v["install_consent"] = json!(word);
            v["next_step"] = json!(format!(
                "the user {word} installing `{server}`: do not install it unless they ask; `other_matches` may hold an \
                 installed alternative"
            ));
            return;
        }
    }
    v["install_consent"] = json!("accepted");
    let inputs: std::collections::BTreeMap<String, String> = answer
        .content
        .as_ref()
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    match install_entry(app, &server, &inputs) {
        Ok(EntryInstall::Installed { .. }) => {}
        Ok(EntryInstall::NeedsInput { missing, .. }) => {
            v["missing"] = serde_json::to_value(&missing).unwrap_or_default();
            v["next_step"] = json!(format!(
                "the user agreed but left required values empty: call the registry tool with {explicit} and `inputs`"
            ));
            return;
        }
        Err(e) => {
            v["install_error"] = json!(e.to_string());
            return;
        }
    }
    v["installed"] = json!(true);
    match app.proxy.activate(&server).await {
        Ok(_) => {
            v["next_step"] = json!(format!(
                "installed with the user's consent and active: call the tool `{call_as}` directly, or use registry \
                 proxy_call with call_as `{call_as}`"
            ));
        }
        Err(e) => {
            v["activation_error"] = json!(e.to_string());
            v["next_step"] = json!(format!(
                "installed with the user's consent, but `{server}` failed to start; fix that (see activation_error), \
                 then activate it"
            ));
        }
    }
    v["server_status"] = json!(app.proxy.state_of(&server));
}

/// Installs a catalog entry; missing required values are asked through elicitation when the client supports it,
/// else returned as `needs_input` for a second call with `inputs`.
async fn catalog_install(
    app: &App,
    name: String,
    inputs: Option<std::collections::BTreeMap<String, String>>,
    caller: &Caller,
) -> Outcome {
    use crate::catalog::{EntryInstall, install_entry};
    let mut inputs = inputs.unwrap_or_default();
    let mut outcome = install_entry(app, &name, &inputs)?;
    if let (EntryInstall::NeedsInput { missing, .. }, Some(peer)) = (&outcome, &caller.peer)
        && declares_elicitation(peer)
        && let Some(answers) = elicit_inputs(peer, &name, missing).await
    {
        inputs.extend(answers);
        outcome = install_entry(app, &name, &inputs)?;
    }
    Ok(serde_json::to_value(outcome).unwrap_or_default())
}

fn declares_elicitation(peer: &rmcp::Peer<rmcp::RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
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
async fn apply_config(
    app: &App,
    req: &crate::configimport::ApplyConfigRequest,
    caller: &Caller,
) -> Outcome {
    let mut report = app.apply_client_config(req).await?;
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
                        app.secrets.set(&n.server, &n.key, v)?;
                        stored.insert(field);
                    }
                }
                report
                    .needs_input
                    .retain(|n| !stored.contains(&format!("{}.{}", n.server, n.key)));
            }
        }
    }
    Ok(serde_json::to_value(report).unwrap_or_default())
}
