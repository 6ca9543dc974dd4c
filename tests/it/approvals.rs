//! Issue 27, part 2: approval policies bound to arguments, end to end with real clients. A legacy rmcp client is
//! asked by elicitation (once, again for the same and for other arguments, for the session, declined, denied); a
//! 2026-07-28 rmcp client gets an input-required result and answers on retry (tampered, foreign-shaped, replayed
//! tokens and changed arguments refused; a legacy child's own question after the approval passes through); REST calls
//! wait and are decided through REST from another task (once, denied, for the session, timed out); `agent-discover
//! call` waits in its process until `agent-discover approvals approve|deny` decides in another; `deny` refuses at
//! once; an annotation rule asks for a tool that declares `destructiveHint`; `proxy_call` and the per-server endpoint
//! take the same step; an `ask` tool never takes the fast lane; replicas on PostgreSQL see each other's decisions; the
//! official Python SDK's elicitation callback answers in both protocol eras.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::events::{Event, Received};
use agent_discover::http::{self, Security};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use rmcp::model::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::eras::{self, accept, asked, completed};
use crate::harness::{self, Agent, parse};

/// How long anything may take on a loaded 2-core machine before a test fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The messages of the elicitation requests `agent` has received.
fn elicited(agent: &Agent) -> Vec<String> {
    agent.seen.elicited.lock().unwrap().clone()
}

/// Sets what `agent`'s client answers the next elicitation with (`None`: it declines).
fn answer(agent: &Agent, decision: Option<&str>) {
    *agent.seen.elicit_answers.lock().unwrap() =
        decision.map(|d| json!({"decision": d}).as_object().unwrap().clone());
}

/// A refused call's typed error (an `isError` result).
#[track_caller]
fn refused(r: &CallToolResult, kind: &str) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let body = parse(r);
    assert_eq!(body["kind"], kind, "{body}");
    body
}

