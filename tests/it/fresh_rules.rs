//! Issue 31, part 4: approval rules are cached under the store's change marker, and neither the cache nor the stdio
//! fast lane's gated set outlives a commit. A rule another process commits to the shared SQLite file applies to this
//! process's very next call (fast lane and normal path alike), before the change feed (a file watch with a 150 ms
//! settle) reports it; a call after the rule is lifted takes the fast lane again.

use serde_json::{Value, json};

use crate::harness;

/// Sets `server`'s rule for `target` (`tool:NAME`) to `policy` straight in the shared database, as another
/// agent-discover process would; returns once it is committed.
fn commit_rule(dir: &std::path::Path, server: &str, target: &str, policy: Option<&str>) {
    let store = agent_discover::store::Store::open(&dir.join("agent-discover.db")).unwrap();
    let id = store.server_by_name(server).unwrap().unwrap().id;
    assert!(store.set_tool_policy(id, target, policy).unwrap());
}

#[tokio::test]
async fn a_rule_committed_by_another_process_applies_to_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;

    // No rule: the fast lane relays, `proxy_call` too (the lane's gated set, read once and kept).
    let r = agent.call("fx__echo", json!({"text": "free"})).await;
    assert_eq!(harness::text(&r), "free");
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 1);
    let proxied = |text: &str| json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": text}});
    assert_eq!(agent.registry(proxied("first")).await, json!("first"));
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 2);

    // Another process denies the tool; the next calls, right after the commit, are refused.
    commit_rule(dir.path(), "fx", "tool:echo", Some("deny"));
    let r = agent.call("fx__echo", json!({"text": "blocked"})).await;
    assert_eq!(
        r.is_error,
        Some(true),
        "the fast lane relayed a denied call: {r:?}"
    );
    assert_eq!(harness::parse(&r)["kind"], "approval_denied", "{r:?}");
    let (is_error, v): (bool, Value) = agent.try_registry(proxied("second")).await.unwrap();
    assert!(is_error, "proxy_call ran under stale rules: {v}");
    assert_eq!(v["kind"], "approval_denied", "{v}");

    // Lifted the same way: the next call takes the fast lane again.
    commit_rule(dir.path(), "fx", "tool:echo", None);
    let r = agent.call("fx__echo", json!({"text": "free again"})).await;
    assert_eq!(harness::text(&r), "free again");
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 3);
    agent.stop().await;
}
