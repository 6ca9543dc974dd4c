//! Tracing benchmark (not a test): the cost per proxied call of OpenTelemetry traces. One rmcp client calls the
//! fixture's `echo` directly and through four `agent-discover mcp` processes, in turn (so all see the same load):
//! tracing off (the default: legacy stdio calls take the fast lane), tracing off with `AGENT_DISCOVER_FAST_LANE=off`
//! (rmcp's handler), tracing on (the fast lane, which makes the spans itself), and tracing on with the fast lane
//! off; tracing exports OTLP `http/protobuf` to a receiver in this process that answers 200 (one per process). Reports each path's latency (median, p99), its median overhead over
//! the direct call made just before, and agent-discover's CPU time per call; then what the receiver got.
//!
//! Run: `cargo build --release -p agent-discover -p ad-fixture && cargo bench --bench tracing`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const CALLS: usize = 5000;
const WARMUP: usize = 500;
/// Linux reports CPU time in clock ticks of 10 ms.
const US_PER_TICK: f64 = 10_000.0;

type Client = RunningService<RoleClient, ()>;

fn release(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/release")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release -p agent-discover -p ad-fixture` first",
        p.display()
    );
    p
}

async fn connect(cmd: tokio::process::Command) -> (Client, u32) {
    let (t, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = t.id().unwrap();
    (().serve(t).await.unwrap(), pid)
}

fn echo(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned())
        .with_arguments(json!({"text": "ping"}).as_object().unwrap().clone())
}

/// CPU time (user + system) of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// `agent-discover mcp` on its own data directory with the fixture registered and active as `fx`.
async fn agent(bin: &Path, fixture: &Path, dir: &Path, env: &[(&str, String)]) -> (Client, u32) {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.arg("--data-dir").arg(dir).arg("mcp");
    cmd.env("AGENT_DISCOVER_DASHBOARD", "off")
        .env("AGENT_DISCOVER_MODEL_SOURCE", "off");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (client, pid) = connect(cmd).await;
    for args in [
        json!({"action": "install", "name": "fx", "command": fixture, "args": []}),
        json!({"action": "activate", "name": "fx"}),
    ] {
        let r = client
            .call_tool(
                CallToolRequestParams::new("registry")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_ne!(r.is_error, Some(true), "{args} -> {r:?}");
    }
    (client, pid)
}

#[derive(Default)]
struct Sink {
    requests: AtomicU64,
    bytes: AtomicU64,
}

/// An OTLP/HTTP receiver that counts what it gets and answers 200.
async fn receiver() -> (Arc<Sink>, String) {
    let sink = Arc::new(Sink::default());
    let s = sink.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let s = s.clone();
            async move {
                s.requests.fetch_add(1, Ordering::Relaxed);
                s.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (sink, url)
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let (bin, fixture) = (release("agent-discover"), release("agent-discover-fixture"));
    let (sink, url) = receiver().await;
    let (handler_sink, handler_url) = receiver().await;
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let (direct, _) = connect(tokio::process::Command::new(&fixture)).await;
    let (off, off_pid) = agent(&bin, &fixture, dirs[0].path(), &[]).await;
    let (handler, handler_pid) = agent(
        &bin,
        &fixture,
        dirs[1].path(),
        &[("AGENT_DISCOVER_FAST_LANE", "off".into())],
    )
    .await;
    let (on, on_pid) = agent(
        &bin,
        &fixture,
        dirs[2].path(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", url.clone())],
    )
    .await;
    let (on_handler, on_handler_pid) = agent(
        &bin,
        &fixture,
        dirs[3].path(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", handler_url.clone()),
            ("AGENT_DISCOVER_FAST_LANE", "off".into()),
        ],
    )
    .await;
    let paths: [(&str, &Client, &str, Option<u32>); 5] = [
        ("direct (fixture alone)", &direct, "echo", None),
        (
            "tracing off (default, fast lane)",
            &off,
            "fx__echo",
            Some(off_pid),
        ),
        (
            "tracing off, fast lane off",
            &handler,
            "fx__echo",
            Some(handler_pid),
        ),
        (
            "tracing on (fast lane, http/protobuf)",
            &on,
            "fx__echo",
            Some(on_pid),
        ),
        (
            "tracing on, fast lane off",
            &on_handler,
            "fx__echo",
            Some(on_handler_pid),
        ),
    ];
    for _ in 0..WARMUP {
        for (_, c, tool, _) in &paths {
            c.call_tool(echo(tool)).await.unwrap();
        }
    }
    let before: Vec<u64> = paths.iter().map(|p| p.3.map_or(0, cpu_ticks)).collect();
    let mut lat: Vec<Vec<f64>> = vec![Vec::with_capacity(CALLS); paths.len()];
    let mut diff: Vec<Vec<f64>> = vec![Vec::with_capacity(CALLS); paths.len()];
    for _ in 0..CALLS {
        let mut direct_us = 0.0;
        for (i, (_, c, tool, _)) in paths.iter().enumerate() {
            let t = Instant::now();
            let r = c.call_tool(echo(tool)).await.unwrap();
            let us = t.elapsed().as_secs_f64() * 1e6;
            assert_ne!(r.is_error, Some(true));
            if i == 0 {
                direct_us = us;
            }
            lat[i].push(us);
            diff[i].push(us - direct_us);
        }
    }
    let after: Vec<u64> = paths.iter().map(|p| p.3.map_or(0, cpu_ticks)).collect();
    println!("{CALLS} calls per path after {WARMUP} warm-up calls, paths in turn\n");
    println!(
        "{:<36} {:>11} {:>9} {:>15} {:>15}",
        "path", "median us", "p99 us", "overhead us", "CPU us/call"
    );
    for (i, (name, ..)) in paths.iter().enumerate() {
        lat[i].sort_by(f64::total_cmp);
        diff[i].sort_by(f64::total_cmp);
        let pct = |p: f64| lat[i][((CALLS as f64 * p) as usize).min(CALLS - 1)];
        let cpu = if paths[i].3.is_some() {
            format!(
                "{:.1}",
                (after[i] - before[i]) as f64 * US_PER_TICK / CALLS as f64
            )
        } else {
            "-".into()
        };
        let over = if i == 0 {
            "-".into()
        } else {
            format!("{:.1}", diff[i][CALLS / 2])
        };
        println!(
            "{name:<36} {:>11.1} {:>9.1} {over:>15} {cpu:>15}",
            pct(0.5),
            pct(0.99)
        );
    }
    // Stop the traced processes: each flushes its queue on the way out.
    for (client, pid, sink, name) in [
        (on, on_pid, &sink, "tracing on"),
        (
            on_handler,
            on_handler_pid,
            &handler_sink,
            "tracing on, fast lane off",
        ),
    ] {
        let _ = client.cancel().await;
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        }) && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!(
            "\nreceiver ({name}): {} export requests, {} bytes ({:.0} bytes per traced call, 2 spans each)",
            sink.requests.load(Ordering::Relaxed),
            sink.bytes.load(Ordering::Relaxed),
            sink.bytes.load(Ordering::Relaxed) as f64 / (CALLS + WARMUP) as f64,
        );
    }
    let _ = off.cancel().await;
    let _ = handler.cancel().await;
    let _ = direct.cancel().await;
}
