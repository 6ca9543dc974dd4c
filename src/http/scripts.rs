//! REST routes for code mode (issue 28): run a script (`POST /api/scripts/run`) and the TypeScript declarations of
//! what a script can call (`GET /api/scripts/api`). Thin handlers over `App::run_script` and `App::script_api`.
//!
//! A REST caller has no MCP client to ask: a tool whose policy is `ask` waits for a person's decision (the dashboard,
//! `agent-discover approvals`, `POST /api/approvals/{id}/approve`), as a REST tool call does; the
//! `x-agent-discover-session` header names the caller's session for approvals given "for this session".

use std::sync::Arc;

use ad_core::identity::Principal;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::api::rest_caller;
use super::error::{ApiResult, Body, Params};
use crate::codemode::Step;
use crate::error::Error;
use crate::scripts::RunRequest;

/// `POST /api/scripts/run`: 200 with the answer (`{result, logs, calls}`, or the script's typed error with its logs
/// and calls); 400 for bad input.
pub async fn run(
    State(s): State<AppState>,
    headers: HeaderMap,
    principal: Option<Extension<Arc<Principal>>>,
    Body(body): Body<RunRequest>,
) -> ApiResult<Json<Value>> {
    let mut caller = rest_caller(&headers)?;
    caller.principal = principal.map(|Extension(p)| p);
    match s.app.run_script(body, caller).await? {
        Step::Done(outcome) => Ok(Json(outcome.to_json())),
        // A caller without a client is never asked: approvals wait for a person instead.
        Step::Asked(_) => Err(Error::InputRequired {
            server: "agent-discover".into(),
            what: "an answer a REST caller cannot give".into(),
        }
        .into()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiQuery {
    /// Servers, comma-separated.
    servers: Option<String>,
    query: Option<String>,
}

/// `GET /api/scripts/api`: TypeScript declarations (`text/plain`).
pub async fn api(
    State(s): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    Params(q): Params<ApiQuery>,
) -> ApiResult<Response> {
    let servers = q.servers.map(|list| {
        list.split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned)
            .collect()
    });
    let principal = principal.map(|Extension(p)| p);
    let text = s
        .app
        .script_api(servers, q.query, principal.as_deref())
        .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response())
}

/// The OpenAPI schemas of these routes.
pub fn schemas() -> Value {
    serde_json::json!({
        "ScriptRun": {"type": "object", "required": ["code"], "additionalProperties": false, "properties": {
            "code": {"type": "string", "description": "JavaScript, the body of an async function: `await call(\"server__tool\", args)`, `return` gives the result"},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 60000, "description": "the script's CPU time limit in ms (default 5000)"}}},
        "ScriptAnswer": {"type": "object", "description": "{result, logs, calls} when the script returned; {error, code, kind, limit?, thrown?, logs, calls} when it failed or was stopped", "properties": {
            "result": {"description": "what the script returned (JSON)"},
            "error": {"type": "string"}, "code": {"type": "string"},
            "kind": {"type": "string", "enum": ["limit_exceeded", "syntax_error", "script_error", "unsettled", "cancelled", "internal"]},
            "limit": {"type": "string", "enum": ["cpu_time", "wall_time", "memory", "inner_calls"]},
            "thrown": {"type": "object", "description": "what the script threw: name, message, stack, and a failed call's kind and details"},
            "logs": {"type": "array", "items": {"type": "string"}},
            "calls": {"type": "array", "items": {"type": "object", "properties": {"tool": {"type": "string"}, "ms": {"type": "integer"}, "ok": {"type": "boolean"}}}},
            "truncated": {"type": "object", "description": "what was cut: result (bytes, limit), logs (dropped_lines, limit)"}}},
        "TypeScript": {"type": "string", "description": "TypeScript declarations"},
    })
}
