//! REST handlers: each parses its input, calls one domain service on `App`, and renders the result as JSON.
//!
//! Servers are addressed as `/api/servers/{id}` where `{id}` is the numeric id, or the name when it is not all digits.
//! Blocking SQLite calls are short (one statement or transaction) and run inline, as everywhere in agent-discover.

use std::collections::BTreeMap;
use std::sync::Arc;

use ad_core::identity::Principal;
use axum::Extension;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::AppState;
use super::error::{ApiError, ApiResult, Body, Params};
use super::ws::{ServerView, ToolView};
use crate::app::App;
use crate::error::{Error, ErrorCode};
use crate::model::{ListFilter, Server, ServerPatch, ServerSpec, ServerSummary, Source};
use crate::proxy::Caller;

/// Finds the server a path names: all digits is an id, anything else a name.
pub(super) fn server(app: &App, key: &str) -> ApiResult<Server> {
    Ok(match key.parse::<i64>() {
        Ok(id) => app.registry.get_by_id(id)?,
        Err(_) => app.registry.get(key)?,
    })
}

pub async fn health(State(s): State<AppState>) -> Json<Value> {
    Json(json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "uptime": s.started.elapsed().as_secs(),
        "pid": std::process::id(),
    }))
}

#[derive(Deserialize)]
pub struct ListQuery {
    query: Option<String>,
    source: Option<String>,
    installed: Option<String>,
}

pub async fn list_servers(
    State(s): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    Params(q): Params<ListQuery>,
) -> ApiResult<Json<Vec<Value>>> {
    let principal = principal.map(|Extension(p)| p);
    let source = q.source.as_deref().map(str::parse::<Source>).transpose()?;
    let installed_only = match q.installed.as_deref() {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return Err(Error::invalid(
                "installed",
                format!(
                    "{:?}; expected true or false",
                    crate::model::truncate_for_message(other)
                ),
            )
            .into());
        }
    };
    let rows = s.app.registry.list(&ListFilter {
        query: q.query.filter(|q| !q.trim().is_empty()),
        source,
        installed_only,
    })?;
    let mut out = Vec::with_capacity(rows.len());
    // Only the servers the caller's groups may see (issue 30), each as this user is to see it.
    for r in rows {
        if !s
            .app
            .proxy
            .visible_to(principal.as_deref(), &r.server.name, None)
        {
            continue;
        }
        let server = r.server.clone();
        let mut v = summary_json(&s.app, r)?;
        s.app
            .apply_personal_auth(&mut v, &server, principal.as_deref())
            .await;
        out.push(v);
    }
    Ok(Json(out))
}

/// A registered server the caller may see; a hidden one is as unknown as one that is not registered (issue 30).
pub(super) fn visible_server(
    app: &App,
    principal: Option<Extension<Arc<Principal>>>,
    key: &str,
) -> ApiResult<Server> {
    let server = server(app, key)?;
    let principal = principal.map(|Extension(p)| p);
    if app
        .proxy
        .visible_to(principal.as_deref(), &server.name, None)
    {
        Ok(server)
    } else {
        Err(Error::not_found("server", key).into())
    }
}

/// A listing row: the stored server, its tool count, whether it runs in this process, and (stdio) its sandbox.
fn summary_json(app: &App, r: ServerSummary) -> crate::error::Result<Value> {
    let running = app.proxy.is_active(&r.server.name);
    let server = r.server.clone();
    let mut v = serde_json::to_value(r).unwrap_or_default();
    v["running"] = Value::Bool(running);
    app.add_sandbox_brief(&mut v, &server)?;
    Ok(v)
}

pub async fn get_server(
    State(s): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let principal = principal.map(|Extension(p)| p);
    let server = visible_server(&s.app, principal.clone().map(Extension), &key)?;
    let tools: Vec<ToolView> = s
        .app
        .registry
        .tools(server.id)?
        .into_iter()
        .map(ToolView::from)
        .collect();
    let child = s
        .app
        .proxy
        .children()
        .into_iter()
        .find(|c| c.name == server.name);
    let server_id = server.id;
    let view = ServerView {
        running: s.app.proxy.is_active(&server.name),
        sandbox: s.app.sandbox_brief(&server)?,
        tool_policy: crate::approvals::rules_json(&s.app.registry.approval_rules(server.id)?),
        summary: ServerSummary {
            tool_count: tools.len() as i64,
            auth_url: s.app.oauth.auth_url(server.id),
            server,
        },
        tools,
    };
    let mut v = serde_json::to_value(view).unwrap_or_default();
    v["child"] = serde_json::to_value(child).unwrap_or_default();
    let server = s.app.registry.get_by_id(server_id)?;
    s.app
        .apply_personal_auth(&mut v, &server, principal.as_deref())
        .await;
    Ok(Json(v))
}

