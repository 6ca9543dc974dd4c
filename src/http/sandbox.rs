//! REST routes for a server's sandbox: `GET /api/servers/{id}/sandbox` (settings, grants, what the kernel offers) and
//! `PUT` (a patch: each field present replaces that setting). Thin handlers over the `App` methods in
//! `src/sandbox` (the same the CLI and the `registry` tool use).

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body};
use crate::sandbox::SandboxPatch;

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

/// `GET /api/servers/{id}/sandbox`.
pub async fn get(State(s): State<AppState>, Path(server): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.sandbox_view(&name_of(&s, &server)?)?))
}

/// `PUT /api/servers/{id}/sandbox`: changes the fields the body has; answers the new view with `applies`.
pub async fn set(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(patch): Body<SandboxPatch>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.set_sandbox(&name_of(&s, &server)?, patch)?))
}

/// `POST /api/servers/{id}/sandbox/check`: starts the server once, confined, and reports what it was refused.
pub async fn check(
    State(s): State<AppState>,
    Path(server): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.sandbox_check(&name_of(&s, &server)?).await?))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let paths = json!({"type": "array", "items": {"type": "string", "description": "an absolute path without `..`"}, "maxItems": 256});
    let network = json!({"type": "string", "enum": ["full", "none", "hosts"]});
    let network_in = json!({"type": "string", "pattern": "^(full|none|hosts:.+)$",
        "description": "full, none, or hosts:HOST,... (`api.github.com`, `*.slack.com`, `HOST:PORT`, an IP address)"});
    let hosts = json!({"type": "array", "items": {"type": "object", "properties": {
        "host": {"type": "string"}, "count": {"type": "integer"}, "reason": {"type": "string"}}},
        "description": "connections the filtering proxy refused since the server's last start"});
    json!({
        "SandboxPatch": {"type": "object", "additionalProperties": false, "properties": {
            "enabled": {"type": "boolean", "description": "false: this server runs unconfined"},
            "network": network_in, "read": paths, "write": paths},
            "description": "each field present replaces that setting; applied at the server's next start"},
        "SandboxView": {"type": "object", "properties": {
            "server": {"type": "string"}, "enabled": {"type": "boolean"},
            "effective": {"type": "boolean", "description": "its next start is confined: enabled, and AGENT_DISCOVER_SANDBOX is not off"},
            "network": network, "read": paths, "write": paths,
            "hosts": {"type": "array", "items": {"type": "string"}, "description": "the allow-list when network is hosts"},
            "network_setting": {"type": "string", "description": "the network setting as text: full, none or hosts:..."},
            "refused_hosts": hosts,
            "suggested_hosts": {"type": "array", "items": {"type": "object", "properties": {
                "host": {"type": "string"}, "source": {"type": "string", "enum": ["arguments", "env", "server.json remotes", "readme"]}}},
                "description": "hosts the package declares; shown, never applied"},
            "grants": {"type": "array", "items": {"type": "object", "properties": {
                "path": {"type": "string"}, "access": {"type": "string", "enum": ["read", "write"]},
                "source": {"type": "string", "enum": ["runtime", "package", "state", "arguments", "env", "user"]}}}},
            "kernel": {"$ref": "#/components/schemas/SandboxKernel"},
            "applies": {"type": "string", "description": "after a change: when it takes effect"}}},
        "SandboxKernel": {"type": "object", "properties": {
            "enabled": {"type": "boolean", "description": "AGENT_DISCOVER_SANDBOX is not off"},
            "landlock_abi": {"type": ["integer", "null"]}, "user_namespaces": {"type": "boolean"},
            "missing": {"type": ["string", "null"], "description": "why children cannot be confined here"}}},
        "SandboxCheck": {"type": "object", "properties": {
            "server": {"type": "string"}, "confined": {"type": "boolean"}, "ok": {"type": "boolean", "description": "it started and listed its tools"},
            "tool_count": {"type": ["integer", "null"]}, "error": {"type": ["string", "null"]}, "error_kind": {"type": ["string", "null"]},
            "refused": {"type": "array", "items": {"type": "object", "properties": {
                "path": {"type": "string"}, "access": {"type": "string", "enum": ["read", "write"]},
                "credential": {"type": "string", "description": "the credential file of HOME it is (never granted by default)"},
                "evidence": {"type": "string", "description": "the line the server printed that shows it"}}}},
            "refused_hosts": hosts, "network": {"type": "string"},
            "advice": {"type": ["string", "null"], "description": "the command that grants what was refused"}}},
        "SandboxBrief": {"type": "object", "properties": {
            "enabled": {"type": "boolean"}, "effective": {"type": "boolean"}, "network": network},
            "description": "a stdio server's sandbox in listings"},
    })
}
