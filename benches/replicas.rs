//! Teams benchmark (issue 16, not a test): `serve` replicas on one PostgreSQL registry. (a) Proxied calls/s of
//! `fx__echo` by 8 concurrent 2026-07-28 (stateless) rmcp clients over HTTP, spread over 3 replicas, against the same
//! 8 clients on 1 replica, rounds interleaved; (b) mutation to snapshot: 200 changes through replica 0 (100
//! registrations, then 100 disables), each timed from its REST request until every replica's
//! `/api/registry/events` stream shows it; p50, p99 and max overall and per replica.
//!
//! It starts its own PostgreSQL (initdb in a temporary directory, a loopback port, as tests/it/pg.rs does) and stops
//! it at the end, its process group only; replicas run in process groups of their own and are stopped the same way;
//! every process it started is checked gone before it exits.
//!
//! Run: `cargo build --release -p agent-discover --bin agent-discover -p ad-fixture && cargo bench --bench replicas`.
//! Uses target/release/agent-discover, the test server target/release/agent-discover-fixture and Debian's PostgreSQL
//! (/usr/lib/postgresql/*/bin).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[path = "../tests/support/pg_server.rs"]
mod pg_server;
use futures::StreamExt;
use pg_server::PgServer;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const CLIENTS: usize = 8;
const WARMUP: usize = 100;
const PER_CLIENT: usize = 500;
const ROUNDS: usize = 5;
const MUTATIONS: usize = 200;
/// How long a server start or a snapshot may take on a loaded 2-core machine before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(30);

type Client = RunningService<RoleClient, ()>;

