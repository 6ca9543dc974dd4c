//! Issue 18, a legacy (2025-11-25, `initialize`) child behind clients of both eras: its log messages reach a
//! 2026-07-28 caller's request stream at the level that request asked for (the child set with `logging/setLevel`
//! as needed, the server named in `logger` on the aggregated front), and the registry's `proxy_call` of a tool that
//! asks the client something: an input-required result for a 2026-07-28 client, answered by retrying the `registry`
//! call; the question itself for a legacy client that declared the capability; a typed `input_required` error (or
//! -32021 for a 2026-07-28 client) for a caller that cannot answer.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::*;
use serde_json::{Value, json};

use crate::eras::{self, Client};
use crate::harness;

/// The plain fixture as `old`: legacy era only, with `--logging` (it honours `logging/setLevel`; its `log` tool
/// sends debug, info, warning and error, those the level lets through).
fn old_fixture() -> Value {
    json!({"action": "install", "name": "old", "command": harness::fixture(),
        "args": ["--name", "old", "--logging"]})
}

/// The log messages a client has received as (logger, data), once there are at least `n` (20 s at most).
async fn logs(client: &Client, n: usize) -> Vec<(Option<String>, Value)> {
    let seen = &client.service().seen;
    let wait = async {
        loop {
            let notified = seen.notify.notified();
            if seen.logs.lock().unwrap().len() >= n {
                return;
            }
            notified.await;
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), wait).await;
    seen.logs.lock().unwrap().clone()
}

/// The messages' texts, sorted: `serve` runs on several threads and rmcp handles each notification of a child in a
/// task of its own, so messages a child sends back to back may be forwarded in another order (README, "What passes through the proxy").
fn data(logs: &[(Option<String>, Value)]) -> Vec<String> {
    let mut texts: Vec<String> = logs
        .iter()
        .map(|(_, d)| d.as_str().unwrap_or_default().to_owned())
        .collect();
    texts.sort();
    texts
}

/// A 2026-07-28 rmcp client; `elicit` and `sampling` set what it declares.
async fn client_2026(endpoint: &str, elicit: bool, sampling: bool) -> Client {
    let seen = Arc::new(harness::Seen::default());
    if elicit {
        *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    }
    eras::client_2026_as(
        endpoint,
        harness::TestClient {
            seen,
            sampling_reply: sampling.then(|| "unused".into()),
        },
    )
    .await
}

/// Starts `name` through the registry tool (the aggregated front serves active servers only).
async fn activate(client: &Client, name: &str) {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry").with_arguments(
                json!({"action": "activate", "name": name})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
}

#[allow(deprecated)]
fn call_at(name: &str, level: Option<LoggingLevel>) -> CallToolRequestParams {
    let mut call = CallToolRequestParams::new(name.to_owned()).with_arguments(Default::default());
    if let Some(level) = level {
        let mut meta = RequestMetaObject::default();
        meta.set_log_level(level);
        call.meta = Some(meta);
    }
    call
}

