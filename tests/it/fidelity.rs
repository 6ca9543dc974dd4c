//! What the aggregated front forwards besides calls: logging (setLevel down, messages up with the server as logger),
//! completions, resource subscriptions and their updates, and tools, prompts and results preserved field for field,
//! against the real npm server-everything.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::*;
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::harness::{self, wait_for};

fn everything_bin() -> String {
    let cache = std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/cache"));
    let bin = cache.join("node/node_modules/.bin/mcp-server-everything");
    assert!(
        bin.exists(),
        "{} is missing: run scripts/test.sh, which installs the test dependencies",
        bin.display()
    );
    bin.to_string_lossy().into_owned()
}

#[allow(deprecated)]
#[tokio::test]
async fn logging_completions_and_subscriptions_reach_server_everything() {
    let bin = everything_bin();
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    let caps = agent.client.peer_info().unwrap().capabilities.clone();
    assert!(caps.logging.is_some(), "logging capability not declared");
    assert!(
        caps.completions.is_some(),
        "completions capability not declared"
    );
    assert_eq!(
        caps.resources.as_ref().and_then(|r| r.subscribe),
        Some(true)
    );
    // The level is set before the child starts: it must still reach it.
    agent
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    agent
        .registry(
            json!({"action": "install", "name": "everything", "command": bin, "args": ["stdio"]}),
        )
        .await;
    let act = agent
        .registry(json!({"action": "activate", "name": "everything"}))
        .await;
    assert_eq!(act["status"], "activated", "{act}");

    // Completions: a prompt argument and a resource-template argument, routed to the child under its own names.
    let done = agent
        .client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("everything__completable-prompt"),
            ArgumentInfo::new("department", "Eng"),
        ))
        .await
        .unwrap();
    assert_eq!(done.completion.values, ["Engineering"]);
    let templates = agent.client.list_all_resource_templates().await.unwrap();
    let text_template = templates
        .iter()
        .find(|t| t.uri_template.ends_with("/text/{resourceId}"))
        .unwrap_or_else(|| panic!("{templates:?}"));
    assert_eq!(
        text_template.uri_template,
        "agent-discover://everything/demo://resource/dynamic/text/{resourceId}"
    );
    let done = agent
        .client
        .complete(CompleteRequestParams::new(
            Reference::for_resource(text_template.uri_template.clone()),
            ArgumentInfo::new("resourceId", "7"),
        ))
        .await
        .unwrap();
    assert_eq!(done.completion.values, ["7"]);
    let err = agent
        .client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("nobody__prompt"),
            ArgumentInfo::new("x", ""),
        ))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nobody__prompt"), "{err}");

    // Logging: the child's messages come back with the server named in `logger`.
    agent
        .call("everything__toggle-simulated-logging", json!({}))
        .await;
    let seen = agent.seen.clone();
    wait_for(Duration::from_secs(15), || {
        seen.logs.lock().unwrap().iter().any(|(logger, _)| {
            logger
                .as_deref()
                .is_some_and(|l| l == "everything" || l.starts_with("everything/"))
        })
    })
    .await;

    // Subscriptions: subscribe under the exposed URI; updates arrive under it, and stop after unsubscribe.
    let uri = "agent-discover://everything/demo://resource/static/document/architecture.md";
    let resources = agent.client.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|r| r.uri == uri), "{resources:?}");
    agent
        .client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .unwrap();
    agent
        .call("everything__toggle-subscriber-updates", json!({}))
        .await;
    wait_for(Duration::from_secs(15), || {
        seen.resources_updated
            .lock()
            .unwrap()
            .iter()
            .any(|u| u == uri)
    })
    .await;
    assert!(
        seen.resources_updated
            .lock()
            .unwrap()
            .iter()
            .all(|u| u == uri),
        "updates for resources nobody subscribed to: {:?}",
        seen.resources_updated.lock().unwrap()
    );
    agent
        .client
        .unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .unwrap();
    let err = agent
        .client
        .subscribe(SubscribeRequestParams::new("file:///not-ours"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("file:///not-ours"), "{err}");
    agent.stop().await;
}

