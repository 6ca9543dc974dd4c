//! REST routes for profiles: list and create (`/api/profiles`), show, change and remove one
//! (`/api/profiles/{name}`), export and import the file (`/api/profiles/export`, `/api/profiles/import`). Thin
//! handlers over the `App` methods in `src/profiles.rs` (the same the CLI and the `registry` tool use).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body, Params};
use crate::profiles::{Profile, ProfileChange, ProfileFile};

/// `GET /api/profiles`.
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!({"profiles": s.app.profiles()?})))
}

/// `POST /api/profiles`: creates one; answers it as `GET` shows it.
pub async fn create(
    State(s): State<AppState>,
    Body(p): Body<Profile>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let p = s.app.create_profile(p)?;
    Ok((StatusCode::CREATED, Json(s.app.show_profile(&p.name)?)))
}

/// `GET /api/profiles/{name}`: its definition, the tools it holds, its endpoints.
pub async fn show(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(s.app.show_profile(&name)?))
}

/// `PATCH /api/profiles/{name}`: each field present replaces (`description`, `servers`, `tools`) or adds and removes
/// entries (`add_servers`, `remove_servers`, `add_tools`, `remove_tools`).
pub async fn change(
    State(s): State<AppState>,
    Path(name): Path<String>,
    Body(change): Body<ProfileChange>,
) -> ApiResult<Json<Value>> {
    s.app.change_profile(&name, change)?;
    Ok(Json(s.app.show_profile(&name)?))
}

/// `DELETE /api/profiles/{name}`.
pub async fn remove(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    let removed = s.app.remove_profile(&name)?;
    if !removed {
        return Err(crate::error::Error::not_found("profile", name).into());
    }
    Ok(Json(json!({"status": "removed", "name": name})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// Profile names, comma-separated (every profile without).
    names: Option<String>,
}

/// `GET /api/profiles/export`: the export file (JSON; the CLI writes TOML too).
pub async fn export(
    State(s): State<AppState>,
    Params(q): Params<ExportQuery>,
) -> ApiResult<Json<ProfileFile>> {
    let names: Vec<String> = q
        .names
        .iter()
        .flat_map(|n| n.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    Ok(Json(s.app.export_profiles(&names)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportQuery {
    /// Replace profiles of the same name (else such a profile refuses the import).
    replace: Option<bool>,
}

/// `POST /api/profiles/import`: an export file; every profile is checked before any is stored.
pub async fn import(
    State(s): State<AppState>,
    Params(q): Params<ImportQuery>,
    Body(file): Body<ProfileFile>,
) -> ApiResult<Json<Value>> {
    if file.version != 1 {
        return Err(crate::error::Error::invalid(
            "profiles file",
            format!(
                "version {} (this agent-discover reads version 1)",
                file.version
            ),
        )
        .into());
    }
    let names = s.app.import_profiles(file, q.replace.unwrap_or(false))?;
    Ok(Json(json!({"status": "imported", "profiles": names})))
}

/// The OpenAPI components these routes use.
pub fn schemas() -> Value {
    let names = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "Profile": {"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
            "description": {"type": "string"},
            "servers": {"type": "array", "items": {"type": "string"}, "description": "servers whose every tool, resource and prompt the profile holds"},
            "tools": {"type": "array", "items": {"type": "string"}, "description": "globs over SERVER__TOOL names (`*`, `?`)"},
            "overrides": {"type": "object", "description": "the profile's own tool overrides, {SERVER: {TOOL: override}} with TOOL the tool's own name, applied over the server's own to what its clients see and call"}}},
        "ProfileView": {"type": "object", "properties": {
            "name": {"type": "string"}, "description": {"type": "string"}, "servers": names, "tools": names,
            "known_tools": {"type": "array", "items": {"type": "string"}, "description": "the known tools it holds, as call_as names"},
            "endpoint": {"type": "string", "description": "its Streamable HTTP endpoint"},
            "stdio": {"type": "array", "items": {"type": "string"}, "description": "agent-discover's arguments to serve it on stdio"}}},
        "ProfileList": {"type": "object", "properties": {"profiles": {"type": "array", "items": {"$ref": "#/components/schemas/Profile"}}}},
        "ProfileChange": {"type": "object", "additionalProperties": false, "properties": {
            "description": {"type": "string"}, "servers": names, "tools": names,
            "add_servers": names, "remove_servers": names, "add_tools": names, "remove_tools": names}},
        "ProfileFile": {"type": "object", "required": ["version", "profiles"], "additionalProperties": false, "properties": {
            "version": {"type": "integer", "const": 1},
            "profiles": {"type": "array", "items": {"$ref": "#/components/schemas/Profile"}}}},
        "ProfileImport": {"type": "object", "properties": {"status": {"type": "string"}, "profiles": names}},
    })
}
