//! Issue 29, part 3 (the gaps): a `SERVER` span for every request served whatever its method (`ping`, lists,
//! `server/discover`, `subscriptions/listen`, custom and unknown methods), over stdio and HTTP in both eras; a
//! `CLIENT` span, failed, for a proxied call refused before it reaches the child; the request id on both; the
//! trace context sent to a legacy HTTP+SSE child as headers; and exports retried when the collector says "later"
//! (503 with `Retry-After`) but not when it says "no" (400). Spans are checked at an OTLP receiver in the test.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness;
use crate::telemetry::{CLIENT_SPAN, CLIENT_TRACE, Got, find, otel_env, receiver, traced_call};

fn served<'a>(spans: &'a [Got], name: &str) -> Option<&'a Got> {
    find(spans, name, 2)
}

/// stdio, a legacy session: `ping`, the lists, `completion/complete` and an unknown method each get a span (the
/// unknown one named by its method, failed with -32601); a proxied call's spans carry the request ids; calls
/// refused before the child (no such tool, a policy that denies, a server not running) get a failed CLIENT span.
#[tokio::test]
async fn every_request_and_every_refused_call_has_a_span() {
    let (received, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn_env(dir.path(), &[], None, &otel_env(&url, "http/protobuf")).await;
    agent
        .install_fixture("tr", &["--trace-tool"], json!({}))
        .await;
    agent.install_fixture("idle", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "tr"}))
        .await;
    let peer = agent.client.peer();
    peer.send_request(ClientRequest::PingRequest(Default::default()))
        .await
        .unwrap();
    peer.list_resources(None).await.unwrap();
    peer.list_prompts(None).await.unwrap();
    let unknown = peer
        .send_request(ClientRequest::CustomRequest(CustomRequest::new(
            "vendor/unknown",
            Some(json!({})),
        )))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    let spans = received
        .wait("spans of ping, lists and an unknown method", |s| {
            ["ping", "resources/list", "prompts/list", "vendor/unknown"]
                .iter()
                .all(|n| served(s, n).is_some())
        })
        .await;
    for name in ["ping", "resources/list", "prompts/list"] {
        let s = served(&spans, name).unwrap();
        assert_eq!(s.attrs["mcp.method.name"], name);
        assert_eq!(s.attrs["network.transport"], "pipe");
        assert_eq!(s.attrs["mcp.protocol.version"], "2025-11-25", "{s:?}");
        assert!(s.attrs.contains_key("jsonrpc.request.id"), "{s:?}");
        assert_eq!(s.status, 0, "{s:?}");
    }
    let u = served(&spans, "vendor/unknown").unwrap();
    assert_eq!(u.attrs["mcp.method.name"], "vendor/unknown");
    assert_eq!(u.attrs["error.type"], "-32601", "{u:?}");
    assert_eq!(u.attrs["rpc.response.status_code"], "-32601");
    assert_eq!(u.status, 2);

    // A proxied call: the ids of the request served and of the request sent to the child.
    agent
        .client
        .call_tool(traced_call("tr__trace_context", CLIENT_TRACE, CLIENT_SPAN))
        .await
        .unwrap();
    let spans = received
        .wait("the call's spans", |s| {
            find(s, "tools/call trace_context", 3).is_some()
        })
        .await;
    let s = served(&spans, "tools/call tr__trace_context").unwrap();
    let c = find(&spans, "tools/call trace_context", 3).unwrap();
    assert_eq!(c.parent, s.span_id);
    assert!(
        s.attrs["jsonrpc.request.id"].parse::<i64>().is_ok(),
        "{s:?}"
    );
    assert!(
        c.attrs["jsonrpc.request.id"].parse::<i64>().is_ok(),
        "{c:?}"
    );

    // Refused before the child: a tool it does not have (through the registry's proxy_call), a tool a policy
    // denies, a server that is not running.
    let (failed, r) = agent
        .try_registry(json!({"action": "proxy_call", "server": "tr", "tool": "no_such_tool", "arguments": {}}))
        .await
        .unwrap();
    assert!(failed && r["kind"] == "tool_not_found", "{r}");
    agent
        .registry(json!({"action": "tool_policy", "name": "tr", "tool": "echo", "policy": "deny"}))
        .await;
    let denied = agent.call("tr__echo", json!({"text": "x"})).await;
    assert_eq!(denied.is_error, Some(true));
    let (failed, r) = agent
        .try_registry(json!({"action": "proxy_call", "server": "idle", "tool": "echo", "arguments": {"text": "x"}}))
        .await
        .unwrap();
    assert!(failed, "{r}");
    let spans = received
        .wait("the refused calls' spans", |s| {
            ["tools/call no_such_tool", "tools/call echo"]
                .iter()
                .all(|n| find(s, n, 3).is_some())
                && s.iter()
                    .filter(|g| {
                        g.attrs.get("agent_discover.outcome").map(String::as_str) == Some("refused")
                    })
                    .count()
                    >= 3
        })
        .await;
    let refused: Vec<&Got> = spans
        .iter()
        .filter(|g| {
            g.kind == 3
                && g.attrs.get("agent_discover.outcome").map(String::as_str) == Some("refused")
        })
        .collect();
    let by = |server: &str, tool: &str| {
        refused
            .iter()
            .find(|g| {
                g.attrs["agent_discover.server"] == server && g.attrs["gen_ai.tool.name"] == tool
            })
            .unwrap_or_else(|| panic!("no refused span for {server}/{tool}: {refused:#?}"))
    };
    let missing = by("tr", "no_such_tool");
    assert_eq!(missing.attrs["agent_discover.refused"], "tool");
    assert_eq!(missing.attrs["error.type"], "tool_not_found");
    assert_eq!(missing.status, 2);
    let parent = spans
        .iter()
        .find(|g| g.kind == 2 && g.span_id == missing.parent)
        .expect("the registry call's span is the parent");
    assert_eq!(parent.name, "tools/call registry");
    assert_eq!(missing.trace_id, parent.trace_id);
    let deny = by("tr", "echo");
    assert_eq!(deny.attrs["agent_discover.refused"], "approval");
    assert_eq!(deny.attrs["error.type"], "approval_denied");
    assert_eq!(
        deny.attrs["mcp.protocol.version"], "2025-11-25",
        "known once the child runs: {deny:?}"
    );
    let denied_served = served(&spans, "tools/call tr__echo").unwrap();
    assert_eq!(deny.parent, denied_served.span_id);
    let idle = by("idle", "echo");
    assert_eq!(idle.attrs["agent_discover.refused"], "server", "{r}");
    assert_eq!(idle.attrs["error.type"], "server_unavailable", "{idle:?}");
    assert!(
        !idle.attrs.contains_key("mcp.protocol.version"),
        "no child, no era: {idle:?}"
    );
    agent.stop().await;
}

