//! Issue 18, MCP 2026-07-28 end to end: children connected in their newest era (`server/discover`, else
//! `initialize`) and their era shown; input-required results (SEP-2322) relayed to 2026-07-28 clients through the
//! per-server and aggregated endpoints, and turned into elicitation requests for legacy clients; the front's 2026
//! answers (initialize 404/-32601, -32021 with HTTP 400, SEP-2164 resource not found, list_changed on
//! `subscriptions/listen`).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness;

type Client = RunningService<RoleClient, harness::TestClient>;

/// `agent-discover serve --port 0` with the conformance fixture registered as `fx` (and `more` servers); returns
/// the process and its base URL.
async fn serve(dir: &std::path::Path, more: &[Value]) -> (tokio::process::Child, String) {
    let setup = harness::spawn(dir, &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "fx", "command": harness::BIN,
            "args": ["fixture-server", "--conformance", "--name", "fx"]}),
        )
        .await;
    for m in more {
        setup.registry(m.clone()).await;
    }
    setup.stop().await;
    let mut serve = harness::command(dir, &["serve", "--port", "0"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(serve.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("serve printed no URL")
        .unwrap()
        .expect("serve exited");
    (serve, url.trim_end_matches('/').to_owned())
}

fn test_client(seen: Arc<harness::Seen>) -> harness::TestClient {
    harness::TestClient {
        seen,
        sampling_reply: None,
    }
}

/// A 2026-07-28 client (`server/discover`, per-request `_meta`) of `endpoint`.
async fn client_2026(endpoint: &str) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(endpoint.to_owned()),
    );
    test_client(Arc::default())
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover")
}

/// A legacy (2025-11-25, `initialize`) client of `endpoint`, answering elicitation with `answers` when given.
async fn client_legacy(endpoint: &str, answers: Option<Value>) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(endpoint.to_owned()),
    );
    let seen = Arc::new(harness::Seen::default());
    if let Some(Value::Object(a)) = answers {
        *seen.elicit_answers.lock().unwrap() = Some(a);
    }
    test_client(seen)
        .serve(transport)
        .await
        .expect("initialize")
}

fn call(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(Default::default())
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn asked(r: CallToolResponse) -> InputRequiredResult {
    match r {
        CallToolResponse::InputRequired(r) => r,
        other => panic!("expected an input-required result, got {other:?}"),
    }
}

fn completed(r: CallToolResponse) -> String {
    match r {
        CallToolResponse::Complete(r) => harness::text(&r),
        other => panic!("expected a complete result, got {other:?}"),
    }
}

/// Three rounds of `test_input_required_result_multi_round` as `tool`: the child's input requests and its evolving
/// `requestState` reach the client untouched, and each retry reaches the child.
async fn multi_round(client: &Client, tool: &str) {
    let r1 = asked(client.call_tool_once(call(tool)).await.unwrap());
    let requests = r1.input_requests.clone().unwrap();
    assert!(requests.contains_key("step1"), "{requests:?}");
    let state1 = r1.request_state.clone().expect("requestState");
    let mut retry = call(tool);
    retry.input_responses = Some([("step1".to_owned(), accept(json!({"name": "Alice"})))].into());
    retry.request_state = Some(state1.clone());
    let r2 = asked(client.call_tool_once(retry).await.unwrap());
    assert!(r2.input_requests.as_ref().unwrap().contains_key("step2"));
    let state2 = r2.request_state.clone().expect("requestState");
    assert_ne!(state1, state2);
    let mut retry = call(tool);
    retry.input_responses = Some([("step2".to_owned(), accept(json!({"color": "blue"})))].into());
    retry.request_state = Some(state2.clone());
    let done = completed(client.call_tool_once(retry).await.unwrap());
    assert_eq!(done, "Alice likes blue");
    // A tampered state is refused by the child, and the refusal reaches the client as its JSON-RPC error.
    let mut tampered = call(tool);
    tampered.input_responses = Some([("step2".to_owned(), accept(json!({"color": "red"})))].into());
    tampered.request_state = Some(format!("{state2}x"));
    match client.call_tool_once(tampered).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}")
        }
        other => panic!("a tampered requestState was not refused: {other:?}"),
    }
}