/// `POST /api/servers`: a server spec plus optional per-server time limits.
#[derive(Deserialize)]
pub struct CreateServer {
    #[serde(flatten)]
    spec: ServerSpec,
    activate_timeout_ms: Option<u64>,
    call_timeout_ms: Option<u64>,
}

pub async fn create_server(
    State(s): State<AppState>,
    Body(body): Body<CreateServer>,
) -> ApiResult<(StatusCode, Json<Server>)> {
    let patch = ServerPatch {
        activate_timeout_ms: body.activate_timeout_ms,
        call_timeout_ms: body.call_timeout_ms,
        ..Default::default()
    };
    // Check the limits before registering, so a bad limit leaves nothing behind.
    for (what, v) in [
        ("activate_timeout_ms", patch.activate_timeout_ms),
        ("call_timeout_ms", patch.call_timeout_ms),
    ] {
        if v.is_some_and(|ms| ms == 0 || ms > 3_600_000) {
            return Err(Error::invalid(what, "must be between 1 and 3600000 milliseconds").into());
        }
    }
    let mut server = s.app.registry.register(body.spec)?;
    if patch.activate_timeout_ms.is_some() || patch.call_timeout_ms.is_some() {
        server = s.app.registry.update(&server.name, &patch)?;
    }
    Ok((StatusCode::CREATED, Json(server)))
}

pub async fn update_server(
    State(s): State<AppState>,
    Path(key): Path<String>,
    Body(patch): Body<ServerPatch>,
) -> ApiResult<Json<Server>> {
    let server = server(&s.app, &key)?;
    Ok(Json(s.app.registry.update(&server.name, &patch)?))
}

pub async fn delete_server(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    s.app.uninstall(&server.name).await?;
    Ok(Json(json!({"status": "deleted", "name": server.name})))
}

pub async fn activate(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    let act = s.app.proxy.activate(&server.name).await?;
    let mut v = json!({
        "state": "ready",
        "id": act.name,
        "toolCount": act.tools.len(),
        "status": act.status,
        "name": act.name,
        "tool_count": act.tools.len(),
        "tools": act.tools.iter().map(|t| json!({
            "name": t.name,
            "call_as": crate::proxy::names::expose(&act.name, &t.name),
            "description": t.description,
        })).collect::<Vec<_>>(),
    });
    // A launcher fetched for this start (`uvx`/`npx` was not installed).
    if let Some(note) = &act.fetched {
        v["fetched"] = note.as_str().into();
    }
    Ok(Json(v))
}

pub async fn deactivate(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    // Stops it here if it runs here; clears the cross-process flag either way.
    let was = s.app.proxy.deactivate(&server.name).await? || server.active;
    Ok(Json(json!({
        "status": if was { "deactivated" } else { "not_active" },
        "name": server.name,
    })))
}

/// An `AddServerResult` (200 whatever its state: the state is the answer).
pub async fn enable_server(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    let r = s.app.enable(&server.name).await?;
    Ok(Json(serde_json::to_value(r).unwrap_or_default()))
}

pub async fn disable_server(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    let changed = s.app.disable(&server.name).await?;
    Ok(Json(json!({
        "status": if changed { "disabled" } else { "already_disabled" },
        "name": server.name,
    })))
}

