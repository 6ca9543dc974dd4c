//! REST routes for A2A agents (#15): list with probed status, add (a card URL or a worker command), remove. Thin
//! handlers over `App::agents`, the same methods the CLI and the MCP agent tools use.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiError, ApiResult, Body};
use crate::agents::AddAgent;

/// `GET /api/agents`: every stored agent with its last known status (probing is done by `agents_discover`).
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!({"agents": s.app.agents.list_stored()?})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    id: Option<String>,
    url: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(rename = "maxConcurrent")]
    max_concurrent: Option<u32>,
}

/// `POST /api/agents`: adds an agent from its card URL, or a worker command started to read its card.
pub async fn add(
    State(s): State<AppState>,
    Body(b): Body<AddBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let spec = AddAgent {
        id: b.id,
        url: b.url,
        command: b.command.map(|c| (c, b.args)),
        headers: b.headers,
        max_concurrent: b.max_concurrent,
    };
    let info = s.app.agents.add(spec).await?;
    let body = serde_json::to_value(info)
        .map_err(|e| ApiError::from(crate::error::Error::Internal(e.to_string())))?;
    Ok((StatusCode::CREATED, Json(body)))
}

/// `DELETE /api/agents/{id}`: removes an agent, stopping its worker if it runs in this process.
pub async fn remove(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    s.app.agents.remove(&id).await?;
    Ok(Json(json!({"status": "removed", "name": id})))
}

pub fn schemas() -> Value {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "Agent": {"type": "object", "properties": {
            "id": {"type": "string"}, "capabilities": strings, "status": {"type": "string", "enum": ["ready", "busy", "unavailable"]},
            "providers": {"type": "array", "items": {"type": "object"}}, "executor": {"type": "string", "enum": ["in-process", "worker"]},
            "description": {"type": "string"}, "source": {"type": "string"}, "protocolVersion": {"type": "string"},
            "maxConcurrent": {"type": "integer"}, "lastError": {"type": "string"}}},
        "AgentList": {"type": "object", "properties": {"agents": {"type": "array", "items": {"$ref": "#/components/schemas/Agent"}}}},
        "AgentCreate": {"type": "object", "additionalProperties": false, "properties": {
            "id": {"type": "string", "description": "default: the card's name"},
            "url": {"type": "string", "description": "the agent card URL, or the agent's base URL"},
            "command": {"type": "string", "description": "a worker to start (serving A2A on $AGENT_DISCOVER_A2A_PORT)"},
            "args": strings, "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "maxConcurrent": {"type": "integer", "minimum": 1, "maximum": 1024}}},
    })
}
