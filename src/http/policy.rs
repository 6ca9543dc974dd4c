//! REST routes for the policies for calls: `GET /api/policy` (what is in force and the last load's failure), `POST
//! /api/policy/test` (a dry run of a call), `POST /api/policy/check` (policy text validated, nothing put in force),
//! `POST /api/policy/reload` (the files read again now). Thin handlers over `src/policy.rs`.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body};
use crate::policy::PolicyTest;

/// `GET /api/policy`.
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.policy_list()?))
}

/// `POST /api/policy/test`.
pub async fn test(State(s): State<AppState>, Body(t): Body<PolicyTest>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.policy_test(&t)?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    text: String,
}

/// `POST /api/policy/check`: `{ok: true, policies}` or `{ok: false, error: {file, message}}` (200 either way: the
/// request was fine, the text may not be).
pub async fn check(Body(b): Body<CheckBody>) -> Json<Value> {
    Json(match crate::policy::check_text(&b.text) {
        Ok(list) => json!({"ok": true, "policies": list}),
        Err(e) => json!({"ok": false, "error": e}),
    })
}

/// `POST /api/policy/reload`.
pub async fn reload(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.policy_reload()?))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let error = json!({"type": ["object", "null"], "properties": {
        "file": {"type": ["string", "null"]}, "message": {"type": "string"}}});
    let policy = json!({"type": "object", "properties": {
        "id": {"type": "string"}, "effect": {"type": "string", "enum": ["permit", "forbid"]},
        "ask": {"type": "boolean"}, "file": {"type": "string"},
        "scope": {"type": "string", "description": "`*`, `server/*` or `server/tool`"}, "text": {"type": "string"}}});
    json!({
        "PolicyList": {"type": "object", "properties": {
            "source": {"type": ["string", "null"]}, "policies": {"type": "integer"},
            "generation": {"type": "integer", "description": "bumped each time a set is put in force"},
            "loaded_at": {"type": ["string", "null"]}, "files": {"type": "array", "items": {"type": "string"}},
            "digest": {"type": "string", "description": "a fingerprint of the files' names and texts: equal on replicas that read the same"},
            "error": error, "error_at": {"type": ["string", "null"]},
            "list": {"type": "array", "items": policy}}},
        "PolicyTest": {"type": "object", "required": ["server", "tool"], "additionalProperties": false, "properties": {
            "server": {"type": "string"}, "tool": {"type": "string"},
            "user": {"type": "string", "description": "default `local`"},
            "groups": {"type": "array", "items": {"type": "string"}},
            "client": {"type": "string"}, "script": {"type": "boolean"},
            "arguments": {"type": "object"}}},
        "PolicyDecision": {"type": "object", "properties": {
            "outcome": {"type": "string", "enum": ["allow", "deny", "ask"]},
            "policed": {"type": "boolean"},
            "decided_by": {"type": "array", "items": {"type": "string"}},
            "reason": {"type": "string"}}},
        "PolicyCheck": {"type": "object", "required": ["text"], "additionalProperties": false, "properties": {
            "text": {"type": "string", "description": "Cedar policies"}}},
        "PolicyChecked": {"type": "object", "properties": {
            "ok": {"type": "boolean"}, "policies": {"type": "array", "items": policy}, "error": error}},
    })
}