pub async fn list_secrets(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    Ok(Json(
        serde_json::to_value(s.app.secrets.list(&server.name)?).unwrap_or_default(),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretValue {
    value: String,
}

pub async fn set_secret(
    State(s): State<AppState>,
    Path((key, secret)): Path<(String, String)>,
    Body(body): Body<SecretValue>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    s.app.secrets.set(&server.name, &secret, &body.value)?;
    Ok(Json(json!({
        "status": "set",
        "name": server.name,
        "key": secret,
        "masked_value": crate::secrets::mask(&body.value),
        "note": "takes effect the next time the server is activated",
    })))
}

pub async fn delete_secret(
    State(s): State<AppState>,
    Path((key, secret)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    if !s.app.secrets.delete(&server.name, &secret)? {
        return Err(Error::not_found("secret", format!("{}/{secret}", server.name)).into());
    }
    Ok(Json(
        json!({"status": "deleted", "name": server.name, "key": secret}),
    ))
}

pub async fn check_health(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<crate::health::HealthReport>> {
    let server = server(&s.app, &key)?;
    Ok(Json(s.app.check_health(&server.name).await?))
}

pub async fn server_metrics(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    let rows = s.app.registry.store().server_metrics(server.id)?;
    Ok(Json(serde_json::to_value(rows).unwrap_or_default()))
}

pub async fn metrics_overview(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let rows = s.app.registry.store().metrics_overview()?;
    Ok(Json(serde_json::to_value(rows).unwrap_or_default()))
}

/// `POST /api/servers/{id}/call`: `{tool, args}` (`arguments` is accepted too).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallBody {
    tool: String,
    #[serde(alias = "arguments")]
    args: Option<Map<String, Value>>,
}

/// The request header that names a REST caller's session, for approvals "for this session" (#27).
pub const SESSION_HEADER: &str = "x-agent-discover-session";

/// The caller a REST request speaks for: its session (`rest:NAME`) when the request names one in [`SESSION_HEADER`].
pub fn rest_caller(headers: &axum::http::HeaderMap) -> Result<Caller, crate::error::Error> {
    let session = match headers.get(SESSION_HEADER) {
        None => None,
        Some(v) => Some(crate::approvals::session_name(
            v.to_str().unwrap_or("\u{fffd}"),
        )?),
    };
    Ok(Caller {
        session: session.map(|n| format!("rest:{n}")),
        ..Caller::default()
    })
}

/// Answers with the tool's MCP result; a tool that ran and failed is still 200 with `isError: true`. A tool whose
/// approval policy is `ask` waits for a person (`/api/approvals`); refused, it answers 403 `kind: approval_denied`,
/// unanswered in time 504 `kind: approval_timeout`.
pub async fn call_tool(
    State(s): State<AppState>,
    Path(key): Path<String>,
    headers: axum::http::HeaderMap,
    principal: Option<Extension<Arc<Principal>>>,
    Body(body): Body<CallBody>,
) -> ApiResult<Json<rmcp::model::CallToolResult>> {
    let principal = principal.map(|Extension(p)| p);
    let server = visible_server(&s.app, principal.clone().map(Extension), &key)?;
    let mut caller = rest_caller(&headers)?;
    caller.principal = principal;
    let result = s
        .app
        .proxy
        .call_tool(&server.name, &body.tool, body.args, caller)
        .await?;
    Ok(Json(result))
}

#[derive(Deserialize)]
pub struct BrowseQuery {
    query: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// `GET /api/browse`: the federated marketplace (official registry, npm, PyPI); each source's outcome is in `sources`.
pub async fn browse(
    State(s): State<AppState>,
    Params(q): Params<BrowseQuery>,
) -> ApiResult<Json<Value>> {
    let query = q.query.unwrap_or_default();
    if query.len() > 1000 {
        return Err(Error::invalid("query", "over 1000 bytes").into());
    }
    let limit = q
        .limit
        .unwrap_or(20)
        .clamp(1, crate::marketplace::MAX_LIMIT);
    let res = s
        .app
        .marketplace()?
        .browse(&query, limit, q.cursor.as_deref())
        .await;
    let servers: Vec<Value> = res
        .servers
        .iter()
        .map(|e| {
            json!({
                "key": e.key, "name": e.name, "title": e.title, "description": e.description, "version": e.version,
                "source": e.source, "runtime": e.runtime, "install_method": e.install_method,
                "repository": e.repository, "website_url": e.website_url,
                "packages": e.packages.iter().map(|p| &p.identifier).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Json(
        json!({"servers": servers, "next_cursor": res.next_cursor, "sources": res.sources}),
    ))
}

/// `GET /api/prereqs`: which install tools this machine has (`true`/`false` each, and their versions).
pub async fn prereqs(State(s): State<AppState>) -> Json<Value> {
    let p = s.app.prereqs().await;
    Json(json!({
        "npx": p.npx.is_some(), "uvx": p.uvx.is_some(), "uv": p.uv.is_some(), "docker": p.docker.is_some(),
        "versions": p,
    }))
}

/// `POST /api/install`: `{name, inputs}` where `name` is a marketplace name or a browse row's `key`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstallBody {
    name: String,
    #[serde(default)]
    inputs: BTreeMap<String, String>,
}

/// Installs from the marketplace: 201 with `status: installed`, or 200 with `status: needs_input` and the values to
/// send again in `inputs` (nothing is registered then).
pub async fn install(
    State(s): State<AppState>,
    Body(body): Body<InstallBody>,
) -> ApiResult<(StatusCode, Json<crate::install::InstallOutcome>)> {
    // Names go into registry requests and command lines: the same limits as the MCP action.
    if body.name.trim().is_empty()
        || body.name.len() > 214
        || body
            .name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(Error::invalid(
            "name",
            format!(
                "{:?} is not a package or server name",
                crate::model::truncate_for_message(&body.name)
            ),
        )
        .into());
    }
    let outcome = crate::install::install(&s.app, &body.name, &body.inputs).await?;
    let status = match outcome {
        crate::install::InstallOutcome::Installed { .. } => StatusCode::CREATED,
        crate::install::InstallOutcome::NeedsInput { .. } => StatusCode::OK,
    };
    Ok((status, Json(outcome)))
}

#[derive(Deserialize)]
pub struct LogQuery {
    limit: Option<usize>,
    offset: Option<usize>,
}

pub async fn logs(
    State(s): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    Params(q): Params<LogQuery>,
) -> Json<Value> {
    let limit = q.limit.unwrap_or(100).min(crate::calllog::CAPACITY);
    // A team's user who is not an admin reads only their own calls (issue 30).
    let principal = principal.map(|Extension(p)| p);
    let only = principal
        .as_deref()
        .filter(|p| !s.app.proxy.sees_all(Some(p)))
        .map(|p| p.user_key());
    let (entries, total) = s
        .app
        .calllog
        .entries_of(only.as_deref(), limit, q.offset.unwrap_or(0));
    Json(json!({"entries": entries, "total": total}))
}

pub async fn clear_logs(State(s): State<AppState>) -> Json<Value> {
    s.app.calllog.clear();
    s.hub.logs_cleared();
    Json(json!({"status": "cleared"}))
}

pub async fn status(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let store = s.app.registry.store();
    let children = s.app.proxy.children();
    let (_, logged) = s.app.calllog.entries(0, 0);
    let flagged: BTreeMap<String, bool> = s
        .app
        .registry
        .list(&ListFilter::default())?
        .into_iter()
        .map(|r| (r.server.name, r.server.active))
        .collect();
    let mut servers = Vec::with_capacity(children.len());
    for c in &children {
        let mut v = serde_json::to_value(c).unwrap_or_default();
        if let Ok(server) = s.app.registry.get(&c.name) {
            s.app.add_sandbox_brief(&mut v, &server)?;
        }
        // Its limits' live state: the breaker, calls in flight and queued (`/api/servers/{id}/limits` has the rest).
        if let Ok(limits) = s.app.limits_view(&c.name) {
            v["breaker"] = limits["breaker"]["state"].clone();
            if let Some(c) = limits.get("concurrency") {
                v["concurrency"] = c.clone();
            }
        }
        servers.push(v);
    }
    Ok(Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "uptime": s.started.elapsed().as_secs(),
        "active_count": children.len(),
        "servers": servers,
        "sandbox_kernel": s.app.sandbox_kernel(),
        "flagged_active": flagged.iter().filter(|(_, a)| **a).map(|(n, _)| n).collect::<Vec<_>>(),
        "authenticating": s.app.registry.list(&ListFilter::default())?.into_iter().filter_map(|r| {
            r.auth_url.map(|u| json!({"name": r.server.name, "state": "authenticating", "authUrl": u}))
        }).collect::<Vec<_>>(),
        "calls": {"logged": logged},
        "guards": s.app.guards_view(None)?,
        "metrics": store.metrics_overview()?,
        "search": s.app.search.status(),
        "scanner": crate::scan_model::status(&s.app.registry, &s.app.search.status()),
        "policy": s.app.policy_status(),
        "registry": {
            "db_path": s.app.config.db_path,
            "schema_version": store.schema_version()?,
            "server_count": store.count_servers()?,
            "tool_count": store.count_tools()?,
        },
        "dashboard": {"token_required": s.token_required, "connections": s.hub.connection_count()},
    })))
}

pub async fn prometheus(State(s): State<AppState>) -> Response {
    let children = s.app.proxy.children();
    let processes = children.iter().filter(|c| c.pid.is_some()).count();
    let mut text = s.app.telemetry.render_prometheus(children.len(), processes);
    text.push_str(&s.app.proxy.paging_stats().prometheus());
    text.push_str(&s.app.proxy.limits_prometheus());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

pub async fn openapi(State(s): State<AppState>) -> Json<Value> {
    Json((*s.openapi).clone())
}

/// Unknown paths: JSON for the API, a plain 404 for anything else.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound.as_str(),
        format!(
            "no route {}; the API is described at /api/openapi.json",
            crate::model::truncate_for_message(uri.path())
        ),
    )
}

pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{method} is not served on {}; see /api/openapi.json",
            crate::model::truncate_for_message(uri.path())
        ),
    )
}

pub async fn apply_config(
    State(s): State<AppState>,
    Body(body): Body<crate::configimport::ApplyConfigRequest>,
) -> ApiResult<Json<Value>> {
    let report = s.app.apply_client_config(&body).await?;
    Ok(Json(serde_json::to_value(report).unwrap_or_default()))
}
