//! OAuth routes: the redirect target `/oauth/callback/{server}` (a page for the person who authorized), and REST
//! routes to start, finish and re-run a server's authorization. Thin handlers over the `App` methods in
//! `authflow.rs` (the same the CLI and the `registry` tool use).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::AppState;
use super::error::{ApiResult, Body};
use crate::app::App;
use crate::authflow::AuthOutcome;

/// The server a path names: all digits is an id, anything else a name (as everywhere under `/api/servers`).
fn name_of(s: &AppState, key: &str) -> ApiResult<String> {
    Ok(match key.parse::<i64>() {
        Ok(id) => s.app.registry.get_by_id(id)?.name,
        Err(_) => key.to_owned(),
    })
}

/// `GET /api/servers/{id}/auth`: the server's authorization, tokens masked.
pub async fn status(State(s): State<AppState>, Path(key): Path<String>) -> ApiResult<Json<Value>> {
    let name = name_of(&s, &key)?;
    Ok(Json(
        serde_json::to_value(s.app.auth_status(&name)?).unwrap_or_default(),
    ))
}

/// `POST /api/servers/{id}/auth`: connect, authorizing first when the server asks (`authUrl`).
pub async fn start(State(s): State<AppState>, Path(key): Path<String>) -> ApiResult<Json<Value>> {
    let name = name_of(&s, &key)?;
    Ok(Json(
        serde_json::to_value(s.app.start_auth(&name).await?).unwrap_or_default(),
    ))
}

#[derive(Deserialize)]
pub struct FinishBody {
    /// The URL the authorization server redirected to (or its query, or the code it showed).
    callback: String,
}

/// `POST /api/servers/{id}/auth/finish`: complete the authorization by hand.
pub async fn finish(
    State(s): State<AppState>,
    Path(key): Path<String>,
    Body(body): Body<FinishBody>,
) -> ApiResult<Json<Value>> {
    let name = name_of(&s, &key)?;
    Ok(Json(
        serde_json::to_value(s.app.finish_auth(&name, &body.callback).await?).unwrap_or_default(),
    ))
}

/// `POST /api/servers/{id}/reauthorize`: a new authorization while the old tokens keep serving.
pub async fn reauthorize(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    let name = name_of(&s, &key)?;
    Ok(Json(
        serde_json::to_value(s.app.reauthorize(&name).await?).unwrap_or_default(),
    ))
}

/// `GET /oauth/callback/{server}`: where the authorization server sends the person back.
pub async fn callback(State(s): State<AppState>, Path(name): Path<String>, uri: Uri) -> Response {
    callback_page(&s.app, &name, &uri).await.0
}

/// Serves only `/oauth/callback/{server}` on `listener`, for `agent-discover auth` when no dashboard runs; each
/// callback's outcome (or why it failed) is sent to `done`. Ends when `stop` is cancelled.
pub async fn serve_callback(
    listener: tokio::net::TcpListener,
    app: Arc<App>,
    done: tokio::sync::mpsc::UnboundedSender<Result<AuthOutcome, String>>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let router = axum::Router::new().route(
        "/oauth/callback/{server}",
        axum::routing::get(move |Path(name): Path<String>, uri: Uri| {
            let (app, done) = (app.clone(), done.clone());
            async move {
                let (page, outcome) = callback_page(&app, &name, &uri).await;
                let _ = done.send(outcome);
                page
            }
        }),
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await
}

/// Completes the authorization from a callback request; the page the person sees, and the outcome.
async fn callback_page(
    app: &Arc<App>,
    name: &str,
    uri: &Uri,
) -> (Response, Result<AuthOutcome, String>) {
    let query = uri.query().unwrap_or_default();
    let result = app.finish_auth(name, &format!("?{query}")).await;
    let page = match &result {
        Ok(outcome) if outcome.state == "ready" => page(
            StatusCode::OK,
            "Authorized",
            &format!("agent-discover is connected to {name}. You can close this tab."),
        ),
        Ok(_) => page(
            StatusCode::OK,
            "More authorization needed",
            &format!("{name} asks for another authorization; see agent-discover."),
        ),
        Err(e) => {
            let status = super::status_of(e.code());
            page(status, "Authorization failed", &e.to_string())
        }
    };
    (page, result.map_err(|e| e.to_string()))
}

fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let html = format!(
        "<!doctype html><meta charset=utf-8><title>{t}</title><body style=\"font-family:sans-serif;margin:3em\"><h1>{t}</h1><p>{x}</p></body>",
        t = esc(title),
        x = esc(text)
    );
    (status, Html(html)).into_response()
}
