//! Issue 31, part 4: the fast lane on the HTTP front (`src/http/lane.rs`). A legacy client's proxied tool calls on
//! `agent-discover serve`'s `/mcp` take the lane (counted by `status.relay.fast_lane_calls`) with what the stdio lane
//! keeps: progress on the client's token before the result, the timeout reset by progress, the client's
//! cancellation passed on, a crashing child's cause; with `AGENT_DISCOVER_FAST_LANE=off` the same calls take rmcp's
//! path with the same answers, as they do while a connected client declared sampling (a child's request mid-call
//! then reaches the caller). A request in a session rmcp does not know is refused as before (404), and a 2026-07-28
//! client's call (rmcp's path) carries `resultType`.

use std::time::{Duration, Instant};

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{Agent, parse, text};
use crate::http::{Served, mcp_client, serve_env};
use crate::relay::{child_said, fast_lane_calls, last_logged};

fn sleep_call(name: &str, ms: u64, step_ms: u64, token: &str) -> CallToolRequestParams {
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(
        json!({"ms": ms, "step_ms": step_ms})
            .as_object()
            .unwrap()
            .clone(),
    );
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String(token.into()),
    )));
    params
}

/// `serve` (with `env`), a legacy MCP client of its `/mcp`, and the fixture as `name` (installed with `extra`) active.
async fn serve_fixture(
    dir: &std::path::Path,
    env: &[(&str, String)],
    name: &str,
    extra: Value,
) -> (Served, Agent) {
    let served = serve_env(dir, &[], env).await;
    let agent = mcp_client(&served.url, None).await;
    agent.install_fixture(name, &[], extra).await;
    agent
        .registry(json!({"action": "activate", "name": name}))
        .await;
    (served, agent)
}

