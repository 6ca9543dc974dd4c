//! Proxy tests against the fixture server: activation, calls, crashes, timeouts, notifications, secrets, cleanup.

use std::time::{Duration, Instant};

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{self, Agent, group_members, parse, pid_alive, text, wait_for};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

async fn child_pgid(agent: &Agent, name: &str) -> u32 {
    let status = agent.registry(json!({"action": "status"})).await;
    let server = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {status}"));
    server["pid"].as_u64().expect("pid") as u32
}

#[tokio::test]
async fn activate_call_deactivate_with_list_changed_and_no_leftovers() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture(
            "fx",
            &["--tool", "lookup_weather=Look up the weather"],
            json!({}),
        )
        .await;
    assert_eq!(agent.tool_names().await, ["registry", "run_script"]);

    let act = agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    assert_eq!(act["status"], "activated");
    agent.wait_list_changed(1).await;
    let names = agent.tool_names().await;
    assert!(
        names.contains(&"fx__echo".to_owned()) && names.contains(&"fx__lookup_weather".to_owned()),
        "{names:?}"
    );
    let again = agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    assert_eq!(again["status"], "already_active");

    let r = agent
        .call("fx__echo", json!({"text": "hello through the proxy"}))
        .await;
    assert_eq!(text(&r), "hello through the proxy");
    let r = agent.call("fx__add", json!({"a": 2, "b": 40})).await;
    assert_eq!(text(&r), "42");
    let pgid = child_pgid(&agent, "fx").await;
    assert!(!group_members(pgid).is_empty());

    // Metrics are written in the background; poll the status until they show.
    let mut calls = 0;
    for _ in 0..100 {
        let status = agent.registry(json!({"action": "status"})).await;
        calls = status["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["server_name"] == "fx")
            .map(|m| m["total_calls"].as_i64().unwrap())
            .unwrap_or(0);
        if calls == 2 {
            assert_eq!(status["calls"]["logged"], 2);
            assert_eq!(status["calls"]["recent"][0]["tool"], "add");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(calls, 2);

    let d = agent
        .registry(json!({"action": "deactivate", "name": "fx"}))
        .await;
    assert_eq!(d["status"], "deactivated");
    agent.wait_list_changed(2).await;
    assert_eq!(agent.tool_names().await, ["registry", "run_script"]);
    assert!(
        group_members(pgid).is_empty(),
        "process group {pgid} survived deactivation"
    );
    let d = agent
        .registry(json!({"action": "deactivate", "name": "fx"}))
        .await;
    assert_eq!(d["status"], "not_active");
    agent.stop().await;
}

#[tokio::test]
async fn shutdown_and_kill_9_leave_no_child() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let pgid = child_pgid(&agent, "fx").await;
    // Close our side: agent-discover sees EOF, shuts down and ends the group.
    let pid = agent.pid;
    agent.stop().await;
    wait_for(Duration::from_secs(10), || !pid_alive(pid)).await;
    wait_for(Duration::from_secs(5), || group_members(pgid).is_empty()).await;

    // kill -9: nothing runs agent-discover's shutdown; the guard's lifeline ends the group.
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.wait_list_changed(1).await; // the server flagged active was restored in the background
    let pgid = child_pgid(&agent, "fx").await;
    assert!(!group_members(pgid).is_empty());
    // SAFETY: kill on a pid we spawned.
    unsafe { libc::kill(agent.pid as i32, libc::SIGKILL) };
    wait_for(Duration::from_secs(10), || group_members(pgid).is_empty()).await;
}

#[tokio::test]
async fn init_that_never_answers_is_killed_after_the_timeout() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture(
            "hang",
            &["--init-hang"],
            json!({"activate_timeout_ms": 800}),
        )
        .await;
    let started = Instant::now();
    let (is_error, v) = agent
        .try_registry(json!({"action": "activate", "name": "hang"}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    // An AddServerResult: `error` with its kind.
    assert_eq!(v["state"], "error", "{v}");
    assert_eq!(v["id"], "hang", "{v}");
    assert_eq!(v["error"]["kind"], "timeout", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timed out after 800 ms"),
        "{v}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    // The hung child and its guard are gone.
    wait_for(Duration::from_secs(5), || {
        harness::processes_with_args(&["--name", "hang", "--init-hang"]).is_empty()
    })
    .await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["active_count"], 0);

    agent
        .install_fixture("slow", &["--init-delay-ms", "300"], json!({}))
        .await;
    let act = agent
        .registry(json!({"action": "activate", "name": "slow"}))
        .await;
    assert_eq!(act["status"], "activated");
    agent.stop().await;
}

#[tokio::test]
async fn exit_before_initialize_reports_stderr() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("keyless", &["--require-env", "FIXTURE_API_KEY"], json!({}))
        .await;
    let (is_error, v) = agent
        .try_registry(json!({"action": "activate", "name": "keyless"}))
        .await
        .unwrap();
    assert!(is_error);
    assert_eq!(v["error"]["kind"], "transport_error", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("API key required") && msg.contains("exit code 1"),
        "{msg}"
    );
    // A secret fixes it: secrets are merged into the child's environment.
    let set = agent.registry(json!({"action": "set_secret", "name": "keyless", "key": "FIXTURE_API_KEY", "value": "sk-live-abcdef"})).await;
    assert_eq!(set["masked_value"], "sk-l****");
    agent
        .registry(json!({"action": "activate", "name": "keyless"}))
        .await;
    let r = agent
        .call("keyless__env", json!({"key": "FIXTURE_API_KEY"}))
        .await;
    assert_eq!(text(&r), "sk-live-abcdef");
    let listed = agent
        .registry(json!({"action": "list_secrets", "name": "keyless"}))
        .await;
    assert_eq!(listed["secrets"][0]["masked_value"], "sk-l****");
    assert!(!listed.to_string().contains("abcdef"));
    // Encrypted at rest: the value is nowhere in the database files.
    for f in ["agent-discover.db", "agent-discover.db-wal"] {
        if let Ok(bytes) = std::fs::read(dir.path().join(f)) {
            assert!(
                !bytes.windows(14).any(|w| w == b"sk-live-abcdef"),
                "{f} holds the secret in clear"
            );
        }
    }
    let del = agent
        .registry(json!({"action": "delete_secret", "name": "keyless", "key": "FIXTURE_API_KEY"}))
        .await;
    assert_eq!(del["status"], "deleted");
    agent.stop().await;
}

#[tokio::test]
async fn crash_mid_call_fails_at_once_then_restarts_on_next_use() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("crashy", &["--crash-after", "1"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "crashy"}))
        .await;
    assert_eq!(
        text(&agent.call("crashy__echo", json!({"text": "one"})).await),
        "one"
    );
    let started = Instant::now();
    let r = agent.call("crashy__echo", json!({"text": "two"})).await;
    assert_eq!(r.is_error, Some(true));
    let v = parse(&r);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("exited during the call") && msg.contains("crashing during call 2"),
        "{msg}"
    );
    assert_eq!(v["server"], "crashy", "{v}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "crash took {:?} to report",
        started.elapsed()
    );
    // Both calls took `mcp`'s fast lane (`proxy/relay.rs`), which fails a call at once when its child exits.
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 2);
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["servers"][0]["status"], "error");
    // Its tools stay listed so the agent can call again; the next call after the back-off restarts it.
    assert!(
        agent
            .tool_names()
            .await
            .contains(&"crashy__echo".to_owned())
    );
    let mut answer = String::new();
    for _ in 0..50 {
        let r = agent.call("crashy__echo", json!({"text": "three"})).await;
        if r.is_error != Some(true) {
            answer = text(&r);
            break;
        }
        let msg = parse(&r)["error"].as_str().unwrap_or_default().to_owned();
        assert!(msg.contains("restarts on the next call"), "{msg}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(answer, "three");
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["servers"][0]["status"], "ready");
    assert_eq!(status["servers"][0]["restarts"], 1);
    agent.stop().await;
}

