//! Proxy benchmark (not a test): latency of a fixture tool called directly and through agent-discover with the same
//! rmcp client, the overhead, calls/s with 1 and 8 concurrent callers, and agent-discover's RSS with 0 and 10 children.
//!
//! Run: `cargo build --release && cargo bench --bench proxy`. Uses target/release/agent-discover.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

const CALLS: usize = 5000;
const WARMUP: usize = 500;

fn bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release` first",
        p.display()
    );
    p
}

async fn connect(cmd: tokio::process::Command) -> (RunningService<RoleClient, ()>, u32) {
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

/// Alternates direct and proxied calls so both paths see the same machine load; returns both sorted, and the
/// per-pair differences sorted.
async fn paired(
    direct: &RunningService<RoleClient, ()>,
    proxied: &RunningService<RoleClient, ()>,
) -> (Vec<Duration>, Vec<Duration>, Vec<f64>) {
    for _ in 0..WARMUP {
        direct.call_tool(echo("echo")).await.unwrap();
        proxied.call_tool(echo("fx__echo")).await.unwrap();
    }
    let (mut d, mut p, mut diff) = (
        Vec::with_capacity(CALLS),
        Vec::with_capacity(CALLS),
        Vec::with_capacity(CALLS),
    );
    for _ in 0..CALLS {
        let t = Instant::now();
        direct.call_tool(echo("echo")).await.unwrap();
        let a = t.elapsed();
        let t = Instant::now();
        let r = proxied.call_tool(echo("fx__echo")).await.unwrap();
        let b = t.elapsed();
        assert_ne!(r.is_error, Some(true));
        d.push(a);
        p.push(b);
        diff.push(b.as_secs_f64() * 1e6 - a.as_secs_f64() * 1e6);
    }
    d.sort();
    p.sort();
    diff.sort_by(f64::total_cmp);
    (d, p, diff)
}

fn pct(v: &[Duration], p: f64) -> Duration {
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

async fn throughput(
    client: Arc<RunningService<RoleClient, ()>>,
    tool: &str,
    callers: usize,
) -> f64 {
    let per = 2000;
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let c = client.clone();
            let tool = tool.to_owned();
            tokio::spawn(async move {
                for _ in 0..per {
                    c.call_tool(echo(&tool)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (callers * per) as f64 / start.elapsed().as_secs_f64()
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

async fn registry(client: &RunningService<RoleClient, ()>, args: serde_json::Value) {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{args} -> {r:?}");
}

#[tokio::main]
async fn main() {
    let bin = bin();
    let dir = tempfile::tempdir().unwrap();

    let mut direct_cmd = tokio::process::Command::new(&bin);
    direct_cmd.arg("fixture-server");
    let (direct, _) = connect(direct_cmd).await;
    let mut proxied_cmd = tokio::process::Command::new(&bin);
    proxied_cmd
        .arg("--data-dir")
        .arg(dir.path())
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off");
    let (proxied, pid) = connect(proxied_cmd).await;
    // Idle RSS with no child.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = rss_kb(pid);

    registry(
        &proxied,
        json!({"action": "install", "name": "fx", "command": bin, "args": ["fixture-server"]}),
    )
    .await;
    registry(&proxied, json!({"action": "activate", "name": "fx"})).await;

    let (d, p, diff) = paired(&direct, &proxied).await;
    let (d50, d99, p50, p99) = (pct(&d, 0.50), pct(&d, 0.99), pct(&p, 0.50), pct(&p, 0.99));
    let us = |x: Duration| x.as_secs_f64() * 1e6;

    let direct = Arc::new(direct);
    let proxied = Arc::new(proxied);
    let mut tput = Vec::new();
    for callers in [1, 8] {
        tput.push((
            callers,
            throughput(direct.clone(), "echo", callers).await,
            throughput(proxied.clone(), "fx__echo", callers).await,
        ));
    }
    let rss1 = rss_kb(pid);
    for i in 1..10 {
        registry(&proxied, json!({"action": "install", "name": format!("fx{i}"), "command": bin, "args": ["fixture-server"]})).await;
        registry(
            &proxied,
            json!({"action": "activate", "name": format!("fx{i}")}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss10 = rss_kb(pid);

    println!("## Proxy overhead (issue 3)\n");
    println!(
        "{CALLS} sequential `echo` calls after {WARMUP} warm-up calls, one rmcp client over stdio, release build.\n"
    );
    println!("| path | p50 | p99 |\n|---|---|---|");
    println!(
        "| direct to the fixture | {:.0} us | {:.0} us |",
        us(d50),
        us(d99)
    );
    println!(
        "| through agent-discover | {:.0} us | {:.0} us |",
        us(p50),
        us(p99)
    );
    println!(
        "| overhead | {:.0} us | {:.0} us |\n",
        us(p50) - us(d50),
        us(p99) - us(d99)
    );
    println!("| concurrent callers | direct calls/s | proxied calls/s |\n|---|---|---|");
    for (c, d, p) in tput {
        println!("| {c} | {d:.0} | {p:.0} |");
    }
    println!("\n| agent-discover RSS | KiB |\n|---|---|");
    println!(
        "| idle, 0 children | {rss0} |\n| 1 active child, after the load | {rss1} |\n| 10 active children | {rss10} |"
    );
    println!(
        "| per extra child | {:.0} |",
        (rss10 as f64 - rss1 as f64) / 9.0
    );
}
