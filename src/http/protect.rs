//! The front as an OAuth-protected resource (MCP authorization, server side; issue 30): RFC 9728 metadata at
//! `/.well-known/oauth-protected-resource[/path]`, and every other request let in only with a valid access token,
//! whose [`Principal`] goes into the request's extensions for the handlers (and, through rmcp, into every MCP
//! request's context). A request without a token gets a 401 naming the metadata; a bad token a 401
//! `invalid_token`; a token without a required scope a 403 `insufficient_scope`.
//!
//! The dashboard logs in the way it does with the static token: `/?token=ACCESS_TOKEN` once, kept as an HttpOnly
//! cookie that is validated like the header on every request (and the WebSocket's upgrade).

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use ad_core::identity::Principal;

use super::error::ApiError;
use crate::ident::{Denied, Identity};

/// The metadata document's path (RFC 9728 section 3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The base URL clients reach this front at: `AGENT_DISCOVER_PUBLIC_URL`, else `http://` and the request's `Host`
/// (already checked against the allowed hosts).
fn base_url(public: Option<&str>, headers: &HeaderMap) -> String {
    if let Some(p) = public {
        return p.trim_end_matches('/').to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// The protected resource a path belongs to, as the path after the base: `/mcp` and each `/mcp/servers/NAME` are
/// resources of their own; the REST API, the WebSocket and the dashboard are the base's.
fn resource_path(path: &str) -> &str {
    if path == "/mcp" {
        return path;
    }
    if let Some(rest) = path.strip_prefix("/mcp/servers/") {
        let name = rest.split('/').next().unwrap_or("");
        return &path[..("/mcp/servers/".len() + name.len())];
    }
    ""
}

/// Answers a request on a protected front: the metadata, a refusal, or the request with its principal to serve.
pub(crate) async fn admit(
    identity: &Identity,
    public_url: Option<&str>,
    cookie_token: Option<String>,
    mut req: Request,
) -> Result<Request, Response> {
    let path = req.uri().path().to_owned();
    let base = base_url(public_url, req.headers());
    if let Some(rest) = path.strip_prefix(WELL_KNOWN)
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return Err(metadata(identity, &base, rest));
    }
    // The OAuth redirect target of remote servers' authorizations carries no token; its `state` is checked there.
    // `GET /health` (status, version, uptime) stays open for load balancers' health checks.
    if path.starts_with("/oauth/callback/") || (path == "/health" && req.method() == Method::GET) {
        return Ok(req);
    }
    let rpath = resource_path(&path);
    let resource = if rpath.is_empty() {
        base.clone()
    } else {
        format!("{base}{rpath}")
    };
    let meta_url = format!("{base}{WELL_KNOWN}{rpath}");
    // `GET /?token=…`: the dashboard's login, validated, then kept as the cookie.
    let from_url = (req.method() == Method::GET && path == "/")
        .then(|| super::security::query_token(req.uri().query()).map(str::to_owned))
        .flatten();
    let presented = from_url
        .clone()
        .or_else(|| super::security::bearer(req.headers()))
        .or(cookie_token);
    let Some(token) = presented else {
        return Err(drained(req, challenge(identity, &meta_url, Denied::Missing)).await);
    };
    let audiences = identity.audiences(&base, &resource);
    match identity.validate(&token, &audiences).await {
        Ok(principal) => {
            if let Some(t) = from_url {
                return Err(super::security::login_redirect(&t));
            }
            if !identity.rules().is_admin(&principal) && !for_users(req.method(), &path) {
                let forbidden = ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "only an administrator of this server may use this route (see docs/identity.md)",
                );
                return Err(drained(req, forbidden.into_response()).await);
            }
            req.extensions_mut().insert(Arc::new(principal));
            Ok(req)
        }
        Err(denied) => {
            tracing::info!(path, reason = ?denied, "refused a request's access token");
            Err(drained(req, challenge(identity, &meta_url, denied)).await)
        }
    }
}

/// `refusal`, sent once the refused request's body is read (up to 4 MiB): hyper closes a connection whose request
/// body has not all arrived when the answer is written, and a client that sends its retry (with a token) on that
/// kept-alive connection meanwhile sees it closed without an answer.
async fn drained(req: Request, refusal: Response) -> Response {
    let _ = axum::body::to_bytes(req.into_body(), 4 << 20).await;
    refusal
}

