//! REST routes for tool pinning and filters: pending tools, one tool's diff, approvals, a server's allow/deny
//! patterns. Thin handlers over the `App` methods in `src/pins.rs` (the same the CLI and the `registry` tool use).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body, Params};
use crate::pinning::ToolFilter;

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
pub(super) fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

#[derive(Deserialize)]
pub struct PendingQuery {
    server: Option<String>,
}

/// `GET /api/tools/pending`: tools withheld until approved, each with the fields that changed.
pub async fn pending(
    State(s): State<AppState>,
    Params(q): Params<PendingQuery>,
) -> ApiResult<Json<Value>> {
    Ok(Json(Value::Array(
        s.app.pending_tools(q.server.as_deref())?,
    )))
}

/// `GET /api/servers/{id}/tools/{tool}/diff`: the approved and the current definition of a pinned tool.
pub async fn diff(
    State(s): State<AppState>,
    Path((server, tool)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.tool_diff(&name_of(&s, &server)?, &tool)?))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    tool: Option<String>,
}

/// `POST /api/servers/{id}/tools/approve`: approves one tool (`tool`) or every pending tool of the server.
pub async fn approve(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(body): Body<ApproveBody>,
) -> ApiResult<Json<Value>> {
    let server = name_of(&s, &server)?;
    Ok(Json(
        s.app
            .approve_tools(&server, body.tool.as_deref(), "rest")
            .await?,
    ))
}

/// `GET /api/servers/{id}/tool-filter`.
pub async fn get_filter(
    State(s): State<AppState>,
    Path(server): Path<String>,
) -> ApiResult<Json<ToolFilter>> {
    Ok(Json(s.app.tool_filter(&name_of(&s, &server)?)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterBody {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
}

/// `PUT /api/servers/{id}/tool-filter`: replaces both pattern lists.
pub async fn set_filter(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(body): Body<FilterBody>,
) -> ApiResult<Json<ToolFilter>> {
    let filter = ToolFilter {
        allow: body.allow,
        deny: body.deny,
        ..Default::default()
    };
    Ok(Json(
        s.app
            .set_tool_filter(&name_of(&s, &server)?, filter)
            .await?,
    ))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}, "maxItems": 64});
    let change = json!({"type": "object", "properties": {"field": {"type": "string"}, "approved": {}, "current": {}}});
    json!({
        "PendingTools": {"type": "array", "items": {"type": "object", "properties": {
            "server": {"type": "string"}, "tool": {"type": "string"}, "status": {"type": "string", "enum": ["changed", "new"]},
            "approved_fingerprint": {"type": ["string", "null"]}, "current_fingerprint": {"type": "string"},
            "approved_at": {"type": ["string", "null"]}, "seen_at": {"type": "string"}, "changes": {"type": "array", "items": change}}}},
        "ToolDiff": {"type": "object", "properties": {"server": {"type": "string"}, "tool": {"type": "string"}, "pending": {"type": "boolean"},
            "approved": {"type": ["object", "null"]}, "current": {"type": "object"}, "approved_fingerprint": {"type": ["string", "null"]},
            "current_fingerprint": {"type": "string"}, "changes": {"type": "array", "items": change}}},
        "ToolApproval": {"type": "object", "additionalProperties": false, "properties": {
            "tool": {"type": "string", "description": "the tool's own name; absent: every pending tool of the server"}}},
        "ToolApproved": {"type": "object", "properties": {"server": {"type": "string"}, "approved": {"type": "array", "items": {"type": "string"}}}},
        "ToolFilter": {"type": "object", "additionalProperties": false, "properties": {
            "allow": strings, "deny": strings}, "description": "glob patterns (`*`, `?`) on tool names; with `allow`, only matching tools are exposed; a `deny` match always hides"},
    })
}