/// One raw 2026-07-28 request over HTTP: (status, JSON body).
async fn raw_2026(endpoint: &str, method: &str, params: Value) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    let mut req = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        req = req.header("mcp-name", name);
    }
    let res = req
        .body(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    // A JSON body, or one SSE `data:` event carrying it.
    let json = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .find_map(|d| serde_json::from_str(d.trim()).ok())
            .unwrap_or(Value::Null)
    });
    (status, json)
}

#[tokio::test]
async fn a_2026_child_is_spoken_to_in_2026_and_its_input_requests_are_relayed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = serve(dir.path(), &[]).await;
    let per_server = format!("{url}/mcp/servers/fx");

    // 2026-07-28 client, per-server endpoint: the fixture is activated in its newest era.
    let client = client_2026(&per_server).await;
    let status: Value = reqwest::get(format!("{url}/api/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let fx = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "fx")
        .unwrap_or_else(|| panic!("fx is not running: {status}"));
    assert_eq!(fx["protocol"], "2026-07-28", "{fx}");

    multi_round(&client, "test_input_required_result_multi_round").await;
    // The prompt asks too, and its retry completes.
    let p1 = client
        .get_prompt_once(GetPromptRequestParams::new(
            "test_input_required_result_prompt",
        ))
        .await
        .unwrap();
    let GetPromptResponse::InputRequired(p1) = p1 else {
        panic!("expected an input-required prompt, got {p1:?}")
    };
    assert!(p1.input_requests.unwrap().contains_key("user_context"));
    let mut retry = GetPromptRequestParams::new("test_input_required_result_prompt");
    retry.input_responses = Some(
        [(
            "user_context".to_owned(),
            accept(json!({"context": "tests"})),
        )]
        .into(),
    );
    let GetPromptResponse::Complete(p2) = client.get_prompt_once(retry).await.unwrap() else {
        panic!("the prompt's retry did not complete")
    };
    assert_eq!(p2.result_type, Some(ResultType::COMPLETE));

    // The child sees what the calling client declared (nothing here): it refuses with -32021, HTTP 400.
    match client.call_tool_once(call("test_missing_capability")).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(
                e.code,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "{e:?}"
            );
            assert!(e.data.unwrap()["requiredCapabilities"]["sampling"].is_object());
        }
        other => panic!("expected -32021, got {other:?}"),
    }
    for endpoint in [per_server.clone(), format!("{url}/mcp")] {
        let name = if endpoint.ends_with("/mcp") {
            "fx__test_missing_capability"
        } else {
            "test_missing_capability"
        };
        let (status, body) = raw_2026(
            &endpoint,
            "tools/call",
            json!({"name": name, "arguments": {}}),
        )
        .await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (400, &json!(-32021)),
            "{endpoint}: {body}"
        );
        // `initialize` under 2026-07-28 metadata: 404 with -32601.
        let (status, body) = raw_2026(
            &endpoint,
            "initialize",
            json!({"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
        )
        .await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!(-32601)),
            "{endpoint}: {body}"
        );
        assert_eq!(body["id"], 7);
    }

    // SEP-2164: an unknown resource is -32602 with the URI, on both fronts.
    let aggregated = client_2026(&format!("{url}/mcp")).await;
    for (c, uri) in [
        (&client, "test://nope".to_owned()),
        (&aggregated, "agent-discover://fx/test://nope".to_owned()),
        (&aggregated, "agent-discover://nobody/x".to_owned()),
    ] {
        match c
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
        {
            Err(rmcp::ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
                assert_eq!(e.data.unwrap()["uri"], json!(uri));
            }
            other => panic!("expected -32602 for {uri}, got {other:?}"),
        }
    }

    // Aggregated front: names mapped, the same rounds.
    multi_round(&aggregated, "fx__test_input_required_result_multi_round").await;

    // list_changed on a `subscriptions/listen` stream of the per-server endpoint when the child's tools change.
    let mut sub = client
        .peer()
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("subscriptions/listen");
    assert_eq!(sub.acknowledged().tools_list_changed, Some(true));
    completed(
        client
            .call_tool_once(call("test_trigger_tool_change"))
            .await
            .unwrap(),
    );
    let note = tokio::time::timeout(Duration::from_secs(20), sub.next())
        .await
        .expect("no list_changed on the listen stream")
        .unwrap();
    assert!(
        matches!(
            note,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{note:?}"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "test_added_tool"),
        "{tools:?}"
    );

    // A legacy client: the 2026 child's input request becomes an elicitation request to it, then the retry.
    let legacy = client_legacy(&format!("{url}/mcp"), Some(json!({"name": "Bob"}))).await;
    let r = legacy
        .call_tool(call("fx__test_input_required_result_elicitation"))
        .await
        .unwrap();
    assert_eq!(harness::text(&r), "Hello, Bob!", "{r:?}");
    assert_eq!(
        legacy.service().seen.elicited.lock().unwrap().as_slice(),
        ["What is your name?"]
    );
    // Methods the 2026-07-28 revision removed are still served to legacy clients.
    legacy
        .peer()
        .send_request(ClientRequest::PingRequest(PingRequest::default()))
        .await
        .unwrap();
    // A legacy client without elicitation is never sent one: the call fails saying why.
    let plain = client_legacy(&per_server, None).await;
    let r = plain
        .call_tool(call("test_input_required_result_elicitation"))
        .await;
    let shown = format!("{r:?}");
    assert!(shown.contains("did not declare"), "{shown}");
    assert!(plain.service().seen.elicited.lock().unwrap().is_empty());

    let _ = serve.kill().await;
}