#[tokio::test]
async fn garbage_stdout_big_results_and_child_list_changed() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture(
            "noisy",
            &["--garbage-stdout", "--stderr-lines", "3"],
            json!({}),
        )
        .await;
    agent
        .registry(json!({"action": "activate", "name": "noisy"}))
        .await;
    agent.wait_list_changed(1).await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert!(
        status["servers"][0]["stderr_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l == "fixture stderr line 3"),
        "{status}"
    );

    // Whole (paging off for this call): 10 MB pass through the proxy.
    let mut big = rmcp::model::CallToolRequestParams::new("noisy__big");
    let mut meta = rmcp::model::MetaObject::default();
    meta.0.insert("agent-discover/page_bytes".into(), json!(0));
    big.meta = Some(rmcp::model::RequestMetaObject(meta));
    let r = agent.client.call_tool(big).await.expect("tools/call");
    assert_eq!(text(&r).len(), 10 * 1024 * 1024);

    let r = agent
        .call("noisy__add_tool", json!({"name": "late_arrival"}))
        .await;
    assert_eq!(text(&r), "added late_arrival");
    agent.wait_list_changed(2).await;
    wait_for(Duration::from_secs(5), || true).await;
    let mut found = false;
    for _ in 0..100 {
        if agent
            .tool_names()
            .await
            .contains(&"noisy__late_arrival".to_owned())
        {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(found, "the child's new tool never appeared");
    assert_eq!(
        text(
            &agent
                .call("noisy__late_arrival", json!({"input": "x"}))
                .await
        ),
        r#"called late_arrival with {"input":"x"}"#
    );
    agent.stop().await;
}

#[tokio::test]
async fn progress_resets_the_call_timeout_and_is_forwarded() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("slowpoke", &[], json!({"call_timeout_ms": 1000}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "slowpoke"}))
        .await;
    // 2.5 s of work with progress every 100 ms stays alive under a 1 s timeout (ten times the interval between
    // progress notifications: a loaded machine may delay some).
    let mut params = CallToolRequestParams::new("slowpoke__sleep").with_arguments(
        json!({"ms": 2500, "step_ms": 100})
            .as_object()
            .unwrap()
            .clone(),
    );
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String("t-1".into()),
    )));
    let r = match agent.client.call_tool_once(params).await.expect("call") {
        CallToolResponse::Complete(r) => r,
        other => panic!("{other:?}"),
    };
    assert_eq!(text(&r), "slept 2500 ms");
    let seen = agent.seen.progress.lock().unwrap().clone();
    // The last notification may trail the result (both are forwarded as they come).
    assert!(
        seen.len() >= 20 && seen.windows(2).all(|w| w[0] < w[1]),
        "{seen:?}"
    );
    // Without progress the same limit fails the call.
    let r = agent
        .call("slowpoke__sleep", json!({"ms": 2500, "step_ms": 2500}))
        .await;
    assert_eq!(r.is_error, Some(true));
    assert_eq!(parse(&r)["kind"], "timeout");
    agent.stop().await;
}

