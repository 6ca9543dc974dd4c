//! REST routes for the guards on calls: `GET /api/guards` (the global settings and every server's counts), `GET
//! /api/servers/{id}/guards` (a server's own settings, what applies, its counts) and `PUT` (a patch: each field
//! present replaces that setting; `default` follows the global one again). Thin handlers over `src/guards.rs`.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body};
use crate::guards::GuardsPatch;

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

/// `GET /api/guards`.
pub async fn all(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.guards_view(None)?))
}

/// `GET /api/servers/{id}/guards`.
pub async fn get(State(s): State<AppState>, Path(server): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.guards_view(Some(&name_of(&s, &server)?))?))
}

/// `PUT /api/servers/{id}/guards`: changes the fields the body has; answers the new view.
pub async fn set(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(patch): Body<GuardsPatch>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.set_guards(
        &name_of(&s, &server)?,
        patch,
        false,
    )?))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let mode = json!({"type": "string", "enum": ["off", "warn", "block"]});
    let set = json!({"type": "string", "enum": ["off", "warn", "block", "default"]});
    let guards = json!({"type": "object", "properties": {
        "arguments": mode, "result_secrets": mode, "result_instructions": mode}});
    json!({
        "GuardsPatch": {"type": "object", "additionalProperties": false, "properties": {
            "arguments": set, "result_secrets": set, "result_instructions": set},
            "description": "each field present replaces the server's own setting; `default` follows the global one"},
        "GuardsView": {"type": "object", "properties": {
            "global": guards, "server": {"type": "string"},
            "own": {"type": "object", "description": "the server's own settings (unset: the global one applies)"},
            "effective": guards,
            "counts": {"type": "object", "description": "the guards' decisions since this process started (by server without one)"}}},
    })
}
