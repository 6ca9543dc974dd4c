//! Issue 16, replicas: several `serve` processes on one registry. Handshake-era sessions live in the replica that
//! created them (another replica answers 404, and the client starts a new session there); 2026-07-28 stateless
//! requests are served by any replica.

use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness;

/// One `agent-discover serve --port 0`; killed (its process group with it) when dropped.
pub struct Replica {
    pub child: tokio::process::Child,
    pub url: String,
}

/// Starts a replica on `dir` with `env`, waiting for the URL it prints once it listens.
pub async fn replica(dir: &std::path::Path, env: &[(&str, String)]) -> Replica {
    let mut cmd = harness::command(dir, &["serve", "--port", "0"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("serve printed no URL")
        .unwrap()
        .expect("serve exited");
    Replica {
        child,
        url: url.trim_end_matches('/').to_owned(),
    }
}

/// Registers the fixture server as `name` through `r`'s REST API and activates it there.
pub async fn register_fixture(http: &reqwest::Client, r: &Replica, name: &str) {
    let created = http
        .post(format!("{}/api/servers", r.url))
        .json(&json!({"name": name, "command": harness::fixture(), "args": ["--name", name]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{}/api/servers/{name}/activate", r.url))
        .send()
        .await
        .unwrap();
    assert!(
        activated.status().is_success(),
        "{}",
        activated.text().await.unwrap()
    );
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#;

async fn post(
    http: &reqwest::Client,
    url: &str,
    body: &str,
    session: Option<&str>,
) -> reqwest::Response {
    let mut req = http
        .post(format!("{url}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_owned());
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    req.send().await.unwrap()
}

/// Checks what `docs`'s "for teams" section promises about sessions, on the replicas `a` and `b` of one registry
/// that has the fixture active as `fx`.
pub async fn sessions_across(a: &Replica, b: &Replica) {
    let http = reqwest::Client::new();
    // A handshake-era session created on A ...
    let init = post(&http, &a.url, INIT, None).await;
    assert!(init.status().is_success(), "{}", init.status());
    let session = init
        .headers()
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_owned();
    drop(init.text().await);
    let initialized = post(
        &http,
        &a.url,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        Some(&session),
    )
    .await;
    assert!(initialized.status().is_success());
    let on_a = post(&http, &a.url, LIST, Some(&session)).await;
    assert_eq!(on_a.status(), 200);
    assert!(on_a.text().await.unwrap().contains("fx__echo"));
    // ... is unknown to B: 404, which tells a conforming client to start a new session (the load balancer needs
    // affinity on `Mcp-Session-Id` to spare it that).
    let on_b = post(&http, &b.url, LIST, Some(&session)).await;
    assert_eq!(on_b.status(), 404, "{}", on_b.text().await.unwrap());
    // A new session on B works.
    let again = post(&http, &b.url, INIT, None).await;
    assert!(again.status().is_success());
    assert!(again.headers().get("mcp-session-id").is_some());

    // 2026-07-28 stateless requests: one client whose requests go to A, then B, then A (what a load balancer without
    // affinity does): each is answered, because no request depends on an earlier one.
    for url in [&a.url, &b.url, &a.url] {
        let client = client_2026(url).await;
        let mut args = serde_json::Map::new();
        args.insert("text".into(), json!(format!("via {url}")));
        let r = client
            .call_tool(CallToolRequestParams::new("fx__echo").with_arguments(args))
            .await
            .unwrap();
        assert_eq!(r.is_error, Some(false), "{r:?}");
        assert!(harness::text(&r).contains(&format!("via {url}")), "{r:?}");
        let _ = client.cancel().await;
    }
}

/// Two replicas on one SQLite data directory (one machine): sessions as documented.
#[tokio::test]
async fn handshake_sessions_stay_on_their_replica_stateless_requests_go_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let a = replica(dir.path(), &[]).await;
    let b = replica(dir.path(), &[]).await;
    register_fixture(&http, &a, "fx").await;
    // B runs the fixture too (without team mode a replica runs what it activated).
    let r: Value = http
        .post(format!("{}/api/servers/fx/activate", b.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(r.to_string().contains("echo"), "{r}");
    sessions_across(&a, &b).await;
}

/// A 2026-07-28 client of `url`'s aggregated endpoint.
pub async fn client_2026(
    url: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, harness::TestClient> {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")),
    );
    harness::TestClient {
        seen: Default::default(),
        sampling_reply: None,
    }
    .serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("server/discover")
}

/// Eight MCP clients spread over `replicas` (which all run the fixture as `fx`) call `fx__echo` while a writer
/// registers servers through each replica in turn; then `replicas[0]` is killed with SIGKILL. The other replicas'
/// clients keep getting answers, and every registration a replica acknowledged is in the registry afterwards.
pub async fn load_then_kill_one(mut replicas: Vec<Replica>) {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    const CLIENTS: usize = 8;
    let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    // Answers per client after the kill, and before it.
    let after: Arc<Vec<AtomicUsize>> =
        Arc::new((0..CLIENTS).map(|_| AtomicUsize::new(0)).collect());
    let before = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let replicas_n = urls.len();
        let url = urls[i % replicas_n].clone();
        let (stop, killed, after, before) =
            (stop.clone(), killed.clone(), after.clone(), before.clone());
        tasks.push(tokio::spawn(async move {
            let client = client_2026(&url).await;
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let text = format!("client {i} call {n}");
                let mut args = serde_json::Map::new();
                args.insert("text".into(), json!(text));
                let was_killed = killed.load(Ordering::SeqCst);
                match client
                    .call_tool(CallToolRequestParams::new("fx__echo").with_arguments(args))
                    .await
                {
                    Ok(r) => {
                        assert_eq!(
                            harness::text(&r),
                            text,
                            "client {i} got another call's answer"
                        );
                        if was_killed {
                            after[i].fetch_add(1, Ordering::SeqCst);
                        } else {
                            before.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    // Only the killed replica's clients may fail, and only once it was killed.
                    Err(_) if i % replicas_n == 0 && killed.load(Ordering::SeqCst) => break,
                    Err(e) => panic!("client {i} of {url}: {e}"),
                }
            }
        }));
    }
    // The writer: registrations acknowledged (201) by some replica, by name.
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let writer = {
        let (stop, acknowledged, urls, killed) = (
            stop.clone(),
            acknowledged.clone(),
            urls.clone(),
            killed.clone(),
        );
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let name = format!("w{n}");
                let url = &urls[n % urls.len()];
                let r = http
                    .post(format!("{url}/api/servers"))
                    .json(&json!({"name": name, "command": "true"}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == 201 => acknowledged.lock().unwrap().push(name),
                    Ok(r) => panic!("registering {name} at {url}: {}", r.status()),
                    Err(_) if n % urls.len() == 0 && killed.load(Ordering::SeqCst) => {}
                    Err(e) => panic!("registering {name} at {url}: {e}"),
                }
            }
        })
    };
    // Mid-load: once 200 calls were answered, SIGKILL the first replica.
    harness::wait_for(Duration::from_secs(120), || {
        before.load(Ordering::SeqCst) >= 200
    })
    .await;
    killed.store(true, Ordering::SeqCst);
    replicas[0].child.start_kill().unwrap();
    replicas[0].child.wait().await.unwrap();
    // Every surviving replica's clients get 20 more answers each.
    harness::wait_for(Duration::from_secs(120), || {
        (0..CLIENTS)
            .filter(|i| i % urls.len() != 0)
            .all(|i| after[i].load(Ordering::SeqCst) >= 20)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    writer.await.unwrap();
    // No acknowledged registration is lost.
    let listed: Vec<Value> = reqwest::get(format!("{}/api/servers", urls[1]))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed.iter().filter_map(|s| s["name"].as_str()).collect();
    let acknowledged = acknowledged.lock().unwrap().clone();
    assert!(acknowledged.len() > 3, "{acknowledged:?}");
    for a in &acknowledged {
        assert!(
            names.contains(&a.as_str()),
            "{a} was acknowledged but is not stored"
        );
    }
    drop(replicas);
}

/// Three replicas on one SQLite data directory under load, one killed with SIGKILL.
#[tokio::test]
async fn replicas_keep_answering_when_one_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(replica(dir.path(), &[]).await);
    }
    register_fixture(&http, &replicas[0], "fx").await;
    for r in &replicas[1..] {
        let a = http
            .post(format!("{}/api/servers/fx/activate", r.url))
            .send()
            .await
            .unwrap();
        assert!(a.status().is_success());
    }
    load_then_kill_one(replicas).await;
}

/// A legacy (handshake-era) MCP client of `url`'s aggregated endpoint, counting `tools/list_changed`.
pub async fn client_legacy(
    url: &str,
) -> (
    rmcp::service::RunningService<rmcp::RoleClient, harness::TestClient>,
    std::sync::Arc<harness::Seen>,
) {
    use rmcp::ServiceExt;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")),
    );
    let seen = std::sync::Arc::new(harness::Seen::default());
    let client = harness::TestClient {
        seen: seen.clone(),
        sampling_reply: None,
    }
    .serve(transport)
    .await
    .expect("initialize");
    (client, seen)
}

/// Waits (bounded, woken by `tools/list_changed`) until the client's tool list satisfies `pred`.
pub async fn wait_tools(
    client: &rmcp::service::RunningService<rmcp::RoleClient, harness::TestClient>,
    seen: &harness::Seen,
    what: &str,
    pred: impl Fn(&[String]) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let notified = seen.notify.notified();
        let names: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        if pred(&names) {
            return;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            panic!("{what}: not within 20 s; tools {names:?}");
        }
    }
}

/// Replicas that follow the shared active flags: a server activated through the first replica runs on every
/// replica (each connected MCP client gets `list_changed` and lists its tools), and deactivated through the last it
/// stops on every replica.
pub async fn follow_active_flags(replicas: &[Replica]) {
    let http = reqwest::Client::new();
    let mut clients = Vec::new();
    for r in replicas {
        clients.push(client_legacy(&r.url).await);
    }
    register_fixture(&http, &replicas[0], "fx").await;
    for (i, (client, seen)) in clients.iter().enumerate() {
        wait_tools(client, seen, &format!("fx__echo on replica {i}"), |t| {
            t.iter().any(|n| n == "fx__echo")
        })
        .await;
        let r = client
            .call_tool(CallToolRequestParams::new("fx__echo").with_arguments(
                serde_json::from_value(json!({"text": format!("on {i}")})).unwrap(),
            ))
            .await
            .unwrap();
        assert_eq!(harness::text(&r), format!("on {i}"));
    }
    for r in replicas {
        let listed: Vec<Value> = http
            .get(format!("{}/api/servers", r.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let fx = listed.iter().find(|s| s["name"] == "fx").unwrap();
        assert_eq!(fx["running"], true, "{} runs fx: {fx}", r.url);
    }
    // A tool filter set through the second replica hides the tool on every replica (each lists its child again).
    let filtered = http
        .put(format!(
            "{}/api/servers/fx/tool-filter",
            replicas[1 % replicas.len()].url
        ))
        .json(&json!({"allow": [], "deny": ["echo"]}))
        .send()
        .await
        .unwrap();
    assert!(
        filtered.status().is_success(),
        "{}",
        filtered.text().await.unwrap()
    );
    for (i, (client, seen)) in clients.iter().enumerate() {
        wait_tools(
            client,
            seen,
            &format!("fx__echo filtered on replica {i}"),
            |t| !t.iter().any(|n| n == "fx__echo") && t.iter().any(|n| n == "fx__add"),
        )
        .await;
    }
    let cleared = http
        .put(format!("{}/api/servers/fx/tool-filter", replicas[0].url))
        .json(&json!({"allow": [], "deny": []}))
        .send()
        .await
        .unwrap();
    assert!(cleared.status().is_success());
    for (i, (client, seen)) in clients.iter().enumerate() {
        wait_tools(
            client,
            seen,
            &format!("fx__echo back on replica {i}"),
            |t| t.iter().any(|n| n == "fx__echo"),
        )
        .await;
    }
    let last = replicas.last().unwrap();
    let stopped = http
        .post(format!("{}/api/servers/fx/deactivate", last.url))
        .send()
        .await
        .unwrap();
    assert!(stopped.status().is_success());
    for (i, (client, seen)) in clients.iter().enumerate() {
        wait_tools(
            client,
            seen,
            &format!("fx__echo gone on replica {i}"),
            |t| !t.iter().any(|n| n == "fx__echo"),
        )
        .await;
    }
    for (client, _) in clients {
        let _ = client.cancel().await;
    }
}

/// Three replicas over one SQLite file with `AGENT_DISCOVER_TEAM=1`.
#[tokio::test]
async fn replicas_over_one_sqlite_file_can_follow_the_active_flags() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("AGENT_DISCOVER_TEAM", "1".to_owned())];
    let mut replicas = Vec::new();
    for _ in 0..3 {
        replicas.push(replica(dir.path(), &env).await);
    }
    follow_active_flags(&replicas).await;
}