#[tokio::test]
async fn sampling_is_forwarded_only_to_clients_that_declared_it() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], Some("sampled by the test client")).await;
    agent.install_fixture("asker", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "asker"}))
        .await;
    let r = agent
        .call("asker__sample", json!({"prompt": "capital of France?"}))
        .await;
    let t = text(&r);
    assert!(
        t.contains("sampled by the test client") && t.contains("capital of France?"),
        "{t}"
    );
    // The call took the fast lane; the child's sampling request mid-call still reached the client.
    assert_eq!(crate::relay::fast_lane_calls(&agent).await, 1);
    agent.stop().await;

    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.wait_list_changed(1).await;
    let r = agent.call("asker__sample", json!({"prompt": "x"})).await;
    let t = text(&r);
    assert!(
        t.contains("sampling failed") && t.contains("sampling capability"),
        "{t}"
    );
    agent.stop().await;
}

#[tokio::test]
async fn resources_prompts_and_static_mode() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &["--tools-mode", "static"], None).await;
    agent
        .install_fixture("docs", &["--resources", "2", "--prompts", "1"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "docs"}))
        .await;
    // Static mode: only the registry tool is listed, proxy_call reaches everything.
    assert_eq!(agent.tool_names().await, ["registry"]);
    let r = agent.registry(json!({"action": "proxy_call", "call_as": "mcp__docs__echo", "arguments": {"text": "static"}})).await;
    assert_eq!(r, Value::String("static".into()));
    let r = agent.registry(json!({"action": "proxy_call", "server": "docs", "tool": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(r, json!(3));
    let schema = agent
        .registry(json!({"action": "get_schema", "call_as": "docs__add"}))
        .await;
    assert_eq!(schema["input_schema"]["required"], json!(["a", "b"]));

    let resources = agent.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "agent-discover://registry",
            "agent-discover://docs/fixture://resource/1",
            "agent-discover://docs/fixture://resource/2"
        ]
    );
    let read = agent
        .client
        .read_resource(ReadResourceRequestParams::new(
            "agent-discover://docs/fixture://resource/2",
        ))
        .await
        .unwrap();
    let ResourceContents::TextResourceContents { text, uri, .. } = &read.contents[0] else {
        panic!("{read:?}")
    };
    assert_eq!(
        (text.as_str(), uri.as_str()),
        (
            "contents of fixture://resource/2",
            "agent-discover://docs/fixture://resource/2"
        )
    );
    let templates = agent.client.list_all_resource_templates().await.unwrap();
    assert_eq!(
        templates[0].uri_template,
        "agent-discover://docs/fixture://item/{id}"
    );
    let prompts = agent.client.list_all_prompts().await.unwrap();
    assert_eq!(prompts[0].name, "docs__prompt_1");
    let mut p = GetPromptRequestParams::new("docs__prompt_1");
    p.arguments = Some(json!({"topic": "rust"}).as_object().unwrap().clone());
    let got = agent.client.get_prompt(p).await.unwrap();
    assert!(format!("{:?}", got.messages[0]).contains("prompt_1 about rust"));
    assert!(
        agent
            .client
            .read_resource(ReadResourceRequestParams::new("file:///etc/passwd"))
            .await
            .is_err()
    );
    agent.stop().await;
}