/// Tools, prompts, resources and a structured result through the proxy equal what the child says directly, but for
/// the names: `_meta`, `structuredContent`, `outputSchema`, `title`, `icons` and annotations survive.
#[tokio::test]
async fn server_everything_is_preserved_field_for_field() {
    let bin = everything_bin();
    let mut cmd = tokio::process::Command::new(&bin);
    cmd.arg("stdio");
    // Declares what agent-discover declares to its children, so server-everything offers the same tools.
    #[allow(deprecated)]
    let caps = ClientCapabilities::builder()
        .enable_roots()
        .enable_sampling()
        .enable_elicitation()
        .build();
    let direct = ClientConfig::new(caps, Implementation::new("direct", "0"))
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
        .serve(TokioChildProcess::new(cmd).unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .registry(
            json!({"action": "install", "name": "everything", "command": bin, "args": ["stdio"]}),
        )
        .await;
    agent
        .registry(json!({"action": "activate", "name": "everything"}))
        .await;

    let mut want_tools = direct.list_all_tools().await.unwrap();
    for t in &mut want_tools {
        t.name = format!("everything__{}", t.name).into();
    }
    let got_tools: Vec<Tool> = agent
        .client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.name.starts_with("everything__"))
        .collect();
    assert_eq!(
        serde_json::to_value(&got_tools).unwrap(),
        serde_json::to_value(&want_tools).unwrap()
    );
    assert!(
        got_tools.iter().any(|t| t.output_schema.is_some()),
        "server-everything has a tool with an output schema"
    );
    assert!(got_tools.iter().any(|t| t.annotations.is_some()));
    assert!(got_tools.iter().any(|t| t.title.is_some()));

    let mut want_prompts = direct.list_all_prompts().await.unwrap();
    for p in &mut want_prompts {
        p.name = format!("everything__{}", p.name);
    }
    let got_prompts = agent.client.list_all_prompts().await.unwrap();
    assert_eq!(
        serde_json::to_value(&got_prompts).unwrap(),
        serde_json::to_value(&want_prompts).unwrap()
    );
    let mut want_resources = direct.list_all_resources().await.unwrap();
    for r in &mut want_resources {
        r.uri = format!("agent-discover://everything/{}", r.uri);
    }
    let mut got_resources = agent.client.list_all_resources().await.unwrap();
    // agent-discover's own resource (the registry snapshot) comes first; the child's follow unchanged.
    assert_eq!(got_resources.remove(0).uri, "agent-discover://registry");
    assert_eq!(
        serde_json::to_value(&got_resources).unwrap(),
        serde_json::to_value(&want_resources).unwrap()
    );

    let args = json!({"location": "New York"});
    let want = direct
        .call_tool(
            CallToolRequestParams::new("get-structured-content")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let got = agent.call("everything__get-structured-content", args).await;
    assert!(got.structured_content.is_some(), "{got:?}");
    let strip = |r: &CallToolResult| {
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("resultType");
        v
    };
    assert_eq!(strip(&got), strip(&want));
    let annotated = agent
        .call(
            "everything__get-annotated-message",
            json!({"messageType": "error", "includeImage": true}),
        )
        .await;
    let direct_annotated = direct
        .call_tool(
            CallToolRequestParams::new("get-annotated-message").with_arguments(
                json!({"messageType": "error", "includeImage": true})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(strip(&annotated), strip(&direct_annotated));
    assert!(
        serde_json::to_value(&annotated)
            .unwrap()
            .to_string()
            .contains("annotations"),
        "{annotated:?}"
    );
    // Both calls took the fast lane, which passes a plain result on as the child wrote it (`relay.rs`).
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 2);
    let _ = direct.cancel().await;
    agent.stop().await;
}

/// `agent-discover mcp --server NAME`: the fixture as itself over stdio, activated on first use; its tools under their
/// own names, sampling and progress forwarded to this client.
#[tokio::test]
async fn stdio_per_server_endpoint_exposes_the_fixture_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup.install_fixture("fx", &[], json!({})).await;
    setup.stop().await;
    let agent = harness::spawn(dir.path(), &["--server", "fx"], Some("sure")).await;
    let info = agent.client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("fx"),
        "the fixture's own server info"
    );
    let names = agent.tool_names().await;
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("__")), "{names:?}");
    let r = agent.call("echo", json!({"text": "as itself"})).await;
    assert_eq!(harness::text(&r), "as itself");
    let r = agent.call("sample", json!({"prompt": "why"})).await;
    assert!(harness::text(&r).contains("sure (asked: why)"), "{r:?}");
    let progress = agent
        .client
        .call_tool(
            CallToolRequestParams::new("sleep").with_arguments(
                json!({"ms": 200, "step_ms": 50})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(progress.is_ok(), "{progress:?}");
    let unknown = agent.call("fx__echo", json!({})).await;
    assert_eq!(unknown.is_error, Some(true));
    assert!(harness::text(&unknown).contains("fx__echo"), "{unknown:?}");
    agent.stop().await;
}

/// `/mcp/servers/{name}` over Streamable HTTP: server-everything as itself (names and URIs unchanged), with
/// completions, logging and subscriptions; an unknown server is a 404.
#[allow(deprecated)]
#[tokio::test]
async fn http_per_server_endpoint_exposes_server_everything_as_itself() {
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use tokio::io::AsyncBufReadExt;

    let bin = everything_bin();
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "everything", "command": bin, "args": ["stdio"]}),
        )
        .await;
    setup.stop().await;
    let mut serve = harness::command(dir.path(), &["serve", "--port", "0"])
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
    let url = url.trim_end_matches('/').to_owned();

    let missing = reqwest::Client::new()
        .post(format!("{url}/mcp/servers/nope"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp/servers/everything")),
    );
    let seen = Arc::new(harness::Seen::default());
    let client = harness::TestClient {
        seen: seen.clone(),
        sampling_reply: None,
    }
    .serve(transport)
    .await
    .expect("initialize through the per-server endpoint");
    let caps = client.peer_info().unwrap().capabilities.clone();
    assert!(
        caps.logging.is_some() && caps.completions.is_some(),
        "{caps:?}"
    );
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{tools:?}");
    let r = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"message": "direct"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(harness::text(&r), "Echo: direct");
    let uri = "demo://resource/static/document/architecture.md";
    let resources = client.list_all_resources().await.unwrap();
    assert!(resources.iter().any(|r| r.uri == uri), "{resources:?}");
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .unwrap();
    assert!(!read.contents.is_empty());
    let done = client
        .complete(CompleteRequestParams::new(
            Reference::for_prompt("completable-prompt"),
            ArgumentInfo::new("department", "Sa"),
        ))
        .await
        .unwrap();
    assert_eq!(done.completion.values, ["Sales"]);
    client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .unwrap();
    client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .unwrap();
    client
        .call_tool(CallToolRequestParams::new("toggle-subscriber-updates"))
        .await
        .unwrap();
    wait_for(Duration::from_secs(15), || {
        seen.resources_updated
            .lock()
            .unwrap()
            .iter()
            .any(|u| u == uri)
    })
    .await;
    // The subscribe request made server-everything log; the message arrives with its logger unchanged.
    wait_for(Duration::from_secs(15), || {
        seen.logs.lock().unwrap().iter().any(|(logger, data)| {
            !logger
                .as_deref()
                .unwrap_or_default()
                .starts_with("everything")
                && data.to_string().contains("Subscribe")
        })
    })
    .await;
    let _ = client.cancel().await;
    let _ = serve.kill().await;
}

