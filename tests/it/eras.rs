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

pub(crate) type Client = RunningService<RoleClient, harness::TestClient>;

/// `agent-discover serve --port 0` with the conformance fixture registered as `fx` (and `more` servers); returns
/// the process and its base URL.
pub(crate) async fn serve(
    dir: &std::path::Path,
    more: &[Value],
) -> (tokio::process::Child, String) {
    let setup = harness::spawn(dir, &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "fx", "command": harness::fixture(),
            "args": ["--conformance", "--name", "fx"]}),
        )
        .await;
    for m in more {
        setup.registry(m.clone()).await;
    }
    setup.stop().await;
    let served = crate::replicas::replica(dir, &[]).await;
    (served.child, served.url)
}

fn test_client(seen: Arc<harness::Seen>) -> harness::TestClient {
    harness::TestClient {
        seen,
        sampling_reply: None,
    }
}

/// A 2026-07-28 client (`server/discover`, per-request `_meta`) of `endpoint`.
pub(crate) async fn client_2026(endpoint: &str) -> Client {
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
pub(crate) async fn client_legacy(endpoint: &str, answers: Option<Value>) -> Client {
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

pub(crate) fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

pub(crate) fn asked(r: CallToolResponse) -> InputRequiredResult {
    match r {
        CallToolResponse::InputRequired(r) => r,
        other => panic!("expected an input-required result, got {other:?}"),
    }
}

pub(crate) fn completed(r: CallToolResponse) -> String {
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
pub(crate) async fn raw_2026(endpoint: &str, method: &str, params: Value) -> (u16, Value) {
    raw_2026_with(endpoint, method, params, &[], json!({})).await
}

/// The `notifications/message` events of a raw 2026-07-28 `tools/call`'s SSE response.
pub(crate) async fn raw_2026_logs(endpoint: &str, params: Value, meta: Value) -> Vec<Value> {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    for (k, v) in meta.as_object().into_iter().flatten() {
        params["_meta"][k] = v.clone();
    }
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let text = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": params})
                .to_string(),
        )
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|v| v["method"] == "notifications/message")
        .collect()
}

/// [`raw_2026`] with extra HTTP headers and extra `_meta` entries.
pub(crate) async fn raw_2026_with(
    endpoint: &str,
    method: &str,
    params: Value,
    headers: &[(&str, &str)],
    meta: Value,
) -> (u16, Value) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    });
    for (k, v) in meta.as_object().into_iter().flatten() {
        params["_meta"][k] = v.clone();
    }
    let mut req = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        req = req.header("mcp-name", name);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let res = req
        .body(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    // A JSON body, or the SSE `data:` event carrying the response (notifications may come first).
    let json = serde_json::from_str(&text).unwrap_or_else(|_| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
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
    let mut http_child = tokio::process::Command::new(harness::fixture())
        .args(["--conformance", "--name", "fxh", "--http", "0"])
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
            json!({"action": "install", "name": "old", "command": harness::fixture(),
                "args": ["--conformance", "--name", "old", "--era", "legacy"]}),
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

    // SEP-2243: the child's front checks `Mcp-Param-Region` against the body, so a call that succeeds shows we sent
    // it (rmcp's client mirrors `x-mcp-header` arguments of the tools it listed; our test client lists them first).
    modern.list_all_tools().await.unwrap();
    let header_call = CallToolRequestParams::new("test_header_param")
        .with_arguments(json!({"region": "eu-west"}).as_object().unwrap().clone());
    assert_eq!(
        completed(modern.call_tool_once(header_call).await.unwrap()),
        "region: eu-west"
    );
    // Our fronts check the header too, against the child's annotations (per-server: its own name; aggregated: ours).
    for (endpoint, name) in [
        (format!("{url}/mcp/servers/fxh"), "test_header_param"),
        (format!("{url}/mcp"), "fxh__test_header_param"),
    ] {
        let args = json!({"name": name, "arguments": {"region": "eu-west"}});
        let (status, body) = raw_2026_with(
            &endpoint,
            "tools/call",
            args.clone(),
            &[("mcp-param-region", "eu-west")],
            json!({}),
        )
        .await;
        assert_eq!(status, 200, "{endpoint}: {body}");
        assert_eq!(
            body["result"]["content"][0]["text"], "region: eu-west",
            "{body}"
        );
        for headers in [
            &[("mcp-param-region", "us-east")][..],
            &[("mcp-param-region", "=?base64?SGVs!!!bG8=?=")][..],
            &[][..],
        ] {
            let (status, body) =
                raw_2026_with(&endpoint, "tools/call", args.clone(), headers, json!({})).await;
            assert_eq!(
                (status, &body["error"]["code"]),
                (400, &json!(-32020)),
                "{endpoint} {headers:?}: {body}"
            );
        }
        // SEP-2575: the request's logLevel reaches the 2026 child, which logs nothing without one.
        let log_call = json!({"name": name.replace("test_header_param", "test_logging_tool"), "arguments": {}});
        let (_, quiet) = raw_2026(&endpoint, "tools/call", log_call.clone()).await;
        assert_eq!(
            quiet["result"]["content"][0]["text"], "logged: false",
            "{quiet}"
        );
        let (_, told) = raw_2026_with(
            &endpoint,
            "tools/call",
            log_call,
            &[],
            json!({"io.modelcontextprotocol/logLevel": "debug"}),
        )
        .await;
        assert_eq!(
            told["result"]["content"][0]["text"], "logged: true",
            "{told}"
        );
        // The child's log message reaches the 2026-07-28 caller that asked for it, on its request's stream, and
        // only at or above the level it asked for.
        let log_call = json!({"name": name.replace("test_header_param", "test_logging_tool"), "arguments": {}});
        let logs = raw_2026_logs(
            &endpoint,
            log_call.clone(),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        )
        .await;
        assert!(
            logs.iter()
                .any(|l| l["params"]["data"] == "test_logging_tool ran"),
            "{endpoint}: {logs:?}"
        );
        let none = raw_2026_logs(
            &endpoint,
            log_call,
            json!({"io.modelcontextprotocol/logLevel": "error"}),
        )
        .await;
        assert!(none.is_empty(), "{endpoint}: {none:?}");
    }

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

/// A 2026-07-28 client of `endpoint` answering with `client` (its declared capabilities go in each request's `_meta`).
pub(crate) async fn client_2026_as(endpoint: &str, client: harness::TestClient) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(endpoint.to_owned()),
    );
    client
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover")
}

