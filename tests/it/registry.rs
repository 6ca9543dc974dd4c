//! The core over stdio and the CLI: every registry action, two processes on one database, bad input, stdout hygiene.

use std::process::Stdio;

use rmcp::model::*;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::harness::{self, BIN};

#[tokio::test]
async fn initialize_and_the_registry_tool_schema() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    let info = agent.client.peer_info().expect("server info");
    let server = info.server_info.as_ref().expect("serverInfo");
    assert_eq!(server.name, "agent-discover");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        info.capabilities
            .tools
            .as_ref()
            .and_then(|t| t.list_changed),
        Some(true)
    );
    agent
        .client
        .send_request(ClientRequest::PingRequest(Default::default()))
        .await
        .expect("ping");
    let tools = agent.client.list_all_tools().await.unwrap();
    // The registry tool, and code mode's run_script (issue 28).
    assert_eq!(tools.len(), 2);
    assert_eq!(tools[1].name, "run_script");
    let schema = Value::Object((*tools[0].input_schema).clone());
    let actions: Vec<&str> = schema["properties"]["action"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(actions, agent_discover::mcp::actions());
    assert_eq!(schema["required"], json!(["action"]));
    agent.stop().await;
}

#[tokio::test]
async fn install_list_status_uninstall() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    assert_eq!(agent.registry(json!({"action": "list"})).await, json!([]));
    let r = agent
        .registry(json!({"action": "install", "name": "files", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {"LOG": "1"}, "description": "Read and write local files", "tags": ["fs", "local"]}))
        .await;
    assert_eq!(
        (
            r["status"].as_str(),
            r["server"].as_str(),
            r["command"].as_str()
        ),
        (Some("installed"), Some("files"), Some("npx"))
    );
    agent.registry(json!({"action": "install", "name": "weather", "command": "uvx", "args": ["weather-mcp"], "description": "Forecasts by city"})).await;

    let all = agent.registry(json!({"action": "list"})).await;
    assert_eq!(all.as_array().unwrap().len(), 2);
    let hit = agent
        .registry(json!({"action": "list", "query": "forecast"}))
        .await;
    assert_eq!(hit[0]["name"], "weather");
    let by_tag = agent
        .registry(json!({"action": "list", "query": "local"}))
        .await;
    assert_eq!(by_tag[0]["name"], "files");
    assert_eq!(by_tag[0]["tags"], json!(["fs", "local"]));
    let manual = agent
        .registry(json!({"action": "list", "source": "manual", "installed_only": true}))
        .await;
    assert_eq!(manual.as_array().unwrap().len(), 2);
    let none = agent
        .registry(json!({"action": "list", "source": "npm"}))
        .await;
    assert_eq!(none, json!([]));

    let (is_error, dup) = agent
        .try_registry(json!({"action": "install", "name": "files", "command": "node"}))
        .await
        .unwrap();
    assert!(is_error);
    assert_eq!(dup["code"], "conflict");

    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["registry"]["server_count"], 2);
    assert_eq!(status["active_count"], 0);
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));

    let r = agent
        .registry(json!({"action": "uninstall", "name": "files"}))
        .await;
    assert_eq!(r["status"], "uninstalled");
    let (is_error, missing) = agent
        .try_registry(json!({"action": "uninstall", "name": "files"}))
        .await
        .unwrap();
    assert!(is_error);
    assert_eq!(missing["code"], "not_found");
    assert_eq!(
        agent
            .registry(json!({"action": "list"}))
            .await
            .as_array()
            .unwrap()
            .len(),
        1
    );
    agent.stop().await;
}

