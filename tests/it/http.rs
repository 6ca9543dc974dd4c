//! The dashboard server. First through the router without a socket (REST round trips, errors, limits, the OpenAPI
//! document against the routes, Host/Origin checks, the token), then end to end on real listeners: WebSocket snapshots
//! and live updates, MCP over Streamable HTTP with list_changed, changes made by another process, the token, two `mcp`
//! processes racing for the port, and the dashboard in headless Chromium.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::http::{self, Security};
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use futures::{SinkExt, StreamExt};
use rmcp::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio_tungstenite::tungstenite;
use tower::ServiceExt as _;

use crate::harness::{self, BIN, TestClient};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

fn fixture(name: &str, flags: &[&str]) -> Value {
    let mut args = vec!["--name".to_owned(), name.into()];
    args.extend(flags.iter().map(|s| s.to_string()));
    json!({"name": name, "command": harness::fixture(), "args": args, "description": format!("fixture {name}")})
}

// ---------- router tests: no socket ----------

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
    text: String,
}

async fn request(router: &axum::Router, req: Request<Body>) -> Answer {
    let resp = router.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), 64 * 1024 * 1024)
        .await
        .expect("body");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
    Answer {
        status,
        headers,
        body,
        text,
    }
}

fn req(method: &str, path: &str, body: Option<&Value>) -> Request<Body> {
    let b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "127.0.0.1:3424");
    match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

async fn send(router: &axum::Router, method: &str, path: &str, body: Option<Value>) -> Answer {
    request(router, req(method, path, body.as_ref())).await
}

#[track_caller]
fn expect(a: &Answer, status: u16) -> &Value {
    assert_eq!(a.status.as_u16(), status, "{}", harness::short(&a.body));
    &a.body
}

#[track_caller]
fn expect_error(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status.as_u16(), status, "{}", a.text);
    assert_eq!(a.body["code"], code, "{}", a.text);
    assert!(
        a.body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{}",
        a.text
    );
}

