//! Issue 31, part 6: a fresh `agent-discover mcp` process whose database has a server flagged active lists that
//! server's tools in its first `tools/list` (their stored definitions, today's filters and pins applied) while the
//! child is still starting, and a call made right after `initialize` waits for the start instead of failing; a
//! server that cannot start makes such a call fail with the start's error. Part 3: once serving, the process lets go
//! of its start-up code's pages and still answers.

use serde_json::{Value, json};

use crate::harness::{self, text};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Each tool's definition by exposed name, as a client sees it.
async fn definitions(agent: &harness::Agent) -> Vec<(String, Value)> {
    agent
        .client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| (t.name.to_string(), serde_json::to_value(&t).unwrap()))
        .collect()
}

#[tokio::test]
async fn a_fresh_process_lists_active_servers_at_once_and_a_call_waits_for_the_start() {
    let dir = tmp();
    let setup = harness::spawn(dir.path(), &[], None).await;
    // The child takes 1.5 s to answer initialize: long after the new process's first list and call are made.
    setup
        .install_fixture("slow", &["--init-delay-ms", "1500"], json!({}))
        .await;
    setup
        .registry(json!({"action": "activate", "name": "slow"}))
        .await;
    let live = definitions(&setup).await;
    // A filter set after the tools were stored: the stored list honours it.
    setup
        .registry(json!({"action": "tool_filter", "name": "slow", "deny": ["echo"]}))
        .await;
    setup.stop().await;

    let agent = harness::spawn(dir.path(), &[], None).await;
    let first = definitions(&agent).await;
    let status = agent.registry(json!({"action": "status"})).await;
    let slow = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "slow")
        .cloned()
        .unwrap_or_default();
    // Listed before it runs: the first list came while its start was under way.
    assert_ne!(slow["status"], "ready", "{status}");
    let names: Vec<&str> = first.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"slow__add"), "{names:?}");
    assert!(!names.contains(&"slow__echo"), "filtered: {names:?}");
    // The stored definitions are the ones the child gave (title, description, schemas, annotations).
    let before = |n: &str| first.iter().find(|(m, _)| m == n).map(|(_, d)| d.clone());
    let was = |n: &str| live.iter().find(|(m, _)| m == n).map(|(_, d)| d.clone());
    for tool in ["slow__add", "slow__fail"] {
        let (a, b) = (before(tool).unwrap(), was(tool).unwrap());
        for key in [
            "description",
            "inputSchema",
            "title",
            "annotations",
            "outputSchema",
        ] {
            assert_eq!(a.get(key), b.get(key), "{tool} {key}");
        }
    }

    // Called at once: it waits for the start and answers.
    let r = agent.call("slow__add", json!({"a": 2, "b": 3})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    assert_eq!(text(&r), "5");
    // Running now: the same tools, the filtered one still hidden.
    let after: Vec<String> = definitions(&agent)
        .await
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(after.contains(&"slow__add".to_owned()) && !after.contains(&"slow__echo".to_owned()));
    let r = agent.call("slow__echo", json!({"text": "x"})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    agent.stop().await;
}

#[tokio::test]
async fn a_call_to_an_active_server_that_cannot_start_fails_with_its_start_error() {
    let dir = tmp();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .install_fixture("keyless", &["--require-env", "KEYLESS_API_KEY"], json!({}))
        .await;
    setup.stop().await;
    // Flagged active (as another process that had the key left it), but it cannot start here.
    let store = agent_discover::store::Store::open(&dir.path().join("agent-discover.db")).unwrap();
    let id = store.server_by_name("keyless").unwrap().unwrap().id;
    store.set_active(id, true, None).unwrap();

    let agent = harness::spawn(dir.path(), &[], None).await;
    let r = agent.call("keyless__echo", json!({"text": "x"})).await;
    assert_eq!(r.is_error, Some(true), "{r:?}");
    let body: Value = serde_json::from_str(&text(&r)).unwrap_or_else(|_| json!(text(&r)));
    let said = body.to_string();
    assert!(
        said.contains("could not start") && said.contains("API key required"),
        "{said}"
    );
    agent.stop().await;
}

/// The process's resident pages of its own executable file (`RssFile` in `/proc/PID/status`), in KiB.
fn rss_file_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("RssFile:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("RssFile in /proc/PID/status")
}

/// Once serving, the start-up code's pages are released (the idle footprint), and the code that runs afterwards is
/// mapped again on use: the process answers as before.
#[tokio::test]
async fn start_up_code_is_released_once_serving_and_requests_still_work() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    assert!(agent.tool_names().await.contains(&"registry".to_owned()));
    let at_start = rss_file_kib(agent.pid);
    let mut now = at_start;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while now * 2 > at_start && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        now = rss_file_kib(agent.pid);
    }
    assert!(
        now * 2 <= at_start,
        "file-backed resident set {at_start} KiB at start, {now} KiB later"
    );
    let status = agent.registry(json!({"action": "status"})).await;
    assert!(status["servers"].is_array(), "{status}");
    agent.stop().await;
}
