//! Proxy benchmark (not a test): latency of a fixture tool called directly and through agent-discover with the same
//! rmcp client, the overhead, agent-discover's CPU time per call, calls/s with 1 and 8 concurrent callers, and
//! agent-discover's RSS with 0 and 10 children.
//!
//! For reference it also measures a minimal proxy built from rmcp alone (this program run as `null-proxy`: rmcp's
//! stdio server with `call_tool` forwarded by rmcp's client, nothing else), the floor for any proxy that speaks MCP
//! through rmcp on this machine.
//!
//! Run: `cargo build --release -p agent-discover -p ad-fixture && cargo bench --bench proxy`. Uses
//! target/release/agent-discover and the test server target/release/agent-discover-fixture.

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
/// Linux reports CPU time in clock ticks of 10 ms (`sysconf(_SC_CLK_TCK)` = 100).
const US_PER_TICK: f64 = 10_000.0;

type Client = RunningService<RoleClient, ()>;

fn bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release` first",
        p.display()
    );
    p
}

/// The test MCP server (package `ad-fixture`), next to agent-discover in target/release.
fn fixture() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover-fixture");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release -p ad-fixture` first",
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

/// Latencies of one path, sorted, and the differences to the direct call made just before each, sorted.
struct Sample {
    latencies: Vec<Duration>,
    diffs: Vec<f64>,
}

impl Sample {
    fn pct(&self, p: f64) -> f64 {
        let v = &self.latencies;
        v[((v.len() as f64 * p) as usize).min(v.len() - 1)].as_secs_f64() * 1e6
    }
    fn median_diff(&self) -> f64 {
        self.diffs[self.diffs.len() / 2]
    }
}

/// Calls every path in turn (the first is the direct one), so all see the same machine load.
async fn rounds(paths: &[(&Client, &str)]) -> Vec<Sample> {
    for _ in 0..WARMUP {
        for (c, tool) in paths {
            c.call_tool(echo(tool)).await.unwrap();
        }
    }
    let mut out: Vec<Sample> = paths
        .iter()
        .map(|_| Sample {
            latencies: Vec::with_capacity(CALLS),
            diffs: Vec::with_capacity(CALLS),
        })
        .collect();
    for _ in 0..CALLS {
        let mut direct = 0.0;
        for (i, (c, tool)) in paths.iter().enumerate() {
            let t = Instant::now();
            let r = c.call_tool(echo(tool)).await.unwrap();
            let took = t.elapsed();
            assert_ne!(r.is_error, Some(true));
            let us = took.as_secs_f64() * 1e6;
            if i == 0 {
                direct = us;
            }
            out[i].latencies.push(took);
            out[i].diffs.push(us - direct);
        }
    }
    for s in &mut out {
        s.latencies.sort();
        s.diffs.sort_by(f64::total_cmp);
    }
    out
}

async fn throughput(client: Arc<Client>, tool: &str, callers: usize) -> f64 {
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

/// CPU time (user + system, clock ticks) and context switches (voluntary + involuntary, all threads) of a process.
fn cpu_and_switches(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let status =
            std::fs::read_to_string(task.unwrap().path().join("status")).unwrap_or_default();
        for l in status.lines() {
            if l.starts_with("voluntary_ctxt_switches:")
                || l.starts_with("nonvoluntary_ctxt_switches:")
            {
                switches += l
                    .split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    (ticks, switches)
}

/// The process ids of `pid`'s descendants (here: the child guard and the fixture server under it).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) {
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u32>().ok());
            parent_of.push((p, ppid.unwrap_or(0)));
        }
    }
    let mut out = vec![];
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for (c, pp) in &parent_of {
            if *pp == p {
                out.push(*c);
                frontier.push(*c);
            }
        }
    }
    out
}