/// The call log's entries, newest first (the `registry` tool's `status`).
async fn recent_calls(agent: &Agent) -> Vec<Value> {
    let status = agent.registry(json!({"action": "status"})).await;
    status["calls"]["recent"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_legacy_client_is_asked_by_elicitation_bound_to_the_exact_arguments() {
    let dir = tmp();
    harness::with_elicitation(json!({"decision": "approve"}));
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("fx", &["--destructive-tool", "wipe"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;

    // No rule: nothing asks, and the call takes the fast lane.
    let r = agent.call("fx__echo", json!({"text": "free"})).await;
    assert_eq!(harness::text(&r), "free");
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 1);
    assert!(elicited(&agent).is_empty());

    // `ask` on echo, set through the registry tool (which may tighten a rule).
    let v = agent
        .registry(json!({"action": "tool_policy", "name": "fx", "tool": "echo", "policy": "ask"}))
        .await;
    assert_eq!(
        v["rules"],
        json!([{"scope": "tool", "tool": "echo", "policy": "ask"}]),
        "{v}"
    );
    let echo = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tool"] == "echo")
        .unwrap();
    assert_eq!(echo["policy"], "ask", "{v}");
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["relay"]["approval_gated"], json!(["fx__echo"]));

    // Approved once: the person saw the server, the tool and the exact arguments; the fast lane was not taken.
    let r = agent
        .call("fx__echo", json!({"text": "one", "opts": {"b": 2, "a": 1}}))
        .await;
    assert_eq!(harness::text(&r), "one");
    let asked = elicited(&agent);
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].contains("Server: fx") && asked[0].contains("Tool: echo"),
        "{}",
        asked[0]
    );
    assert!(
        asked[0].contains("\"text\": \"one\"") && asked[0].contains("\"a\": 1"),
        "{}",
        asked[0]
    );
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 1);

    // Once means once: the same arguments ask again, and so do other ones.
    agent
        .call("fx__echo", json!({"text": "one", "opts": {"a": 1, "b": 2}}))
        .await;
    assert_eq!(elicited(&agent).len(), 2);
    agent.call("fx__echo", json!({"text": "two"})).await;
    assert_eq!(elicited(&agent).len(), 3);

    // For the session: the same call passes without asking for the rest of this connection; others still ask.
    answer(&agent, Some("approve_session"));
    agent.call("fx__echo", json!({"text": "three"})).await;
    assert_eq!(elicited(&agent).len(), 4);
    answer(&agent, Some("deny"));
    let r = agent.call("fx__echo", json!({"text": "three"})).await;
    assert_eq!(harness::text(&r), "three");
    assert_eq!(elicited(&agent).len(), 4, "a session approval asks no more");
    let logged = recent_calls(&agent).await;
    assert!(
        logged[0]["response"]
            .as_str()
            .unwrap()
            .starts_with("[approval: approved for the session by elicitation]"),
        "{}",
        logged[0]
    );

    // Denied, and declined: the call ends with `approval_denied`, logged as a failed call with its kind.
    let r = agent.call("fx__echo", json!({"text": "four"})).await;
    let body = refused(&r, "approval_denied");
    assert_eq!(body["denied_by"], "elicitation", "{body}");
    assert!(body["approval"].is_string(), "{body}");
    answer(&agent, None);
    let r = agent.call("fx__echo", json!({"text": "five"})).await;
    refused(&r, "approval_denied");
    assert_eq!(elicited(&agent).len(), 6);
    let logged = recent_calls(&agent).await;
    assert_eq!(logged[0]["success"], false, "{}", logged[0]);
    assert!(
        logged[0]["response"]
            .as_str()
            .unwrap()
            .contains("approval_denied"),
        "{}",
        logged[0]
    );

    // The registry tool cannot loosen a rule (it may be what asks about its own caller).
    let (is_error, v) = agent
        .try_registry(
            json!({"action": "tool_policy", "name": "fx", "tool": "echo", "policy": "allow"}),
        )
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("cannot loosen"),
        "{v}"
    );

    // `deny`: refused at once, nobody asked.
    agent
        .registry(json!({"action": "tool_policy", "name": "fx", "tool": "add", "policy": "deny"}))
        .await;
    let r = agent.call("fx__add", json!({"a": 1, "b": 2})).await;
    let body = refused(&r, "approval_denied");
    assert_eq!(body["denied_by"], "policy", "{body}");
    assert_eq!(elicited(&agent).len(), 6);

    // An annotation rule: the server's tools that declare destructiveHint ask; the others do not (fast lane).
    answer(&agent, Some("approve"));
    agent
        .registry(json!({"action": "tool_policy", "name": "fx", "annotation": "destructive", "policy": "ask"}))
        .await;
    let r = agent.call("fx__wipe", json!({"input": "everything"})).await;
    assert!(harness::text(&r).contains("everything"), "{r:?}");
    let asked = elicited(&agent);
    assert_eq!(asked.len(), 7);
    assert!(asked[6].contains("Tool: wipe"), "{}", asked[6]);
    let lane = crate::relay::fast_lane_calls(&agent).await;
    let r = agent.call("fx__sleep", json!({"ms": 0})).await;
    assert_eq!(harness::text(&r), "slept 0 ms");
    assert_eq!(elicited(&agent).len(), 7);
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, lane + 1);

    // `proxy_call` takes the same step.
    let v = agent
        .registry(json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "via proxy_call"}}))
        .await;
    assert_eq!(v, json!("via proxy_call"));
    assert_eq!(elicited(&agent).len(), 8);
    answer(&agent, Some("deny"));
    let (is_error, v) = agent
        .try_registry(
            json!({"action": "proxy_call", "call_as": "fx__echo", "arguments": {"text": "no"}}),
        )
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "approval_denied", "{v}");
    agent.stop().await;
}

/// A 2026-07-28 rmcp client of `endpoint` that declares elicitation (it answers input requests itself, on retry).
pub(crate) async fn client_2026(endpoint: &str) -> eras::Client {
    let seen = Arc::new(harness::Seen::default());
    *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    eras::client_2026_as(
        endpoint,
        harness::TestClient {
            seen,
            sampling_reply: None,
        },
    )
    .await
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().unwrap().clone())
}

fn retry(
    mut c: CallToolRequestParams,
    key: &str,
    answer: Value,
    state: &str,
) -> CallToolRequestParams {
    c.input_responses = Some([(key.to_owned(), answer)].into());
    c.request_state = Some(state.to_owned());
    c
}

/// A retry refused as invalid params naming why in `data.requestState`.
async fn refused_retry(client: &eras::Client, c: CallToolRequestParams, why: &str) {
    match client.call_tool_once(c).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            assert_eq!(e.data.unwrap()["requestState"], why, "{}", e.message);
        }
        other => panic!("a {why} retry was not refused: {other:?}"),
    }
}

/// The approval question of an input-required result: its elicitation request as JSON.
fn approval_question(r: &InputRequiredResult) -> Value {
    let requests = serde_json::to_value(r.input_requests.clone().unwrap()).unwrap();
    assert_eq!(
        requests["approval"]["method"], "elicitation/create",
        "{requests}"
    );
    requests["approval"]["params"].clone()
}