#[tokio::test]
async fn rest_round_trip_without_a_socket() {
    let dir = tmp();
    let app = app_in(dir.path());
    let r = http::router(app.clone(), Security::loopback());

    let a = send(&r, "GET", "/health", None).await;
    assert_eq!(expect(&a, 200)["status"], "ok");
    assert_eq!(a.body["pid"], std::process::id());

    let a = send(&r, "POST", "/api/servers", Some(fixture("fx", &[]))).await;
    let id = expect(&a, 201)["id"].as_i64().expect("id");
    expect_error(
        &send(&r, "POST", "/api/servers", Some(fixture("fx", &[]))).await,
        409,
        "conflict",
    );
    expect_error(
        &send(
            &r,
            "POST",
            "/api/servers",
            Some(json!({"name": "bad name", "command": "x"})),
        )
        .await,
        400,
        "invalid_input",
    );
    expect_error(
        &send(
            &r,
            "POST",
            "/api/servers",
            Some(json!({"name": "t", "command": "x", "call_timeout_ms": 0})),
        )
        .await,
        400,
        "invalid_input",
    );
    assert!(
        app.registry.get("t").is_err(),
        "a refused limit must not leave a server behind"
    );

    let list = send(&r, "GET", "/api/servers", None).await;
    let rows = expect(&list, 200).as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["name"].clone(), rows[0]["running"].clone()),
        (json!("fx"), json!(false))
    );
    let hits = send(
        &r,
        "GET",
        "/api/servers?query=fixture&installed=true&source=manual",
        None,
    )
    .await;
    assert_eq!(expect(&hits, 200).as_array().unwrap().len(), 1);
    let none = send(&r, "GET", "/api/servers?query=nothing-like-it", None).await;
    assert_eq!(expect(&none, 200).as_array().unwrap().len(), 0);
    expect_error(
        &send(&r, "GET", "/api/servers?installed=maybe", None).await,
        400,
        "invalid_input",
    );
    expect_error(
        &send(&r, "GET", "/api/servers?source=nope", None).await,
        400,
        "invalid_input",
    );

    let by_id = send(&r, "GET", &format!("/api/servers/{id}"), None).await;
    let by_name = send(&r, "GET", "/api/servers/fx", None).await;
    assert_eq!(expect(&by_id, 200)["name"], "fx");
    assert_eq!(expect(&by_name, 200)["id"], id);
    expect_error(
        &send(&r, "GET", "/api/servers/999", None).await,
        404,
        "not_found",
    );
    expect_error(
        &send(&r, "GET", "/api/servers/no-such", None).await,
        404,
        "not_found",
    );

    let upd = send(
        &r,
        "PUT",
        "/api/servers/fx",
        Some(json!({"description": "changed"})),
    )
    .await;
    assert_eq!(expect(&upd, 200)["description"], "changed");
    expect_error(
        &send(&r, "PUT", "/api/servers/fx", Some(json!({"nonsense": 1}))).await,
        400,
        "invalid_input",
    );

    // Not active yet: a call is refused as unavailable.
    let call = |tool: &str, args: Value| json!({"tool": tool, "args": args});
    expect_error(
        &send(
            &r,
            "POST",
            "/api/servers/fx/call",
            Some(call("echo", json!({"text": "x"}))),
        )
        .await,
        503,
        "unavailable",
    );

    let act = send(&r, "POST", "/api/servers/fx/activate", None).await;
    assert_eq!(expect(&act, 200)["status"], "activated");
    assert!(
        act.body["tool_count"].as_u64().unwrap() >= 10,
        "{}",
        act.text
    );
    assert_eq!(act.body["tools"][0]["call_as"], "fx__echo");
    let again = send(&r, "POST", "/api/servers/fx/activate", None).await;
    assert_eq!(expect(&again, 200)["status"], "already_active");
    let detail = send(&r, "GET", "/api/servers/fx", None).await;
    assert_eq!(expect(&detail, 200)["running"], true);
    assert!(
        detail.body["child"]["pid"].as_u64().is_some(),
        "{}",
        detail.text
    );
    assert!(
        detail.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo" && t["input_schema"]["properties"]["text"].is_object())
    );

    let echo = send(
        &r,
        "POST",
        "/api/servers/fx/call",
        Some(call("echo", json!({"text": "hi over REST"}))),
    )
    .await;
    assert_eq!(expect(&echo, 200)["content"][0]["text"], "hi over REST");
    assert_eq!(echo.body["isError"], false);
    let fail = send(
        &r,
        "POST",
        "/api/servers/fx/call",
        Some(json!({"tool": "fail", "arguments": {"message": "boom"}})),
    )
    .await;
    assert_eq!(
        expect(&fail, 200)["isError"],
        true,
        "a tool error is a result, not an HTTP error"
    );
    expect_error(
        &send(
            &r,
            "POST",
            "/api/servers/fx/call",
            Some(call("no_such_tool", json!({}))),
        )
        .await,
        404,
        "not_found",
    );
    expect_error(
        &send(
            &r,
            "POST",
            "/api/servers/fx/call",
            Some(json!({"args": {}})),
        )
        .await,
        400,
        "invalid_input",
    );

    let logs = send(&r, "GET", "/api/logs?limit=1", None).await;
    assert_eq!(expect(&logs, 200)["total"], 2);
    assert_eq!(logs.body["entries"].as_array().unwrap().len(), 1);
    assert_eq!(logs.body["entries"][0]["tool"], "fail");
    assert_eq!(logs.body["entries"][0]["success"], false);

    app.proxy.flush_metrics().await;
    let m = send(&r, "GET", "/api/servers/fx/metrics", None).await;
    let echo_row = expect(&m, 200)
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool_name"] == "echo")
        .cloned();
    assert_eq!(echo_row.expect("echo metrics")["call_count"], 1);
    let overview = send(&r, "GET", "/api/metrics", None).await;
    assert_eq!(expect(&overview, 200)[0]["total_calls"], 2);
    let prom = send(&r, "GET", "/metrics", None).await;
    assert_eq!(prom.status, 200);
    assert!(
        prom.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    assert!(
        prom.text
            .contains("agent_discover_tool_calls_total{server=\"fx\",tool=\"echo\"} 1\n"),
        "{}",
        prom.text
    );
    assert!(
        prom.text
            .contains("agent_discover_tool_call_errors_total{server=\"fx\",tool=\"fail\"} 1\n")
    );
    assert!(
        prom.text.contains("agent_discover_active_servers 1\n")
            && prom.text.contains("agent_discover_children 1\n")
    );

    // Secrets: masked out, never in clear.
    let set = send(
        &r,
        "PUT",
        "/api/servers/fx/secrets/API_KEY",
        Some(json!({"value": "sk-test-123456"})),
    )
    .await;
    assert_eq!(expect(&set, 200)["masked_value"], "sk-t****");
    let listed = send(&r, "GET", &format!("/api/servers/{id}/secrets"), None).await;
    assert_eq!(expect(&listed, 200)[0]["key"], "API_KEY");
    assert!(!listed.text.contains("sk-test-123456") && !set.text.contains("sk-test-123456"));
    expect_error(
        &send(
            &r,
            "PUT",
            "/api/servers/fx/secrets/API_KEY",
            Some(json!({"value": ""})),
        )
        .await,
        400,
        "invalid_input",
    );
    expect_error(
        &send(
            &r,
            "PUT",
            "/api/servers/fx/secrets/bad%20key",
            Some(json!({"value": "v"})),
        )
        .await,
        400,
        "invalid_input",
    );
    expect(
        &send(&r, "DELETE", "/api/servers/fx/secrets/API_KEY", None).await,
        200,
    );
    expect_error(
        &send(&r, "DELETE", "/api/servers/fx/secrets/API_KEY", None).await,
        404,
        "not_found",
    );

    let health = send(&r, "POST", "/api/servers/fx/health", None).await;
    assert_eq!(expect(&health, 200)["status"], "healthy");
    let status = send(&r, "GET", "/api/status", None).await;
    assert_eq!(expect(&status, 200)["active_count"], 1);
    assert_eq!(status.body["servers"][0]["name"], "fx");

    let d = send(&r, "POST", "/api/servers/fx/deactivate", None).await;
    assert_eq!(expect(&d, 200)["status"], "deactivated");
    let d = send(&r, "POST", "/api/servers/fx/deactivate", None).await;
    assert_eq!(expect(&d, 200)["status"], "not_active");

    // A health check of a stopped server starts it briefly and leaves it stopped.
    let health = send(&r, "POST", "/api/servers/fx/health", None).await;
    assert_eq!(expect(&health, 200)["status"], "healthy");
    assert!(!app.proxy.is_active("fx"));
    let row = send(&r, "GET", "/api/servers/fx", None).await;
    assert_eq!(
        (
            row.body["health_status"].clone(),
            row.body["active"].clone()
        ),
        (json!("healthy"), json!(false))
    );

    // A server that cannot start is unhealthy, and counted.
    expect(
        &send(
            &r,
            "POST",
            "/api/servers",
            Some(fixture("broken", &["--exit-before-init"])),
        )
        .await,
        201,
    );
    let sick = send(&r, "POST", "/api/servers/broken/health", None).await;
    assert_eq!(expect(&sick, 200)["status"], "unhealthy");
    assert!(
        sick.body["error"]
            .as_str()
            .unwrap()
            .contains("API key required"),
        "{}",
        sick.text
    );
    let row = send(&r, "GET", "/api/servers/broken", None).await;
    assert_eq!(row.body["error_count"], 1);

    assert_eq!(
        expect(&send(&r, "DELETE", "/api/logs", None).await, 200)["status"],
        "cleared"
    );
    assert_eq!(send(&r, "GET", "/api/logs", None).await.body["total"], 0);

    assert_eq!(
        expect(&send(&r, "DELETE", "/api/servers/fx", None).await, 200)["status"],
        "deleted"
    );
    expect_error(
        &send(&r, "GET", "/api/servers/fx", None).await,
        404,
        "not_found",
    );
    app.proxy.shutdown().await;
}

