//! SEP-2243's `Mcp-Param-*` headers on the way to a 2026-07-28 Streamable HTTP child: agent-discover's client to the
//! child mirrors a tool's `x-mcp-header` arguments from the tools it listed, and when the child refuses a call's
//! headers (-32020) it lists the tools again and retries the call once, as the specification tells a client to; a
//! tool the new list shows changed is withheld (tool pinning) instead of called again.

use std::time::Duration;

use rmcp::model::*;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::eras::{client_2026, completed, raw_2026};
use crate::harness;

/// `agent-discover serve` with the fixture over Streamable HTTP (`extra` arguments) registered as `fxh`; returns
/// both processes and the per-server endpoint.
async fn setup(
    dir: &std::path::Path,
    extra: &[&str],
) -> (tokio::process::Child, tokio::process::Child, String) {
    let mut child = tokio::process::Command::new(harness::fixture())
        .args(["--conformance", "--name", "fxh", "--http", "0"])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let child_url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    let (serve, url) = crate::conformance::serve_installed(
        dir,
        &[json!({"action": "install", "name": "fxh", "transport": "streamable-http", "url": child_url})],
    )
    .await;
    (child, serve, format!("{url}/mcp/servers/fxh"))
}

/// `test_header_param` as `endpoint` lists it (`None`: not listed).
async fn header_tool(endpoint: &str) -> Option<Value> {
    let (status, body) = raw_2026(endpoint, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test_header_param")
        .cloned()
}

fn header_call() -> CallToolRequestParams {
    CallToolRequestParams::new("test_header_param")
        .with_arguments(json!({"region": "eu-west"}).as_object().unwrap().clone())
}

#[tokio::test]
async fn a_call_refused_for_its_headers_is_retried_once_after_listing_the_tools_again() {
    // The child refuses the first call of its annotated tool with -32020, as a server whose header check knew the
    // annotation before agent-discover's list did.
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut serve, endpoint) = setup(dir.path(), &["--refuse-headers-once"]).await;
    let client = client_2026(&endpoint).await;
    client.list_all_tools().await.unwrap();
    // Listed once (at activation); refused, listed again, retried: the caller sees only the answer.
    assert_eq!(
        completed(client.call_tool_once(header_call()).await.unwrap()),
        "region: eu-west (tools listed 2 times)"
    );
    // Retried once only: a second refusal would reach the caller (none comes, so the next call just succeeds).
    assert_eq!(
        completed(client.call_tool_once(header_call()).await.unwrap()),
        "region: eu-west (tools listed 2 times)"
    );
    let _ = serve.kill().await;
}

#[tokio::test]
async fn a_tool_whose_new_list_shows_it_changed_is_withheld_not_called_again() {
    // The child annotates `region` only after agent-discover first listed its tools (at activation), and says
    // nothing: the first call goes without `Mcp-Param-Region` and is refused with -32020.
    let dir = tempfile::tempdir().unwrap();
    let (_child, mut serve, endpoint) = setup(dir.path(), &["--headers-unlisted"]).await;
    let client = client_2026(&endpoint).await;
    let listed = header_tool(&endpoint).await.expect("listed at activation");
    assert_eq!(
        listed["inputSchema"]["properties"]["region"]["x-mcp-header"],
        Value::Null
    );
    // The list taken after the refusal shows the tool changed: withheld until approved, not called again.
    let r = match client.call_tool_once(header_call()).await.unwrap() {
        CallToolResponse::Complete(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let body: Value = serde_json::from_str(&harness::text(&r)).unwrap();
    assert_eq!(body["code"], "conflict", "{body}");
    assert!(header_tool(&endpoint).await.is_none());
    // Approved as it is now: listed with the annotation, and called with the header.
    let base = endpoint.trim_end_matches("/mcp/servers/fxh");
    let approved = reqwest::Client::new()
        .post(format!("{base}/api/servers/fxh/tools/approve"))
        .json(&json!({"tool": "test_header_param"}))
        .send()
        .await
        .unwrap();
    assert!(
        approved.status().is_success(),
        "{}",
        approved.text().await.unwrap()
    );
    let listed = header_tool(&endpoint).await.expect("listed once approved");
    assert_eq!(
        listed["inputSchema"]["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    client.list_all_tools().await.unwrap();
    assert_eq!(
        completed(client.call_tool_once(header_call()).await.unwrap()),
        "region: eu-west"
    );
    let _ = serve.kill().await;
}
