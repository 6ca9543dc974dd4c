//! REST routes for limits: `GET /api/limits` (every server's), `GET`/`PUT /api/servers/{id}/limits` (a patch: each
//! field present replaces that setting), `POST /api/servers/{id}/limits/reset` (close an open breaker). Thin handlers
//! over the `App` methods in `src/limits.rs` (the same the CLI and the `registry` tool use).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body};
use crate::limits::LimitsPatch;

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

/// `GET /api/limits`.
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.app.limits_list()?)))
}

/// `GET /api/servers/{id}/limits`.
pub async fn get(State(s): State<AppState>, Path(server): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.limits_view(&name_of(&s, &server)?)?))
}

/// `PUT /api/servers/{id}/limits`: changes the fields the body has; answers the new view.
pub async fn set(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(patch): Body<LimitsPatch>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.set_limits(&name_of(&s, &server)?, patch)?))
}

/// `POST /api/servers/{id}/limits/reset`: closes the server's breaker.
pub async fn reset(
    State(s): State<AppState>,
    Path(server): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.reset_breaker(&name_of(&s, &server)?)?))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let rate = json!({"type": ["string", "null"], "description": "COUNT/PERIOD (10/s, 600/min, 5/30s, optionally ` burst N`) or off"});
    let rate_obj = json!({"type": ["object", "null"], "properties": {"count": {"type": "integer"}, "per_ms": {"type": "integer"}, "burst": {"type": "integer"}}});
    json!({
        "LimitsPatch": {"type": "object", "additionalProperties": false, "properties": {
            "reset": {"type": "boolean", "description": "start from the defaults before the other fields"},
            "rate": rate, "burst": {"type": "integer", "minimum": 1}, "tool": {"type": "string", "description": "rate and burst are this tool's own"},
            "tool_rate": rate, "caller_rate": rate,
            "concurrency": {"type": ["integer", "string"], "description": "calls at once, or off"},
            "queue": {"type": "integer"}, "wait": {"type": "string", "description": "500ms, 5s, 1m"},
            "breaker": {"type": "string", "description": "FAILURES/WINDOW (5/30s) or off"}, "cooldown": {"type": "string"}},
            "description": "each field present replaces that setting; applies to the server's next call"},
        "LimitsView": {"type": "object", "properties": {
            "server": {"type": "string"},
            "settings": {"type": "object", "properties": {"rate": rate_obj, "tool_rate": rate_obj, "caller_rate": rate_obj,
                "tools": {"type": "object", "additionalProperties": rate_obj}, "concurrency": {"type": ["integer", "null"]},
                "queue": {"type": "integer"}, "wait_ms": {"type": "integer"},
                "breaker": {"type": ["object", "null"], "properties": {"failures": {"type": "integer"}, "window_ms": {"type": "integer"}, "cooldown_ms": {"type": "integer"}}}}},
            "tokens": {"type": "integer", "description": "tokens in the server's bucket now (this process)"},
            "concurrency": {"type": "object", "properties": {"cap": {"type": "integer"}, "in_flight": {"type": "integer"}, "waiting": {"type": "integer"}, "queue": {"type": "integer"}}},
            "breaker": {"type": "object", "properties": {"state": {"type": "string", "enum": ["closed", "open", "half_open", "off"]},
                "recent_failures": {"type": "integer"}, "opened": {"type": "integer"}, "retry_after_ms": {"type": "integer"}}},
            "refused": {"type": "object", "properties": {"rate_limited": {"type": "integer"}, "server_busy": {"type": "integer"}, "server_unavailable": {"type": "integer"}}}}},
        "LimitsList": {"type": "array", "items": {"$ref": "#/components/schemas/LimitsView"}},
    })
}
