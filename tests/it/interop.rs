//! Interop with parts nobody here wrote: real MCP servers from npm and PyPI (installed by scripts/test.sh) and the
//! official Python SDK as a client in both protocol eras.

use std::path::PathBuf;
use std::time::Duration;

use rmcp::model::*;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness::{self, group_members, text};

/// Where scripts/test.sh installs test dependencies. Missing pieces fail the test with a fix, never skip it.
fn cache() -> PathBuf {
    std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/cache"))
}

fn need(path: PathBuf) -> String {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh, which installs the test dependencies before running cargo test",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

fn everything_bin() -> String {
    need(cache().join("node/node_modules/.bin/mcp-server-everything"))
}

/// Runs one of `tests/interop/*.py` (the official Python SDK as the client) against agent-discover and the fixture, in
/// `mode` (`auto`: 2026-07-28; `legacy`: 2025-11-25), in a fresh data directory; its stdout. Fails the test if the
/// script fails.
pub(crate) async fn python_check(script: &str, mode: &str) -> String {
    let python = need(cache().join("venv/bin/python"));
    let script = need(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/interop")
            .join(script),
    );
    let dir = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(harness::BIN)
        .arg(harness::fixture())
        .arg(dir.path())
        .arg(mode)
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} ({mode}) failed:\n{stdout}\n{stderr}"
    );
    stdout
}

#[tokio::test]
async fn python_sdk_drives_the_proxy_in_both_protocol_eras() {
    for (mode, expected) in [
        ("auto", "negotiated 2026-07-28"),
        ("legacy", "negotiated 2025-11-25"),
    ] {
        let stdout = python_check("python_proxy_check.py", mode).await;
        assert!(stdout.contains(expected), "{stdout}");
    }
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let bin = everything_bin();
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .registry(
            json!({"action": "install", "name": "everything", "command": bin, "args": ["stdio"]}),
        )
        .await;
    agent.registry(json!({"action": "set_secret", "name": "everything", "key": "AGENT_DISCOVER_TEST_SECRET", "value": "opensesame"})).await;
    let act = agent
        .registry(json!({"action": "activate", "name": "everything"}))
        .await;
    let tools: Vec<&str> = act["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"everything__echo"), "{tools:?}");
    assert_eq!(
        text(
            &agent
                .call("everything__echo", json!({"message": "hi everything"}))
                .await
        ),
        "Echo: hi everything"
    );
    let r = agent.registry(json!({"action": "proxy_call", "call_as": "mcp__everything__get-sum", "arguments": {"a": 2, "b": 40}})).await;
    assert!(r.to_string().contains("42"), "{r}");
    // Secrets reach the child's environment.
    let env = text(&agent.call("everything__get-env", json!({})).await);
    assert!(
        env.contains("opensesame"),
        "secret missing from the child's environment"
    );

    let resources = agent.client.list_all_resources().await.unwrap();
    // agent-discover's own registry snapshot comes first, then the child's resources.
    assert_eq!(resources[0].uri, "agent-discover://registry");
    assert!(resources.len() > 1);
    let first = resources[1].uri.clone();
    assert!(first.starts_with("agent-discover://everything/"), "{first}");
    let read = agent
        .client
        .read_resource(ReadResourceRequestParams::new(first.clone()))
        .await
        .unwrap();
    assert!(!read.contents.is_empty());
    let prompts = agent.client.list_all_prompts().await.unwrap();
    let simple = prompts
        .iter()
        .find(|p| p.name == "everything__simple-prompt")
        .unwrap_or_else(|| panic!("{prompts:?}"));
    let got = agent
        .client
        .get_prompt(GetPromptRequestParams::new(simple.name.clone()))
        .await
        .unwrap();
    assert!(!got.messages.is_empty());

    let status = agent.registry(json!({"action": "status"})).await;
    let pgid = status["servers"][0]["pid"].as_u64().unwrap() as u32;
    assert!(
        group_members(pgid).len() >= 2,
        "guard and node expected in the group"
    );
    agent
        .registry(json!({"action": "deactivate", "name": "everything"}))
        .await;
    assert!(
        group_members(pgid).is_empty(),
        "npm server left processes behind"
    );
    agent.stop().await;
}

#[tokio::test]
async fn mcp_server_time_from_pypi() {
    let bin = need(cache().join("venv/bin/mcp-server-time"));
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.registry(json!({"action": "install", "name": "time", "command": bin, "description": "time and timezones"})).await;
    let act = agent
        .registry(json!({"action": "activate", "name": "time"}))
        .await;
    let tools: Vec<&str> = act["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["time__get_current_time", "time__convert_time"]);
    let r = agent
        .call(
            "time__get_current_time",
            json!({"timezone": "Europe/Paris"}),
        )
        .await;
    let v: Value = serde_json::from_str(&text(&r)).unwrap_or_else(|_| panic!("{}", text(&r)));
    assert_eq!(v["timezone"], "Europe/Paris");
    let r = agent
        .call(
            "time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await;
    assert!(text(&r).contains("21:00"), "{}", text(&r));
    let status = agent.registry(json!({"action": "status"})).await;
    let pgid = status["servers"][0]["pid"].as_u64().unwrap() as u32;
    agent
        .registry(json!({"action": "deactivate", "name": "time"}))
        .await;
    assert!(group_members(pgid).is_empty());
    agent.stop().await;
}

/// Starts server-everything as a network server and returns it with its port, once it says it is listening.
async fn everything_http(mode: &str, ready: &str) -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new(everything_bin())
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut errs = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let wait = async {
        loop {
            tokio::select! {
                Ok(Some(l)) = lines.next_line() => if l.contains(ready) { return },
                Ok(Some(l)) = errs.next_line() => if l.contains(ready) { return },
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait)
        .await
        .expect("server-everything did not start");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    tokio::spawn(async move { while let Ok(Some(_)) = errs.next_line().await {} });
    (child, port)
}

/// A TCP relay to `upstream` on 127.0.0.1 that keeps a copy of every byte clients send (to see the HTTP headers
/// agent-discover sends); returns its port and the copy.
async fn tap(upstream: u16) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let copy = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                continue;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let copy = copy.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 || sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    copy.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = sw.shutdown().await;
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
            });
        }
    });
    (port, seen)
}