#[tokio::test]
#[allow(deprecated)]
async fn a_legacy_childs_log_messages_reach_2026_callers_at_their_level() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = eras::serve(
        dir.path(),
        &[
            old_fixture(),
            json!({"action": "install", "name": "fxl", "command": harness::fixture(),
                "args": ["--conformance", "--name", "fxl", "--era", "legacy"]}),
        ],
    )
    .await;
    let aggregated = format!("{url}/mcp");
    // A legacy client asks for warning and above: the child is started at that level.
    let legacy = eras::client_legacy(&aggregated, None).await;
    legacy
        .peer()
        .set_level(SetLevelRequestParams::new(LoggingLevel::Warning))
        .await
        .unwrap();
    activate(&legacy, "old").await;
    activate(&legacy, "fxl").await;
    let r = legacy.call_tool(call_at("old__log", None)).await.unwrap();
    assert_eq!(harness::text(&r), "sent warning,error at level warning");
    let got = logs(&legacy, 2).await;
    assert_eq!(data(&got), ["error from log", "warning from log"]);
    assert!(
        got.iter().all(|(l, _)| l.as_deref() == Some("old/fixture")),
        "{got:?}"
    );

    // A 2026-07-28 client asks for debug on its request: the child is set to debug for it, and every message of the
    // call reaches that request's stream, the server named in `logger`.
    let modern = client_2026(&aggregated, false, false).await;
    let r = eras::completed(
        modern
            .call_tool_once(call_at("old__log", Some(LoggingLevel::Debug)))
            .await
            .unwrap(),
    );
    assert_eq!(r, "sent debug,info,warning,error at level debug");
    let got = logs(&modern, 4).await;
    assert_eq!(
        data(&got),
        [
            "debug from log",
            "error from log",
            "info from log",
            "warning from log"
        ]
    );
    assert!(
        got.iter().all(|(l, _)| l.as_deref() == Some("old/fixture")),
        "{got:?}"
    );
    // The legacy client still gets only what it asked for (the child now logs more).
    let got = logs(&legacy, 4).await;
    assert_eq!(
        data(&got),
        [
            "error from log",
            "error from log",
            "warning from log",
            "warning from log"
        ]
    );

    // Per-server endpoint, raw 2026-07-28 requests: `logger` as the child sent it, each request at its own level,
    // nothing without a level.
    let per_server = format!("{url}/mcp/servers/old");
    let call = json!({"name": "log", "arguments": {}});
    let errors = eras::raw_2026_logs(
        &per_server,
        call.clone(),
        json!({"io.modelcontextprotocol/logLevel": "error"}),
    )
    .await;
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["params"]["level"], "error");
    assert_eq!(errors[0]["params"]["logger"], "fixture");
    assert_eq!(errors[0]["params"]["data"], "error from log");
    let infos = eras::raw_2026_logs(
        &per_server,
        call.clone(),
        json!({"io.modelcontextprotocol/logLevel": "info"}),
    )
    .await;
    let mut levels: Vec<&str> = infos
        .iter()
        .filter_map(|l| l["params"]["level"].as_str())
        .collect();
    levels.sort();
    assert_eq!(levels, ["error", "info", "warning"]);
    let none = eras::raw_2026_logs(&per_server, call, json!({})).await;
    assert!(none.is_empty(), "{none:?}");

    // The conformance fixture as a legacy child: its three messages during the call, spaced out, all arrive.
    let fxl = client_2026(&aggregated, false, false).await;
    eras::completed(
        fxl.call_tool_once(call_at(
            "fxl__test_tool_with_logging",
            Some(LoggingLevel::Info),
        ))
        .await
        .unwrap(),
    );
    let got = logs(&fxl, 3).await;
    assert_eq!(
        data(&got),
        [
            "Tool execution completed",
            "Tool execution started",
            "Tool processing data"
        ]
    );
    assert!(
        got.iter().all(|(l, _)| l.as_deref() == Some("fxl")),
        "{got:?}"
    );
    let _ = serve.kill().await;
}

/// The registry's `proxy_call` of `call_as` with `arguments`.
fn proxy_call(call_as: &str, arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("registry").with_arguments(
        json!({"action": "proxy_call", "call_as": call_as, "arguments": arguments})
            .as_object()
            .unwrap()
            .clone(),
    )
}

fn error_body(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    serde_json::from_str(&harness::text(r)).unwrap()
}