/// The refusal of a retry: invalid params naming why in `data.requestState`.
async fn refused(client: &Client, retry: CallToolRequestParams, why: &str) {
    match client.call_tool_once(retry).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}");
            assert_eq!(e.data.unwrap()["requestState"], why, "{}", e.message);
        }
        other => panic!("a retry with a {why} requestState was not refused: {other:?}"),
    }
}

fn retry_with(
    mut call: CallToolRequestParams,
    key: &str,
    answer: Value,
    state: &str,
) -> CallToolRequestParams {
    call.input_responses = Some([(key.to_owned(), answer)].into());
    call.request_state = Some(state.to_owned());
    call
}

#[tokio::test]
async fn a_legacy_childs_requests_reach_a_2026_client_as_input_required_results() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = serve(
        dir.path(),
        &[
            json!({"action": "install", "name": "old", "command": harness::fixture(),
            "args": ["--conformance", "--name", "old", "--era", "legacy"]}),
        ],
    )
    .await;
    // Declares elicitation and sampling, not roots.
    let seen = Arc::new(harness::Seen::default());
    *seen.elicit_answers.lock().unwrap() = Some(Default::default());
    let client = client_2026_as(
        &format!("{url}/mcp/servers/old"),
        harness::TestClient {
            seen: seen.clone(),
            sampling_reply: Some("unused".into()),
        },
    )
    .await;
    assert_eq!(running(&url).await["old"]["protocol"], "2025-11-25");
    let elicit = || {
        CallToolRequestParams::new("test_elicitation")
            .with_arguments(json!({"message": "who?"}).as_object().unwrap().clone())
    };

    // The child's elicitation request comes back as an input-required result with a token of ours.
    let r1 = asked(client.call_tool_once(elicit()).await.unwrap());
    let requests = serde_json::to_value(r1.input_requests.clone().unwrap()).unwrap();
    assert_eq!(
        requests["elicitation"]["method"], "elicitation/create",
        "{requests}"
    );
    assert_eq!(requests["elicitation"]["params"]["message"], "who?");
    let token = r1.request_state.clone().expect("a minted requestState");
    // Nothing reached the client as a request of its own: it is stateless.
    assert!(seen.elicited.lock().unwrap().is_empty());

    // A retry without the answer is asked again, with the same token.
    let mut again = elicit();
    again.request_state = Some(token.clone());
    assert_eq!(
        asked(client.call_tool_once(again).await.unwrap()).request_state,
        Some(token.clone())
    );
    // Tampered, forged, or for another call: refused, and the child keeps waiting.
    let answer = accept(json!({"username": "ann", "email": "a@x"}));
    refused(
        &client,
        retry_with(
            elicit(),
            "elicitation",
            answer.clone(),
            &format!("{token}-TAMPERED"),
        ),
        "tampered",
    )
    .await;
    refused(
        &client,
        retry_with(elicit(), "elicitation", answer.clone(), "adrs1.e30.AAAA"),
        "tampered",
    )
    .await;
    let other_args = CallToolRequestParams::new("test_elicitation").with_arguments(
        json!({"message": "someone else?"})
            .as_object()
            .unwrap()
            .clone(),
    );
    refused(
        &client,
        retry_with(other_args, "elicitation", answer.clone(), &token),
        "mismatched",
    )
    .await;
    // An answer that is no elicitation result is refused before it reaches the child.
    match client
        .call_tool_once(retry_with(
            elicit(),
            "elicitation",
            json!({"action": 7}),
            &token,
        ))
        .await
    {
        Err(rmcp::ServiceError::McpError(e)) => assert_eq!(e.code, ErrorCode::INVALID_PARAMS),
        other => panic!("a malformed answer was accepted: {other:?}"),
    }
    // The answer resolves the child's request and the child's own result comes back.
    let done = completed(
        client
            .call_tool_once(retry_with(elicit(), "elicitation", answer.clone(), &token))
            .await
            .unwrap(),
    );
    assert!(done.contains("action=accept"), "{done}");
    assert!(done.contains("ann"), "{done}");
    // The token served its call once.
    refused(
        &client,
        retry_with(elicit(), "elicitation", answer, &token),
        "gone",
    )
    .await;

    // Sampling the same way, through the aggregated front (names mapped).
    let aggregated = client_2026_as(
        &format!("{url}/mcp"),
        harness::TestClient {
            seen: Arc::default(),
            sampling_reply: Some("unused".into()),
        },
    )
    .await;
    let sample = || {
        CallToolRequestParams::new("old__test_sampling")
            .with_arguments(json!({"prompt": "capital?"}).as_object().unwrap().clone())
    };
    let r = asked(aggregated.call_tool_once(sample()).await.unwrap());
    let requests = serde_json::to_value(r.input_requests.unwrap()).unwrap();
    assert_eq!(requests["sampling"]["method"], "sampling/createMessage");
    let reply = json!({"role": "assistant", "model": "m",
        "content": {"type": "text", "text": "Paris"}});
    let done = completed(
        aggregated
            .call_tool_once(retry_with(
                sample(),
                "sampling",
                reply,
                r.request_state.as_deref().unwrap(),
            ))
            .await
            .unwrap(),
    );
    assert_eq!(done, "LLM response: Paris");

    // Several rounds in one call, each with its own token; a request the client did not declare (roots) is refused
    // to the child and never asked of the client. The tool wants all three answers, so it asks again (its own rule)
    // until it gives up, and the client learns what it lacked: -32021 naming roots.
    let multi = call("test_input_required_result_multiple_inputs");
    let mut next = client.call_tool_once(multi.clone()).await;
    let (mut rounds, mut asked_for, mut last_state) = (0, Vec::new(), None);
    let result = loop {
        match next {
            Ok(CallToolResponse::InputRequired(r)) => {
                rounds += 1;
                assert!(rounds <= 30, "no end to the rounds");
                // The child asks its questions at once: one round carries them all.
                let requests = r.input_requests.unwrap();
                let keys: Vec<String> = requests.keys().cloned().collect();
                assert_eq!(keys, ["elicitation", "sampling"], "{requests:?}");
                asked_for.extend(keys.iter().cloned());
                let state = r.request_state.expect("a minted requestState");
                assert_ne!(
                    Some(&state),
                    last_state.as_ref(),
                    "a round reused its token"
                );
                let mut retry = multi.clone();
                retry.input_responses = Some(
                    [
                        ("elicitation".to_owned(), accept(json!({"name": "Alice"}))),
                        (
                            "sampling".to_owned(),
                            json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "Hi"}}),
                        ),
                    ]
                    .into(),
                );
                retry.request_state = Some(state.clone());
                next = client.call_tool_once(retry).await;
                last_state = Some(state);
            }
            Err(rmcp::ServiceError::McpError(e)) => break e,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(
        result.code,
        ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
        "{result:?}"
    );
    assert!(result.data.unwrap()["requiredCapabilities"]["roots"].is_object());
    assert!(
        asked_for.contains(&"elicitation".to_owned()),
        "{asked_for:?}"
    );
    assert!(asked_for.contains(&"sampling".to_owned()), "{asked_for:?}");
    assert!(!asked_for.contains(&"roots".to_owned()), "{asked_for:?}");

    // prompts/get: the prompt's question comes back as an input-required result too.
    let p1 = client
        .get_prompt_once(GetPromptRequestParams::new(
            "test_input_required_result_prompt",
        ))
        .await
        .unwrap();
    let GetPromptResponse::InputRequired(p1) = p1 else {
        panic!("expected an input-required prompt, got {p1:?}")
    };
    assert!(p1.input_requests.unwrap().contains_key("elicitation"));
    let mut retry = GetPromptRequestParams::new("test_input_required_result_prompt");
    retry.input_responses = Some(
        [(
            "elicitation".to_owned(),
            accept(json!({"context": "tests"})),
        )]
        .into(),
    );
    retry.request_state = p1.request_state.clone();
    let GetPromptResponse::Complete(p2) = client.get_prompt_once(retry.clone()).await.unwrap()
    else {
        panic!("the prompt's retry did not complete")
    };
    assert_eq!(p2.result_type, Some(ResultType::COMPLETE));
    assert!(format!("{:?}", p2.messages).contains("Use this context: tests"));
    // A prompt's token does not serve a tool call.
    let mut crossed = elicit();
    crossed.input_responses = retry.input_responses.clone();
    crossed.request_state = p1.request_state;
    match client.call_tool_once(crossed).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(e.data.unwrap()["requestState"], "mismatched")
        }
        other => panic!("a prompt's token served a tool call: {other:?}"),
    }

    // A legacy client of the same child still gets the child's request directly.
    let legacy = client_legacy(
        &format!("{url}/mcp/servers/old"),
        Some(json!({"username": "u", "email": "e@x"})),
    )
    .await;
    let r = legacy.call_tool(elicit()).await.unwrap();
    assert!(harness::text(&r).contains("action=accept"), "{r:?}");
    assert_eq!(
        legacy.service().seen.elicited.lock().unwrap().as_slice(),
        ["who?"]
    );
    let _ = serve.kill().await;
}

