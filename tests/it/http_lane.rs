//! Issue 31, part 4: the fast lane on the HTTP front (`src/http/lane.rs`). A legacy client's proxied tool calls on
//! `agent-discover serve`'s `/mcp` take the lane (counted by `status.relay.fast_lane_calls`) with what the stdio lane
//! keeps: progress on the client's token before the result, the timeout reset by progress, the client's
//! cancellation passed on, a crashing child's cause; with `AGENT_DISCOVER_FAST_LANE=off` the same calls take rmcp's
//! path with the same answers, as they do while a connected client declared sampling (a child's request mid-call
//! then reaches the caller). A request in a session rmcp does not know is refused as before (404). A 2026-07-28
//! client's stateless call takes the lane too (`src/http/lane/stateless.rs`) with the answers rmcp gives with the
//! lane off (a result with `resultType`, a tool error, a -32021 refusal as HTTP 400, an unknown tool), leaves SEP-2243
//! header mismatches to rmcp, gets a legacy child's question as the input-required result, and cancels the call when
//! it goes away.

use std::time::{Duration, Instant};

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{Agent, parse, text};
use crate::http::{Served, mcp_client, serve_env};
use crate::relay::{child_said, fast_lane_calls, last_logged, logged_cancelled};

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
    logged_cancelled(&agent).await;
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

/// The headers of a 2026-07-28 client's stateless `tools/call` of `name` (SEP-2243), beyond `post`'s.
fn headers_2026(name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", "tools/call".to_owned()),
        ("mcp-name", name.to_owned()),
    ]
}

/// A 2026-07-28 client's `tools/call` body (its envelope in `_meta`, elicitation declared when `elicits`).
fn call_2026(id: u64, name: &str, args: Value, elicits: bool) -> Value {
    let caps = if elicits {
        json!({"elicitation": {}})
    } else {
        json!({})
    };
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": name, "arguments": args,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                  "io.modelcontextprotocol/clientCapabilities": caps}}})
}

/// A whole answer to a POST: status, content type, and the JSON-RPC messages of its body.
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    content_type: String,
    messages: Vec<Value>,
}

/// POSTs `body` to `/mcp` as a 2026-07-28 client would, with `headers` (e.g. [`headers_2026`]).
async fn post_2026(url: &str, headers: &[(&str, String)], body: &Value) -> Answer {
    let mut request = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers {
        request = request.header(*k, v);
    }
    let response = request.body(body.to_string()).send().await.expect("POST");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let messages = if content_type.starts_with("text/event-stream") {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).unwrap_or_else(|e| panic!("{e}: {d}")))
            .collect()
    } else {
        vec![serde_json::from_str(&text).unwrap_or(Value::String(text))]
    };
    Answer {
        status,
        content_type,
        messages,
    }
}

/// Two `serve`s with the fixture as `fx`: the lane on, and off.
async fn on_and_off(on: &std::path::Path, off: &std::path::Path) -> [(Served, Agent); 2] {
    let lane_off = [("AGENT_DISCOVER_FAST_LANE", "off".to_owned())];
    [
        serve_fixture(on, &[], "fx", json!({})).await,
        serve_fixture(off, &lane_off, "fx", json!({})).await,
    ]
}

#[tokio::test]
async fn a_2026_clients_stateless_calls_take_the_lane_with_rmcps_answers() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let [(on, lane), (off, normal)] = on_and_off(a.path(), b.path()).await;
    let calls = [
        ("fx__echo", json!({"text": "hi"}), false, true),
        ("fx__fail", json!({"message": "no"}), false, true),
        ("fx__nope", json!({}), false, false),
        // The child asks a client that did not declare elicitation: rmcp's -32021 refusal, as HTTP 400.
        ("fx__elicit", json!({"message": "who?"}), false, true),
    ];
    let mut taken = 0;
    for (i, (name, args, elicits, lane_takes)) in calls.into_iter().enumerate() {
        let body = call_2026(i as u64 + 1, name, args, elicits);
        let fast = post_2026(&on.url, &headers_2026(name), &body).await;
        let slow = post_2026(&off.url, &headers_2026(name), &body).await;
        assert_eq!(fast, slow, "{name}");
        taken += u64::from(lane_takes);
        assert_eq!(fast_lane_calls(&lane).await, taken, "{name}: {fast:?}");
        match name {
            "fx__echo" => {
                assert_eq!(
                    (fast.status, fast.content_type.as_str()),
                    (200, "text/event-stream")
                );
                let result = &fast.messages.last().unwrap()["result"];
                assert_eq!(result["resultType"], "complete", "{fast:?}");
                assert_eq!(result["content"][0]["text"], "hi", "{fast:?}");
            }
            "fx__fail" => {
                assert_eq!(fast.messages[0]["result"]["isError"], true, "{fast:?}")
            }
            "fx__elicit" => {
                assert_eq!(fast.status, 400, "{fast:?}");
                assert_eq!(fast.messages[0]["error"]["code"], -32021, "{fast:?}");
            }
            _ => {}
        }
    }
    assert_eq!(fast_lane_calls(&normal).await, 0);
    for (served, agent) in [(on, lane), (off, normal)] {
        agent.stop().await;
        served.stop().await;
    }
}