/// What a user who is not an admin may reach: MCP, finding and calling the tools their groups may see, their own
/// call log, code mode, the dashboard's files and its live stream (`/ws`, filtered per user by `ws_view.rs`). The
/// registry's changes, secrets, approvals, status and metrics are for admins.
fn for_users(method: &Method, path: &str) -> bool {
    if path == "/mcp" || path.starts_with("/mcp/servers/") {
        return true;
    }
    let get = method == Method::GET;
    match path {
        "/health" | "/api/openapi.json" | "/api/servers" | "/api/logs" | "/api/scripts/api"
        | "/ws" => get,
        "/api/scripts/run" => method == Method::POST,
        _ => {
            if let Some(rest) = path.strip_prefix("/api/servers/") {
                return match rest.split_once('/') {
                    None => get,
                    Some((_, "call")) => method == Method::POST,
                    // Their own keys (`personal.rs`: the handlers act for the caller only).
                    Some((_, r)) if r == "my-secrets" || r.starts_with("my-secrets/") => true,
                    Some(_) => false,
                };
            }
            // The dashboard's static files.
            get && !path.starts_with("/api/") && path != "/metrics"
        }
    }
}

/// The RFC 9728 document for the resource at `rest` (empty: the base).
fn metadata(identity: &Identity, base: &str, rest: &str) -> Response {
    let mut doc = json!({
        "resource": format!("{base}{rest}"),
        "authorization_servers": [identity.config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "agent-discover",
    });
    if !identity.config.required_scopes.is_empty() {
        doc["scopes_supported"] = json!(identity.config.required_scopes);
    }
    axum::Json(doc).into_response()
}

/// A quoted-string parameter's value: no quotes or backslashes, no control characters.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '"' && *c != '\\' && !c.is_control())
        .collect()
}

fn challenge(identity: &Identity, meta_url: &str, denied: Denied) -> Response {
    let scope = identity.config.required_scopes.join(" ");
    let mut params = Vec::new();
    let (status, code, message) = match &denied {
        Denied::Missing => (
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this server needs an OAuth access token (Authorization: Bearer …)".to_owned(),
        ),
        Denied::Invalid(why) => {
            params.push("error=\"invalid_token\"".to_owned());
            params.push(format!("error_description=\"{}\"", quoted(why)));
            (StatusCode::UNAUTHORIZED, "invalid_token", why.clone())
        }
        Denied::Scope(_) => {
            params.push("error=\"insufficient_scope\"".to_owned());
            (
                StatusCode::FORBIDDEN,
                "insufficient_scope",
                format!("the access token lacks a required scope ({scope})"),
            )
        }
    };
    params.push(format!("resource_metadata=\"{}\"", quoted(meta_url)));
    if !scope.is_empty() {
        params.push(format!("scope=\"{}\"", quoted(&scope)));
    }
    let mut resp = ApiError::new(status, code, message).into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("Bearer {}", params.join(", "))) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// The principal the guard put on a request (REST handlers take it with `Extension`).
pub fn principal_of(req: &axum::http::Extensions) -> Option<Arc<Principal>> {
    req.get::<Arc<Principal>>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_by_path() {
        assert_eq!(resource_path("/mcp"), "/mcp");
        assert_eq!(resource_path("/mcp/servers/one"), "/mcp/servers/one");
        assert_eq!(resource_path("/mcp/servers/one/x"), "/mcp/servers/one");
        assert_eq!(resource_path("/api/servers"), "");
        assert_eq!(resource_path("/mcpx"), "");
        assert_eq!(quoted("a\"b\\c\nd"), "abcd");
        assert!(for_users(&Method::POST, "/mcp"));
        assert!(for_users(&Method::POST, "/api/servers/one/call"));
        assert!(for_users(&Method::GET, "/api/servers/one"));
        assert!(!for_users(&Method::DELETE, "/api/servers/one"));
        assert!(!for_users(&Method::GET, "/api/servers/one/secrets"));
        assert!(for_users(
            &Method::PUT,
            "/api/servers/one/my-secrets/API_KEY"
        ));
        assert!(!for_users(&Method::GET, "/api/servers/one/personal-keys"));
        assert!(for_users(&Method::GET, "/ws"));
        assert!(!for_users(&Method::GET, "/api/status"));
        assert!(for_users(&Method::GET, "/app.js"));
    }
}
