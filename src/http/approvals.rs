//! REST routes for approvals (#27): a server's approval policy rules (`GET`/`PUT /api/servers/{id}/tool-policy`), the
//! calls waiting for a person (`GET /api/approvals`), and a person's answer (`POST /api/approvals/{id}/approve`,
//! `/deny`). Thin handlers over the `App` methods in `src/approvals.rs`, which the CLI and the `registry` tool use too.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::error::{ApiResult, Body, Params};
use crate::approval::{ApprovalPolicy, Scope};
use crate::error::{Error, Result};

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

/// `GET /api/servers/{id}/tool-policy`: the rules and what each known tool resolves to.
pub async fn get_policy(
    State(s): State<AppState>,
    Path(server): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.tool_policy(&name_of(&s, &server)?)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    /// One tool of the server (with neither `tool` nor `annotation`: the server-wide rule).
    tool: Option<String>,
    /// `destructive` or `open_world`: the server's tools that declare that hint.
    annotation: Option<String>,
    /// `allow`, `ask` or `deny`; `null` (or `clear`) removes the rule.
    policy: Option<String>,
}

/// `PUT /api/servers/{id}/tool-policy`: sets or removes one rule; answers like `GET`.
pub async fn set_policy(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(body): Body<PolicyBody>,
) -> ApiResult<Json<Value>> {
    let server = name_of(&s, &server)?;
    let target = crate::approvals::target_of(body.tool.as_deref(), body.annotation.as_deref())?;
    let policy = match body.policy.as_deref() {
        None | Some("clear") => None,
        Some(p) => Some(p.parse::<ApprovalPolicy>()?),
    };
    Ok(Json(s.app.set_tool_policy(&server, &target, policy)?))
}

#[derive(Deserialize)]
pub struct ListQuery {
    all: Option<bool>,
}

/// `GET /api/approvals`: the calls waiting for a person, newest first (`?all=true`: recent approvals of every kind).
pub async fn list(
    State(s): State<AppState>,
    Params(q): Params<ListQuery>,
) -> ApiResult<Json<Value>> {
    Ok(Json(Value::Array(s.app.approvals(q.all.unwrap_or(false))?)))
}

/// A JSON body that may be left out (empty: the defaults).
fn optional_body<T: serde::de::DeserializeOwned + Default>(bytes: &[u8]) -> Result<T> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| Error::invalid("body", e.to_string()))
}

/// Who answers through REST: `rest`, or `dashboard` when the dashboard says so.
fn by_of(by: Option<&str>) -> Result<&'static str> {
    match by {
        None | Some("rest") => Ok("rest"),
        Some("dashboard") => Ok("dashboard"),
        Some(_) => Err(Error::invalid("by", "rest or dashboard")),
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    /// `once` (default) or `session`.
    scope: Option<String>,
    by: Option<String>,
}

/// `POST /api/approvals/{id}/approve`: `{"scope": "once" | "session"}`.
pub async fn approve(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let body: ApproveBody = optional_body(&body)?;
    let scope = match body.scope.as_deref() {
        None => Scope::Once,
        Some(s) => s.parse()?,
    };
    let by = by_of(body.by.as_deref())?;
    Ok(Json(s.app.decide_approval(&id, Some(scope), by)?))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    by: Option<String>,
}

/// `POST /api/approvals/{id}/deny`.
pub async fn deny(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let body: DenyBody = optional_body(&body)?;
    let by = by_of(body.by.as_deref())?;
    Ok(Json(s.app.decide_approval(&id, None, by)?))
}

/// The OpenAPI schemas of these routes.
pub fn schemas() -> Value {
    let policy = serde_json::json!({"type": "string", "enum": ["allow", "ask", "deny"]});
    let target = serde_json::json!({"type": "object", "properties": {
        "scope": {"type": "string", "enum": ["server", "tool", "annotation"]},
        "tool": {"type": "string"}, "annotation": {"type": "string", "enum": ["destructive", "open_world"]}}});
    serde_json::json!({
        "ToolPolicyRule": {"type": "object", "additionalProperties": false, "properties": {
            "tool": {"type": "string", "description": "one tool of the server (without tool and annotation: the server-wide rule)"},
            "annotation": {"type": "string", "enum": ["destructive", "open_world"], "description": "the server's tools that declare destructiveHint / openWorldHint true"},
            "policy": {"type": ["string", "null"], "enum": ["allow", "ask", "deny", "clear", null], "description": "null or clear removes the rule"}}},
        "ToolPolicy": {"type": "object", "properties": {
            "server": {"type": "string"},
            "default": {"const": "allow"},
            "rules": {"type": "array", "items": {"allOf": [target, {"type": "object", "properties": {"policy": policy}}]}},
            "tools": {"type": "array", "items": {"type": "object", "properties": {
                "tool": {"type": "string"}, "policy": policy, "rule": {"type": ["object", "null"], "description": "the rule it comes from (null: the default, allow)"},
                "annotations": {"type": "array", "items": {"type": "string"}}}}}}},
        "ApprovalDecision": {"type": "object", "additionalProperties": false, "properties": {
            "scope": {"type": "string", "enum": ["once", "session"], "description": "session: the same call (same digest) passes for the rest of its caller's session"},
            "by": {"type": "string", "enum": ["rest", "dashboard"]}}},
        "Approval": {"type": "object", "properties": {
            "id": {"type": "string"}, "server": {"type": "string"}, "tool": {"type": "string"},
            "arguments": {"description": "the call's exact arguments (keys sorted)"},
            "digest": {"type": "string", "description": "SHA-256 of [server, tool, arguments]: what the approval is bound to"},
            "session": {"type": ["string", "null"]},
            "via": {"type": "string", "enum": ["wait", "elicitation", "input"]},
            "status": {"type": "string", "enum": ["pending", "approved", "denied", "expired", "used"]},
            "scope": {"type": ["string", "null"], "enum": ["once", "session", null]},
            "requested_at": {"type": "string"}, "deadline": {"type": "string"},
            "decided_at": {"type": ["string", "null"]}, "decided_by": {"type": ["string", "null"]}}},
        "ApprovalList": {"type": "array", "items": {"$ref": "#/components/schemas/Approval"}},
    })
}