#[tokio::test]
async fn stateless_calls_whose_headers_rmcp_checks_otherwise_keep_rmcps_path() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let [(on, lane), (off, normal)] = on_and_off(a.path(), b.path()).await;
    let body = call_2026(1, "fx__echo", json!({"text": "hi"}), false);
    let named = |name: &str| {
        let mut h = headers_2026("fx__echo");
        h[2].1 = name.to_owned();
        h
    };
    let without_method = {
        let mut h = headers_2026("fx__echo");
        h.remove(1);
        h
    };
    let with_param = {
        let mut h = headers_2026("fx__echo");
        h.push(("mcp-param-text", "hi".to_owned()));
        h
    };
    let cases = [
        ("another name", named("fx__fail")),
        ("no method", without_method),
        ("an Mcp-Param header", with_param),
    ];
    // rmcp refuses the two mismatches (SEP-2243: 400, -32001), and serves the third (the tool annotates no argument).
    for ((what, headers), status) in cases.into_iter().zip([400, 400, 200]) {
        let fast = post_2026(&on.url, &headers, &body).await;
        let slow = post_2026(&off.url, &headers, &body).await;
        assert_eq!(fast, slow, "{what}");
        assert_eq!(fast.status, status, "{what}: {fast:?}");
        assert_eq!(fast_lane_calls(&lane).await, 0, "{what}: {fast:?}");
    }
    // The same call with its headers right takes the lane.
    let fast = post_2026(&on.url, &headers_2026("fx__echo"), &body).await;
    assert_eq!(
        fast,
        post_2026(&off.url, &headers_2026("fx__echo"), &body).await
    );
    assert_eq!(fast_lane_calls(&lane).await, 1, "{fast:?}");
    for (served, agent) in [(on, lane), (off, normal)] {
        agent.stop().await;
        served.stop().await;
    }
}

#[tokio::test]
async fn a_legacy_childs_question_during_a_stateless_lane_call_comes_back_input_required() {
    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "fx", json!({})).await;
    let args = json!({"message": "who?"});
    let first = post_2026(
        &served.url,
        &headers_2026("fx__elicit"),
        &call_2026(1, "fx__elicit", args.clone(), true),
    )
    .await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(
        fast_lane_calls(&agent).await,
        1,
        "the first round took the lane"
    );
    let result = &first.messages.last().unwrap()["result"];
    assert_eq!(result["resultType"], "input_required", "{first:?}");
    assert_eq!(
        result["inputRequests"]["elicitation"]["params"]["message"], "who?",
        "{first:?}"
    );
    // The retry, with the answer and the request state, completes (the normal path: rmcp's).
    let mut retry = call_2026(2, "fx__elicit", args, true);
    retry["params"]["inputResponses"] =
        json!({"elicitation": {"action": "accept", "content": {"answer": "Ann"}}});
    retry["params"]["requestState"] = result["requestState"].clone();
    let done = post_2026(&served.url, &headers_2026("fx__elicit"), &retry).await;
    let result = &done.messages.last().unwrap()["result"];
    assert_eq!(result["resultType"], "complete", "{done:?}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("elicited:") && text.contains("Ann"),
        "{done:?}"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    agent.stop().await;
    served.stop().await;
}

#[tokio::test]
async fn a_stateless_client_that_goes_away_cancels_its_lane_call() {
    let dir = tempfile::tempdir().unwrap();
    let (served, agent) = serve_fixture(dir.path(), &[], "sleepy", json!({})).await;
    // With a progress token, the answer's stream opens with the first progress; the client reads it and leaves.
    let mut body = call_2026(
        1,
        "sleepy__sleep",
        json!({"ms": 30000, "step_ms": 50}),
        false,
    );
    body["params"]["_meta"]["progressToken"] = json!("p-1");
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", served.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers_2026("sleepy__sleep") {
        request = request.header(k, v);
    }
    let mut response = request.body(body.to_string()).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let chunk = response.chunk().await.unwrap().expect("the first progress");
    assert!(
        std::str::from_utf8(&chunk)
            .unwrap()
            .contains("notifications/progress"),
        "{chunk:?}"
    );
    drop(response);
    assert!(
        child_said(&agent, "fixture: sleep cancelled").await,
        "the child never heard of the cancellation"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    let logged = last_logged(&agent).await;
    assert!(
        logged["response"]
            .as_str()
            .unwrap()
            .contains("cancelled by the client"),
        "{logged}"
    );

    // Without progress nothing is sent before the result (as rmcp sends nothing before its first message): a client
    // that gives up waiting for the response's head cancels the call too.
    body["id"] = json!(2);
    body["params"]["_meta"]
        .as_object_mut()
        .unwrap()
        .remove("progressToken");
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", served.url))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (k, v) in headers_2026("sleepy__sleep") {
        request = request.header(k, v);
    }
    let gave_up = tokio::time::timeout(
        Duration::from_millis(300),
        request.body(body.to_string()).send(),
    )
    .await;
    assert!(gave_up.is_err(), "the call should still be running");
    let mut cancelled = 0;
    for _ in 0..250 {
        let status = agent.registry(json!({"action": "status"})).await;
        cancelled = status["calls"]["recent"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| {
                c["response"]
                    .as_str()
                    .is_some_and(|r| r.contains("cancelled by the client"))
            })
            .count();
        if cancelled == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cancelled, 2, "the second call was not cancelled");
    assert_eq!(fast_lane_calls(&agent).await, 2);
    agent.stop().await;
    served.stop().await;
}