#[tokio::test]
async fn malformed_oversized_and_unrouted_requests_answer_json() {
    let dir = tmp();
    let r = http::router(app_in(dir.path()), Security::loopback());
    let big =
        json!({"name": "big", "command": "x", "description": "d".repeat(http::BODY_LIMIT + 1)});
    expect_error(
        &send(&r, "POST", "/api/servers", Some(big)).await,
        413,
        "payload_too_large",
    );
    let raw = |ct: &str, body: &str| {
        Request::builder()
            .method("POST")
            .uri("/api/servers")
            .header(header::HOST, "localhost:3424")
            .header(header::CONTENT_TYPE, ct)
            .body(Body::from(body.to_owned()))
            .unwrap()
    };
    expect_error(
        &request(&r, raw("application/json", "{not json")).await,
        400,
        "invalid_input",
    );
    expect_error(
        &request(&r, raw("text/plain", "{}")).await,
        415,
        "unsupported_media_type",
    );
    expect_error(
        &send(&r, "PATCH", "/api/servers", None).await,
        405,
        "method_not_allowed",
    );
    expect_error(
        &send(&r, "GET", "/api/nothing/here", None).await,
        404,
        "not_found",
    );
    expect_error(
        &send(&r, "GET", "/api/logs?limit=lots", None).await,
        400,
        "invalid_input",
    );

    // The dashboard's files are served from the binary, with a strict content security policy.
    let page = send(&r, "GET", "/", None).await;
    assert_eq!(page.status, 200);
    assert!(page.text.contains("<title>agent-discover</title>"));
    assert!(
        page.headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("default-src 'self'")
    );
    assert_eq!(page.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    for (file, ct) in [
        ("/app.js", "text/javascript"),
        ("/schema-form.js", "text/javascript"),
        ("/style.css", "text/css"),
    ] {
        let a = send(&r, "GET", file, None).await;
        assert_eq!(a.status, 200, "{file}");
        assert!(
            a.headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with(ct),
            "{file}"
        );
    }
    expect_error(&send(&r, "GET", "/nope.js", None).await, 404, "not_found");
}

#[tokio::test]
async fn openapi_document_matches_the_routes() {
    let dir = tmp();
    let r = http::router(app_in(dir.path()), Security::loopback());
    let doc = send(&r, "GET", "/api/openapi.json", None).await;
    assert_eq!(expect(&doc, 200)["openapi"], "3.1.0");
    let paths = doc.body["paths"].as_object().unwrap();
    for required in [
        "/health",
        "/api/servers",
        "/api/servers/{id}",
        "/api/servers/{id}/activate",
        "/api/servers/{id}/deactivate",
        "/api/servers/{id}/secrets",
        "/api/servers/{id}/secrets/{key}",
        "/api/servers/{id}/health",
        "/api/servers/{id}/metrics",
        "/api/metrics",
        "/api/servers/{id}/call",
        "/api/logs",
        "/api/status",
        "/api/openapi.json",
        "/ws",
        "/mcp",
        "/metrics",
    ] {
        assert!(
            paths.contains_key(required),
            "{required} missing from the document"
        );
    }
    let methods = ["get", "post", "put", "delete"];
    for (path, ops) in paths {
        if path == "/mcp" {
            continue; // rmcp's service; exercised end to end below
        }
        let mut concrete = path
            .replace("{id}", "no-such-server")
            .replace("{key}", "KEY");
        if path == "/api/browse" {
            // A bad parameter is refused before any marketplace request: tests talk to 127.0.0.1 only.
            concrete.push_str("?limit=not-a-number");
        }
        for m in methods {
            if path == "/api/registry/events" && m == "get" {
                continue; // an event stream that never ends: http::registry_events_over_sse reads it
            }
            let a = send(&r, &m.to_uppercase(), &concrete, None).await;
            if ops.get(m).is_some() {
                assert_ne!(
                    a.status, 405,
                    "{m} {path} is documented but not routed: {}",
                    a.text
                );
                assert!(
                    !a.text.contains("no route"),
                    "{m} {path} is documented but not routed: {}",
                    a.text
                );
                let schema = &ops[m]["responses"];
                assert!(
                    schema.get("default").is_some(),
                    "{m} {path} documents no error shape"
                );
            } else {
                assert_eq!(
                    a.status, 405,
                    "{m} {path} is routed but not documented: {}",
                    a.text
                );
            }
        }
    }
    // Every component a path refers to exists.
    let refs: Vec<String> = doc
        .text
        .match_indices("#/components/schemas/")
        .map(|(i, _)| doc.text[i + 21..].split('"').next().unwrap().to_owned())
        .collect();
    for name in refs {
        assert!(
            doc.body["components"]["schemas"].get(&name).is_some(),
            "schema {name} is referenced but not defined"
        );
    }
}

#[tokio::test]
async fn foreign_host_and_origin_are_refused() {
    let dir = tmp();
    let r = http::router(app_in(dir.path()), Security::loopback());
    let with = |host: Option<&str>, origin: Option<&str>, path: &str| {
        let mut b = Request::builder().uri(path);
        if let Some(h) = host {
            b = b.header(header::HOST, h);
        }
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::empty()).unwrap()
    };
    // DNS rebinding: a foreign name resolving to 127.0.0.1 still carries its own Host.
    expect_error(
        &request(&r, with(Some("evil.example:3424"), None, "/api/servers")).await,
        403,
        "forbidden",
    );
    expect_error(
        &request(&r, with(Some("evil.example:3424"), None, "/")).await,
        403,
        "forbidden",
    );
    expect_error(
        &request(&r, with(None, None, "/health")).await,
        400,
        "invalid_input",
    );
    // A page from another origin, even on this host.
    expect_error(
        &request(
            &r,
            with(
                Some("127.0.0.1:3424"),
                Some("http://evil.example"),
                "/api/servers",
            ),
        )
        .await,
        403,
        "forbidden",
    );
    expect_error(
        &request(
            &r,
            with(
                Some("127.0.0.1:3424"),
                Some("http://127.0.0.1:9999"),
                "/api/servers",
            ),
        )
        .await,
        403,
        "forbidden",
    );
    expect_error(
        &request(
            &r,
            with(Some("127.0.0.1:3424"), Some("null"), "/api/servers"),
        )
        .await,
        403,
        "forbidden",
    );
    // The MCP endpoint is behind the same check.
    expect_error(
        &request(&r, with(Some("evil.example"), None, "/mcp")).await,
        403,
        "forbidden",
    );
    // The dashboard itself, and clients that send no Origin.
    assert_eq!(
        request(
            &r,
            with(
                Some("127.0.0.1:3424"),
                Some("http://127.0.0.1:3424"),
                "/api/servers"
            )
        )
        .await
        .status,
        200
    );
    assert_eq!(
        request(
            &r,
            with(
                Some("localhost:3424"),
                Some("http://localhost:3424"),
                "/health"
            )
        )
        .await
        .status,
        200
    );
    assert_eq!(
        request(&r, with(Some("[::1]:3424"), None, "/health"))
            .await
            .status,
        200
    );
    // No wildcard CORS, ever.
    let a = request(&r, with(Some("127.0.0.1:3424"), None, "/health")).await;
    assert!(a.headers.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
}

#[tokio::test]
async fn beyond_loopback_every_request_needs_the_token() {
    let dir = tmp();
    let ip: std::net::IpAddr = "0.0.0.0".parse().unwrap();
    assert!(
        Security::for_bind(ip, &[], None).is_err(),
        "a non-loopback bind without a token must be refused"
    );
    let sec = Security::for_bind(ip, &["box.lan".into()], Some("s3cret-token".into())).unwrap();
    let r = http::router(app_in(dir.path()), sec);
    let get = |path: &str, auth: Option<(&str, &str)>| {
        let mut b = Request::builder()
            .uri(path)
            .header(header::HOST, "box.lan:3424");
        if let Some((k, v)) = auth {
            b = b.header(k, v);
        }
        b.body(Body::empty()).unwrap()
    };
    for path in [
        "/health",
        "/",
        "/api/servers",
        "/metrics",
        "/ws",
        "/mcp",
        "/app.js",
    ] {
        let a = request(&r, get(path, None)).await;
        expect_error(&a, 401, "unauthorized");
        assert_eq!(a.headers[header::WWW_AUTHENTICATE], "Bearer", "{path}");
    }
    expect_error(
        &request(&r, get("/health", Some(("authorization", "Bearer wrong")))).await,
        401,
        "unauthorized",
    );
    assert_eq!(
        request(
            &r,
            get("/health", Some(("authorization", "Bearer s3cret-token")))
        )
        .await
        .status,
        200
    );
    assert_eq!(
        request(
            &r,
            get(
                "/api/servers",
                Some(("cookie", "x=1; agent_discover_token=s3cret-token"))
            )
        )
        .await
        .status,
        200
    );
    // The printed URL carries the token once; it becomes a strict cookie and leaves the address bar.
    let a = request(&r, get("/?token=s3cret-token", None)).await;
    assert_eq!(a.status, 303);
    assert_eq!(a.headers[header::LOCATION], "/");
    let cookie = a.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.contains("agent_discover_token=s3cret-token")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
    );
    expect_error(
        &request(&r, get("/?token=wrong", None)).await,
        401,
        "unauthorized",
    );
    // Host names are still checked.
    let foreign = Request::builder()
        .uri("/health")
        .header(header::HOST, "evil.example")
        .header("authorization", "Bearer s3cret-token")
        .body(Body::empty())
        .unwrap();
    expect_error(&request(&r, foreign).await, 403, "forbidden");
}