/// A child's JSON-RPC error reaches the client with the child's code, message and data: on the per-server endpoint
/// for tools/call and resources/read; on the aggregated front for resources/read (the URI in `data` under the name
/// the client used), while an aggregated tool call turns it into a tool error naming the child's message.
#[tokio::test]
async fn a_childs_json_rpc_error_keeps_its_code_and_message() {
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .install_fixture(
            "fx",
            &["--error-tool", "boom", "--resources", "1"],
            json!({}),
        )
        .await;
    let act = setup
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    assert_eq!(act["status"], "activated", "{act}");

    // Aggregated front.
    let r = setup.call("fx__boom", json!({})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let body = harness::parse(&r);
    assert_eq!(body["kind"], "server_error", "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("boom always fails")
            && body["error"].as_str().unwrap().contains("-32042"),
        "{body}"
    );
    let err = setup
        .client
        .read_resource(ReadResourceRequestParams::new(
            "agent-discover://fx/nope://gone",
        ))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{e:?}");
    assert_eq!(e.message, "no resource nope://gone");
    assert_eq!(
        e.data,
        Some(json!({"uri": "agent-discover://fx/nope://gone"}))
    );
    setup.stop().await;

    // Per-server endpoint: the child's error as the child sent it.
    let agent = harness::spawn(dir.path(), &["--server", "fx"], None).await;
    let err = agent
        .client
        .call_tool(CallToolRequestParams::new("boom"))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.code, ErrorCode(-32042), "{e:?}");
    assert_eq!(e.message, "boom always fails");
    assert_eq!(e.data, Some(json!({"tool": "boom"})));
    let err = agent
        .client
        .read_resource(ReadResourceRequestParams::new("nope://gone"))
        .await
        .unwrap_err();
    let rmcp::ServiceError::McpError(e) = err else {
        panic!("{err:?}")
    };
    assert_eq!(e.code, ErrorCode::RESOURCE_NOT_FOUND, "{e:?}");
    assert_eq!(e.data, Some(json!({"uri": "nope://gone"})));
    // The connection is fine afterwards.
    let r = agent.call("echo", json!({"text": "still here"})).await;
    assert_eq!(harness::text(&r), "still here");
    agent.stop().await;
}
