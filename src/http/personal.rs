//! REST routes for each user's own keys (team mode with identity): a user lists, sets and deletes their own values of
//! a server's secrets (`/api/servers/{id}/my-secrets[/{key}]`, acting for the authenticated user only, on servers
//! they may see); an administrator reads which users have values (never the values), the running children with
//! users' keys, and sets whether users without values use the shared ones (`/api/servers/{id}/personal-keys`).
//! Thin handlers over `Secrets` (`ad_registry::personal`) and the proxy's `personal.rs`.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{server, visible_server};
use super::error::{ApiResult, Body};
use crate::error::Error;
use ad_core::identity::Principal;

/// The authenticated user, whose keys these routes are; refused without identity (one user has no keys of their own).
fn me(principal: &Option<Extension<Arc<Principal>>>) -> ApiResult<String> {
    match principal {
        Some(Extension(p)) => Ok(p.user_key()),
        None => Err(Error::invalid(
            "user",
            "your own keys need the front's identity on (team mode, docs/identity.md); without it, set the server's secrets (PUT /api/servers/{id}/secrets/{key})",
        )
        .into()),
    }
}

/// `GET /api/servers/{id}/my-secrets`: the caller's own values, masked.
pub async fn list_mine(
    State(s): State<AppState>,
    Path(key): Path<String>,
    principal: Option<Extension<Arc<Principal>>>,
) -> ApiResult<Json<Value>> {
    let user = me(&principal)?;
    let server = visible_server(&s.app, principal, &key)?;
    let list = s.app.secrets.list_mine(&server.name, &user)?;
    Ok(Json(
        json!({"name": server.name, "user": user, "secrets": list}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MineValue {
    value: String,
}

/// `PUT /api/servers/{id}/my-secrets/{key}`: sets the caller's own value; their next call uses it.
pub async fn set_mine(
    State(s): State<AppState>,
    Path((key, secret)): Path<(String, String)>,
    principal: Option<Extension<Arc<Principal>>>,
    Body(body): Body<MineValue>,
) -> ApiResult<Json<Value>> {
    let user = me(&principal)?;
    let server = visible_server(&s.app, principal, &key)?;
    s.app
        .secrets
        .set_mine(&server.name, &user, &secret, &body.value)?;
    Ok(Json(json!({
        "status": "set",
        "name": server.name,
        "key": secret,
        "user": user,
        "masked_value": crate::secrets::mask(&body.value),
        "note": "your next call of this server runs with your own value",
    })))
}

/// `DELETE /api/servers/{id}/my-secrets/{key}`.
pub async fn delete_mine(
    State(s): State<AppState>,
    Path((key, secret)): Path<(String, String)>,
    principal: Option<Extension<Arc<Principal>>>,
) -> ApiResult<Json<Value>> {
    let user = me(&principal)?;
    let server = visible_server(&s.app, principal, &key)?;
    if !s.app.secrets.delete_mine(&server.name, &user, &secret)? {
        return Err(
            Error::not_found("secret", format!("{}/{secret} of yours", server.name)).into(),
        );
    }
    Ok(Json(
        json!({"status": "deleted", "name": server.name, "key": secret, "user": user}),
    ))
}

/// `GET /api/servers/{id}/personal-keys` (admin): which users have which keys, the rule for the others, and the
/// children running with users' keys.
pub async fn view(State(s): State<AppState>, Path(key): Path<String>) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    Ok(Json(personal_view(&s.app, &server.name)?))
}

/// What `GET …/personal-keys` and the CLI's `secrets users` show.
pub fn personal_view(app: &crate::app::App, name: &str) -> crate::error::Result<Value> {
    let keys = app.secrets.personal_keys(name)?;
    let mut v = serde_json::to_value(&keys).unwrap_or_default();
    v["children"] =
        serde_json::to_value(app.proxy.personal_children(Some(name))).unwrap_or_default();
    Ok(v)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setting {
    allow_shared: bool,
}

/// `PUT /api/servers/{id}/personal-keys` (admin): `{"allow_shared": false}` refuses users without their own values.
pub async fn set(
    State(s): State<AppState>,
    Path(key): Path<String>,
    Body(body): Body<Setting>,
) -> ApiResult<Json<Value>> {
    let server = server(&s.app, &key)?;
    s.app
        .secrets
        .set_allows_shared(&server.name, body.allow_shared)?;
    Ok(Json(personal_view(&s.app, &server.name)?))
}
