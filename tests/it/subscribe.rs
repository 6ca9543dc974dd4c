//! Registry snapshots (seed 001's subscribe): `{seq, servers}` with a `seq: 0` bootstrap per subscriber and one step
//! per change, from the App, as Server-Sent Events at `/api/registry/events`, and as the MCP resource
//! `agent-discover://registry` with `resources/subscribe`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::model::ServerSpec;
use futures::StreamExt;
use rmcp::model::{ReadResourceRequestParams, SubscribeRequestParams};
use serde_json::{Value, json};

use crate::harness::{self, BIN, wait_for};

const WAIT: Duration = Duration::from_secs(15);

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

fn fixture(name: &str) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        description: format!("fixture {name}"),
        command: Some(harness::fixture().into()),
        args: vec!["--name".into(), name.into()],
        ..Default::default()
    }
}

fn names(servers: &[agent_discover::feed::ListedEntry]) -> Vec<&str> {
    servers.iter().map(|s| s.name.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_start_at_seq_0_step_once_per_change_and_a_stalled_subscriber_blocks_nobody() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let mut live = app.subscribe_registry();
    // Subscribed now, never read until the end.
    let mut stalled = app.subscribe_registry();

    let first = live.next().await.unwrap();
    assert_eq!(first.seq, 0);
    assert!(first.servers.is_empty(), "{first:?}");

    app.add_server(fixture("one"), "manual").await.unwrap();
    let s1 = tokio::time::timeout(WAIT, live.next())
        .await
        .expect("no snapshot after a registration")
        .unwrap();
    assert!(s1.seq >= 1, "{s1:?}");
    assert_eq!(names(&s1.servers), ["one"]);
    assert_eq!(s1.servers[0].status.as_str(), "stopped");

    // The same registration again changes nothing, so the next snapshot is the following real change, one step on.
    app.add_server(fixture("one"), "manual").await.unwrap();
    app.add_server(fixture("two"), "manual").await.unwrap();
    let s2 = tokio::time::timeout(WAIT, live.next())
        .await
        .expect("no snapshot after the second registration")
        .unwrap();
    assert_eq!(s2.seq, s1.seq + 1, "an unchanged re-registration moved seq");
    assert_eq!(names(&s2.servers), ["one", "two"]);

    // The subscriber that never read held nobody up; its first read is its bootstrap, with the current set.
    let boot = stalled.next().await.unwrap();
    assert_eq!(boot.seq, 0);
    assert_eq!(names(&boot.servers), ["one", "two"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // resources/subscribe: the handshake-era subscription this client speaks
async fn registry_events_over_sse_and_the_mcp_resource_follow_changes_made_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let served = crate::http::serve(dir.path(), &[]).await;

    // SSE: the bootstrap first.
    let resp = reqwest::Client::new()
        .get(format!("{}/api/registry/events", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut next_event = async || -> Value {
        loop {
            if let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                    return serde_json::from_str(data).unwrap();
                }
                continue; // a keep-alive comment
            }
            let chunk = tokio::time::timeout(WAIT, body.next())
                .await
                .expect("no event within 15 s")
                .expect("the stream ended")
                .unwrap();
            buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    let boot = next_event().await;
    assert_eq!(boot["seq"], 0, "{boot}");
    assert_eq!(boot["servers"], json!([]));

    // MCP: the resource reads the same set, and a subscription hears of changes.
    let agent = crate::http::mcp_client(&served.url, None).await;
    let read = agent
        .client
        .read_resource(ReadResourceRequestParams::new("agent-discover://registry"))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("{read:?}")
    };
    let snapshot: Value = serde_json::from_str(text).unwrap();
    assert_eq!(snapshot["servers"], json!([]), "{snapshot}");
    agent
        .client
        .subscribe(SubscribeRequestParams::new("agent-discover://registry"))
        .await
        .unwrap();

    // A registration by another agent-discover process on the same database reaches both.
    let out = harness::command(
        dir.path(),
        &[
            "add",
            "elsewhere",
            "--",
            harness::fixture(),
            "--name",
            "elsewhere",
        ],
    )
    .output()
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    let changed = next_event().await;
    assert!(changed["seq"].as_u64().unwrap() >= 1, "{changed}");
    assert_eq!(changed["servers"][0]["name"], "elsewhere", "{changed}");
    assert_eq!(changed["servers"][0]["status"], "stopped", "{changed}");
    assert_eq!(changed["servers"][0]["transport"], "stdio", "{changed}");
    let seen = agent.seen.clone();
    wait_for(WAIT, || {
        seen.resources_updated
            .lock()
            .unwrap()
            .iter()
            .any(|u| u == "agent-discover://registry")
    })
    .await;
    let read = agent
        .client
        .read_resource(ReadResourceRequestParams::new("agent-discover://registry"))
        .await
        .unwrap();
    let rmcp::model::ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else {
        panic!("{read:?}")
    };
    let snapshot: Value = serde_json::from_str(text).unwrap();
    assert_eq!(snapshot["servers"][0]["name"], "elsewhere", "{snapshot}");
    agent.stop().await;
    drop(body);
    served.stop().await;
}