/// The servers' rows in `/api/status`, by name.
async fn running(url: &str) -> Value {
    let status: Value = reqwest::get(format!("{url}/api/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut by_name = serde_json::Map::new();
    for s in status["servers"].as_array().unwrap() {
        by_name.insert(s["name"].as_str().unwrap().to_owned(), s.clone());
    }
    Value::Object(by_name)
}

#[tokio::test]
async fn an_http_2026_child_and_a_legacy_child_keep_their_eras() {
    // A 2026-07-28 child over Streamable HTTP: rmcp's server refuses 2026 requests without `Mcp-Method`/`Mcp-Name`.
    let mut http_child = tokio::process::Command::new(harness::BIN)
        .args([
            "fixture-server",
            "--conformance",
            "--name",
            "fxh",
            "--http",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(http_child.stdout.take().unwrap()).lines();
    let child_url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = serve(
        dir.path(),
        &[
            json!({"action": "install", "name": "fxh", "transport": "streamable-http", "url": child_url}),
            json!({"action": "install", "name": "old", "command": harness::BIN,
                "args": ["fixture-server", "--conformance", "--name", "old", "--era", "legacy"]}),
        ],
    )
    .await;

    let modern = client_2026(&format!("{url}/mcp/servers/fxh")).await;
    let r1 = asked(
        modern
            .call_tool_once(call("test_input_required_result_elicitation"))
            .await
            .unwrap(),
    );
    assert!(r1.input_requests.unwrap().contains_key("user_name"));
    let mut retry = call("test_input_required_result_elicitation");
    retry.input_responses = Some([("user_name".to_owned(), accept(json!({"name": "Ann"})))].into());
    assert_eq!(
        completed(modern.call_tool_once(retry).await.unwrap()),
        "Hello, Ann!"
    );

    // The legacy child: connected with `initialize`; a legacy client's elicitation reaches it as before.
    let legacy = client_legacy(
        &format!("{url}/mcp/servers/old"),
        Some(json!({"username": "u", "email": "e@x"})),
    )
    .await;
    let r = legacy
        .call_tool(
            CallToolRequestParams::new("test_elicitation")
                .with_arguments(json!({"message": "who?"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(harness::text(&r).contains("action=accept"), "{r:?}");

    let eras = running(&url).await;
    assert_eq!(eras["fxh"]["protocol"], "2026-07-28", "{eras}");
    assert_eq!(eras["old"]["protocol"], "2025-11-25", "{eras}");
    // Recorded in the registry: `list --json` (another process) shows each server's era.
    let listed = harness::command(dir.path(), &["list", "--json"])
        .output()
        .await
        .unwrap();
    let rows: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let era = |name: &str| {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["protocol"].clone())
    };
    assert_eq!(era("fxh"), Some(json!("2026-07-28")), "{rows}");
    assert_eq!(era("old"), Some(json!("2025-11-25")), "{rows}");
    let _ = serve.kill().await;
}