/// `serve` over HTTP: 2026-07-28 requests to `/mcp` (`server/discover`, a list, an unknown method,
/// `subscriptions/listen`) and a legacy session's `ping` on `/mcp/servers/NAME` each get a span.
#[tokio::test]
async fn requests_of_both_eras_over_http_have_spans() {
    let (received, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let served_by = crate::replicas::replica(dir.path(), &otel_env(&url, "http/json")).await;
    let http = reqwest::Client::new();
    crate::replicas::register_fixture(&http, &served_by, "fx").await;
    let front = format!("{}/mcp", served_by.url);
    for method in ["server/discover", "prompts/list", "vendor/unknown"] {
        let (status, body) =
            crate::eras::raw_2026_with(&front, method, json!({}), &[], json!({})).await;
        if method == "vendor/unknown" {
            assert_eq!(body["error"]["code"], -32601, "{method}: {body}");
        } else {
            assert_eq!(status, 200, "{method}: {body}");
        }
    }
    let legacy = crate::eras::client_legacy(&format!("{front}/servers/fx"), None).await;
    legacy
        .peer()
        .send_request(ClientRequest::PingRequest(Default::default()))
        .await
        .unwrap();
    let modern = crate::eras::client_2026_as(
        &front,
        harness::TestClient {
            seen: Arc::default(),
            sampling_reply: None,
        },
    )
    .await;
    let sub = modern
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("subscriptions/listen");
    drop(sub);
    let spans = received
        .wait("spans of both eras' requests", |s| {
            [
                "server/discover",
                "prompts/list",
                "vendor/unknown",
                "ping",
                "subscriptions/listen",
            ]
            .iter()
            .all(|n| served(s, n).is_some())
        })
        .await;
    for name in [
        "server/discover",
        "prompts/list",
        "vendor/unknown",
        "subscriptions/listen",
    ] {
        let s = served(&spans, name).unwrap();
        assert_eq!(s.attrs["mcp.protocol.version"], "2026-07-28", "{s:?}");
        assert_eq!(s.attrs["network.transport"], "tcp");
        assert!(s.attrs.contains_key("jsonrpc.request.id"), "{s:?}");
    }
    assert_eq!(
        served(&spans, "vendor/unknown").unwrap().attrs["error.type"],
        "-32601"
    );
    let ping = served(&spans, "ping").unwrap();
    assert_eq!(ping.attrs["mcp.protocol.version"], "2025-11-25");
    assert!(ping.attrs.contains_key("mcp.session.id"), "{ping:?}");
    drop(legacy);
    drop(modern);
}

/// A minimal legacy HTTP+SSE server (protocol 2024-11-05): one tool, `seen`, answering with the `traceparent`
/// header its `tools/call` POST came with.
#[derive(Clone, Default)]
struct Sse {
    out: Arc<Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>>,
}

async fn sse_stream(State(s): State<Sse>) -> axum::response::Response {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    tx.send("event: endpoint\ndata: /messages\n\n".into())
        .unwrap();
    *s.out.lock().unwrap() = Some(tx);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|m| (Ok::<_, std::convert::Infallible>(Bytes::from(m)), rx))
    });
    axum::response::Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn sse_post(State(s): State<Sse>, headers: HeaderMap, body: Bytes) -> axum::http::StatusCode {
    let msg: Value = serde_json::from_slice(&body).unwrap();
    if let Some(id) = msg.get("id").filter(|_| msg.get("method").is_some()) {
        let result = match msg["method"].as_str().unwrap() {
            "initialize" => json!({"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                "serverInfo": {"name": "sse", "version": "0"}}),
            "tools/list" => json!({"tools": [{"name": "seen", "inputSchema": {"type": "object"}}]}),
            "tools/call" => {
                let tp = headers
                    .get("traceparent")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                json!({"content": [{"type": "text", "text": tp}]})
            }
            _ => json!({}),
        };
        let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
        if let Some(out) = &*s.out.lock().unwrap() {
            let _ = out.send(format!("event: message\ndata: {reply}\n\n"));
        }
    }
    axum::http::StatusCode::ACCEPTED
}

/// A legacy HTTP+SSE child gets the proxied call's span as the `traceparent` header, as Streamable HTTP children do.
#[tokio::test]
async fn a_legacy_sse_child_gets_the_traceparent_header() {
    let app = axum::Router::new()
        .route("/sse", axum::routing::get(sse_stream))
        .route("/messages", axum::routing::post(sse_post))
        .with_state(Sse::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sse_url = format!("http://{}/sse", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (received, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn_env(dir.path(), &[], None, &otel_env(&url, "http/protobuf")).await;
    agent
        .registry(json!({"action": "install", "name": "old", "transport": "sse", "url": sse_url}))
        .await;
    let act = agent
        .registry(json!({"action": "activate", "name": "old"}))
        .await;
    assert_eq!(act["status"], "activated", "{act}");
    let r = agent
        .client
        .call_tool(traced_call("old__seen", CLIENT_TRACE, CLIENT_SPAN))
        .await
        .unwrap();
    let header = harness::text(&r);
    let spans = received
        .wait("the SSE call's span", |s| {
            find(s, "tools/call seen", 3).is_some()
        })
        .await;
    let proxied = find(&spans, "tools/call seen", 3).unwrap();
    assert_eq!(header, format!("00-{CLIENT_TRACE}-{}-01", proxied.span_id));
    assert_eq!(proxied.attrs["network.transport"], "tcp");
    agent.stop().await;
}

/// A 503 with `Retry-After: 1` is retried after that second and the spans arrive; a 400 is not retried.
#[tokio::test]
async fn exports_are_retried_on_503_and_not_on_400() {
    let (received, url) = receiver().await;
    received.answers.lock().unwrap().push_back((503, Some("1")));
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn_env(dir.path(), &[], None, &otel_env(&url, "http/protobuf")).await;
    received
        .wait("spans after a 503", |s| served(s, "initialize").is_some())
        .await;
    {
        let log = received.log.lock().unwrap();
        let (status, ids, at) = &log[0];
        assert_eq!(*status, 503);
        assert!(!ids.is_empty());
        let again = log[1..]
            .iter()
            .find(|(st, got, _)| *st == 200 && ids.iter().all(|i| got.contains(i)))
            .expect("the refused batch, sent again");
        assert!(
            again.2 - *at >= Duration::from_millis(900),
            "Retry-After: 1 was honoured"
        );
    }

    // A 400: that batch is dropped, the next one goes through.
    received.answers.lock().unwrap().push_back((400, None));
    let before = received.log.lock().unwrap().len();
    agent.registry(json!({"action": "list"})).await;
    harness::wait_for(Duration::from_secs(30), || {
        received
            .log
            .lock()
            .unwrap()
            .iter()
            .skip(before)
            .any(|(st, _, _)| *st == 400)
    })
    .await;
    agent.registry(json!({"action": "status"})).await;
    // The status call's spans come in a request after the 400'd one: it was not retried meanwhile.
    let after_400 = |log: &[(u16, Vec<String>, std::time::Instant)]| {
        log.iter()
            .enumerate()
            .skip(before)
            .find(|(_, (st, _, _))| *st == 400)
            .map(|(i, _)| i)
    };
    harness::wait_for(Duration::from_secs(30), || {
        let log = received.log.lock().unwrap();
        after_400(&log).is_some_and(|i| log[i + 1..].iter().any(|(st, _, _)| *st == 200))
    })
    .await;
    {
        let log = received.log.lock().unwrap();
        let i = after_400(&log).unwrap();
        let later = &log[i + 1..];
        assert!(
            later.iter().any(|(st, _, _)| *st == 200),
            "exports went on after the 400"
        );
        for (_, ids, _) in later {
            assert!(
                log[i].1.iter().all(|id| !ids.contains(id)),
                "a 400'd batch was sent again"
            );
        }
    }
    agent.stop().await;
}

/// A malformed batch variable is a warning on stderr and its default, not a refusal to start.
#[tokio::test]
async fn an_invalid_batch_variable_warns_and_uses_the_default() {
    let dir = tempfile::tempdir().unwrap();
    let out = harness::command(dir.path(), &["mcp"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_BSP_SCHEDULE_DELAY", "soon")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("OTEL_BSP_SCHEDULE_DELAY=soon"), "{stderr}");
    assert!(stderr.contains("using the default, 5000"), "{stderr}");
    assert!(
        stderr.contains("exporting traces over OTLP"),
        "tracing still on: {stderr}"
    );
}
