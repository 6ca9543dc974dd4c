//! REST routes for saved scripts (`/api/scripts/saved...`: list, save, show, remove; each script is the tool
//! `scripts__NAME`), large results kept in pages (`GET /api/results/{id}`) and a server's paging limit
//! (`/api/servers/{id}/paging`). Thin handlers over `App` and `Proxy` methods.

use std::sync::Arc;

use ad_core::identity::Principal;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Body, Params};
use crate::saved_scripts::SaveRequest;

/// `GET /api/scripts/saved`: every saved script (without bodies).
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!({"scripts": s.app.list_scripts()?})))
}

/// `POST /api/scripts/saved`: save (or replace) a script.
pub async fn save(
    State(s): State<AppState>,
    Body(body): Body<SaveRequest>,
) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.app.save_script(body)?)))
}

/// `GET /api/scripts/saved/{name}`: one script, with its body.
pub async fn show(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.app.show_script(&name)?)))
}

/// `DELETE /api/scripts/saved/{name}`.
pub async fn remove(State(s): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Value>> {
    s.app.remove_script(&name)?;
    Ok(Json(json!({"status": "removed", "name": name})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    offset: Option<usize>,
    limit: Option<usize>,
}

/// `GET /api/results/{id}?offset=N&limit=M`: a page of a kept result (`{id, offset, total, next_offset, text}`).
pub async fn read_result(
    State(s): State<AppState>,
    principal: Option<Extension<Arc<Principal>>>,
    Path(id): Path<String>,
    Params(q): Params<PageQuery>,
) -> ApiResult<Json<Value>> {
    let principal = principal.map(|Extension(p)| p);
    let page =
        s.app
            .proxy
            .read_result(&id, q.offset.unwrap_or(0), q.limit, principal.as_deref())?;
    Ok(Json(json!(page)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagingBody {
    /// Bytes; 0 never pages; `null` goes back to the default.
    page_bytes: Option<u64>,
}

fn paging_view(s: &AppState, server: &str) -> ApiResult<Json<Value>> {
    let own = s.app.proxy.server_page_bytes(server)?;
    Ok(Json(json!({
        "server": server,
        "page_bytes": own,
        "default": s.app.proxy.paging().page_bytes,
    })))
}

/// `GET /api/servers/{id}/paging`: the server's own limit (`null`: the default applies).
pub async fn get_paging(
    State(s): State<AppState>,
    Path(server): Path<String>,
) -> ApiResult<Json<Value>> {
    paging_view(&s, &server)
}

/// `PUT /api/servers/{id}/paging`: set (or with `null` clear) the server's own limit.
pub async fn set_paging(
    State(s): State<AppState>,
    Path(server): Path<String>,
    Body(body): Body<PagingBody>,
) -> ApiResult<Json<Value>> {
    s.app
        .proxy
        .set_server_page_bytes(&server, body.page_bytes)?;
    paging_view(&s, &server)
}

/// The OpenAPI schemas of these routes.
pub fn schemas() -> Value {
    json!({
        "ScriptSave": {"type": "object", "required": ["name", "code"], "additionalProperties": false, "properties": {
            "name": {"type": "string", "description": "1-64 letters, digits, '_' or '-', starting with a letter"},
            "code": {"type": "string", "description": "JavaScript, the body of an async function; its arguments are `args`"},
            "description": {"type": "string"},
            "input_schema": {"type": "object", "description": "JSON Schema of the arguments (\"type\": \"object\")"},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 60000}}},
        "SavedScript": {"type": "object", "properties": {
            "name": {"type": "string"}, "tool": {"type": "string"}, "description": {"type": "string"},
            "input_schema": {"type": "object"}, "code": {"type": "string"}, "sha256": {"type": "string"},
            "withheld": {"type": "boolean"}, "created_at": {"type": "string"}, "updated_at": {"type": "string"}}},
        "ResultPage": {"type": "object", "properties": {
            "id": {"type": "string"}, "offset": {"type": "integer"}, "total": {"type": "integer"},
            "next_offset": {"type": ["integer", "null"]}, "text": {"type": "string"}}},
        "Paging": {"type": "object", "properties": {"page_bytes": {"type": ["integer", "null"], "minimum": 0}}},
    })
}
