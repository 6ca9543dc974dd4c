//! Issue 31 part 4: the stdio fast lane carries calls to a ready 2026-07-28 child (`relay/crossing.rs`). A legacy
//! client's calls take it with the answers the normal path gives (the lane off); a child's input-required answer
//! reaches that client as its elicitation request and the retry completes; a 2026-07-28 client gets the
//! input-required result and retries the normal way; progress, the call timeout and the client's cancellation work
//! as for legacy children, and a legacy client's cancellation while the child's question waits on it ends the call.
//! Each test checks `status.relay.fast_lane_calls` to prove which path its calls took.

use std::time::{Duration, Instant};

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{self, Agent, parse, text};
use crate::relay::{child_said, fast_lane_calls, last_logged, logged_cancelled};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// A legacy client (elicitation answered with a name) of `agent-discover mcp` whose child `c26` is the conformance
/// fixture, spoken to in 2026-07-28; the fast lane on or off.
async fn conformance_agent(dir: &std::path::Path, lane: bool) -> Agent {
    harness::with_elicitation(json!({"name": "Ann"}));
    conformance_agent_as_is(dir, lane).await
}

/// `conformance_agent` with the elicitation answers set by the caller (`harness::with_elicitation`).
async fn conformance_agent_as_is(dir: &std::path::Path, lane: bool) -> Agent {
    let env: &[(&str, String)] = if lane {
        &[]
    } else {
        &[("AGENT_DISCOVER_FAST_LANE", "off".to_owned())]
    };
    let agent = harness::spawn_env(dir, &[], None, env).await;
    agent
        .install_fixture("c26", &["--conformance"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "c26"}))
        .await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["servers"][0]["protocol"], "2026-07-28", "{status}");
    agent
}

/// What a legacy client gets from a 2026-07-28 child: plain results, the child's input requests asked of it
/// (elicitation here; what the child asks depends on the capabilities the request's envelope carries), a tool error.
async fn legacy_answers(agent: &Agent) -> Vec<Value> {
    let mut answers = Vec::new();
    for tool in [
        "c26__test_simple_text",
        "c26__test_multiple_content_types",
        "c26__test_input_required_result_elicitation",
        "c26__test_input_required_result_capabilities",
        "c26__test_error_handling",
    ] {
        let r = agent.call(tool, json!({})).await;
        answers.push(serde_json::to_value(&r).unwrap());
    }
    answers
}

#[tokio::test]
async fn a_legacy_clients_calls_of_a_2026_child_take_the_lane_and_its_questions_are_asked() {
    let (dir_on, dir_off) = (tmp(), tmp());
    let on = conformance_agent(dir_on.path(), true).await;
    let off = conformance_agent(dir_off.path(), false).await;
    let lane = legacy_answers(&on).await;
    let normal = legacy_answers(&off).await;
    // Every call's first round took the lane; none did with it off.
    assert_eq!(fast_lane_calls(&on).await, 5);
    assert_eq!(fast_lane_calls(&off).await, 0);
    for (i, (l, n)) in lane.iter().zip(&normal).enumerate() {
        assert_eq!(l, n, "answer {i} differs");
    }
    // A legacy client gets no `resultType`, as on the normal path.
    assert!(lane[0].get("resultType").is_none(), "{}", lane[0]);
    assert_eq!(
        lane[0]["content"][0]["text"],
        "This is a simple text response for testing."
    );
    // The child's input request reached the client as an elicitation request, and its answer the child's retry.
    assert_eq!(lane[2]["content"][0]["text"], "Hello, Ann!", "{}", lane[2]);
    let asked = on.seen.elicited.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked.iter().all(|m| m == "What is your name?"), "{asked:?}");
    assert_eq!(*off.seen.elicited.lock().unwrap(), asked);
    assert_eq!(lane[4]["isError"], true);
    let logged = last_logged(&on).await;
    assert_eq!(
        (&logged["tool"], &logged["success"]),
        (&json!("test_error_handling"), &json!(false)),
        "{logged}"
    );
    on.stop().await;
    off.stop().await;
}

/// `agent-discover mcp` with a 2026-07-28 client (elicitation declared) and the conformance fixture as `c26`.
async fn client_2026(dir: &std::path::Path) -> crate::eras::Client {
    let seen = std::sync::Arc::new(harness::Seen::default());
    *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    let command = harness::command(dir, &["mcp"]);
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
        json!({"action": "install", "name": "c26", "command": harness::fixture(), "args": ["--conformance", "--name", "c26"]}),
        json!({"action": "activate", "name": "c26"}),
    ] {
        registry(&client, args).await;
    }
    client
}

async fn registry(client: &crate::eras::Client, args: Value) -> Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    parse(&r)
}

async fn lane_calls(client: &crate::eras::Client) -> u64 {
    registry(client, json!({"action": "status"})).await["relay"]["fast_lane_calls"]
        .as_u64()
        .unwrap()
}

fn call(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(Default::default())
}