#[tokio::test]
async fn unknown_tools_suggest_similar_ones_and_names_are_legal() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    let long = "a-rather-long-server-name-to-overflow.the-limit";
    agent
        .install_fixture(
            long,
            &["--tool", "fetch_weather_forecast_for_a_city_by_name"],
            json!({}),
        )
        .await;
    agent
        .registry(json!({"action": "activate", "name": long}))
        .await;
    let names = agent.tool_names().await;
    for n in &names {
        assert!(
            n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "illegal exposed name {n}"
        );
    }
    let weather =
        agent_discover::proxy::names::expose(long, "fetch_weather_forecast_for_a_city_by_name");
    assert!(
        weather.len() <= 64 && names.contains(&weather),
        "{weather} not in {names:?}"
    );
    let r = agent.call(&weather, json!({"input": "Paris"})).await;
    assert!(
        text(&r).starts_with("called fetch_weather_forecast_for_a_city_by_name"),
        "{}",
        text(&r)
    );
    // The unshortened spelling is accepted too (parsed by the longest server-name prefix).
    let r = agent.registry(json!({"action": "proxy_call", "call_as": format!("{long}__echo"), "arguments": {"text": "long"}})).await;
    assert_eq!(r, Value::String("long".into()));

    let r = agent.call("nosuch__ech", json!({})).await;
    assert_eq!(r.is_error, Some(true));
    let v = parse(&r);
    assert_eq!(v["kind"], "tool_not_found");
    let suggestions: Vec<&str> = v["did_you_mean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["tool"].as_str().unwrap())
        .collect();
    assert!(suggestions.contains(&"echo"), "{v}");
    assert!(suggestions.len() <= 3);
    agent.stop().await;
}

#[tokio::test]
async fn active_servers_are_restored_by_new_processes() {
    let dir = tmp();
    let a = harness::spawn(dir.path(), &[], None).await;
    a.install_fixture("shared", &[], json!({})).await;
    a.registry(json!({"action": "activate", "name": "shared"}))
        .await;
    // A second client process on the same database starts the server itself, after answering initialize.
    let started = Instant::now();
    let b = harness::spawn(dir.path(), &[], None).await;
    let init = started.elapsed();
    b.wait_list_changed(1).await;
    assert!(b.tool_names().await.contains(&"shared__echo".to_owned()));
    assert_eq!(
        text(&b.call("shared__echo", json!({"text": "from b"})).await),
        "from b"
    );
    assert!(init < Duration::from_secs(5));
    // A server that cannot start has its flag cleared and its error recorded.
    a.install_fixture("broken", &["--exit-before-init"], json!({}))
        .await;
    let store = agent_discover::store::Store::open(&dir.path().join("agent-discover.db")).unwrap();
    let id = store.server_by_name("broken").unwrap().unwrap().id;
    store.set_active(id, true, None).unwrap();
    let c = harness::spawn(dir.path(), &[], None).await;
    c.wait_list_changed(1).await;
    wait_for(Duration::from_secs(10), || {
        store
            .server_by_name("broken")
            .unwrap()
            .is_some_and(|s| !s.active && s.last_error.is_some())
    })
    .await;
    let err = store
        .server_by_name("broken")
        .unwrap()
        .unwrap()
        .last_error
        .unwrap();
    assert!(err.contains("API key required"), "{err}");
    for agent in [a, b, c] {
        agent.stop().await;
    }
}

