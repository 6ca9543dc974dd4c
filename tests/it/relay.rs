//! Issue 12's fast lane (`src/proxy/relay.rs`): proxied tool calls of `agent-discover mcp` relayed without rmcp's
//! per-request machinery still carry progress, the call timeout, the client's cancellation, a child's sampling request
//! mid-call, and the normal path's error shapes; calls it does not carry take the normal path (a child's crash: the
//! crash test in `proxy.rs`, whose calls take the lane). Each test checks `status.relay.fast_lane_calls` to prove
//! which path its calls took.

use std::time::{Duration, Instant};

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{self, Agent, parse, text};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// How many calls took the fast lane in `agent` (its `status`).
pub(crate) async fn fast_lane_calls(agent: &Agent) -> u64 {
    let status = agent.registry(json!({"action": "status"})).await;
    status["relay"]["fast_lane_calls"]
        .as_u64()
        .unwrap_or_else(|| panic!("no relay count in {status}"))
}

/// The call log's newest entry.
pub(crate) async fn last_logged(agent: &Agent) -> Value {
    let status = agent.registry(json!({"action": "status"})).await;
    status["calls"]["recent"][0].clone()
}

/// Asserts that the call log's newest entry is a call that failed because its client cancelled it.
pub(crate) async fn logged_cancelled(agent: &Agent) {
    let logged = last_logged(agent).await;
    assert_eq!(logged["success"], false, "{logged}");
    assert!(
        logged["response"]
            .as_str()
            .unwrap()
            .contains("cancelled by the client"),
        "{logged}"
    );
}

/// Waits (bounded) until the child's stderr tail has a line starting with `prefix`.
pub(crate) async fn child_said(agent: &Agent, prefix: &str) -> bool {
    for _ in 0..250 {
        let status = agent.registry(json!({"action": "status"})).await;
        if status["servers"][0]["stderr_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap_or("").starts_with(prefix))
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

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

#[tokio::test]
async fn fast_lane_forwards_progress_in_order_and_times_calls_out() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("slowpoke", &[], json!({"call_timeout_ms": 400}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "slowpoke"}))
        .await;
    assert_eq!(fast_lane_calls(&agent).await, 0);

    // 1.2 s of work with progress every 100 ms outlives a 400 ms timeout: progress moves the deadline.
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
    assert_eq!(fast_lane_calls(&agent).await, 1);
    // Every notification, on the client's own token, in the child's order.
    let want: Vec<f64> = (1..=12).map(|i| f64::from(i) * 100.0).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.seen.progress.lock().unwrap().len() < want.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*agent.seen.progress.lock().unwrap(), want);
    let logged = last_logged(&agent).await;
    assert_eq!(
        (&logged["tool"], &logged["success"], &logged["response"]),
        (&json!("sleep"), &json!(true), &json!("slept 1200 ms")),
        "{logged}"
    );

    // Without progress the same limit fails the call with the normal path's typed error, and the child is told.
    let started = Instant::now();
    let r = agent
        .call("slowpoke__sleep", json!({"ms": 5000, "step_ms": 5000}))
        .await;
    assert_eq!(r.is_error, Some(true));
    let v = parse(&r);
    assert_eq!(
        (&v["kind"], &v["server"], &v["tool"]),
        (&json!("timeout"), &json!("slowpoke"), &json!("sleep")),
        "{v}"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(3),
        "timed out after {elapsed:?}"
    );
    assert_eq!(fast_lane_calls(&agent).await, 2);
    assert!(
        child_said(&agent, "fixture: sleep cancelled").await,
        "the child never saw the cancellation"
    );
    let logged = last_logged(&agent).await;
    assert_eq!(logged["success"], false, "{logged}");
    assert!(
        logged["response"].as_str().unwrap().contains("timed out"),
        "{logged}"
    );
    agent.stop().await;
}

#[tokio::test]
async fn fast_lane_passes_the_clients_cancellation_to_the_child() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("sleepy", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "sleepy"}))
        .await;
    // Dropping the pending call makes rmcp's client send notifications/cancelled.
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
    // The connection is healthy afterwards, and the next call takes the fast lane too.
    assert_eq!(
        text(
            &agent
                .call("sleepy__echo", json!({"text": "still here"}))
                .await
        ),
        "still here"
    );
    assert_eq!(fast_lane_calls(&agent).await, 2);
    agent.stop().await;
}