// ---------- end to end: real listeners ----------

/// `agent-discover serve --port 0` on a data dir: the URL it printed, and its stderr so far.
pub(crate) struct Served {
    child: tokio::process::Child,
    pub(crate) url: String,
    stderr: Arc<Mutex<Vec<String>>>,
    /// Signalled for every stderr line.
    stderr_line: Arc<tokio::sync::Notify>,
}

pub(crate) async fn serve(dir: &Path, extra: &[&str]) -> Served {
    serve_env(dir, extra, &[]).await
}

/// A marketplace of one server (the stub registry of the install tests) for a `serve` process.
async fn marketplace_env(dir: &Path) -> Vec<(&'static str, String)> {
    let base = crate::install::stub().await;
    vec![
        ("AGENT_DISCOVER_MCP_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_NPM_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_PYPI_URL", base),
        ("XDG_CONFIG_HOME", dir.join("config").display().to_string()),
    ]
}

pub(crate) async fn serve_env(dir: &Path, extra: &[&str], env: &[(&str, String)]) -> Served {
    serve_echoing(dir, extra, env, true).await
}

/// `serve` with `env`; its stderr is kept for [`Served::stderr_text`] and, when `echo`, also copied to the test's
/// output as it comes (a test whose failure message carries the log passes `false`, so that message leads its output).
async fn serve_echoing(dir: &Path, extra: &[&str], env: &[(&str, String)], echo: bool) -> Served {
    let mut args = vec!["serve", "--port", "0"];
    args.extend_from_slice(extra);
    let mut cmd = harness::command(dir, &args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agent-discover serve");
    let pid = child.id().unwrap_or(0);
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let stderr_line = Arc::new(tokio::sync::Notify::new());
    let (sink, notify) = (stderr.clone(), stderr_line.clone());
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(l)) = lines.next_line().await {
            if echo {
                eprintln!("[serve {pid}] {l}");
            }
            sink.lock().unwrap().push(l);
            notify.notify_waiters();
        }
    });
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("serve printed no URL within 30 s")
        .expect("read stdout")
        .expect("serve exited before printing its URL");
    assert!(
        first.starts_with("http://127.0.0.1:") && first.ends_with('/'),
        "{first}"
    );
    Served {
        child,
        url: first.trim_end_matches('/').to_owned(),
        stderr,
        stderr_line,
    }
}

impl Served {
    pub(crate) fn ws_url(&self) -> String {
        format!("{}/ws", self.url.replacen("http://", "ws://", 1))
    }

    /// SIGTERM, then it must exit cleanly and promptly (open WebSockets and MCP streams included).
    pub(crate) async fn stop(self) {
        self.stop_within(Duration::from_secs(10)).await
    }