#[tokio::test]
async fn paginated_tool_lists_are_followed() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture(
            "paged",
            &["--tool-count", "40", "--page-size", "7"],
            json!({}),
        )
        .await;
    let act = agent
        .registry(json!({"action": "activate", "name": "paged"}))
        .await;
    let tools = act["tools"].as_array().unwrap();
    assert_eq!(
        tools.len(),
        12 + 40,
        "built-in tools plus 40 generated ones, over 8 pages"
    );
    assert!(tools.iter().any(|t| t["name"] == "paged__tool_40"));
    agent.stop().await;
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_in_the_child() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("sleepy", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "sleepy"}))
        .await;
    let params = CallToolRequestParams::new("sleepy__sleep").with_arguments(
        json!({"ms": 30000, "step_ms": 50})
            .as_object()
            .unwrap()
            .clone(),
    );
    // Dropping the pending call makes rmcp's client send notifications/cancelled; agent-discover relays it.
    let dropped = tokio::time::timeout(
        Duration::from_millis(300),
        agent.client.call_tool_once(params),
    )
    .await;
    assert!(dropped.is_err(), "the call should still be running");
    let mut cancelled = false;
    for _ in 0..250 {
        let status = agent.registry(json!({"action": "status"})).await;
        if status["servers"][0]["stderr_tail"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| {
                l.as_str()
                    .unwrap_or("")
                    .starts_with("fixture: sleep cancelled")
            })
        {
            cancelled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(cancelled, "the child never saw the cancellation");
    // The connection is still healthy afterwards.
    assert_eq!(
        text(
            &agent
                .call("sleepy__echo", json!({"text": "still here"}))
                .await
        ),
        "still here"
    );
    agent.stop().await;
}

#[tokio::test]
async fn a_server_that_keeps_crashing_stays_down_until_activated_again() {
    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture("doomed", &["--crash-after", "0"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "doomed"}))
        .await;
    let mut last = String::new();
    // Every call crashes the child; after MAX_FAILURES crashes it is taken down for good.
    for _ in 0..200 {
        let r = agent.call("doomed__echo", json!({"text": "x"})).await;
        last = parse(&r)["error"].as_str().unwrap_or_default().to_owned();
        if last.contains("is not active") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(last.contains("is not active"), "{last}");
    let listed = agent.registry(json!({"action": "list"})).await;
    assert_eq!(listed[0]["active"], false);
    assert!(
        !agent
            .tool_names()
            .await
            .contains(&"doomed__echo".to_owned())
    );
    let store = agent_discover::store::Store::open(&dir.path().join("agent-discover.db")).unwrap();
    let err = store
        .server_by_name("doomed")
        .unwrap()
        .unwrap()
        .last_error
        .unwrap();
    assert!(err.contains("gave up after 5 failures"), "{err}");
    // Activating again starts it afresh.
    let act = agent
        .registry(json!({"action": "activate", "name": "doomed"}))
        .await;
    assert_eq!(act["status"], "activated");
    agent.stop().await;
}

/// A child's elicitation and roots requests reach a client that declared those capabilities, and are refused with a
/// clear error (naming the capability) for a client that did not.
#[tokio::test]
async fn elicitation_and_roots_are_forwarded_or_refused() {
    let dir = tmp();
    harness::with_elicitation(json!({"answer": "blue"}));
    harness::with_roots(&["file:///work/project"]);
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("asker", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "asker"}))
        .await;
    let r = agent
        .call("asker__elicit", json!({"message": "favourite colour?"}))
        .await;
    let t = text(&r);
    assert_ne!(r.is_error, Some(true), "{t}");
    assert!(t.contains("blue") && t.contains("accept"), "{t}");
    assert_eq!(*agent.seen.elicited.lock().unwrap(), ["favourite colour?"]);
    let r = agent.call("asker__roots", json!({})).await;
    let t = text(&r);
    assert_ne!(r.is_error, Some(true), "{t}");
    assert!(t.contains("file:///work/project"), "{t}");
    agent.stop().await;

    // A client without either capability; the server is restored from its active flag.
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.wait_list_changed(1).await;
    let r = agent.call("asker__elicit", json!({"message": "x"})).await;
    let t = text(&r);
    assert_eq!(r.is_error, Some(true), "{t}");
    assert!(
        t.contains("elicitation failed") && t.contains("elicitation capability"),
        "{t}"
    );
    let r = agent.call("asker__roots", json!({})).await;
    let t = text(&r);
    assert_eq!(r.is_error, Some(true), "{t}");
    assert!(
        t.contains("roots failed") && t.contains("roots capability"),
        "{t}"
    );
    agent.stop().await;
}

