//! The sandbox around stdio children (issue 26), from outside: a hostile fixture server started through agent-discover
//! with the defaults tries what a malicious MCP server would (read the user's keys, agent-discover's database and
//! environment, write outside its state, ptrace, signal, leave a daemon, reach the network with `network: none`), and
//! every attempt fails, while what it is granted (its state directory, a directory its arguments name) works.
//! A kernel without Landlock or user namespaces makes these tests fail: the sandbox refuses, and they expect it to work.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::harness::{self, Agent, cache_path};

/// agent-discover started with HOME at `home` (so "the user's files" are ours to plant) and a secret of its own in its
/// environment (which no child may see).
async fn agent(dir: &Path, home: &Path) -> Agent {
    harness::spawn_env(
        dir,
        &[],
        None,
        &[
            ("HOME", home.display().to_string()),
            (
                "AGENT_DISCOVER_OPENAI_API_KEY",
                "sk-canary-of-agent-discover".into(),
            ),
        ],
    )
    .await
}

async fn attempt(a: &Agent, server: &str, args: serde_json::Value) -> String {
    harness::text(&a.call(&format!("{server}__attempt"), args).await)
}

fn denied(outcome: &str, what: &str) {
    assert!(
        outcome.starts_with("denied:"),
        "{what} was allowed: {outcome}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_server_started_with_defaults_is_denied_everything_but_its_own_state() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let granted = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa"), "CANARY PRIVATE KEY").unwrap();
    std::fs::write(granted.path().join("notes.txt"), "granted").unwrap();
    let a = agent(dir.path(), home.path()).await;
    let granted_arg = granted.path().display().to_string();
    a.install_fixture("hx", &["--hostile", &granted_arg], json!({}))
        .await;
    a.registry(json!({"action": "activate", "name": "hx"}))
        .await;
    let me = a.pid as i64;

    let canary = home.path().join(".ssh/id_rsa").display().to_string();
    denied(
        &attempt(&a, "hx", json!({"what": "read", "path": canary})).await,
        "reading ~/.ssh/id_rsa",
    );
    denied(
        &attempt(&a, "hx", json!({"what": "list", "path": home.path()})).await,
        "listing HOME",
    );
    for file in ["agent-discover.db", "secrets.key"] {
        let path = dir.path().join(file);
        assert!(path.exists(), "{file} exists, so the attempt is meaningful");
        denied(
            &attempt(&a, "hx", json!({"what": "read", "path": path})).await,
            &format!("reading agent-discover's {file}"),
        );
    }
    denied(
        &attempt(&a, "hx", json!({"what": "environ", "pid": me})).await,
        "reading agent-discover's /proc/PID/environ",
    );
    let own = attempt(&a, "hx", json!({"what": "environ", "pid": 0})).await;
    assert!(own.starts_with("ok: "), "{own}");
    let names: Vec<&str> = own["ok: ".len()..].split(',').collect();
    assert!(names.contains(&"HOME") && names.contains(&"PATH"), "{own}");
    // Only what AGENT_DISCOVER_SANDBOX_PASS_ENV names on purpose (scripts/test.sh passes its leftover marker).
    let passed = std::env::var("AGENT_DISCOVER_SANDBOX_PASS_ENV").unwrap_or_default();
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("AGENT_DISCOVER_") && !passed.split(',').any(|p| p == *n)),
        "agent-discover's variables reached the child: {own}"
    );
    assert!(!names.contains(&"AGENT_DISCOVER_OPENAI_API_KEY"), "{own}");
    denied(
        &attempt(
            &a,
            "hx",
            json!({"what": "write", "path": home.path().join(".bashrc")}),
        )
        .await,
        "writing to HOME",
    );
    assert!(!home.path().join(".bashrc").exists());
    let stray = outside.path().join("stray");
    denied(
        &attempt(&a, "hx", json!({"what": "write", "path": stray})).await,
        "writing outside its state directory",
    );
    assert!(!stray.exists());
    denied(
        &attempt(&a, "hx", json!({"what": "ptrace", "pid": 0})).await,
        "ptrace of its parent",
    );
    denied(
        &attempt(&a, "hx", json!({"what": "ptrace", "pid": me})).await,
        "ptrace of agent-discover",
    );
    denied(
        &attempt(&a, "hx", json!({"what": "signal", "pid": me})).await,
        "signalling agent-discover",
    );
    let seen = attempt(&a, "hx", json!({"what": "processes"})).await;
    let pids: Vec<&str> = seen["ok: ".len()..].split(',').collect();
    assert!(
        seen.starts_with("ok: ") && pids.len() <= 3 && !pids.contains(&me.to_string().as_str()),
        "other processes are in sight: {seen}"
    );

    // What it is granted works: its state directory (its HOME), and the directory its arguments name.
    let state_file = dir.path().join("sandbox/hx/home/probe");
    let wrote = attempt(&a, "hx", json!({"what": "write", "path": state_file})).await;
    assert_eq!(wrote, "ok: written");
    assert!(state_file.exists());
    let read = attempt(
        &a,
        "hx",
        json!({"what": "read", "path": granted.path().join("notes.txt")}),
    )
    .await;
    assert_eq!(read, "ok: 7 bytes");

    // A daemon that left the process group and the session ends with the server.
    let token = format!("3001.{}", std::process::id());
    let started = attempt(&a, "hx", json!({"what": "daemon", "token": token})).await;
    assert!(started.starts_with("ok: daemon"), "{started}");
    harness::wait_for(Duration::from_secs(5), || {
        !harness::processes_with_args(&["sleep", &token]).is_empty()
    })
    .await;
    a.registry(json!({"action": "deactivate", "name": "hx"}))
        .await;
    harness::wait_for(Duration::from_secs(10), || {
        harness::processes_with_args(&["sleep", &token]).is_empty()
    })
    .await;
    // Uninstalling the server removes its state directory with what it wrote there.
    a.registry(json!({"action": "uninstall", "name": "hx"}))
        .await;
    assert!(!dir.path().join("sandbox/hx").exists());
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_none_cannot_reach_a_loopback_listener_and_full_can() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(4) {
            drop(conn);
        }
    });
    let a = agent(dir.path(), home.path()).await;
    a.install_fixture("closed", &["--hostile"], json!({})).await;
    a.install_fixture("open", &["--hostile"], json!({})).await;
    let set = a
        .registry(json!({"action": "sandbox", "name": "closed", "network": "none"}))
        .await;
    assert_eq!(set["network"], "none", "{set}");
    for name in ["closed", "open"] {
        a.registry(json!({"action": "activate", "name": name}))
            .await;
    }
    denied(
        &attempt(&a, "closed", json!({"what": "connect", "port": port})).await,
        "connecting with network none",
    );
    let open = attempt(&a, "open", json!({"what": "connect", "port": port})).await;
    assert_eq!(
        open, "ok: connected",
        "the listener is reachable with the default network"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_the_sandbox_denies_is_a_typed_refusal_that_says_how_to_opt_out() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // A copy of the fixture inside agent-discover's data directory: never granted to a child, so not executable there.
    let hidden = dir.path().join("hidden-fixture");
    std::fs::copy(harness::fixture(), &hidden).unwrap();
    let a = agent(dir.path(), home.path()).await;
    a.registry(json!({"action": "install", "name": "hid", "command": hidden, "args": []}))
        .await;
    let (is_error, v) = a
        .try_registry(json!({"action": "activate", "name": "hid"}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    let text = v.to_string();
    assert!(text.contains("sandbox"), "{text}");
    assert!(
        text.contains("AGENT_DISCOVER_SANDBOX=off") && text.contains("--off"),
        "{text}"
    );
    assert_eq!(v["error"]["kind"], "sandbox_denied", "{v}");
    // The user's opt-out for this server: it starts.
    a.registry(json!({"action": "sandbox", "name": "hid", "enabled": false}))
        .await;
    a.registry(json!({"action": "activate", "name": "hid"}))
        .await;
    assert_eq!(
        harness::text(&a.call("hid__echo", json!({"text": "x"})).await),
        "x"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_npm_filesystem_server_works_confined_to_its_granted_directory() {
    let bin = cache_path("node/node_modules/.bin/mcp-server-filesystem");
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), "hello from the granted root").unwrap();
    let a = agent(dir.path(), home.path()).await;
    a.registry(
        json!({"action": "install", "name": "files", "command": bin, "args": [root.path()]}),
    )
    .await;
    let shown = a
        .registry(json!({"action": "sandbox", "name": "files"}))
        .await;
    let grants = shown["grants"].as_array().expect("grants").clone();
    let root_grant = grants
        .iter()
        .find(|g| g["path"] == root.path().display().to_string())
        .unwrap_or_else(|| panic!("the root named in its arguments is granted: {shown}"));
    assert_eq!(root_grant["access"], "write");
    assert_eq!(root_grant["source"], "arguments");
    assert!(
        grants
            .iter()
            .all(|g| g["path"] != home.path().display().to_string()),
        "HOME is not granted: {shown}"
    );
    a.registry(json!({"action": "activate", "name": "files"}))
        .await;
    let file = root.path().join("hello.txt").display().to_string();
    let r = a.call("files__read_text_file", json!({"path": file})).await;
    assert_eq!(harness::text(&r), "hello from the granted root");
    let written = root.path().join("written.txt");
    let r = a
        .call(
            "files__write_file",
            json!({"path": written.display().to_string(), "content": "ok"}),
        )
        .await;
    assert_ne!(r.is_error, Some(true), "{}", harness::text(&r));
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "ok");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pypi_server_through_uvx_works_confined_with_defaults() {
    let uvx = cache_path("uv/bin/uvx");
    let wheels = cache_path("wheels");
    let python = cache_path("venv/bin/python");
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let a = agent(dir.path(), home.path()).await;
    // Offline from the wheels scripts/test.sh downloaded; uv's cache and the tool's environment land in the
    // server's state directory (its HOME), the only place it may write.
    a.registry(
        json!({"action": "install", "name": "time", "command": uvx, "args": [
            "--offline", "--no-index", "--find-links", wheels, "--python", python, "mcp-server-time"
        ]}),
    )
    .await;
    let act = a
        .registry(json!({"action": "activate", "name": "time"}))
        .await;
    assert!(act.to_string().contains("time__get_current_time"), "{act}");
    harness::time_server_answers_confined(&a, dir.path()).await;
    a.stop().await;
}