/// Remote servers over Streamable HTTP and legacy SSE (real server-everything in both modes), reached through a relay
/// that shows what agent-discover sent: the configured headers, with `${NAME}` filled from the server's secrets.
#[tokio::test]
async fn remote_servers_over_streamable_http_and_legacy_sse() {
    let (_http, http_port) = everything_http("streamableHttp", "listening on port").await;
    let (_sse, sse_port) = everything_http("sse", "running on port").await;
    let (http_tap, http_seen) = tap(http_port).await;
    let (sse_tap, sse_seen) = tap(sse_port).await;
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    let headers = json!({"X-Test": "yes", "Authorization": "Bearer ${REMOTE_TOKEN}"});
    agent
        .registry(json!({"action": "install", "name": "remote-http", "transport": "streamable-http", "url": format!("http://127.0.0.1:{http_tap}/mcp"), "headers": headers}))
        .await;
    agent
        .registry(json!({"action": "install", "name": "remote-sse", "transport": "sse", "url": format!("http://127.0.0.1:{sse_tap}/sse"), "headers": headers}))
        .await;
    for (name, seen) in [("remote-http", &http_seen), ("remote-sse", &sse_seen)] {
        agent
            .registry(json!({"action": "set_secret", "name": name, "key": "REMOTE_TOKEN", "value": format!("tok-{name}")}))
            .await;
        let act = agent
            .registry(json!({"action": "activate", "name": name}))
            .await;
        assert_eq!(act["status"], "activated", "{act}");
        let r = agent
            .call(&format!("{name}__echo"), json!({"message": name}))
            .await;
        assert_eq!(text(&r), format!("Echo: {name}"));
        let sent = String::from_utf8_lossy(&seen.lock().unwrap()).to_ascii_lowercase();
        assert!(sent.contains("x-test: yes"), "{name}: {sent}");
        assert!(
            sent.contains(&format!("authorization: bearer tok-{name}")),
            "{name}: {sent}"
        );
        let d = agent
            .registry(json!({"action": "deactivate", "name": name}))
            .await;
        assert_eq!(d["status"], "deactivated");
    }
    agent.stop().await;
}