#[tokio::test]
async fn fast_lane_errors_match_the_normal_path_and_other_calls_take_it() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("fx", &["--error-tool", "boom"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    // A child's JSON-RPC error: the same tool error whichever path carried it.
    let fast = parse(&agent.call("fx__boom", json!({})).await);
    assert_eq!(fast_lane_calls(&agent).await, 1);
    let (is_error, normal) = agent
        .try_registry(
            json!({"action": "proxy_call", "server": "fx", "tool": "boom", "arguments": {}}),
        )
        .await
        .expect("proxy_call");
    assert!(is_error, "{normal}");
    assert_eq!(
        fast_lane_calls(&agent).await,
        2,
        "proxy_call is relayed too"
    );
    assert_eq!(fast, normal);
    assert!(
        fast["error"]
            .as_str()
            .unwrap()
            .contains("boom always fails"),
        "{fast}"
    );

    // `_meta` with more than a progress token (2026-07-28 request metadata, say) takes the normal path, and works.
    let mut params = CallToolRequestParams::new("fx__echo")
        .with_arguments(json!({"text": "by rmcp"}).as_object().unwrap().clone());
    let mut meta = RequestMetaObject::new();
    meta.0.0.insert("example.com/trace".into(), json!("t"));
    params.meta = Some(meta);
    let r = agent.client.call_tool(params).await.expect("call");
    assert_eq!(text(&r), "by rmcp");
    assert_eq!(fast_lane_calls(&agent).await, 2);

    // Unknown tools are the normal path's to answer.
    let r = agent.call("fx__nope", json!({})).await;
    assert_eq!(parse(&r)["kind"], "tool_not_found");
    assert_eq!(fast_lane_calls(&agent).await, 2);
    agent.stop().await;
}

/// `agent-discover mcp` in `dir` with a 2026-07-28 client (`server/discover`, per-request `_meta`) over stdio,
/// declaring elicitation when `elicit`; the legacy fixture installed and active as `old`.
async fn stdio_2026(dir: &std::path::Path, elicit: bool, lane: bool) -> crate::eras::Client {
    let seen = std::sync::Arc::new(harness::Seen::default());
    if elicit {
        *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    }
    let mut command = harness::command(dir, &["mcp"]);
    if !lane {
        command.env("AGENT_DISCOVER_FAST_LANE", "off");
    }
    let transport =
        rmcp::transport::TokioChildProcess::new(command).expect("spawn agent-discover mcp");
    let client = rmcp::service::ClientServiceExt::serve_with_lifecycle(
        harness::TestClient {
            seen,
            sampling_reply: None,
        },
        transport,
        rmcp::service::ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("server/discover");
    for args in [
        json!({"action": "install", "name": "old", "command": harness::fixture(), "args": ["--name", "old"]}),
        json!({"action": "activate", "name": "old"}),
    ] {
        let r = client
            .call_tool(
                CallToolRequestParams::new("registry")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    client
}

/// How many calls took the fast lane, asked by a 2026-07-28 client.
async fn lane_calls_2026(client: &crate::eras::Client) -> u64 {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(json!({"action": "status"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    parse(&r)["relay"]["fast_lane_calls"].as_u64().unwrap()
}

fn call_2026(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().unwrap().clone())
}

/// A 2026-07-28 client's calls of a legacy child take the lane over stdio: a complete result (with `resultType`,
/// which such a client requires) and a tool error shaped as before; a child that asks the client mid-call has its
/// call handed to the input-required exchange (`relay/handover.rs`), whose retry completes it; a client that did
/// not declare the capability gets -32021, as on the normal path.
#[tokio::test]
async fn a_2026_clients_calls_take_the_lane_and_its_childs_questions_come_back_input_required() {
    let dir = tmp();
    let client = stdio_2026(dir.path(), true, true).await;
    let r = client
        .call_tool_once(call_2026("old__echo", json!({"text": "hi"})))
        .await
        .unwrap();
    assert_eq!(crate::eras::completed(r), "hi");
    assert_eq!(lane_calls_2026(&client).await, 1);
    // The same answer on the wire as the normal path gives: `resultType` complete, nothing else added.
    let r = client
        .call_tool(call_2026("old__echo", json!({"text": "again"})))
        .await
        .unwrap();
    assert_eq!(r.result_type, Some(ResultType::COMPLETE), "{r:?}");
    assert_eq!(text(&r), "again");
    assert_eq!(lane_calls_2026(&client).await, 2);

    let elicit = || call_2026("old__elicit", json!({"message": "who?"}));
    let asked = crate::eras::asked(client.call_tool_once(elicit()).await.unwrap());
    assert_eq!(
        lane_calls_2026(&client).await,
        3,
        "the first round took the lane"
    );
    let requests = serde_json::to_value(asked.input_requests.clone().unwrap()).unwrap();
    assert_eq!(requests["elicitation"]["params"]["message"], "who?");
    let mut retry = elicit();
    retry.input_responses = Some(
        [(
            "elicitation".to_owned(),
            crate::eras::accept(json!({"answer": "Ann"})),
        )]
        .into(),
    );
    retry.request_state = asked.request_state.clone();
    let done = crate::eras::completed(client.call_tool_once(retry).await.unwrap());
    assert!(
        done.starts_with("elicited:") && done.contains("Ann"),
        "{done}"
    );
    // The retry took the normal path; the question never reached the client as a request of its own.
    assert_eq!(lane_calls_2026(&client).await, 3);
    assert!(client.service().seen.elicited.lock().unwrap().is_empty());
    client.cancel().await.unwrap();

    let dir = tmp();
    let plain = stdio_2026(dir.path(), false, true).await;
    match plain.call_tool_once(elicit()).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(
                e.code,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "{e:?}"
            );
            assert!(e.data.unwrap()["requiredCapabilities"]["elicitation"].is_object());
        }
        other => panic!("expected -32021, got {other:?}"),
    }
    assert_eq!(lane_calls_2026(&plain).await, 1);

    // The same answers, on the wire, as rmcp's handler gives with the lane off: a result and a tool error.
    let dir = tmp();
    let normal = stdio_2026(dir.path(), false, false).await;
    for (tool, args) in [
        ("old__echo", json!({"text": "same"})),
        ("old__fail", json!({})),
    ] {
        let fast = plain
            .call_tool(call_2026(tool, args.clone()))
            .await
            .unwrap();
        let slow = normal.call_tool(call_2026(tool, args)).await.unwrap();
        assert_eq!(
            serde_json::to_value(&fast).unwrap(),
            serde_json::to_value(&slow).unwrap(),
            "{tool}"
        );
    }
    assert_eq!(lane_calls_2026(&plain).await, 3);
    assert_eq!(lane_calls_2026(&normal).await, 0);
    plain.cancel().await.unwrap();
    normal.cancel().await.unwrap();
}

/// The registry's `proxy_call` answers of `agent` (the fixture `fx`, active, with a 400 ms call timeout): an
/// echo (named both ways), a tool error, an unknown tool, a timeout, a child's question the client can answer
/// (sampling) and one it cannot (elicitation, not declared), each whole as the client got it.
async fn proxy_call_answers(agent: &Agent) -> Vec<Value> {
    let calls = [
        json!({"action": "proxy_call", "call_as": "fx__echo", "arguments": {"text": "hi"}}),
        json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "two"}}),
        json!({"action": "proxy_call", "call_as": "fx__boom", "arguments": {}}),
        json!({"action": "proxy_call", "call_as": "fx__nope", "arguments": {}}),
        json!({"action": "proxy_call", "call_as": "fx__sleep", "arguments": {"ms": 5000, "step_ms": 5000}}),
        json!({"action": "proxy_call", "call_as": "fx__sample", "arguments": {"prompt": "p?"}}),
        json!({"action": "proxy_call", "call_as": "fx__elicit", "arguments": {"message": "who?"}}),
    ];
    let mut answers = Vec::new();
    for args in calls {
        let Value::Object(map) = args else {
            unreachable!()
        };
        let r = agent
            .client
            .call_tool(CallToolRequestParams::new("registry").with_arguments(map))
            .await
            .expect("proxy_call");
        answers.push(serde_json::to_value(&r).unwrap());
    }
    answers
}

async fn fixture_agent(dir: &std::path::Path, lane: bool) -> Agent {
    let env: &[(&str, String)] = if lane {
        &[]
    } else {
        &[("AGENT_DISCOVER_FAST_LANE", "off".to_owned())]
    };
    let agent = harness::spawn_env(dir, &[], Some("sure"), env).await;
    agent
        .install_fixture(
            "fx",
            &["--error-tool", "boom"],
            json!({"call_timeout_ms": 400}),
        )
        .await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    agent
}

#[tokio::test]
async fn proxy_call_takes_the_lane_and_answers_as_with_the_lane_off() {
    let (dir_on, dir_off) = (tmp(), tmp());
    let on = fixture_agent(dir_on.path(), true).await;
    let off = fixture_agent(dir_off.path(), false).await;
    let lane = proxy_call_answers(&on).await;
    let normal = proxy_call_answers(&off).await;
    // Every call but the unknown tool's took the lane; none did with it off.
    assert_eq!(fast_lane_calls(&on).await, 6);
    assert_eq!(fast_lane_calls(&off).await, 0);
    for (i, (l, n)) in lane.iter().zip(&normal).enumerate() {
        assert_eq!(l, n, "answer {i} differs");
    }
    let body = |i: usize| -> String { lane[i]["content"][0]["text"].as_str().unwrap().to_owned() };
    assert_eq!((body(0), body(1)), ("hi".to_owned(), "two".to_owned()));
    let kind = |i: usize| serde_json::from_str::<Value>(&body(i)).unwrap()["kind"].clone();
    assert_eq!(lane[2]["isError"], true);
    assert!(body(2).contains("boom always fails"), "{}", body(2));
    assert_eq!(kind(3), "tool_not_found");
    assert_eq!(kind(4), "timeout");
    // The child's sampling request reached this client (it declared sampling) and the call completed.
    assert!(
        body(5).starts_with("sampled:") && body(5).contains("sure"),
        "{}",
        body(5)
    );
    // Elicitation it did not declare: the typed error `proxy_call` gives.
    assert_eq!(kind(6), "input_required");
    let logged = last_logged(&on).await;
    assert_eq!(
        (&logged["tool"], &logged["success"]),
        (&json!("elicit"), &json!(false)),
        "{logged}"
    );
    on.stop().await;
    off.stop().await;
}