#[tokio::test]
async fn proxy_call_of_a_legacy_child_that_asks_round_trips_for_both_eras() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = eras::serve(dir.path(), &[old_fixture()]).await;
    let aggregated = format!("{url}/mcp");
    let elicit = || proxy_call("old__elicit", json!({"message": "who?"}));

    // 2026-07-28 client: the `registry` call itself comes back input-required; retrying it answers the child.
    let modern = client_2026(&aggregated, true, false).await;
    activate(&modern, "old").await;
    activate(&modern, "fx").await;
    let r1 = eras::asked(modern.call_tool_once(elicit()).await.unwrap());
    let requests = serde_json::to_value(r1.input_requests.clone().unwrap()).unwrap();
    assert_eq!(requests["elicitation"]["method"], "elicitation/create");
    assert_eq!(requests["elicitation"]["params"]["message"], "who?");
    let mut retry = elicit();
    retry.input_responses = Some(
        [(
            "elicitation".to_owned(),
            eras::accept(json!({"answer": "Ann"})),
        )]
        .into(),
    );
    retry.request_state = r1.request_state.clone();
    let done = eras::completed(modern.call_tool_once(retry.clone()).await.unwrap());
    assert!(done.starts_with("elicited:"), "{done}");
    assert!(done.contains("Ann"), "{done}");
    // Its token served once; the question never reached the client as a request of its own.
    match modern.call_tool_once(retry).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.data.unwrap()["requestState"], "gone")
        }
        other => panic!("a used token served again: {other:?}"),
    }
    assert!(modern.service().seen.elicited.lock().unwrap().is_empty());

    // A 2026-07-28 proxy_call of a 2026-07-28 child asking: the child's own input-required result, the same way.
    let r = eras::asked(
        modern
            .call_tool_once(proxy_call(
                "fx__test_input_required_result_elicitation",
                json!({}),
            ))
            .await
            .unwrap(),
    );
    assert!(r.input_requests.unwrap().contains_key("user_name"));
    let mut retry = proxy_call("fx__test_input_required_result_elicitation", json!({}));
    retry.input_responses =
        Some([("user_name".to_owned(), eras::accept(json!({"name": "Ann"})))].into());
    retry.request_state = r.request_state;
    assert_eq!(
        eras::completed(modern.call_tool_once(retry).await.unwrap()),
        "Hello, Ann!"
    );

    // A 2026-07-28 client that did not declare elicitation: the child is refused, fails, and the client gets -32021.
    let plain = client_2026(&aggregated, false, false).await;
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

    // A legacy client that declared elicitation is asked the child's question, and the call completes.
    let legacy = eras::client_legacy(&aggregated, Some(json!({"answer": "Bob"}))).await;
    let r = legacy.call_tool(elicit()).await.unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert!(harness::text(&r).contains("Bob"), "{r:?}");
    assert_eq!(
        legacy.service().seen.elicited.lock().unwrap().as_slice(),
        ["who?"]
    );
    // One that did not: a typed error saying what the tool needs, and nothing asked of any other client.
    let unable = eras::client_legacy(&aggregated, None).await;
    let r = unable.call_tool(elicit()).await.unwrap();
    let body = error_body(&r);
    assert_eq!(body["kind"], "input_required", "{body}");
    assert_eq!(body["needs"], "elicitation", "{body}");
    assert_eq!(body["server"], "old");
    assert_eq!(
        legacy.service().seen.elicited.lock().unwrap().len(),
        1,
        "another client was asked"
    );

    // REST (no MCP client at all): the same refusal, 503 with code unavailable.
    let res = reqwest::Client::new()
        .post(format!("{url}/api/servers/old/call"))
        .json(&json!({"tool": "elicit", "args": {"message": "who?"}}))
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        (status, &body["code"]),
        (503, &json!("unavailable")),
        "{body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("input_required"),
        "{body}"
    );
    assert_eq!(legacy.service().seen.elicited.lock().unwrap().len(), 1);
    let _ = serve.kill().await;
}

#[tokio::test]
async fn a_legacy_childs_requests_sent_together_are_asked_in_one_round() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = eras::serve(
        dir.path(),
        &[
            json!({"action": "install", "name": "fxl", "command": harness::fixture(),
                "args": ["--conformance", "--name", "fxl", "--era", "legacy"]}),
        ],
    )
    .await;
    // Declares elicitation, sampling and roots.
    let seen = Arc::new(harness::Seen::default());
    *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    *seen.roots.lock().unwrap() = Some(vec!["file:///unused".into()]);
    let client = eras::client_2026_as(
        &format!("{url}/mcp/servers/fxl"),
        harness::TestClient {
            seen,
            sampling_reply: Some("unused".into()),
        },
    )
    .await;
    let multi = || {
        CallToolRequestParams::new("test_input_required_result_multiple_inputs")
            .with_arguments(Default::default())
    };
    // The child asks its three questions at once: one input-required result carries them.
    let r1 = eras::asked(client.call_tool_once(multi()).await.unwrap());
    let requests = serde_json::to_value(r1.input_requests.unwrap()).unwrap();
    assert_eq!(requests["elicitation"]["method"], "elicitation/create");
    assert_eq!(requests["sampling"]["method"], "sampling/createMessage");
    assert_eq!(requests["roots"]["method"], "roots/list");
    assert_eq!(requests.as_object().unwrap().len(), 3, "{requests}");
    let token = r1.request_state.unwrap();
    // Only one answered: that one goes to the child, the others are asked again under the same token.
    let mut partial = multi();
    partial.input_responses = Some(
        [(
            "elicitation".to_owned(),
            eras::accept(json!({"name": "Alice"})),
        )]
        .into(),
    );
    partial.request_state = Some(token.clone());
    let r2 = eras::asked(client.call_tool_once(partial).await.unwrap());
    let keys: Vec<String> = r2.input_requests.unwrap().keys().cloned().collect();
    assert_eq!(keys, ["roots", "sampling"]);
    assert_eq!(r2.request_state.as_deref(), Some(token.as_str()));
    let mut rest = multi();
    rest.input_responses = Some(
        [
            (
                "sampling".to_owned(),
                json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "Hello there!"}}),
            ),
            (
                "roots".to_owned(),
                json!({"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}),
            ),
        ]
        .into(),
    );
    rest.request_state = Some(token);
    let done = eras::completed(client.call_tool_once(rest).await.unwrap());
    assert!(
        done.contains("Alice") && done.contains("Hello there!"),
        "{done}"
    );
    let _ = serve.kill().await;
}