#[tokio::test]
async fn two_processes_share_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let a = harness::spawn(dir.path(), &[], None).await;
    let b = harness::spawn(dir.path(), &[], None).await;
    a.registry(
        json!({"action": "install", "name": "shared-one", "command": "node", "args": ["x.js"]}),
    )
    .await;
    let seen = b.registry(json!({"action": "list"})).await;
    assert_eq!(seen[0]["name"], "shared-one");
    b.registry(json!({"action": "uninstall", "name": "shared-one"}))
        .await;
    assert_eq!(a.registry(json!({"action": "list"})).await, json!([]));
    // Concurrent writers: both succeed (busy timeout + WAL), nothing is lost.
    let (ra, rb) = tokio::join!(
        async {
            for i in 0..20 {
                a.registry(
                    json!({"action": "install", "name": format!("a{i}"), "command": "node"}),
                )
                .await;
            }
        },
        async {
            for i in 0..20 {
                b.registry(
                    json!({"action": "install", "name": format!("b{i}"), "command": "node"}),
                )
                .await;
            }
        }
    );
    let _ = (ra, rb);
    assert_eq!(
        a.registry(json!({"action": "list"}))
            .await
            .as_array()
            .unwrap()
            .len(),
        40
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test]
async fn bad_input_gets_clear_errors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .registry(json!({"action": "install", "name": "keep", "command": "node"}))
        .await;
    let before = agent.registry(json!({"action": "list"})).await;
    let huge = "x".repeat(1024 * 1024);
    // (arguments, part of the message, the field blamed)
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"action": "explode"}),
            "unknown action `explode`",
            "action",
        ),
        (json!({}), "`action` is required", "action"),
        (json!({"action": 7}), "`action` must be a string", "action"),
        (
            json!({"action": "install"}),
            "needs the argument `name`",
            "name",
        ),
        (
            json!({"action": "install", "name": "ok"}),
            "needs a command",
            "command",
        ),
        (
            json!({"action": "install", "name": 42, "command": "node"}),
            "`name` must be a string",
            "name",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "node", "args": "not-a-list"}),
            "`args` must be an array",
            "args",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "node", "args": [1]}),
            "`args[]` must be a string",
            "args",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "node", "env": {"K": 1}}),
            "`env.K` must be a string",
            "env",
        ),
        (
            json!({"action": "install", "name": "x; rm -rf /", "command": "node"}),
            "invalid server name",
            "name",
        ),
        (
            json!({"action": "install", "name": "../../etc/passwd", "command": "node"}),
            "invalid server name",
            "name",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "rm -rf / ; echo"}),
            "never run through a shell",
            "command",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "node", "description": huge}),
            "over the limit",
            "description",
        ),
        (
            json!({"action": "install", "name": huge.clone(), "command": "node"}),
            "too long",
            "name",
        ),
        (
            json!({"action": "list", "query": huge.clone()}),
            "over the limit",
            "query",
        ),
        (
            json!({"action": "list", "installed_only": "yes"}),
            "`installed_only` must be a boolean",
            "installed_only",
        ),
        (
            json!({"action": "list", "source": "elsewhere"}),
            "invalid source",
            "source",
        ),
        (
            json!({"action": "uninstall", "name": "x; rm -rf /"}),
            "invalid server name",
            "name",
        ),
        (
            json!({"action": "install", "name": "ok", "transport": "carrier-pigeon", "command": "node"}),
            "invalid transport",
            "transport",
        ),
        (
            json!({"action": "install", "name": "ok", "transport": "sse", "url": "file:///etc/passwd"}),
            "must start with http",
            "url",
        ),
        (
            json!({"action": "proxy_call", "server": "keep"}),
            "give `tool`",
            "tool",
        ),
        (
            json!({"action": "find_tools", "intents": "one"}),
            "must be an array",
            "intents",
        ),
        (
            json!({"action": "install", "name": "ok", "command": "node", "call_timeout_ms": 0}),
            "between 1 and",
            "call_timeout_ms",
        ),
    ];
    // SEP-1303: argument problems are tool results with `isError: true` naming the field, not protocol errors.
    for (args, expected, field) in cases {
        let (is_error, v) = agent
            .try_registry(args.clone())
            .await
            .unwrap_or_else(|e| panic!("{} -> protocol error {e:?}", harness::short(&args)));
        assert!(
            is_error,
            "{} should be rejected: {v}",
            harness::short(&args)
        );
        assert_eq!(v["code"], "invalid_input", "{}: {v}", harness::short(&args));
        assert_eq!(v["field"], field, "{}: {v}", harness::short(&args));
        let message = v["error"].as_str().unwrap_or_default();
        assert!(
            message.contains(expected),
            "{} -> {message:?} (expected {expected:?})",
            harness::short(&args)
        );
        assert!(
            v.to_string().len() < 1000,
            "error message echoes the huge input"
        );
    }
    assert_eq!(
        agent.registry(json!({"action": "list"})).await,
        before,
        "a rejected call changed the registry"
    );
    // An unknown tool is a tool result too, and the server is still fine afterwards.
    let err = agent
        .client
        .call_tool(CallToolRequestParams::new("no_such_tool"))
        .await
        .map(|r| harness::parse(&r));
    assert!(
        matches!(err, Ok(ref v) if v["kind"] == "tool_not_found"),
        "{err:?}"
    );
    assert_eq!(agent.registry(json!({"action": "list"})).await, before);
    agent.stop().await;
}

