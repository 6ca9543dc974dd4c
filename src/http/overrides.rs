//! REST routes for tool overrides: every override (or a server's), one tool's, set and clear. Thin handlers over the
//! `App` methods in `src/overrides.rs` (the same the CLI and the `registry` tool use).

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body, Params};
use super::pins::name_of;
use ad_registry::overrides::ToolOverride;

#[derive(Deserialize)]
pub struct ListQuery {
    server: Option<String>,
    profile: Option<String>,
}

/// `?profile=NAME`: a profile's override instead of the server's own.
#[derive(Deserialize)]
pub struct ProfileQuery {
    profile: Option<String>,
}

/// `GET /api/tools/overrides`: every tool override, or one server's (a profile's with `profile`).
pub async fn list(
    State(s): State<AppState>,
    Params(q): Params<ListQuery>,
) -> ApiResult<Json<Value>> {
    let server = q.server.map(|k| name_of(&s, &k)).transpose()?;
    Ok(Json(Value::Array(s.app.tool_overrides_in(
        q.profile.as_deref(),
        server.as_deref(),
    )?)))
}

/// `GET /api/servers/{id}/tools/{tool}/override`.
pub async fn get(
    State(s): State<AppState>,
    Path((server, tool)): Path<(String, String)>,
    Params(q): Params<ProfileQuery>,
) -> ApiResult<Json<Value>> {
    let server = name_of(&s, &server)?;
    Ok(Json(s.app.tool_override_in(
        q.profile.as_deref(),
        &server,
        &tool,
    )?))
}

/// `PUT /api/servers/{id}/tools/{tool}/override`: replaces the tool's override (an empty one clears it).
pub async fn set(
    State(s): State<AppState>,
    Path((server, tool)): Path<(String, String)>,
    Params(q): Params<ProfileQuery>,
    Body(body): Body<ToolOverride>,
) -> ApiResult<Json<Value>> {
    let server = name_of(&s, &server)?;
    Ok(Json(
        s.app
            .set_tool_override_in(q.profile.as_deref(), &server, &tool, body)
            .await?,
    ))
}

/// `DELETE /api/servers/{id}/tools/{tool}/override`.
pub async fn clear(
    State(s): State<AppState>,
    Path((server, tool)): Path<(String, String)>,
    Params(q): Params<ProfileQuery>,
) -> ApiResult<Json<Value>> {
    let server = name_of(&s, &server)?;
    Ok(Json(
        s.app
            .clear_tool_override_in(q.profile.as_deref(), &server, &tool)
            .await?,
    ))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let params = json!({"type": "array", "items": {"type": "string"}});
    let body = json!({"type": "object", "additionalProperties": false, "properties": {
        "name": {"type": "string", "description": "the name the agent sees (1-64 of letters, digits, `_`, `-`, `.`)"},
        "title": {"type": "string"}, "description": {"type": "string"},
        "annotations": {"type": "object", "description": "set over the tool's own: title (string), readOnlyHint, destructiveHint, idempotentHint, openWorldHint (booleans)"},
        "fixed": {"type": "object", "description": "parameter -> value: hidden from the agent, given on every call"},
        "hidden": params, }});
    json!({
        "ToolOverrideBody": body,
        "ToolOverride": {"type": "object", "properties": {
            "server": {"type": "string"}, "tool": {"type": "string", "description": "the tool's own name"},
            "override": body, "shown_as": {"type": "string"}, "call_as": {"type": "string"},
            "status": {"type": "string", "enum": ["approved", "pending", "unseen"]}}},
        "ToolOverrideList": {"type": "array", "items": {"$ref": "#/components/schemas/ToolOverride"}},
        "ToolOverrideCleared": {"type": "object", "properties": {"server": {"type": "string"}, "tool": {"type": "string"}, "cleared": {"type": "boolean"}}},
    })
}