/// The CLI's `secrets`, `activate`, `status` and `deactivate`: a secret set from stdin overrides the same variable in
/// the server's configured env, is shown masked, and appears in no log even at trace level; `activate` flags the server
/// so an MCP process runs it.
#[tokio::test]
async fn cli_secrets_activate_status_deactivate() {
    const SECRET: &str = "sk-from-the-secret-store-42";
    let dir = tmp();
    let run = |args: &[&str], stdin: Option<&str>| {
        let mut cmd = harness::command(dir.path(), args);
        cmd.env("AGENT_DISCOVER_LOG", "trace")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let input = stdin.map(str::to_owned);
        async move {
            use tokio::io::AsyncWriteExt;
            let mut child = cmd.spawn().expect("run agent-discover");
            let mut pipe = child.stdin.take().unwrap();
            if let Some(input) = input {
                pipe.write_all(input.as_bytes()).await.unwrap();
            }
            drop(pipe);
            let out = child.wait_with_output().await.unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            );
            assert!(
                !stdout.contains(SECRET) && !stderr.contains(SECRET),
                "the secret leaked: {stdout} {stderr}"
            );
            (out.status.code(), stdout, stderr)
        }
    };
    let (code, _, err) = run(
        &[
            "add",
            "fx",
            "--env",
            "FIXTURE_API_KEY=from-the-config",
            "--",
            harness::fixture(),
        ],
        None,
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(
        &["secrets", "set", "fx", "FIXTURE_API_KEY"],
        Some(&format!("{SECRET}\n")),
    )
    .await;
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&["secrets", "ls", "fx", "--json"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(listed[0]["key"], "FIXTURE_API_KEY", "{listed}");
    assert_eq!(listed[0]["masked_value"], "sk-f****", "{listed}");

    let (code, out, err) = run(&["activate", "fx", "--json"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let act: Value = serde_json::from_str(&out).expect("JSON");
    assert!(
        act["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "env")),
        "{act}"
    );
    let (code, out, err) = run(&["status", "--json"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let status: Value = serde_json::from_str(&out).expect("JSON");
    assert!(status.to_string().contains("\"fx\""), "{status}");

    // An MCP process runs the flagged server with the secret, which wins over the configured value.
    let agent = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[("AGENT_DISCOVER_LOG", "trace".to_owned())],
    )
    .await;
    agent.wait_list_changed(1).await;
    // Starting the child with the secret in its environment logged nothing of it. (Past this point the fixture's
    // `env` tool returns the value as its result, which trace logging of protocol messages would show.)
    let logged = agent.seen.stderr.lock().unwrap().join("\n");
    assert!(logged.contains("TRACE"), "no trace log lines were captured");
    assert!(!logged.contains(SECRET), "the secret is in the log");
    let r = agent
        .call("fx__env", json!({"key": "FIXTURE_API_KEY"}))
        .await;
    assert_eq!(text(&r), SECRET);
    agent.stop().await;

    let (code, _, err) = run(&["deactivate", "fx"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let store = agent_discover::store::Store::open(&dir.path().join("agent-discover.db")).unwrap();
    assert!(!store.server_by_name("fx").unwrap().unwrap().active);
    let (code, _, err) = run(&["secrets", "rm", "fx", "FIXTURE_API_KEY"], None).await;
    assert_eq!(code, Some(0), "{err}");
    let (_, out, _) = run(&["secrets", "ls", "fx", "--json"], None).await;
    let listed: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(listed, json!([]), "{listed}");
}