    /// SIGTERM, then it must exit cleanly within `limit`.
    pub(crate) async fn stop_within(mut self, limit: Duration) {
        let pid = self.child.id().expect("running") as i32;
        // SAFETY: kill on a pid we spawned and have not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("serve did not stop within {limit:?} of SIGTERM"))
            .expect("wait");
        assert!(status.success(), "serve exited with {status}");
    }

    /// Like [`Served::stop_within`], returning every stderr line it wrote.
    pub(crate) async fn stop_keeping_log(self, limit: Duration) -> Vec<String> {
        let lines = self.stderr.clone();
        self.stop_within(limit).await;
        lines.lock().unwrap().clone()
    }

    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// Waits (bounded) until stderr has a line containing `needle`.
    async fn stderr_line_with(&self, needle: &str) {
        let wait = async {
            loop {
                let next = self.stderr_line.notified();
                if self.stderr_text().contains(needle) {
                    return;
                }
                next.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), wait)
            .await
            .unwrap_or_else(|_| panic!("stderr never said {needle:?}: {}", self.stderr_text()));
    }
}

pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub(crate) async fn ws_connect(
    url: &str,
    headers: &[(&str, &str)],
) -> Result<Ws, tungstenite::Error> {
    use tungstenite::client::IntoClientRequest;
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    tokio_tungstenite::connect_async(req)
        .await
        .map(|(ws, _)| ws)
}

/// The next JSON message that satisfies `pred`, within `limit`.
pub(crate) async fn next_message(
    ws: &mut Ws,
    limit: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, ws.next())
            .await
            .unwrap_or_else(|_| panic!("no matching WebSocket message within {limit:?}"))
            .expect("the WebSocket closed")
            .expect("WebSocket error");
        if let tungstenite::Message::Text(t) = msg {
            let v: Value = serde_json::from_str(&t).expect("JSON message");
            if pred(&v) {
                return v;
            }
        }
    }
}

fn server_in<'a>(state: &'a Value, name: &str) -> Option<&'a Value> {
    state["servers"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)
}

pub(crate) async fn mcp_client(url: &str, token: Option<&str>) -> harness::Agent {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp"));
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
    let seen = Arc::new(harness::Seen::default());
    let client = TestClient {
        seen: seen.clone(),
        sampling_reply: None,
    }
    .serve(transport)
    .await
    .expect("MCP initialize over Streamable HTTP");
    harness::Agent {
        client,
        seen,
        pid: 0,
    }
}