#[tokio::test]
async fn stdout_carries_only_mcp_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = harness::command(dir.path(), &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "this is not json",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"registry","arguments":{"action":"nope"}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"no/such/method"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"registry","arguments":{"action":"status"}}}"#,
    ];
    for l in lines {
        stdin.write_all(format!("{l}\n").as_bytes()).await.unwrap();
    }
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ids = Vec::new();
    while ids.len() < 4 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(10), out.next_line())
            .await
            .expect("answer")
            .unwrap()
            .expect("line");
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("non-JSON on stdout: {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if let Some(id) = v["id"].as_i64() {
            ids.push(id);
        }
    }
    ids.sort();
    assert_eq!(ids, [1, 2, 3, 4]);
    drop(stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(
        status.success(),
        "agent-discover exited with {status} on stdin EOF"
    );
    assert!(out.next_line().await.unwrap().is_none());
}

fn cli(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env_remove("AGENT_DISCOVER_DB")
        .output()
        .unwrap()
}

#[test]
fn cli_add_list_show_remove() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(
        dir.path(),
        &[
            "add",
            "files",
            "--description",
            "local files",
            "--tag",
            "fs",
            "--env",
            "A=1",
            "--json",
            "--",
            "npx",
            "-y",
            "pkg",
            "/tmp",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["name"].as_str(), v["command"].as_str()),
        (Some("files"), Some("npx"))
    );
    assert_eq!(v["args"], json!(["-y", "pkg", "/tmp"]));
    assert_eq!(v["env"], json!({"A": "1"}));

    let out = cli(dir.path(), &["list", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["name"], "files");
    let out = cli(dir.path(), &["list"]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.starts_with("NAME") && table.contains("files") && table.contains("local files"),
        "{table}"
    );
    let out = cli(dir.path(), &["show", "files", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tools"], json!([]));
    assert!(
        String::from_utf8(cli(dir.path(), &["show", "files"]).stdout)
            .unwrap()
            .contains("command:     npx -y pkg /tmp")
    );

    // Failures: exit 2, one line on stderr, nothing on stdout.
    for args in [
        &["add", "files", "--", "node"][..],
        &["show", "ghost"],
        &["remove", "ghost"],
        &["add", "x; rm -rf /", "--", "node"],
        &["list", "--source", "mars"],
    ] {
        let out = cli(dir.path(), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?} printed data");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
    let out = cli(dir.path(), &["remove", "files", "--json"]);
    assert!(out.status.success());
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["status"],
        "removed"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&cli(dir.path(), &["list", "--json"]).stdout).unwrap(),
        json!([])
    );
}

#[test]
fn cli_and_mcp_see_the_same_registry_and_env_overrides_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("elsewhere.db");
    let out = std::process::Command::new(BIN)
        .args(["add", "viaenv", "--", "node"])
        .env("AGENT_DISCOVER_DB", &db)
        .env("AGENT_DISCOVER_DATA_DIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(db.exists(), "AGENT_DISCOVER_DB was not used");
    let out = std::process::Command::new(BIN)
        .args(["list", "--json"])
        .env("AGENT_DISCOVER_DATA_DIR", dir.path())
        .env("AGENT_DISCOVER_DB", &db)
        .output()
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&out.stdout).unwrap()[0]["name"],
        "viaenv"
    );
    let store = agent_discover::store::Store::open(&db).unwrap();
    assert_eq!(
        store.schema_version().unwrap(),
        agent_discover::store::SCHEMA_VERSION
    );
    // Reopening runs no migration twice.
    drop(store);
    let again = agent_discover::store::Store::open(&db).unwrap();
    assert_eq!(again.count_servers().unwrap(), 1);
}

/// Processes that open a brand-new data directory at the same instant all succeed (the switch to WAL and the creation
/// of the secrets key race), and they end up sharing one complete key.
#[test]
fn processes_racing_to_create_a_fresh_data_dir_all_succeed() {
    for _round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let racers: Vec<_> = (0..8)
            .map(|_| {
                std::process::Command::new(BIN)
                    .arg("--data-dir")
                    .arg(dir.path())
                    .args(["list", "--json"])
                    .env_remove("AGENT_DISCOVER_DB")
                    .env_remove("AGENT_DISCOVER_MASTER_KEY")
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for racer in racers {
            let out = racer.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let key = std::fs::read(dir.path().join("secrets.key")).unwrap();
        assert_eq!(key.len(), 32);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