/// The text of a resource read's first contents.
fn read_text(r: &ReadResourceResult) -> (String, Option<String>) {
    match &r.contents[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => (text.clone(), mime_type.clone()),
        other => panic!("expected text contents, got {other:?}"),
    }
}

#[tokio::test]
async fn an_mcp_app_resource_is_read_through_the_uri_its_tool_names() {
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = serve(dir.path(), &[]).await;
    // Per-server endpoint: the tool's `_meta.ui.resourceUri` and the `ui://` resource as the child has them.
    let own = client_2026(&format!("{url}/mcp/servers/fx")).await;
    let tools = own.list_all_tools().await.unwrap();
    let app = tools.iter().find(|t| t.name == "test_app_tool").unwrap();
    let uri = app.meta.as_ref().unwrap()["ui"]["resourceUri"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(uri, "ui://fixture/app.html");
    let read = own
        .read_resource(ReadResourceRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let (html, mime) = read_text(&read);
    assert!(html.contains("test_app_tool"), "{html}");
    assert_eq!(mime.as_deref(), Some("text/html;profile=mcp-app"));

    // Aggregated front: the tool names the exposed URI, which its resource list shows and a read routes back.
    let host = client_legacy(&format!("{url}/mcp"), None).await;
    let tools = host.list_all_tools().await.unwrap();
    let app = tools
        .iter()
        .find(|t| t.name == "fx__test_app_tool")
        .unwrap_or_else(|| panic!("no fx__test_app_tool in {tools:?}"));
    let exposed = app.meta.as_ref().unwrap()["ui"]["resourceUri"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(exposed, "agent-discover://fx/ui://fixture/app.html");
    let listed = host.list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == exposed), "{listed:?}");
    let read = host
        .read_resource(ReadResourceRequestParams::new(exposed.clone()))
        .await
        .unwrap();
    let (same, mime) = read_text(&read);
    assert_eq!(same, html);
    assert_eq!(mime.as_deref(), Some("text/html;profile=mcp-app"));
    // The contents carry the URI the host asked for.
    let ResourceContents::TextResourceContents { uri: got, .. } = &read.contents[0] else {
        unreachable!("checked above")
    };
    assert_eq!(got, &exposed);
    let _ = serve.kill().await;
}
