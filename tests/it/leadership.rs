//! Issue 10: the dashboard port changes hands when its leader exits. Real `agent-discover mcp` processes on one data dir
//! and one port: the leader is killed with SIGKILL, then the next one exits cleanly (its stdin closed), and each time
//! a survivor serves the same port within 2 s.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::AsyncBufReadExt;

use crate::harness;

/// One `agent-discover mcp` process with an MCP client on its stdio and its stderr lines collected.
struct Proc {
    child: tokio::process::Child,
    client: Option<rmcp::service::RunningService<rmcp::RoleClient, ()>>,
    pid: u32,
    lines: Arc<Mutex<Vec<String>>>,
    changed: Arc<tokio::sync::Notify>,
}

impl Proc {
    async fn spawn(dir: &std::path::Path, port: u16) -> Proc {
        let mut cmd = harness::command(dir, &["mcp"]);
        cmd.env("AGENT_DISCOVER_DASHBOARD", "on")
            .env("AGENT_DISCOVER_PORT", port.to_string())
            .env("AGENT_DISCOVER_LOG", "agent_discover=info,warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn agent-discover mcp");
        let pid = child.id().expect("pid");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let changed = Arc::new(tokio::sync::Notify::new());
        let stderr = child.stderr.take().unwrap();
        {
            let (lines, changed) = (lines.clone(), changed.clone());
            tokio::spawn(async move {
                let mut r = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(l)) = r.next_line().await {
                    eprintln!("[agent-discover {pid}] {l}");
                    lines.lock().unwrap().push(l);
                    changed.notify_waiters();
                }
            });
        }
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let client = ().serve(io).await.expect("initialize over stdio");
        Proc {
            child,
            client: Some(client),
            pid,
            lines,
            changed,
        }
    }

    /// Waits (event-driven: each stderr line wakes it) for a line containing `needle`.
    async fn wait_line(&self, needle: &str) {
        let wait = async {
            loop {
                let notified = self.changed.notified();
                if self
                    .lines
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|l| l.contains(needle))
                {
                    return;
                }
                notified.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .unwrap_or_else(|_| panic!("process {} never logged {needle:?}", self.pid));
    }
}

/// The pid of the process answering `/health` on `port`, if any answers.
async fn health_pid(http: &reqwest::Client, port: u16) -> Option<u32> {
    let r = http
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .ok()?;
    let v: Value = r.json().await.ok()?;
    v["pid"].as_u64().map(|p| p as u32)
}

/// Waits until one of `survivors` answers on `port` and returns it with the time taken since `since`. Fails after
/// `limit` (a deadline loop on the port: there is no event to wait on from outside the processes).
async fn wait_for_new_leader(
    http: &reqwest::Client,
    port: u16,
    survivors: &[u32],
    since: Instant,
    limit: Duration,
) -> (u32, Duration) {
    loop {
        if let Some(pid) = health_pid(http, port).await
            && survivors.contains(&pid)
        {
            return (pid, since.elapsed());
        }
        assert!(
            since.elapsed() < limit,
            "no survivor ({survivors:?}) served port {port} within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_dashboard_port_survives_its_leader() {
    let dir = tempfile::tempdir().unwrap();
    // The database exists before the processes start: this test is about the port.
    let out = harness::command(dir.path(), &["list"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    let mut a = Proc::spawn(dir.path(), port).await;
    a.wait_line("dashboard at http://").await;
    assert_eq!(health_pid(&http, port).await, Some(a.pid));
    let b = Proc::spawn(dir.path(), port).await;
    let c = Proc::spawn(dir.path(), port).await;
    b.wait_line("ready to take the port over").await;
    c.wait_line("ready to take the port over").await;
    // The followers serve no port: the leader still answers.
    assert_eq!(health_pid(&http, port).await, Some(a.pid));

    // 1. The leader is killed (SIGKILL: no chance to clean up).
    // SAFETY: kill(2) on a child this test spawned and has not reaped.
    assert_eq!(unsafe { libc::kill(a.pid as i32, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    a.child.wait().await.unwrap();
    let (second, took) =
        wait_for_new_leader(&http, port, &[b.pid, c.pid], killed, Duration::from_secs(2)).await;
    eprintln!("takeover after SIGKILL: {took:?} (pid {second})");
    assert!(took <= Duration::from_secs(2), "took {took:?}");

    // 2. The new leader exits cleanly: its MCP client closes stdin.
    let (mut leader, mut last) = if second == b.pid { (b, c) } else { (c, b) };
    leader.client.take().unwrap().cancel().await.unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), leader.child.wait())
        .await
        .expect("the leader did not exit after its stdin closed")
        .unwrap();
    assert!(status.success(), "{status}");
    let exited = Instant::now();
    let (third, took) =
        wait_for_new_leader(&http, port, &[last.pid], exited, Duration::from_secs(2)).await;
    eprintln!("takeover after a clean exit: {took:?} (pid {third})");
    assert!(took <= Duration::from_secs(2), "took {took:?}");
    last.wait_line("taking the port over").await;

    // The last one exits too, and nothing is left behind.
    last.client.take().unwrap().cancel().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), last.child.wait())
        .await
        .expect("the last process did not exit")
        .unwrap();
    for pid in [a.pid, leader.pid, last.pid] {
        assert!(!harness::pid_alive(pid), "process {pid} left behind");
    }
    assert_eq!(health_pid(&http, port).await, None);
}