async fn put_policy(url: &str, server: &str, rule: Value) -> Value {
    let r = reqwest::Client::new()
        .put(format!("{url}/api/servers/{server}/tool-policy"))
        .json(&rule)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_2026_client_answers_on_retry_with_a_token_bound_to_the_call() {
    let dir = tmp();
    let (mut serve, url) = eras::serve(
        dir.path(),
        &[
            json!({"action": "install", "name": "old", "command": harness::fixture(), "args": ["--name", "old"]}),
            json!({"action": "install", "name": "quick", "command": harness::fixture(), "args": ["--name", "quick"],
                "call_timeout_ms": 400}),
        ],
    )
    .await;
    put_policy(&url, "old", json!({"policy": "ask"})).await;
    put_policy(&url, "quick", json!({"policy": "ask"})).await;
    // The per-server endpoint: the child's own tool names.
    let client = client_2026(&format!("{url}/mcp/servers/old")).await;

    let first = asked(
        client
            .call_tool_once(call("echo", json!({"text": "a"})))
            .await
            .unwrap(),
    );
    let question = approval_question(&first);
    let message = question["message"].as_str().unwrap();
    assert!(
        message.contains("Server: old") && message.contains("\"text\": \"a\""),
        "{message}"
    );
    // A 2026-07-28 request over HTTP has no session: only approve and deny are offered.
    let choices: Vec<&str> = question["requestedSchema"]["properties"]["decision"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["const"].as_str().unwrap())
        .collect();
    assert_eq!(choices, ["approve", "deny"]);
    let token = first.request_state.clone().expect("a requestState");
    assert!(token.starts_with("adap1."), "{token}");

    // Without the answer: asked again, same token.
    let mut again = call("echo", json!({"text": "a"}));
    again.request_state = Some(token.clone());
    assert_eq!(
        asked(client.call_tool_once(again).await.unwrap()).request_state,
        Some(token.clone())
    );
    // Altered, forged, or for other arguments: refused.
    let approve = accept(json!({"decision": "approve"}));
    refused_retry(
        &client,
        retry(
            call("echo", json!({"text": "a"})),
            "approval",
            approve.clone(),
            &format!("{token}x"),
        ),
        "tampered",
    )
    .await;
    refused_retry(
        &client,
        retry(
            call("echo", json!({"text": "a"})),
            "approval",
            approve.clone(),
            "adap1.e30.AAAA",
        ),
        "tampered",
    )
    .await;
    refused_retry(
        &client,
        retry(
            call("echo", json!({"text": "b"})),
            "approval",
            approve.clone(),
            &token,
        ),
        "mismatched",
    )
    .await;
    // A held child request's token shape is not an approval's: the call is asked about afresh.
    let fresh = asked(
        client
            .call_tool_once(retry(
                call("echo", json!({"text": "a"})),
                "approval",
                approve.clone(),
                "adrs1.e30.AAAA",
            ))
            .await
            .unwrap(),
    );
    assert_ne!(fresh.request_state.as_deref(), Some(token.as_str()));

    // Approved: the call runs; the token served once.
    let done = completed(
        client
            .call_tool_once(retry(
                call("echo", json!({"text": "a"})),
                "approval",
                approve.clone(),
                &token,
            ))
            .await
            .unwrap(),
    );
    assert_eq!(done, "a");
    refused_retry(
        &client,
        retry(
            call("echo", json!({"text": "a"})),
            "approval",
            approve.clone(),
            &token,
        ),
        "gone",
    )
    .await;

    // Denied: `approval_denied`, by the input.
    let r = asked(
        client
            .call_tool_once(call("echo", json!({"text": "b"})))
            .await
            .unwrap(),
    );
    let res = client
        .call_tool_once(retry(
            call("echo", json!({"text": "b"})),
            "approval",
            accept(json!({"decision": "deny"})),
            r.request_state.as_deref().unwrap(),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(res) = res else {
        panic!("not a complete result: {res:?}")
    };
    let body = refused(&res, "approval_denied");
    assert!(
        body["error"].as_str().unwrap().contains("denied by input"),
        "{body}"
    );

    // Approved, then the legacy child asks its own question: it comes back sealed in an approval token, and the
    // answer reaches the child.
    let elicit = || call("elicit", json!({"message": "your name?"}));
    let r = asked(client.call_tool_once(elicit()).await.unwrap());
    let r = asked(
        client
            .call_tool_once(retry(
                elicit(),
                "approval",
                approve.clone(),
                r.request_state.as_deref().unwrap(),
            ))
            .await
            .unwrap(),
    );
    let requests = serde_json::to_value(r.input_requests.clone().unwrap()).unwrap();
    assert_eq!(requests["elicitation"]["params"]["message"], "your name?");
    let state = r.request_state.clone().unwrap();
    assert!(state.starts_with("adap1."), "{state}");
    let done = completed(
        client
            .call_tool_once(retry(
                elicit(),
                "elicitation",
                accept(json!({"answer": "Ada"})),
                &state,
            ))
            .await
            .unwrap(),
    );
    assert!(done.contains("Ada"), "{done}");
    // That round served once: replayed, it would run the call again without asking.
    refused_retry(
        &client,
        retry(
            elicit(),
            "elicitation",
            accept(json!({"answer": "Ada"})),
            &state,
        ),
        "gone",
    )
    .await;

    // A `deny` set meanwhile stops the next round of a call approved earlier.
    let r = asked(client.call_tool_once(elicit()).await.unwrap());
    let r = asked(
        client
            .call_tool_once(retry(
                elicit(),
                "approval",
                approve.clone(),
                r.request_state.as_deref().unwrap(),
            ))
            .await
            .unwrap(),
    );
    put_policy(&url, "old", json!({"tool": "elicit", "policy": "deny"})).await;
    let res = client
        .call_tool_once(retry(
            elicit(),
            "elicitation",
            accept(json!({"answer": "Ada"})),
            r.request_state.as_deref().unwrap(),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(res) = res else {
        panic!("not a complete result: {res:?}")
    };
    refused(&res, "approval_denied");

    // The aggregated front asks the same way, under the exposed name.
    let aggregated = client_2026(&format!("{url}/mcp")).await;
    let r = asked(
        aggregated
            .call_tool_once(call("old__echo", json!({"text": "c"})))
            .await
            .unwrap(),
    );
    assert!(
        approval_question(&r)["message"]
            .as_str()
            .unwrap()
            .contains("Tool: echo")
    );
    let done = completed(
        aggregated
            .call_tool_once(retry(
                call("old__echo", json!({"text": "c"})),
                "approval",
                approve.clone(),
                r.request_state.as_deref().unwrap(),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(done, "c");

    // An answer after the deadline (the server's call timeout, here 400 ms): `approval_timeout`.
    let quick = client_2026(&format!("{url}/mcp/servers/quick")).await;
    let r = asked(
        quick
            .call_tool_once(call("echo", json!({"text": "late"})))
            .await
            .unwrap(),
    );
    // Waits for time itself to pass the deadline, not for anything to be ready.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let res = quick
        .call_tool_once(retry(
            call("echo", json!({"text": "late"})),
            "approval",
            approve,
            r.request_state.as_deref().unwrap(),
        ))
        .await
        .unwrap();
    let CallToolResponse::Complete(res) = res else {
        panic!("not a complete result: {res:?}")
    };
    refused(&res, "approval_timeout");
    let _ = serve.kill().await;
}

// ---------- REST, in process ----------

struct Answer {
    status: StatusCode,
    body: Value,
}

fn request(method: &str, path: &str, body: Option<&Value>, session: Option<&str>) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "127.0.0.1:3424");
    if let Some(s) = session {
        b = b.header("x-agent-discover-session", s);
    }
    match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    }
}

async fn send(router: axum::Router, req: Request<Body>) -> Answer {
    let resp = router.oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Answer { status, body }
}

#[track_caller]
fn ok(a: &Answer) -> &Value {
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    &a.body
}

/// The next approval event of `sub` (bounded).
async fn next_event(sub: &mut agent_discover::events::Subscription) -> Event {
    loop {
        match tokio::time::timeout(PATIENCE, sub.recv()).await {
            Ok(Some(Received::Event(e))) => return e,
            Ok(Some(Received::Lagged(_))) => continue,
            other => panic!("no approval event: {other:?}"),
        }
    }
}

/// The id of the next approval asked (`approval:requested`), checking how it was asked.
async fn requested(sub: &mut agent_discover::events::Subscription, via: &str) -> String {
    loop {
        if let Event::ApprovalRequested { id, via: v, .. } = next_event(sub).await {
            assert_eq!(v, via);
            return id;
        }
    }
}

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(harness::BIN));
    App::open(config).expect("open the app")
}

#[tokio::test]
async fn rest_calls_wait_for_a_decision_made_through_rest() {
    let dir = tmp();
    let app = app_in(dir.path());
    let router = http::router(app.clone(), Security::loopback());
    for (name, timeout) in [("fx", None), ("slow", Some(700))] {
        let mut spec =
            json!({"name": name, "command": harness::fixture(), "args": ["--name", name]});
        if let Some(ms) = timeout {
            spec["call_timeout_ms"] = json!(ms);
        }
        let a = send(
            router.clone(),
            request("POST", "/api/servers", Some(&spec), None),
        )
        .await;
        assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
        let a = send(
            router.clone(),
            request("POST", &format!("/api/servers/{name}/activate"), None, None),
        )
        .await;
        ok(&a);
    }
    let rule = json!({"tool": "echo", "policy": "ask"});
    let a = send(
        router.clone(),
        request("PUT", "/api/servers/fx/tool-policy", Some(&rule), None),
    )
    .await;
    assert_eq!(
        ok(&a)["rules"],
        json!([{"scope": "tool", "tool": "echo", "policy": "ask"}])
    );
    let mut events = app.events.subscribe("approval:*");
    let echo =
        |text: &str| json!({"tool": "echo", "args": {"text": text, "opts": {"b": 2, "a": 1}}});

    // Approved once from another task: the waiting call completes.
    let waiting = tokio::spawn(send(
        router.clone(),
        request("POST", "/api/servers/fx/call", Some(&echo("hi")), None),
    ));
    let id = requested(&mut events, "wait").await;
    let list = send(router.clone(), request("GET", "/api/approvals", None, None)).await;
    let list = ok(&list).as_array().unwrap().clone();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["id"], id);
    assert_eq!(
        (&list[0]["server"], &list[0]["tool"], &list[0]["status"]),
        (&json!("fx"), &json!("echo"), &json!("pending"))
    );
    assert_eq!(
        list[0]["arguments"],
        json!({"opts": {"a": 1, "b": 2}, "text": "hi"})
    );
    assert_eq!(list[0]["session"], Value::Null);
    let a = send(
        router.clone(),
        request(
            "POST",
            &format!("/api/approvals/{id}/approve"),
            Some(&json!({"scope": "once"})),
            None,
        ),
    )
    .await;
    assert_eq!(ok(&a)["status"], "approved");
    let done = waiting.await.unwrap();
    assert_eq!(ok(&done)["content"][0]["text"], "hi");
    assert!(matches!(
        next_event(&mut events).await,
        Event::ApprovalDecided { decision: "approved", ref by, .. } if by == "rest"
    ));
    // Decided once: a second decision is refused.
    let again = send(
        router.clone(),
        request("POST", &format!("/api/approvals/{id}/deny"), None, None),
    )
    .await;
    assert_eq!(again.status, StatusCode::BAD_REQUEST, "{}", again.body);

    // Denied (the dashboard says so): 403 `approval_denied`.
    let waiting = tokio::spawn(send(
        router.clone(),
        request("POST", "/api/servers/fx/call", Some(&echo("no")), None),
    ));
    let id = requested(&mut events, "wait").await;
    ok(&send(
        router.clone(),
        request(
            "POST",
            &format!("/api/approvals/{id}/deny"),
            Some(&json!({"by": "dashboard"})),
            None,
        ),
    )
    .await);
    let done = waiting.await.unwrap();
    assert_eq!(done.status, StatusCode::FORBIDDEN, "{}", done.body);
    assert_eq!(
        (
            &done.body["code"],
            &done.body["kind"],
            &done.body["approval"]
        ),
        (&json!("denied"), &json!("approval_denied"), &json!(id))
    );
    assert!(
        done.body["error"]
            .as_str()
            .unwrap()
            .contains("denied by dashboard")
    );

    // For the caller's session (its header): the same call passes afterwards without asking; others ask again.
    let waiting = tokio::spawn(send(
        router.clone(),
        request("POST", "/api/servers/fx/call", Some(&echo("s")), Some("s1")),
    ));
    let id = requested(&mut events, "wait").await;
    let a = send(
        router.clone(),
        request(
            "POST",
            &format!("/api/approvals/{id}/approve"),
            Some(&json!({"scope": "session"})),
            None,
        ),
    )
    .await;
    assert_eq!(
        (&ok(&a)["scope"], &a.body["session"]),
        (&json!("session"), &json!("rest:s1"))
    );
    ok(&waiting.await.unwrap());
    let count = |app: &App| app.approvals(true).unwrap().len();
    let before = count(&app);
    let again = send(
        router.clone(),
        request("POST", "/api/servers/fx/call", Some(&echo("s")), Some("s1")),
    )
    .await;
    assert_eq!(ok(&again)["content"][0]["text"], "s");
    assert_eq!(count(&app), before, "nothing was asked");
    // Another session, or other arguments, ask again.
    for (text, session) in [("s", "s2"), ("t", "s1")] {
        let waiting = tokio::spawn(send(
            router.clone(),
            request(
                "POST",
                "/api/servers/fx/call",
                Some(&echo(text)),
                Some(session),
            ),
        ));
        let id = requested(&mut events, "wait").await;
        ok(&send(
            router.clone(),
            request("POST", &format!("/api/approvals/{id}/deny"), None, None),
        )
        .await);
        assert_eq!(waiting.await.unwrap().status, StatusCode::FORBIDDEN);
    }

    // Nobody answers before the deadline (the server's call timeout): 504 `approval_timeout`, the approval expired.
    let rule = json!({"policy": "ask"});
    ok(&send(
        router.clone(),
        request("PUT", "/api/servers/slow/tool-policy", Some(&rule), None),
    )
    .await);
    let late = send(
        router.clone(),
        request(
            "POST",
            "/api/servers/slow/call",
            Some(&json!({"tool": "add", "args": {"a": 1, "b": 2}})),
            None,
        ),
    )
    .await;
    assert_eq!(late.status, StatusCode::GATEWAY_TIMEOUT, "{}", late.body);
    assert_eq!(late.body["kind"], "approval_timeout", "{}", late.body);
    let all = send(
        router.clone(),
        request("GET", "/api/approvals?all=true", None, None),
    )
    .await;
    let expired = ok(&all)
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == late.body["approval"])
        .cloned()
        .unwrap();
    assert_eq!(
        (&expired["status"], &expired["decided_by"]),
        (&json!("expired"), &json!("timeout"))
    );

    // `deny` policy: refused at once.
    ok(&send(
        router.clone(),
        request(
            "PUT",
            "/api/servers/fx/tool-policy",
            Some(&json!({"tool": "add", "policy": "deny"})),
            None,
        ),
    )
    .await);
    let refused = send(
        router.clone(),
        request(
            "POST",
            "/api/servers/fx/call",
            Some(&json!({"tool": "add", "args": {"a": 1, "b": 2}})),
            None,
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        refused.body["error"]
            .as_str()
            .unwrap()
            .contains("denied by policy")
    );

    // The call log: approved calls say so, refused ones are failures with their kind.
    let (entries, _) = app.calllog.entries(50, 0);
    assert!(entries.iter().any(|e| {
        e.success
            && e.response
                .starts_with("[approval: approved once by rest] hi")
    }));
    assert!(entries.iter().any(|e| {
        e.success
            && e.response
                .starts_with("[approval: approved for the session by rest]")
    }));
    assert!(
        entries
            .iter()
            .any(|e| !e.success && e.response.starts_with("approval_denied"))
    );
    assert!(
        entries
            .iter()
            .any(|e| !e.success && e.tool == "add" && e.response.starts_with("approval_timeout"))
    );
    // Rules are shown and removed the same way; bad input is a 400 naming the field.
    let shown = send(
        router.clone(),
        request("GET", "/api/servers/fx/tool-policy", None, None),
    )
    .await;
    assert_eq!(ok(&shown)["rules"].as_array().unwrap().len(), 2);
    ok(&send(
        router.clone(),
        request(
            "PUT",
            "/api/servers/fx/tool-policy",
            Some(&json!({"tool": "add", "policy": null})),
            None,
        ),
    )
    .await);
    for bad in [
        json!({"policy": "sometimes"}),
        json!({"tool": "echo", "annotation": "destructive", "policy": "ask"}),
        json!({"annotation": "readonly", "policy": "ask"}),
    ] {
        let a = send(
            router.clone(),
            request("PUT", "/api/servers/fx/tool-policy", Some(&bad), None),
        )
        .await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}: {}", a.body);
    }
    app.proxy.shutdown().await;
}

// ---------- the CLI, across processes ----------

pub(crate) async fn cli(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = harness::command(dir, args)
        .output()
        .await
        .expect("run agent-discover");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The id of the first call waiting for approval in `dir`'s registry, once another process recorded one: read again
/// each time another process commits (`ad_store::watch`), never on a timer.
pub(crate) async fn pending_in(dir: &Path) -> Value {
    use agent_discover::store::{Store, watch};
    let path = dir.join("agent-discover.db");
    let store = Store::open(&path).unwrap();
    let changed = Arc::new(tokio::sync::Notify::new());
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let kick = changed.clone();
    watch::spawn(store.clone(), &path, move || kick.notify_one(), stop);
    let found = tokio::time::timeout(PATIENCE, async {
        loop {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64;
            if let Some(a) = store.approvals(true, 10, now).unwrap().first() {
                return a.clone();
            }
            changed.notified().await;
        }
    })
    .await
    .expect("no call waited for approval");
    json!({"id": found.id, "tool": found.tool, "arguments": found.arguments})
}

#[tokio::test]
async fn a_cli_call_waits_until_another_process_decides() {
    let dir = tmp();
    let d = dir.path();
    let (ok, _, err) = cli(d, &["add", "fx", "--", harness::fixture(), "--name", "fx"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = cli(d, &["tools", "policy", "fx", "echo", "--ask", "--json"]).await;
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["rules"],
        json!([{"scope": "tool", "tool": "echo", "policy": "ask"}])
    );
    // Without a flag: shown, as a table.
    let (ok, out, _) = cli(d, &["tools", "policy", "fx"]).await;
    assert!(
        ok && out.contains("tool echo") && out.contains("ask"),
        "{out}"
    );

    let call = |text: &str| {
        harness::command(
            d,
            &[
                "call",
                "fx__echo",
                "--args",
                &json!({"text": text}).to_string(),
            ],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
    };
    // Approved by `approvals approve` in another process.
    let waiting = call("from the cli");
    let pending = pending_in(d).await;
    assert_eq!(pending["tool"], "echo");
    assert_eq!(pending["arguments"], r#"{"text":"from the cli"}"#);
    let id = pending["id"].as_str().unwrap().to_owned();
    let (ok, out, err) = cli(d, &["approvals", "list", "--json"]).await;
    assert!(ok, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["id"], id.as_str(), "{list}");
    assert_eq!(list[0]["arguments"], json!({"text": "from the cli"}));
    let (ok, out, err) = cli(d, &["approvals", "approve", &id]).await;
    assert!(ok, "{err}");
    assert!(out.contains("approved fx__echo (once)"), "{out}");
    let done = tokio::time::timeout(PATIENCE, waiting.wait_with_output())
        .await
        .expect("the call did not end")
        .unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert_eq!(stdout.trim(), "from the cli");

    // Denied by `approvals deny`: the call fails with `approval_denied`.
    let waiting = call("not this one");
    let id = pending_in(d).await["id"].as_str().unwrap().to_owned();
    let (ok, out, err) = cli(d, &["approvals", "deny", &id]).await;
    assert!(ok && out.contains("denied fx__echo"), "{out}{err}");
    let done = tokio::time::timeout(PATIENCE, waiting.wait_with_output())
        .await
        .expect("the call did not end")
        .unwrap();
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("approval_denied"), "{stderr}");
    // Recorded with who decided.
    let (_, out, _) = cli(d, &["approvals", "list", "--all", "--json"]).await;
    let all: Value = serde_json::from_str(&out).unwrap();
    let by: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["decided_by"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(by.len(), 2, "{all}");
    assert!(by.iter().all(|b| b.starts_with("cli:")), "{all}");
    // Nothing waits now; deciding an unknown approval is an error.
    let (ok, _, err) = cli(d, &["approvals", "list"]).await;
    assert!(ok && err.contains("no call is waiting"), "{err}");
    let (ok, _, err) = cli(d, &["approvals", "approve", "nope"]).await;
    assert!(!ok && err.contains("not found"), "{err}");
    // Clearing the rule: the call runs without asking.
    let (ok, _, err) = cli(d, &["tools", "policy", "fx", "echo", "--clear"]).await;
    assert!(ok, "{err}");
    let (ok, out, err) = cli(d, &["call", "fx__echo", "--args", r#"{"text":"free"}"#]).await;
    assert!(ok && out.trim() == "free", "{out}{err}");
}

/// The next `server:tool_policy` event's server (bounded).
async fn policy_changed(sub: &mut agent_discover::events::Subscription) -> String {
    loop {
        match tokio::time::timeout(PATIENCE, sub.recv()).await {
            Ok(Some(Received::Event(Event::ToolPolicyChanged { name }))) => return name,
            Ok(Some(_)) => continue,
            other => panic!("no policy change heard: {other:?}"),
        }
    }
}

/// A rule another process sets reaches this process's fast lane as soon as the database watch reports the commit (the
/// normal path reads the rules on every call), and this process's listeners hear of it.
#[tokio::test]
async fn a_rule_set_by_another_process_reaches_the_fast_lane() {
    let dir = tmp();
    let d = dir.path();
    let app = app_in(d);
    let router = http::router(app.clone(), Security::loopback());
    let spec = json!({"name": "fx", "command": harness::fixture(), "args": ["--name", "fx"]});
    let a = send(
        router.clone(),
        request("POST", "/api/servers", Some(&spec), None),
    )
    .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
    ok(&send(
        router.clone(),
        request("POST", "/api/servers/fx/activate", None, None),
    )
    .await);
    assert!(app.proxy.approval_gated().is_empty());
    let mut changed = app.events.subscribe("server:tool_policy");
    let (ok_, _, err) = cli(
        d,
        &[
            "tools",
            "policy",
            "fx",
            "--annotation",
            "destructive",
            "--deny",
        ],
    )
    .await;
    assert!(ok_, "{err}");
    let (ok_, _, err) = cli(d, &["tools", "policy", "fx", "echo", "--ask"]).await;
    assert!(ok_, "{err}");
    // The fixture's tools declare no destructive hint: only echo leaves the fast lane, and only that is a change.
    assert_eq!(policy_changed(&mut changed).await, "fx");
    assert_eq!(app.proxy.approval_gated(), ["fx__echo"]);
    let (ok_, _, err) = cli(d, &["tools", "policy", "fx", "echo", "--clear"]).await;
    assert!(ok_, "{err}");
    assert_eq!(policy_changed(&mut changed).await, "fx");
    assert!(app.proxy.approval_gated().is_empty());
    app.proxy.shutdown().await;
}

// ---------- PostgreSQL: replicas decide for each other ----------

#[tokio::test]
async fn a_call_on_one_postgres_replica_is_approved_on_another() {
    let server = crate::pg::server();
    let url = server.new_database();
    let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let env = |name: &str| {
        vec![
            ("AGENT_DISCOVER_DATABASE_URL", url.clone()),
            ("AGENT_DISCOVER_MASTER_KEY", key.to_owned()),
            ("AGENT_DISCOVER_REPLICA", name.to_owned()),
        ]
    };
    let (da, db) = (tmp(), tmp());
    let a = crate::replicas::replica(da.path(), &env("a")).await;
    let b = crate::replicas::replica(db.path(), &env("b")).await;
    let http = reqwest::Client::new();
    crate::replicas::register_fixture(&http, &b, "fx").await;
    put_policy(&a.url, "fx", json!({"tool": "echo", "policy": "ask"})).await;
    // Replica a's dashboard stream: its state lists the calls waiting, whichever replica holds them.
    let ws_url = format!("{}/ws", a.url.replace("http://", "ws://"));
    let mut ws = crate::http::ws_connect(&ws_url, &[]).await.unwrap();
    let call = tokio::spawn({
        let http = http.clone();
        let url = b.url.clone();
        async move {
            http.post(format!("{url}/api/servers/fx/call"))
                .json(&json!({"tool": "echo", "args": {"text": "team"}}))
                .send()
                .await
                .unwrap()
        }
    });
    let state = crate::http::next_message(&mut ws, PATIENCE, |m| {
        m["type"] == "state" && m["approvals"].as_array().is_some_and(|a| !a.is_empty())
    })
    .await;
    let id = state["approvals"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(state["approvals"][0]["arguments"], json!({"text": "team"}));
    let decided = http
        .post(format!("{}/api/approvals/{id}/approve", a.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 200, "{}", decided.text().await.unwrap());
    let done = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the call on b did not end")
        .unwrap();
    assert_eq!(done.status(), 200);
    let body: Value = done.json().await.unwrap();
    assert_eq!(body["content"][0]["text"], "team");
    // The store's own round trip on PostgreSQL: rules, a decision once, expiry.
    let team = agent_discover::store::Store::open_url(&url).unwrap();
    let fx = team.server_by_name("fx").unwrap().unwrap().id;
    assert_eq!(team.tool_policies(fx).unwrap().len(), 1);
    assert!(
        team.set_tool_policy(fx, "annotation:destructive", Some("deny"))
            .unwrap()
    );
    assert!(
        !team
            .set_tool_policy(fx, "annotation:destructive", Some("deny"))
            .unwrap()
    );
    let row = team.approval(&id).unwrap().unwrap();
    assert_eq!(
        (row.status.as_str(), row.decided_by.as_deref()),
        ("used", Some("rest"))
    );
    let (_, again) = team
        .decide_approval(&id, "denied", None, "rest", 0)
        .unwrap();
    assert!(!again);
}

// ---------- the official Python SDK ----------

#[tokio::test]
async fn the_python_sdk_answers_with_its_elicitation_callback_in_both_eras() {
    for (mode, era) in [("auto", "2026-07-28"), ("legacy", "2025-11-25")] {
        let stdout = crate::interop::python_check("python_approval_check.py", mode).await;
        assert!(
            stdout.contains(&format!("ok: approvals in {era}")),
            "{stdout}"
        );
    }
}