#[tokio::test]
async fn websocket_snapshots_live_log_and_mcp_over_http_with_list_changed() {
    let dir = tmp();
    let served = serve(dir.path(), &[]).await;
    let http = reqwest::Client::new();
    let api = |p: &str| format!("{}{p}", served.url);

    let created = http
        .post(api("/api/servers"))
        .json(&fixture("fx", &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    let mut ws = ws_connect(&served.ws_url(), &[])
        .await
        .expect("WebSocket connect");
    let first = next_message(&mut ws, Duration::from_secs(10), |v| v["type"] == "state").await;
    let seq0 = first["seq"].as_u64().expect("seq");
    assert!(seq0 >= 1);
    assert_eq!(first["version"], env!("CARGO_PKG_VERSION"));
    // The snapshot on connect may predate the registration by a moment; the next one then follows.
    let first = match server_in(&first, "fx") {
        Some(_) => first,
        None => {
            next_message(&mut ws, Duration::from_secs(10), |v| {
                v["type"] == "state" && server_in(v, "fx").is_some()
            })
            .await
        }
    };
    let seq0 = first["seq"].as_u64().unwrap().max(seq0);
    assert_eq!(server_in(&first, "fx").unwrap()["running"], false);

    let agent = mcp_client(&served.url, None).await;
    assert_eq!(agent.tool_names().await, ["registry", "run_script"]);

    // Activate through REST: a new snapshot (higher seq) shows it running with its tools; MCP clients hear list_changed.
    let act: Value = http
        .post(api("/api/servers/fx/activate"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(act["status"], "activated");
    let running = next_message(&mut ws, Duration::from_secs(10), |v| {
        v["type"] == "state" && server_in(v, "fx").is_some_and(|s| s["running"] == true)
    })
    .await;
    assert!(running["seq"].as_u64().unwrap() > seq0);
    let fx = server_in(&running, "fx").unwrap();
    assert!(
        fx["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo" && t["input_schema"].is_object())
    );
    assert_eq!(running["active"][0]["name"], "fx");
    agent.wait_list_changed(1).await;
    assert!(agent.tool_names().await.contains(&"fx__echo".to_owned()));

    // A call over MCP-over-HTTP and one over REST each arrive as a live log entry.
    let r = agent
        .call("fx__echo", json!({"text": "over streamable http"}))
        .await;
    assert_eq!(harness::text(&r), "over streamable http");
    let entry = next_message(&mut ws, Duration::from_secs(10), |v| {
        v["type"] == "log_entry"
    })
    .await;
    assert_eq!(
        (
            entry["entry"]["tool"].clone(),
            entry["entry"]["success"].clone()
        ),
        (json!("echo"), json!(true))
    );
    let r = http
        .post(api("/api/servers/fx/call"))
        .json(&json!({"tool": "add", "args": {"a": 2, "b": 40}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let entry = next_message(&mut ws, Duration::from_secs(10), |v| {
        v["type"] == "log_entry"
    })
    .await;
    assert_eq!(entry["entry"]["tool"], "add");
    assert_eq!(entry["entry"]["args"], json!({"a": 2, "b": 40}));

    // The CLI's status shows the serving process's call log (call logs live in each process's memory).
    let port = served.url.rsplit(':').next().unwrap().to_owned();
    let out = harness::command(dir.path(), &["status", "--json", "--port", &port])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools: Vec<&str> = status["calls"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no call log in {status}"))
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["add", "echo"], "{status}");
    assert!(status["search"]["provider"].is_string(), "{status}");
    // Another database's CLI does not take this server's log for its own.
    let other = tmp();
    let out = harness::command(other.path(), &["status", "--json", "--port", &port])
        .output()
        .await
        .unwrap();
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        status["calls"]["unavailable"]
            .as_str()
            .is_some_and(|u| u.contains("another database")),
        "{status}"
    );

    // A refresh resends the newest snapshot.
    ws.send(tungstenite::Message::Text(r#"{"type":"refresh"}"#.into()))
        .await
        .unwrap();
    let again = next_message(&mut ws, Duration::from_secs(10), |v| v["type"] == "state").await;
    assert!(again["seq"].as_u64().unwrap() >= running["seq"].as_u64().unwrap());

    // A WebSocket from a foreign page is refused at the handshake.
    match ws_connect(&served.ws_url(), &[("origin", "http://evil.example")]).await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 403),
        other => panic!(
            "a foreign Origin was not refused: {:?}",
            other.map(|_| "connected")
        ),
    }
    // The same page, from this server, is fine.
    let host = served.url.trim_start_matches("http://").to_owned();
    ws_connect(
        &served.ws_url(),
        &[("origin", &served.url), ("host", &host)],
    )
    .await
    .expect("same-origin WebSocket");

    let d: Value = http
        .post(api("/api/servers/fx/deactivate"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(d["status"], "deactivated");
    agent.wait_list_changed(2).await;
    assert_eq!(agent.tool_names().await, ["registry", "run_script"]);
    let metrics = http
        .get(api("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("agent_discover_tool_calls_total{server=\"fx\",tool=\"echo\"} 1"),
        "{metrics}"
    );

    // Stopping with a WebSocket and an MCP session open still exits at once and cleanly.
    served.stop().await;
    drop(ws);
    agent.stop().await;
}

#[tokio::test]
async fn marketplace_browse_install_and_prereqs_over_rest() {
    let dir = tmp();
    let env = marketplace_env(dir.path()).await;
    let served = serve_env(dir.path(), &[], &env).await;
    let http = reqwest::Client::new();
    let api = |p: &str| format!("{}{p}", served.url);

    let found: Value = http
        .get(api("/api/browse?query=weather"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = &found["servers"][0];
    assert_eq!(row["key"], "registry:io.github.example/weather", "{found}");
    assert_eq!(
        (row["install_method"].as_str(), row["runtime"].as_str()),
        (Some("npx"), Some("node"))
    );
    assert_eq!(row["packages"], json!(["@example/weather-mcp"]));
    assert!(
        found["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "registry" && s["ok"] == true),
        "{found}"
    );
    let r = http
        .get(api("/api/browse?limit=lots"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    let pre: Value = http
        .get(api("/api/prereqs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for tool in ["npx", "uvx", "uv", "docker"] {
        assert!(pre[tool].is_boolean(), "{pre}");
        assert_eq!(
            pre[tool].as_bool().unwrap(),
            pre["versions"][tool].is_string(),
            "{pre}"
        );
    }

    // A required secret is missing: nothing is registered, the answer says what to send.
    let install = |inputs: Value| {
        http.post(api("/api/install"))
            .json(&json!({"name": "registry:io.github.example/weather", "inputs": inputs}))
            .send()
    };
    let r = install(json!({})).await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["status"].as_str(), body["missing"][0]["name"].as_str()),
        (Some("needs_input"), Some("WEATHER_API_KEY")),
        "{body}"
    );
    assert_eq!(body["missing"][0]["is_secret"], true);
    let list: Value = http
        .get(api("/api/servers"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list, json!([]));

    let r = install(json!({"WEATHER_API_KEY": "wk-1234567"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        (body["status"].as_str(), body["command"].as_str()),
        (Some("installed"), Some("npx")),
        "{body}"
    );
    let name = body["server"].as_str().unwrap();
    let secrets: Value = http
        .get(api(&format!("/api/servers/{name}/secrets")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(secrets[0]["masked_value"], "wk-1****");
    let server: Value = http
        .get(api(&format!("/api/servers/{name}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (server["source"].as_str(), server["package_name"].as_str()),
        (Some("registry"), Some("@example/weather-mcp")),
        "{server}"
    );

    // Hostile names are refused before any request or command line sees them.
    let r = http
        .post(api("/api/install"))
        .json(&json!({"name": "x; rm -rf /"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let r = install(json!({"WEATHER_API_KEY": "wk-1234567"}))
        .await
        .unwrap();
    assert_eq!(r.status(), 409, "installing twice is a conflict");
    served.stop().await;
}

#[tokio::test]
async fn changes_by_another_process_reach_the_dashboard_without_polling() {
    let dir = tmp();
    let served = serve(dir.path(), &[]).await;
    let mut ws = ws_connect(&served.ws_url(), &[])
        .await
        .expect("WebSocket connect");
    let first = next_message(&mut ws, Duration::from_secs(10), |v| v["type"] == "state").await;
    assert_eq!(first["servers"], json!([]));

    // Another agent-discover process (the CLI) registers a server in the same database.
    let started = Instant::now();
    let out = harness::command(dir.path(), &["add", "other", "--", harness::fixture()])
        .output()
        .await
        .expect("run agent-discover add");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = next_message(&mut ws, Duration::from_secs(10), |v| {
        v["type"] == "state" && server_in(v, "other").is_some()
    })
    .await;
    // Pushed by the file watch, well before the fallback timer would fire.
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(4500),
        "took {took:?}: the change was polled, not watched; serve said:\n{}",
        served.stderr_text()
    );
    assert!(seen["seq"].as_u64().unwrap() > first["seq"].as_u64().unwrap());
    served.stop().await;
}

#[tokio::test]
async fn token_mode_end_to_end_prints_the_token_once() {
    let dir = tmp();
    let served = serve(dir.path(), &["--require-token"]).await;
    let token =
        std::fs::read_to_string(dir.path().join(http::security::TOKEN_FILE)).expect("token file");
    let token = token.trim().to_owned();
    assert_eq!(token.len(), 64);
    served.stderr_line_with(&token).await;

    let http = reqwest::Client::new();
    let health = format!("{}/health", served.url);
    assert_eq!(http.get(&health).send().await.unwrap().status(), 401);
    assert_eq!(
        http.get(&health)
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    match ws_connect(&served.ws_url(), &[]).await {
        Err(tungstenite::Error::Http(resp)) => assert_eq!(resp.status(), 401),
        other => panic!(
            "a WebSocket without the token was not refused: {:?}",
            other.map(|_| "connected")
        ),
    }
    let bearer = format!("Bearer {token}");
    let mut ws = ws_connect(&served.ws_url(), &[("authorization", &bearer)])
        .await
        .expect("WebSocket with the token");
    next_message(&mut ws, Duration::from_secs(10), |v| v["type"] == "state").await;
    let agent = mcp_client(&served.url, Some(&token)).await;
    assert_eq!(agent.tool_names().await, ["registry", "run_script"]);
    agent.stop().await;
    served.stop().await;

    // Second start: the same token, not printed again.
    let served = serve(dir.path(), &["--require-token"]).await;
    served.stderr_line_with(http::security::TOKEN_FILE).await;
    let text = served.stderr_text();
    assert!(
        !text.contains(&token),
        "the token was printed twice: {text}"
    );
    assert_eq!(
        http.get(format!("{}/health", served.url))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    served.stop().await;
}

#[tokio::test]
async fn two_mcp_processes_race_for_the_dashboard_port() {
    let dir = tmp();
    // The database exists before the race: this test is about the port. (Two processes creating a fresh database at
    // the same instant is the store's concern.)
    let out = harness::command(dir.path(), &["list"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let spawn = || {
        let mut cmd = harness::command(dir.path(), &["mcp"]);
        cmd.env("AGENT_DISCOVER_DASHBOARD", "on")
            .env("AGENT_DISCOVER_PORT", port.to_string());
        let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agent-discover mcp");
        let pid = transport.id().expect("pid");
        async move {
            let seen = Arc::new(harness::Seen::default());
            let client = TestClient {
                seen: seen.clone(),
                sampling_reply: None,
            }
            .serve(transport)
            .await
            .expect("initialize over stdio");
            harness::Agent { client, seen, pid }
        }
    };
    let (a, b) = tokio::join!(spawn(), spawn());
    // Both serve MCP over stdio without error.
    assert_eq!(a.tool_names().await, ["registry", "run_script"]);
    assert_eq!(b.tool_names().await, ["registry", "run_script"]);
    // Exactly one of them serves the dashboard.
    // The leader bound the port before it answered `initialize`, so the port is ready now.
    let health: Value = reqwest::get(format!("http://127.0.0.1:{port}/health"))
        .await
        .expect("no process serves the dashboard port")
        .json()
        .await
        .unwrap();
    let leader = health["pid"].as_u64().unwrap() as u32;
    assert!(
        leader == a.pid || leader == b.pid,
        "leader {leader} is neither {} nor {}",
        a.pid,
        b.pid
    );
    // The follower is fully usable: it registers a server the leader's REST API then shows (one database).
    let follower = if leader == a.pid { &b } else { &a };
    follower.install_fixture("fx", &[], json!({})).await;
    let list: Value = reqwest::get(format!("http://127.0.0.1:{port}/api/servers"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["name"], "fx");
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn dashboard_in_a_real_browser() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "{chromium} is missing: install it with `apt-get install -y chromium` (or set CHROMIUM), as .ci/run does"
    );
    let cache = std::env::var("AGENT_DISCOVER_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join(".ci/cache"));
    let playwright = cache.join("node/node_modules/playwright-core");
    assert!(
        playwright.join("package.json").exists(),
        "{} is missing: run scripts/test.sh, which installs tests/interop/package.json (with playwright-core) into .ci/cache/node",
        playwright.display()
    );
    let dir = tmp();
    let env = marketplace_env(dir.path()).await;
    // Not echoed: a failure's message carries node's steps first, then this log, at the head of the test's output.
    let served = serve_echoing(dir.path(), &[], &env, false).await;
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let mut node = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/dashboard.mjs"))
        .arg(format!("{}/", served.url))
        .arg(&shot)
        .env("FIXTURE_COMMAND", harness::fixture())
        .env("POLICY_DIR", dir.path().join("policies"))
        .env("PLAYWRIGHT_CORE", &playwright)
        .env("CHROMIUM", &chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node (install Node.js 18 or newer)");
    // Its steps are read as they come, so a run that overstays still says how far it got.
    let steps = Arc::new(Mutex::new(String::new()));
    let sink = steps.clone();
    let mut err_lines = tokio::io::BufReader::new(node.stderr.take().unwrap()).lines();
    let reader = tokio::spawn(async move {
        while let Ok(Some(l)) = err_lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    });
    let mut stdout = String::new();
    let mut node_out = node.stdout.take().unwrap();
    let run = async {
        tokio::io::AsyncReadExt::read_to_string(&mut node_out, &mut stdout)
            .await
            .expect("read node's stdout");
        node.wait().await.expect("wait for node")
    };
    let status = tokio::time::timeout(Duration::from_secs(180), run).await;
    if status.is_err() {
        let _ = node.start_kill();
    }
    // Bounded: a browser left behind could hold the pipe open.
    let _ = tokio::time::timeout(Duration::from_secs(5), reader).await;
    let failed = |why: &str| -> String {
        format!(
            "browser test {why}; node's output:\n{}\n--- the served process's log ---\n{}",
            steps.lock().unwrap(),
            served.stderr_text()
        )
    };
    let status = match status {
        Ok(status) => status,
        Err(_) => panic!("{}", failed("took over 180 s")),
    };
    assert!(
        status.success(),
        "{}",
        failed(&format!("failed ({status})"))
    );
    assert_eq!(
        stdout.trim(),
        "dashboard ok",
        "{}",
        failed("printed no verdict")
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "not a real screenshot"
    );
    eprintln!("dashboard screenshot: {}", shot.display());
    served.stop().await;
}

/// Issue 10: `POST /api/config/apply` with an inline client config, then by path; bad input is a 400 naming the field.
#[tokio::test]
async fn rest_config_apply_inline_and_by_path() {
    let dir = tmp();
    let app = app_in(dir.path());
    let r = http::router(app.clone(), Security::loopback());
    let cfg = json!({"mcpServers": {"my tools": {"command": "npx", "args": ["-y", "srv"]}}});
    let a = send(
        &r,
        "POST",
        "/api/config/apply",
        Some(json!({"config": cfg, "format": "cursor"})),
    )
    .await;
    let body = expect(&a, 200);
    assert_eq!(
        body["results"][0],
        json!({"name": "my-tools", "action": "added", "id": "my-tools", "state": "stopped", "toolCount": 0})
    );
    assert_eq!(body["renamed"][0]["from"], "my tools");
    let again = send(
        &r,
        "POST",
        "/api/config/apply",
        Some(json!({"config": cfg, "format": "cursor"})),
    )
    .await;
    assert_eq!(expect(&again, 200)["results"][0]["action"], "unchanged");
    let file = dir.path().join("settings.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"g": {"httpUrl": "http://127.0.0.1:9/mcp"}}}"#,
    )
    .unwrap();
    let by_path = send(
        &r,
        "POST",
        "/api/config/apply",
        Some(json!({"path": file, "format": "gemini"})),
    )
    .await;
    assert_eq!(expect(&by_path, 200)["results"][0]["name"], "g");
    // The file is its servers' origin: a server that left it is removed, the inline (manual) one stays.
    std::fs::write(
        &file,
        r#"{"mcpServers": {"h": {"httpUrl": "http://127.0.0.1:9/mcp"}}}"#,
    )
    .unwrap();
    let replaced = send(&r, "POST", "/api/config/apply", Some(json!({"path": file}))).await;
    assert_eq!(expect(&replaced, 200)["results"][0]["name"], "h");
    assert!(app.registry.get("g").is_err());
    assert_eq!(
        app.registry.get("h").unwrap().origin,
        std::fs::canonicalize(&file).unwrap().display().to_string()
    );
    assert_eq!(app.registry.get("my-tools").unwrap().origin, "manual");
    let bad = send(&r, "POST", "/api/config/apply", Some(json!({"config": {"mcpServers": {"x": {"command": "x", "bogus": 1}}}, "format": "cursor"}))).await;
    expect_error(&bad, 400, "invalid_input");
    assert!(
        bad.text.contains("`x`") && bad.text.contains("`bogus`"),
        "{}",
        bad.text
    );
    let neither = send(
        &r,
        "POST",
        "/api/config/apply",
        Some(json!({"format": "cursor"})),
    )
    .await;
    expect_error(&neither, 400, "invalid_input");
}

/// REST enable/disable: disable stops the child and shows `disabled`; activate is refused; enable answers an
/// `AddServerResult` (`ready` with the tool count) and the list shows `ready`.
#[tokio::test]
async fn rest_enable_and_disable() {
    let dir = tmp();
    let app = app_in(dir.path());
    let r = http::router(app.clone(), Security::loopback());
    expect(
        &send(&r, "POST", "/api/servers", Some(fixture("fx", &[]))).await,
        201,
    );
    let act = send(&r, "POST", "/api/servers/fx/activate", None).await;
    assert_eq!(expect(&act, 200)["state"], "ready");
    let pid = app.proxy.child_status("fx").unwrap().pid.unwrap();
    let off = send(&r, "POST", "/api/servers/fx/disable", None).await;
    assert_eq!(expect(&off, 200)["status"], "disabled");
    assert!(!harness::pid_alive(pid));
    let list = send(&r, "GET", "/api/servers", None).await;
    assert_eq!(expect(&list, 200)[0]["status"], "disabled");
    let refused = send(&r, "POST", "/api/servers/fx/activate", None).await;
    expect_error(&refused, 503, "unavailable");
    let again = send(&r, "POST", "/api/servers/fx/disable", None).await;
    assert_eq!(expect(&again, 200)["status"], "already_disabled");
    let on = send(&r, "POST", "/api/servers/fx/enable", None).await;
    let on = expect(&on, 200);
    assert_eq!(
        (&on["state"], &on["id"]),
        (&json!("ready"), &json!("fx")),
        "{on}"
    );
    assert!(on["toolCount"].as_u64().unwrap() > 0);
    let list = send(&r, "GET", "/api/servers", None).await;
    assert_eq!(expect(&list, 200)[0]["status"], "ready");
    expect_error(
        &send(&r, "POST", "/api/servers/nope/enable", None).await,
        404,
        "not_found",
    );
    let doc = send(&r, "GET", "/api/openapi.json", None).await;
    let doc = expect(&doc, 200);
    assert!(doc["paths"]["/api/servers/{id}/enable"]["post"].is_object());
    assert!(doc["paths"]["/api/servers/{id}/disable"]["post"].is_object());
    app.proxy.shutdown().await;
}

/// SIGTERM while a batch of tools is being embedded (seconds of CPU) stops `serve` at once: the exit does not wait
/// for blocking work, which dropping the runtime would.
#[tokio::test]
async fn serve_stops_at_once_while_tools_are_being_embedded() {
    let dir = tmp();
    let model = agent_discover::embed::find_model_dir(None).unwrap_or_else(|| {
        panic!("the embedding model is not installed: run scripts/install-model.sh or set AGENT_DISCOVER_MODEL_DIR")
    });
    // 256 tools: one embedding batch, many seconds of CPU in a debug build.
    let tools: String = (0..256)
        .map(|i| format!("pay{i}=Pays invoice {i} in euros or dollars and emails the receipt to the billing contact\n"))
        .collect();
    // Outside agent-discover's data directory, which no sandboxed server may read.
    let files = tempfile::tempdir().unwrap();
    let file = files.path().join("tools.txt");
    std::fs::write(&file, tools).unwrap();
    let served = serve_env(
        dir.path(),
        &[],
        &[("AGENT_DISCOVER_MODEL_DIR", model.display().to_string())],
    )
    .await;
    let http = reqwest::Client::new();
    let spec = fixture("payroll", &["--tool-file", &file.display().to_string()]);
    let r = http
        .post(format!("{}/api/servers", served.url))
        .json(&spec)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let r = http
        .post(format!("{}/api/servers/payroll/activate", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    served.stderr_line_with("embedding tools").await;
    served.stop_within(Duration::from_secs(5)).await;
}