#[tokio::test]
async fn a_2026_clients_calls_of_a_2026_child_take_the_lane_and_retry_the_normal_way() {
    let dir = tmp();
    let client = client_2026(dir.path()).await;
    let r = client
        .call_tool(call("c26__test_simple_text"))
        .await
        .unwrap();
    assert_eq!(r.result_type, Some(ResultType::COMPLETE), "{r:?}");
    assert_eq!(text(&r), "This is a simple text response for testing.");
    assert_eq!(lane_calls(&client).await, 1);

    let asked = crate::eras::asked(
        client
            .call_tool_once(call("c26__test_input_required_result_elicitation"))
            .await
            .unwrap(),
    );
    assert_eq!(
        lane_calls(&client).await,
        2,
        "the first round took the lane"
    );
    let requests = serde_json::to_value(asked.input_requests.clone().unwrap()).unwrap();
    assert_eq!(
        requests["user_name"]["params"]["message"],
        "What is your name?"
    );
    let mut retry = call("c26__test_input_required_result_elicitation");
    retry.input_responses = Some(
        [(
            "user_name".to_owned(),
            crate::eras::accept(json!({"name": "Bo"})),
        )]
        .into(),
    );
    retry.request_state = asked.request_state.clone();
    let done = crate::eras::completed(client.call_tool_once(retry).await.unwrap());
    assert_eq!(done, "Hello, Bo!");
    // The retry took the normal path; the question never reached the client as a request of its own.
    assert_eq!(lane_calls(&client).await, 2);
    assert!(client.service().seen.elicited.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
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

/// The plain fixture speaking 2026-07-28 (`--era both`): progress, the call timeout and the client's cancellation
/// on the lane, as for a legacy child (`relay.rs`'s tests).
#[tokio::test]
async fn a_2026_childs_progress_timeout_and_cancellation_on_the_lane() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("s26", &["--era", "both"], json!({"call_timeout_ms": 400}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "s26"}))
        .await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["servers"][0]["protocol"], "2026-07-28", "{status}");

    // 1.2 s of work with progress every 100 ms outlives a 400 ms timeout: progress moves the deadline.
    let r = match agent
        .client
        .call_tool_once(sleep_call("s26__sleep", 1200, 100, "t-1"))
        .await
        .expect("call")
    {
        CallToolResponse::Complete(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(text(&r), "slept 1200 ms");
    assert_eq!(fast_lane_calls(&agent).await, 1);
    let want: Vec<f64> = (1..=12).map(|i| f64::from(i) * 100.0).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while agent.seen.progress.lock().unwrap().len() < want.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(*agent.seen.progress.lock().unwrap(), want);

    // Without progress the same limit fails the call with the normal path's typed error, and the child is told.
    let r = agent
        .call("s26__sleep", json!({"ms": 5000, "step_ms": 5000}))
        .await;
    let v = parse(&r);
    assert_eq!(
        (&r.is_error, &v["kind"], &v["tool"]),
        (&Some(true), &json!("timeout"), &json!("sleep")),
        "{v}"
    );
    assert_eq!(fast_lane_calls(&agent).await, 2);
    assert!(
        child_said(&agent, "fixture: sleep cancelled").await,
        "the child never saw the timeout's cancellation"
    );
    agent.stop().await;

    // The client's cancellation reaches the child; the call ends without an answer.
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("s26", &["--era", "both"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "s26"}))
        .await;
    // Dropping the pending call makes rmcp's client send notifications/cancelled.
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        agent
            .client
            .call_tool_once(sleep_call("s26__sleep", 30_000, 50, "t-2")),
    )
    .await;
    assert!(dropped.is_err(), "the call should still be running");
    assert!(
        child_said(&agent, "fixture: sleep cancelled").await,
        "the child never saw the client's cancellation"
    );
    assert_eq!(fast_lane_calls(&agent).await, 1);
    logged_cancelled(&agent).await;
    agent.stop().await;
}

/// The child's question reached the legacy client through the lane-handed rounds and the client cancels the call
/// while it is still unanswered: the call ends without a retry reaching the child, and the session goes on (the next
/// call answers and takes the lane). As on the normal path, the cancelled call is not in the call log (checked with
/// the lane off too).
#[tokio::test]
async fn a_legacy_clients_cancellation_while_the_childs_question_waits_ends_the_call() {
    for lane in [true, false] {
        let dir = tmp();
        harness::with_elicitation(json!({"__never": true}));
        let agent = conformance_agent_as_is(dir.path(), lane).await;
        {
            let pending = agent
                .client
                .call_tool_once(call("c26__test_input_required_result_elicitation"));
            tokio::pin!(pending);
            let asked = async {
                loop {
                    let notified = agent.seen.notify.notified();
                    if !agent.seen.elicited.lock().unwrap().is_empty() {
                        return;
                    }
                    notified.await;
                }
            };
            tokio::select! {
                r = &mut pending => panic!("the call answered while its question waits: {r:?}"),
                r = tokio::time::timeout(Duration::from_secs(30), asked) => {
                    r.expect("the question never reached the client")
                }
            }
            // Dropping the pending call makes rmcp's client send notifications/cancelled.
        }
        assert_eq!(fast_lane_calls(&agent).await, u64::from(lane));
        let r = agent.call("c26__test_simple_text", json!({})).await;
        assert_eq!(text(&r), "This is a simple text response for testing.");
        assert_eq!(fast_lane_calls(&agent).await, 2 * u64::from(lane));
        assert_eq!(agent.seen.elicited.lock().unwrap().len(), 1, "lane {lane}");
        let status = agent.registry(json!({"action": "status"})).await;
        let tools: Vec<&str> = status["calls"]["recent"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["tool"].as_str())
            .collect();
        assert_eq!(tools, ["test_simple_text"], "lane {lane}: {status}");
        agent.stop().await;
    }
}
