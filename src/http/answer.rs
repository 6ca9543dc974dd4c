//! `/mcp` answers every JSON-RPC request that has an id with that id, even one rmcp cannot type (it would answer a
//! 415 without JSON-RPC, and the client would wait forever): a thin middleware around rmcp's service that collects the
//! body once and, only when rmcp refused it as untyped (415), answers with [`crate::mcp::front::reply_to_untyped`].

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::ClientJsonRpcMessage;

use super::MCP_BODY_LIMIT;

fn is_json(request: &Request) -> bool {
    request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|e| e.trim().eq_ignore_ascii_case("application/json"))
        })
}

/// Middleware for the MCP endpoints; any other request passes untouched.
pub async fn every_id_answered(request: Request, next: Next) -> Response {
    if request.method() != Method::POST || !is_json(&request) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, MCP_BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Payload Too Large: request body exceeds {MCP_BODY_LIMIT} bytes"),
            )
                .into_response();
        }
    };
    // `initialize` under 2026-07-28 metadata: 404 with -32601, as for the other methods that revision removed.
    if let Some(reply) = crate::mcp::front::initialize_under_2026(&bytes) {
        let body = serde_json::to_vec(&reply).unwrap_or_default();
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    // rmcp types the body itself and answers one it cannot type with 415 (its content-type check passed, as
    // `is_json` did): only then is the body read here too (typing every body twice cost 35k instructions per call).
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
        && serde_json::from_slice::<ClientJsonRpcMessage>(&bytes).is_err()
        && let Some(reply) = crate::mcp::front::reply_to_untyped(&bytes)
    {
        let body = serde_json::to_vec(&reply).unwrap_or_default();
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    response
}