fn bin() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release --bin agent-discover` first",
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

// ---------------------------------------------------------------------------------------------------------------
// Replicas (PostgreSQL of our own is tests/support/pg_server.rs)

/// One `agent-discover serve --port 0` in a process group of its own; its fixture children run under
/// agent-discover's child guard, which kills them when the replica exits. Dropping it kills the group.
struct Replica {
    child: tokio::process::Child,
    pid: i32,
    url: String,
    _dir: tempfile::TempDir,
}

impl Replica {
    async fn start(db_url: &str, name: &str) -> Replica {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = tokio::process::Command::new(bin());
        cmd.arg("--data-dir")
            .arg(dir.path())
            .args(["serve", "--port", "0"])
            .env("AGENT_DISCOVER_DASHBOARD", "off")
            .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
            .env_remove("AGENT_DISCOVER_DB")
            .env("AGENT_DISCOVER_DATABASE_URL", db_url)
            .env("AGENT_DISCOVER_MASTER_KEY", KEY)
            .env("AGENT_DISCOVER_REPLICA", name)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("start agent-discover serve");
        let pid = child.id().unwrap() as i32;
        let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(PATIENCE, out.next_line())
            .await
            .expect("serve printed no URL")
            .unwrap()
            .expect("serve exited");
        Replica {
            child,
            pid,
            url: url.trim_end_matches('/').to_owned(),
            _dir: dir,
        }
    }

    /// SIGTERM (a clean stop, which stops its children), then SIGKILL to its group if it is slow.
    async fn stop(mut self) {
        // SAFETY: the replica we started, not reaped yet.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        if tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .is_err()
        {
            // SAFETY: the group of the replica we started, which has not exited.
            unsafe { libc::killpg(self.pid, libc::SIGKILL) };
            let _ = self.child.wait().await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        // After `stop` the group is empty (the pid is reaped only once the group leader exited, so no reuse
        // yet while we hold the Child); on a panic this is what stops the replica.
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: the group of a replica we started that is still running.
            unsafe { libc::killpg(self.pid, libc::SIGKILL) };
        }
    }
}

/// The ids of `pid`'s descendants.
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

/// Registers the fixture as `fx` through `r` and activates it (the other replicas follow the active flag).
async fn register_fixture(http: &reqwest::Client, r: &Replica) {
    let created = http
        .post(format!("{}/api/servers", r.url))
        .json(&json!({"name": "fx", "command": fixture(), "args": ["--name", "fx"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{}/api/servers/fx/activate", r.url))
        .send()
        .await
        .unwrap();
    assert!(
        activated.status().is_success(),
        "{}",
        activated.text().await.unwrap()
    );
}

// ---------------------------------------------------------------------------------------------------------------
// Snapshot streams

#[derive(Deserialize)]
struct Snap {
    servers: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    name: String,
    status: String,
}

impl Snap {
    fn status(&self, name: &str) -> Option<&str> {
        self.servers
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.status.as_str())
    }
}

/// A subscription to one replica's snapshots; dropping it closes the stream (so the replica can stop cleanly).
struct Follow {
    rx: mpsc::UnboundedReceiver<(Instant, Snap)>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Follow {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Follows `url`'s `/api/registry/events`: every snapshot with the instant its last byte was read.
async fn follow(url: &str) -> Follow {
    let resp = reqwest::get(format!("{url}/api/registry/events"))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let (tx, rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut body = resp.bytes_stream();
        let mut buf = Vec::<u8>::new();
        while let Some(Ok(chunk)) = body.next().await {
            let at = Instant::now();
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = buf.drain(..end + 2).collect();
                for line in String::from_utf8_lossy(&event).lines() {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(s) = serde_json::from_str::<Snap>(data.trim())
                        && tx.send((at, s)).is_err()
                    {
                        return;
                    }
                }
            }
        }
    });
    Follow { rx, reader }
}

/// The instant the first snapshot satisfying `pred` arrived (earlier ones are consumed).
async fn until(f: &mut Follow, what: &str, pred: impl Fn(&Snap) -> bool) -> Instant {
    tokio::time::timeout(PATIENCE, async {
        while let Some((at, s)) = f.rx.recv().await {
            if pred(&s) {
                return at;
            }
        }
        panic!("{what}: the snapshot stream ended");
    })
    .await
    .unwrap_or_else(|_| panic!("{what}: not within {PATIENCE:?}"))
}

// ---------------------------------------------------------------------------------------------------------------
// Clients and measurements

async fn client_2026(url: &str) -> Client {
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")),
    );
    ().serve_with_lifecycle(
        transport,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
    )
    .await
    .expect("server/discover")
}

async fn echo(c: &Client, text: String) {
    let mut args = serde_json::Map::new();
    args.insert("text".into(), json!(text));
    let r = c
        .call_tool(CallToolRequestParams::new("fx__echo").with_arguments(args))
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true), "{r:?}");
}

/// 8 clients, client i on replica i % n.
async fn clients(replicas: &[Replica]) -> Vec<Arc<Client>> {
    let mut out = Vec::new();
    for i in 0..CLIENTS {
        out.push(Arc::new(
            client_2026(&replicas[i % replicas.len()].url).await,
        ));
    }
    out
}

/// All clients at once, `per` calls each; calls/s.
async fn load(clients: &[Arc<Client>], per: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.clone();
            tokio::spawn(async move {
                for n in 0..per {
                    echo(&c, format!("client {i} call {n}")).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (clients.len() * per) as f64 / start.elapsed().as_secs_f64()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench());
}

async fn bench() {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load_avg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let pg = PgServer::start();
    let (db1, db3) = (pg.create_database("one"), pg.create_database("three"));
    let http = reqwest::Client::new();

    // One replica on its own registry, three on another; both sets stay up so their rounds can alternate.
    let single = vec![Replica::start(&db1, "solo").await];
    let mut team = Vec::new();
    for i in 0..3 {
        team.push(Replica::start(&db3, &format!("r{i}")).await);
    }
    let mut streams = Vec::new();
    for r in &team {
        streams.push(follow(&r.url).await);
    }
    register_fixture(&http, &single[0]).await;
    register_fixture(&http, &team[0]).await;
    // The fixture runs on every replica of the team (each one follows the shared active flag).
    for (i, rx) in streams.iter_mut().enumerate() {
        until(rx, &format!("fx ready on r{i}"), |s| {
            s.status("fx") == Some("ready")
        })
        .await;
    }

    // (a) calls/s
    let (c1, c3) = (clients(&single).await, clients(&team).await);
    load(&c1, WARMUP).await;
    load(&c3, WARMUP).await;
    let (mut one, mut three) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Alternate which goes first, so neither always follows the other.
        if round % 2 == 0 {
            one.push(load(&c1, PER_CLIENT).await);
            three.push(load(&c3, PER_CLIENT).await);
        } else {
            three.push(load(&c3, PER_CLIENT).await);
            one.push(load(&c1, PER_CLIENT).await);
        }
    }
    for c in c1.into_iter().chain(c3) {
        if let Ok(c) = Arc::try_unwrap(c) {
            let _ = c.cancel().await;
        }
    }

    // (b) mutation -> every replica's snapshot: registrations, then disables, one at a time through r0.
    let mut overall = Vec::with_capacity(MUTATIONS);
    let mut per_replica = vec![Vec::with_capacity(MUTATIONS); team.len()];
    for m in 0..MUTATIONS {
        let half = MUTATIONS / 2;
        let name = format!("m{}", m % half);
        let t0 = Instant::now();
        let status = if m < half {
            http.post(format!("{}/api/servers", team[0].url))
                .json(&json!({"name": name, "command": "true"}))
                .send()
                .await
                .unwrap()
                .status()
        } else {
            http.post(format!("{}/api/servers/{name}/disable", team[0].url))
                .send()
                .await
                .unwrap()
                .status()
        };
        assert!(status.is_success(), "mutation {m}: {status}");
        let mut worst = 0.0f64;
        for (i, rx) in streams.iter_mut().enumerate() {
            let at = if m < half {
                until(rx, &format!("{name} registered, on r{i}"), |s| {
                    s.status(&name).is_some()
                })
                .await
            } else {
                until(rx, &format!("{name} disabled, on r{i}"), |s| {
                    s.status(&name) == Some("disabled")
                })
                .await
            };
            let ms = at.duration_since(t0).as_secs_f64() * 1e3;
            per_replica[i].push(ms);
            worst = worst.max(ms);
        }
        overall.push(worst);
    }

    // Stop everything, then check that nothing we started is left.
    let mut started: Vec<u32> = Vec::new();
    for r in single.iter().chain(&team) {
        started.push(r.pid as u32);
        started.extend(descendants(r.pid as u32));
    }
    drop(streams);
    for r in single.into_iter().chain(team) {
        r.stop().await;
    }
    let pg_pid = pg.pid();
    started.push(pg_pid);
    started.extend(descendants(pg_pid));
    drop(pg);
    let deadline = Instant::now() + PATIENCE;
    let alive = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    while started.iter().any(alive) {
        assert!(
            Instant::now() < deadline,
            "left behind: {:?}",
            started.iter().filter(|p| alive(p)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let range = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        format!(
            "{:.0}-{:.0} (median {:.0})",
            s[0],
            s[s.len() - 1],
            s[s.len() / 2]
        )
    };
    println!("## Teams: replicas on PostgreSQL (issue 16)\n");
    println!(
        "Machine: {cores} vCPUs, shared (load average at start: {}); PostgreSQL, every replica, its fixture child and \
         the bench's clients all on it.\n",
        load_avg
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "(a) {CLIENTS} concurrent 2026-07-28 clients over HTTP calling `fx__echo`, client i on replica i mod n; \
         {ROUNDS} rounds of {PER_CLIENT} calls per client after {WARMUP} warm-up calls, 1 and 3 replicas alternating.\n"
    );
    println!("| replicas | calls/s, min-max (median) | rounds |\n|---|---|---|");
    let fmt = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!("| 1 | {} | {} |", range(&one), fmt(&one));
    println!("| 3 | {} | {} |", range(&three), fmt(&three));
    println!(
        "\n(b) {MUTATIONS} mutations through r0, one at a time ({} registrations, then {} disables), from the REST \
         request to the snapshot showing it on each replica's `/api/registry/events`:\n",
        MUTATIONS / 2,
        MUTATIONS / 2
    );
    println!("| snapshot of | p50 | p99 | max |\n|---|---|---|---|");
    let row = |label: &str, v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        println!(
            "| {label} | {:.1} ms | {:.1} ms | {:.1} ms |",
            pct(&s, 0.50),
            pct(&s, 0.99),
            s[s.len() - 1]
        );
        pct(&s, 0.99)
    };
    let p99 = row("every replica (the last to show it)", &overall);
    for (i, v) in per_replica.iter().enumerate() {
        row(
            &format!("r{i}{}", if i == 0 { " (the writer)" } else { "" }),
            v,
        );
    }
    println!(
        "\nTarget: a change reaches every replica within 1 s: p99 {p99:.1} ms, {}.",
        if p99 <= 1000.0 { "met" } else { "NOT met" }
    );
}