fn rss_kb(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

async fn registry(client: &Client, args: serde_json::Value) {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{args} -> {r:?}");
}

/// The minimal rmcp proxy: one child, its tools listed as they are, every call forwarded.
struct NullProxy {
    child: rmcp::Peer<RoleClient>,
}

impl rmcp::ServerHandler for NullProxy {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        rmcp::model::ServerConfig::new(
            rmcp::model::ServerCapabilities::builder()
                .enable_tools()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _r: Option<rmcp::model::PaginatedRequestParams>,
        _c: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::ListToolsResult, rmcp::ErrorData> {
        let tools = self
            .child
            .list_all_tools()
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))?;
        Ok(rmcp::model::ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _c: rmcp::service::RequestContext<rmcp::RoleServer>,
    ) -> Result<rmcp::model::CallToolResponse, rmcp::ErrorData> {
        self.child
            .call_tool_once(request)
            .await
            .map_err(|e| rmcp::ErrorData::internal_error(e.to_string(), None))
    }
}

/// The minimal proxy's child connection: the fixture run with `args`; with `NULL_PROXY_CHILD_ERA=2026` spoken to in
/// 2026-07-28 (`server/discover`, per-request `_meta`), as agent-discover speaks to a child that offers it.
async fn null_child(fixture: PathBuf, args: &[String]) -> Client {
    let mut cmd = tokio::process::Command::new(fixture);
    cmd.args(args);
    if std::env::var("NULL_PROXY_CHILD_ERA").as_deref() != Ok("2026") {
        return connect(cmd).await.0;
    }
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    let (t, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    ().serve_with_lifecycle(
        t,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .unwrap()
}

async fn null_proxy(fixture: PathBuf, args: Vec<String>) {
    let child = null_child(fixture, &args).await;
    let server = NullProxy {
        child: child.peer().clone(),
    }
    .serve(rmcp::transport::stdio_pipes())
    .await
    .unwrap();
    let _ = server.waiting().await;
    let _ = child.cancel().await;
}

/// The minimal proxy behind rmcp's Streamable HTTP service at `/mcp` on 127.0.0.1 (a free port, printed on stdout as
/// `http://127.0.0.1:PORT/`, as `agent-discover serve` prints its URL); until stdin closes.
async fn null_proxy_http(fixture: PathBuf, args: Vec<String>) {
    use rmcp::transport::StreamableHttpService;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    let child = null_child(fixture, &args).await;
    let peer = child.peer().clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(NullProxy {
                child: peer.clone(),
            })
        },
        Arc::new(LocalSessionManager::default()),
        Default::default(),
    );
    let router = axum::Router::new().route_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("http://{}/", listener.local_addr().unwrap());
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    let stop = async {
        use tokio::io::AsyncReadExt;
        let mut sink = Vec::new();
        let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    };
    let _ = axum::serve(listener, router)
        .with_graceful_shutdown(stop)
        .await;
    let _ = child.cancel().await;
}

fn main() {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("null-proxy") => {
            // The same runtime as agent-discover's `mcp` command.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let fixture = PathBuf::from(args.next().unwrap());
            return rt.block_on(null_proxy(fixture, args.collect()));
        }
        Some("null-proxy-http") => {
            // The same runtime as agent-discover's `serve` command: two workers.
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let fixture = PathBuf::from(args.next().unwrap());
            return rt.block_on(null_proxy_http(fixture, args.collect()));
        }
        _ => {}
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let bin = bin();
    let fixture = fixture();
    let dir = tempfile::tempdir().unwrap();

    let (direct, _) = connect(tokio::process::Command::new(&fixture)).await;
    let mut proxied_cmd = tokio::process::Command::new(&bin);
    proxied_cmd
        .arg("--data-dir")
        .arg(dir.path())
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off")
        // With the local model installed, activations embed tools; give the model back soon so its unload is measured.
        .env("AGENT_DISCOVER_MODEL_IDLE_SECS", "2");
    let (proxied, pid) = connect(proxied_cmd).await;
    let mut null_cmd = tokio::process::Command::new(std::env::current_exe().unwrap());
    null_cmd.arg("null-proxy").arg(&fixture);
    let (null, _) = connect(null_cmd).await;
    // Idle RSS with no child.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = rss_kb(pid);

    registry(
        &proxied,
        json!({"action": "install", "name": "fx", "command": fixture, "args": []}),
    )
    .await;
    registry(&proxied, json!({"action": "activate", "name": "fx"})).await;

    let kids = descendants(pid);
    let kids_cpu = || kids.iter().map(|k| cpu_and_switches(*k).0).sum::<u64>();
    let (before, kids_before) = (cpu_and_switches(pid), kids_cpu());
    let samples = rounds(&[(&direct, "echo"), (&proxied, "fx__echo"), (&null, "echo")]).await;
    let (after, kids_after) = (cpu_and_switches(pid), kids_cpu());
    let n = (CALLS + WARMUP) as f64;
    let cpu_us = (after.0 - before.0) as f64 * US_PER_TICK / n;
    let child_cpu_us = (kids_after - kids_before) as f64 * US_PER_TICK / n;
    let switches = (after.1 - before.1) as f64 / n;
    let _ = null.cancel().await;

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
        registry(
            &proxied,
            json!({"action": "install", "name": format!("fx{i}"), "command": fixture, "args": []}),
        )
        .await;
        registry(
            &proxied,
            json!({"action": "activate", "name": format!("fx{i}")}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss10 = rss_kb(pid);
    // With the local model: wait (bounded) for the idle unload, then measure again.
    let search = status(&proxied).await["search"].clone();
    let after_unload = if search["provider"] == "local" {
        let deadline = Instant::now() + Duration::from_secs(30);
        while status(&proxied).await["search"]["model_loaded"] == true {
            assert!(Instant::now() < deadline, "the model was not unloaded");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Some(rss_kb(pid))
    } else {
        None
    };

    println!("## Proxy overhead (issue 3)\n");
    println!(
        "{CALLS} rounds after {WARMUP} warm-up rounds; each round calls `echo` directly, through agent-discover and \
         through the minimal rmcp proxy, with one rmcp client each over stdio; release build.\n"
    );
    println!(
        "| path | p50 | p99 | overhead p50 | overhead p99 | median paired difference |\n|---|---|---|---|---|---|"
    );
    let names = [
        "direct to the fixture",
        "through agent-discover",
        "through the minimal rmcp proxy",
    ];
    for (name, s) in names.iter().zip(&samples) {
        println!(
            "| {name} | {:.0} us | {:.0} us | {:.0} us | {:.0} us | {:.0} us |",
            s.pct(0.50),
            s.pct(0.99),
            s.pct(0.50) - samples[0].pct(0.50),
            s.pct(0.99) - samples[0].pct(0.99),
            s.median_diff()
        );
    }
    println!(
        "\nagent-discover per proxied call: {cpu_us:.0} us of CPU, {switches:.1} context switches (the fixture server \
         behind it: {child_cpu_us:.0} us of CPU).\n"
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
    match after_unload {
        Some(kb) => println!(
            "| 10 active children, after the local model's idle unload | {kb} |\n\nSearch: {search} (the local model \
             was loaded to embed the children's tools)."
        ),
        None => println!("\nSearch: {search} (no local model: BM25 only, nothing to load)."),
    }
}

async fn status(client: &Client) -> serde_json::Value {
    let r = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(json!({"action": "status"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let text = r.content[0].as_text().unwrap().text.clone();
    serde_json::from_str(&text).unwrap()
}
