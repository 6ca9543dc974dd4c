//! Startup benchmark (not a test): time from spawn to the `initialize` response, and idle RSS, of `agent-discover mcp`
//! with an empty registry and with 1,000 servers.
//!
//! Run: `cargo build --release -p agent-discover -p ad-fixture && cargo bench --bench startup`. Uses
//! target/release/agent-discover; the registered servers name the test server target/release/agent-discover-fixture.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 30;
const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;

fn bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release` first",
        p.display()
    );
    p
}

/// The test MCP server (package `ad-fixture`), next to agent-discover in target/release: the command of the seeded
/// servers.
fn fixture() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover-fixture");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release -p ad-fixture` first",
        p.display()
    );
    p
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// One cold start: spawn, send initialize, read the response line. Returns (time to response, RSS after 1 s idle).
fn start_once(bin: &Path, dir: &Path, measure_rss: bool) -> (Duration, Option<u64>) {
    let t = Instant::now();
    let mut child = Command::new(bin)
        .arg("--data-dir")
        .arg(dir)
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INIT}").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let elapsed = t.elapsed();
    assert!(line.contains("\"serverInfo\""), "{line}");
    let rss = measure_rss.then(|| {
        // "Idle" is what the process holds once the handshake is done and background restoration has settled.
        std::thread::sleep(Duration::from_secs(1));
        rss_kb(child.id())
    });
    drop(stdin);
    child.wait().unwrap();
    (elapsed, rss)
}

fn seed(fixture: &Path, dir: &Path, n: usize) {
    let store = agent_discover::store::Store::open(&dir.join("agent-discover.db")).unwrap();
    let registry =
        agent_discover::registry::Registry::new(store, agent_discover::events::EventBus::default());
    for i in 0..n {
        let spec = agent_discover::model::ServerSpec {
            name: format!("server-{i}"),
            description: format!(
                "Benchmark server number {i} with a description long enough to look real"
            ),
            command: Some(fixture.display().to_string()),
            args: vec![],
            tags: vec!["bench".into(), format!("group-{}", i % 10)],
            ..Default::default()
        };
        registry.register(spec).unwrap();
    }
}

fn main() {
    let bin = bin();
    let fixture = fixture();
    println!("## Startup (issue 2)\n");
    println!(
        "`agent-discover mcp`, spawn to initialize response, {RUNS} runs each, release build; RSS read from /proc after 1 s idle.\n"
    );
    println!("| registry | min | p50 | p95 | idle RSS |\n|---|---|---|---|---|");
    for n in [0usize, 1000] {
        let dir = tempfile::tempdir().unwrap();
        seed(&fixture, dir.path(), n);
        start_once(&bin, dir.path(), false); // warm the page cache and create the secrets key
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| start_once(&bin, dir.path(), false).0)
            .collect();
        times.sort();
        let (_, rss) = start_once(&bin, dir.path(), true);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {n} servers | {:.2} ms | {:.2} ms | {:.2} ms | {:.1} MB |",
            ms(times[0]),
            ms(times[RUNS / 2]),
            ms(times[RUNS * 95 / 100]),
            rss.unwrap() as f64 / 1024.0
        );
    }
}