#[tokio::test]
async fn http_lane_relays_with_progress_and_the_timeout_as_the_normal_path_does() {
    let dir = tempfile::tempdir().unwrap();
    let (served, agent) =
        serve_fixture(dir.path(), &[], "slowpoke", json!({"call_timeout_ms": 400})).await;
    assert_eq!(fast_lane_calls(&agent).await, 0);
    assert_eq!(
        text(&agent.call("slowpoke__echo", json!({"text": "hi"})).await),
        "hi"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);

    // 1.2 s of work with progress every 100 ms outlives a 400 ms timeout: progress moves the deadline, and every
    // notification reaches the client's token, in order, before the result (same POST stream).
    let r = match agent
        .client
        .call_tool_once(sleep_call("slowpoke__sleep", 1200, 100, "t-1"))
        .await
        .expect("call")
    {
        CallToolResponse::Complete(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(text(&r), "slept 1200 ms");
    let want: Vec<f64> = (1..=12).map(|i| f64::from(i) * 100.0).collect();
    assert_eq!(*agent.seen.progress.lock().unwrap(), want);
    assert_eq!(fast_lane_calls(&agent).await, 2);
    let logged = last_logged(&agent).await;
    assert_eq!(
        (&logged["tool"], &logged["success"], &logged["response"]),
        (&json!("sleep"), &json!(true), &json!("slept 1200 ms")),
        "{logged}"
    );

    // Without progress the same limit fails the call with the typed error, and the child is told.
    let started = Instant::now();
    let r = agent
        .call("slowpoke__sleep", json!({"ms": 5000, "step_ms": 5000}))
        .await;
    assert_eq!(r.is_error, Some(true));
    let v = parse(&r);
    assert_eq!(
        (&v["kind"], &v["tool"]),
        (&json!("timeout"), &json!("sleep")),
        "{v}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fast_lane_calls(&agent).await, 3);
    assert!(child_said(&agent, "fixture: sleep cancelled").await);
    agent.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn http_lane_passes_the_clients_cancellation_and_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "sleepy", json!({})).await;
    // Dropping the pending call makes rmcp's client POST notifications/cancelled in its session.
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        agent
            .client
            .call_tool_once(sleep_call("sleepy__sleep", 30000, 50, "c-1")),
    )
    .await;
    assert!(dropped.is_err(), "the call should still be running");
    assert!(
        child_said(&agent, "fixture: sleep cancelled").await,
        "the child never saw the cancellation"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    let logged = last_logged(&agent).await;
    assert_eq!(logged["success"], false, "{logged}");
    assert!(
        logged["response"]
            .as_str()
            .unwrap()
            .contains("cancelled by the client"),
        "{logged}"
    );
    // The session is healthy afterwards.
    assert_eq!(
        text(&agent.call("sleepy__echo", json!({"text": "still"})).await),
        "still"
    );
    assert_eq!(fast_lane_calls(&agent).await, 2);

    // A child that dies mid-call fails it at once with its exit cause, as the normal path does.
    let started = Instant::now();
    let r = agent.call("sleepy__exit", json!({"code": 3})).await;
    assert_eq!(r.is_error, Some(true));
    let v = parse(&r);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("exited during the call") && msg.contains("fixture: exiting on request"),
        "{v}"
    );
    assert_eq!(v["server"], "sleepy", "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(fast_lane_calls(&agent).await, 3);
    agent.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn with_the_lane_off_http_calls_take_rmcps_path_with_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AGENT_DISCOVER_FAST_LANE", "off".to_owned())];
    let (served, agent) = serve_fixture(dir.path(), &env, "fx", json!({})).await;
    assert_eq!(
        text(&agent.call("fx__echo", json!({"text": "hi"})).await),
        "hi"
    );
    let r = agent.call("fx__fail", json!({"message": "no"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text(&r), "fixture failure: no");
    assert_eq!(fast_lane_calls(&agent).await, 0);
    agent.stop().await;
    served.stop().await;

    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "fx", json!({})).await;
    assert_eq!(
        text(&agent.call("fx__echo", json!({"text": "hi"})).await),
        "hi"
    );
    let r = agent.call("fx__fail", json!({"message": "no"})).await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(text(&r), "fixture failure: no");
    assert_eq!(fast_lane_calls(&agent).await, 2);
    agent.stop().await;
    served.stop().await;
}

/// POSTs `body` to `/mcp` with `headers`; the status and the JSON-RPC messages of its SSE events (or its JSON body).
async fn post(url: &str, headers: &[(&str, &str)], body: Value) -> (u16, Vec<Value>) {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.body(body.to_string()).send().await.expect("POST");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let messages = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect::<Vec<Value>>();
    let messages = match serde_json::from_str(&text) {
        Ok(v) if messages.is_empty() => vec![v],
        _ => messages,
    };
    (status, messages)
}

#[tokio::test]
async fn an_unknown_session_is_refused_and_a_2026_client_gets_result_type() {
    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "fx", json!({})).await;
    let call = |id: u64, meta: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "fx__echo", "arguments": {"text": "raw"}, "_meta": meta}})
    };
    // A session rmcp does not know: its 404, not the lane's answer.
    let (status, _) = post(
        &served.url,
        &[
            ("mcp-session-id", "no-such-session"),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        call(1, json!({})),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(fast_lane_calls(&agent).await, 0);

    // A 2026-07-28 request (no session, its revision in `_meta`): the result says it is complete.
    let (status, messages) = post(
        &served.url,
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "fx__echo"),
        ],
        call(
            2,
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {}}),
        ),
    )
    .await;
    assert_eq!(status, 200, "{messages:?}");
    let answer = messages.last().expect("an answer");
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "raw", "{answer}");
    agent.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn while_a_client_takes_requests_calls_keep_rmcps_path_and_the_child_asks_the_caller() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "fx", json!({})).await;
    assert_eq!(
        text(&agent.call("fx__echo", json!({"text": "a"})).await),
        "a"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    // A second session that declares sampling: the lane registers no caller, so from now on calls take rmcp's path,
    // and the child's sampling request mid-call reaches the session that called.
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", served.url)),
    );
    let sampler = crate::harness::TestClient {
        seen: std::sync::Arc::default(),
        sampling_reply: Some("from the sampler".into()),
    }
    .serve(transport)
    .await
    .expect("initialize");
    let r = sampler
        .call_tool(
            CallToolRequestParams::new("fx__sample")
                .with_arguments(json!({"prompt": "p"}).as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call");
    assert!(text(&r).contains("from the sampler"), "{r:?}");
    assert_eq!(
        text(&agent.call("fx__echo", json!({"text": "b"})).await),
        "b"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    let _ = sampler.cancel().await;
    agent.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn a_long_lane_call_hears_keep_alive_comments_before_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AGENT_DISCOVER_SSE_KEEPALIVE_MS", "100".to_owned())];
    let (served, agent) = serve_fixture(dir.path(), &env, "napper", json!({})).await;
    // A session of its own, opened by hand, so the answer's bytes can be read as they come.
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, body: Value| {
        let mut r = http
            .post(format!("{}/mcp", served.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        r.body(body.to_string()).send()
    };
    let init = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}),
    )
    .await
    .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    init.text().await.unwrap();
    let ack = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await
    .unwrap();
    assert_eq!(ack.status().as_u16(), 202);
    let before = fast_lane_calls(&agent).await;
    // 600 ms of work without progress: the stream carries only comments until the result.
    let answer = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "napper__sleep", "arguments": {"ms": 600, "step_ms": 600}}}),
    )
    .await
    .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let body = answer.text().await.unwrap();
    assert_eq!(
        fast_lane_calls(&agent).await,
        before + 1,
        "the lane took it"
    );
    let result = body.find("data:").expect("an event");
    let comments = body[..result]
        .lines()
        .filter(|l| l.starts_with(':'))
        .count();
    assert!(
        comments >= 2,
        "keep-alive comments before the result: {body:?}"
    );
    assert!(body[result..].contains("slept 600 ms"), "{body:?}");
    agent.stop().await;
    served.stop().await;
}
