//! Issue 31, part 4: what the HTTP front's cheaper path keeps. `/mcp` answers a request rmcp cannot type with its id
//! (the middleware reads the body only after rmcp refused it), on the aggregated endpoint and a per-server one, while
//! typed messages are rmcp's to answer; the router serves every connection without copying its routes.

use std::path::PathBuf;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::http::{self, Security};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::harness;

/// POSTs `message` to `path` as an MCP client would (both media types accepted); the status and the JSON body.
async fn post(router: axum::Router, path: &str, message: &Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header(header::HOST, "127.0.0.1:3424")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .body(Body::from(message.to_string()))
        .unwrap();
    let response = router.oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

#[tokio::test]
async fn a_request_rmcp_cannot_type_is_answered_with_its_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::in_dir(dir.path());
    config.guard_exe = Some(PathBuf::from(harness::BIN));
    let app = App::open(config).expect("open the app");
    let router = http::router(app.clone(), Security::loopback());
    let spec = json!({"name": "fx", "command": harness::fixture(), "args": ["--name", "fx"]});
    let (status, body) = post(router.clone(), "/api/servers", &spec).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    for path in ["/mcp", "/mcp/servers/fx"] {
        // `params` that is not an object: invalid params, under the request's id.
        let (status, body) = post(
            router.clone(),
            path,
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 5}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["id"], 7, "{path}: {body}");
        assert_eq!(body["error"]["code"], -32602, "{path}: {body}");
        // A method that is not a string: invalid request, under its string id.
        let (status, body) = post(
            router.clone(),
            path,
            &json!({"jsonrpc": "2.0", "id": "x", "method": 5}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["id"], "x", "{path}: {body}");
        assert_eq!(body["error"]["code"], -32600, "{path}: {body}");
        // An untyped notification deserves no answer: rmcp's own refusal stands.
        let (status, body) = post(
            router.clone(),
            path,
            &json!({"jsonrpc": "2.0", "method": 5}),
        )
        .await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path}: {body}");
    }
    // A typed request is rmcp's: `initialize` opens a session (the middleware answers nothing itself).
    let (status, body) = post(
        router.clone(),
        "/mcp",
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.proxy.shutdown().await;
}
