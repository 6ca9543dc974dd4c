//! Limits benchmark (not a test). (a) Rate accuracy: calls let through in a window by 8 concurrent callers against
//! the configured rate, on one replica (the proxy's `Limits` over a SQLite registry) and across two replicas (two
//! `Limits`, each over its own connection pool to one PostgreSQL database, as two `serve` processes have: the shared
//! buckets leased in batches). (b) The cost of the check per call, on the fast lane's path (`admit_in_lane` and the
//! outcome) and the normal path's (`admit`), with the defaults (breaker only) and with a rate, a tool rate, a cap and
//! the breaker set. (c) A hanging server behind `agent-discover mcp`: how many calls time out before its breaker cuts
//! it off, how fast its refusals come, and the latency of another server's tool before and while it hangs.
//!
//! It starts its own PostgreSQL for (a) (initdb in a temporary directory, as tests/it/pg.rs does) and stops it at the
//! end. Run: `cargo build --release -p agent-discover --bin agent-discover -p ad-fixture && cargo bench --bench
//! limits`. Uses target/release/agent-discover and target/release/agent-discover-fixture for (c); unoptimized:
//! `cargo build -p agent-discover --bin agent-discover -p ad-fixture && AGENT_DISCOVER_BIN_DIR=target/debug cargo
//! bench --profile dev --bench limits`.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "../tests/support/pg_server.rs"]
mod pg_server;

use ad_core::limits::{LimitSettings, Rate};
use agent_discover::events::EventBus;
use agent_discover::proxy::limits::Limits;
use agent_discover::registry::Registry;
use agent_discover::store::Store;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const CALLERS: usize = 8;
const WINDOW: Duration = Duration::from_secs(10);

/// A built program: from `AGENT_DISCOVER_BIN_DIR` (`target/debug` for an unoptimized run), else target/release.
fn release(name: &str) -> PathBuf {
    let dir = std::env::var_os("AGENT_DISCOVER_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release"));
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is missing: cargo build --release -p agent-discover --bin agent-discover -p ad-fixture",
        p.display()
    );
    p
}

/// A registry with the server `fx` and `settings` for it.
fn registry(store: Store, settings: Option<&LimitSettings>) -> Registry {
    let reg = Registry::new(store, EventBus::default());
    if reg.get("fx").is_err() {
        let spec = serde_json::from_value(json!({"name": "fx", "command": "true"})).unwrap();
        reg.register(spec).unwrap();
    }
    if let Some(s) = settings {
        reg.set_limit_settings("fx", Some(s.clone())).unwrap();
    }
    reg
}

fn rate(count: u32, burst: u32) -> LimitSettings {
    LimitSettings {
        rate: Some(Rate {
            count,
            per_ms: 1_000,
            burst: Some(burst),
        }),
        ..LimitSettings::default()
    }
}

/// `CALLERS` threads spread over `limits` calling `admit` as fast as they can for `WINDOW`: how many were let
/// through.
fn hammer(limits: &[Arc<Limits>]) -> (u64, Duration) {
    let passed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    std::thread::scope(|s| {
        for i in 0..CALLERS {
            let l = limits[i % limits.len()].clone();
            let passed = passed.clone();
            s.spawn(move || {
                while started.elapsed() < WINDOW {
                    if let Ok(a) = l.admit("fx", "echo", None) {
                        a.finish(false);
                        passed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    (passed.load(Ordering::Relaxed), started.elapsed())
}

fn accuracy(label: &str, limits: &[Arc<Limits>], count: u32, burst: u32) {
    let (passed, took) = hammer(limits);
    let expected = f64::from(burst) + f64::from(count) * took.as_secs_f64();
    println!(
        "{label}: {count}/s burst {burst}, {CALLERS} callers, {:.2} s: {passed} let through, {expected:.0} allowed ({:+.2}%)",
        took.as_secs_f64(),
        (passed as f64 - expected) / expected * 100.0
    );
}

fn cost(label: &str, limits: &Limits, lane: bool) {
    const N: u32 = 1_000_000;
    // Warm: the server's limits are made on first use.
    for _ in 0..1_000 {
        if lane {
            limits.admit_in_lane("fx", "echo").unwrap().finish(false);
        } else {
            limits.admit("fx", "echo", None).unwrap().finish(false);
        }
    }
    let t = Instant::now();
    for _ in 0..N {
        if lane {
            limits.admit_in_lane("fx", "echo").unwrap().finish(false);
        } else {
            limits.admit("fx", "echo", None).unwrap().finish(false);
        }
    }
    println!(
        "{label}: {:.0} ns per call",
        t.elapsed().as_nanos() as f64 / f64::from(N)
    );
}

async fn call(c: &rmcp::service::RunningService<RoleClient, ()>, name: &str, args: Value) -> Value {
    let r = c
        .call_tool(
            CallToolRequestParams::new(name.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    if r.is_error == Some(true) {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    } else {
        json!({"ok": text})
    }
}

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)].as_secs_f64() * 1e6
}

async fn latencies(c: &rmcp::service::RunningService<RoleClient, ()>, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let v = call(c, "fast__echo", json!({"text": "x"})).await;
        out.push(t.elapsed());
        assert_eq!(v["ok"], "x", "{v}");
    }
    out
}

async fn breaker() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = tokio::process::Command::new(release("agent-discover"));
    cmd.arg("--data-dir")
        .arg(dir.path())
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off")
        .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
        .env("AGENT_DISCOVER_LOG", "warn");
    let c = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let fixture = release("agent-discover-fixture");
    for (name, timeout) in [("fast", 60_000), ("hang", 500)] {
        let v = call(&c, "registry", json!({"action": "install", "name": name, "command": fixture, "args": ["--name", name], "call_timeout_ms": timeout})).await;
        assert!(v.get("error").is_none(), "{v}");
        call(&c, "registry", json!({"action": "activate", "name": name})).await;
    }
    call(
        &c,
        "registry",
        json!({"action": "limits", "name": "hang", "breaker": "3/30s"}),
    )
    .await;
    latencies(&c, 300).await;
    let mut before = latencies(&c, 2_000).await;

    // Two callers keep calling the hanging tool while the other server's latency is measured.
    let c = Arc::new(c);
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let mut hangers = Vec::new();
    for _ in 0..2 {
        let (c, stop) = (c.clone(), stop.clone());
        hangers.push(tokio::spawn(async move {
            let mut seen: Vec<(String, Duration, Duration)> = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let v = call(&c, "hang__sleep", json!({"ms": 60_000, "step_ms": 60_000})).await;
                let kind = v["kind"].as_str().unwrap_or("ok").to_owned();
                seen.push((kind, t.elapsed(), started.elapsed()));
                // An agent retrying every 50 ms.
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            seen
        }));
    }
    let mut during = latencies(&c, 2_000).await;
    stop.store(true, Ordering::Relaxed);
    // Again with nothing else going on: the machine's own drift between the runs.
    let mut after = latencies(&c, 2_000).await;
    let mut all = Vec::new();
    for h in hangers {
        all.extend(h.await.unwrap());
    }
    all.sort_by_key(|s| s.2);
    let timeouts = all.iter().filter(|s| s.0 == "timeout").count();
    let first_cut = all
        .iter()
        .find(|s| s.0 == "server_unavailable")
        .map(|s| s.2);
    let mut refusals: Vec<Duration> = all
        .iter()
        .filter(|s| s.0 == "server_unavailable")
        .map(|s| s.1)
        .collect();
    println!(
        "breaker 3/30s on a server that hangs (call timeout 500 ms, 2 callers retrying every 50 ms): {timeouts} calls timed out, cut off after {:?}; {} refusals at once, p50 {:.0} us",
        first_cut,
        refusals.len(),
        if refusals.is_empty() {
            0.0
        } else {
            pct(&mut refusals, 0.5)
        }
    );
    println!(
        "another server's echo, 2000 calls: before p50 {:.0} us p99 {:.0} us; while the other hangs p50 {:.0} us p99 {:.0} us; after p50 {:.0} us p99 {:.0} us",
        pct(&mut before, 0.5),
        pct(&mut before, 0.99),
        pct(&mut during, 0.5),
        pct(&mut during, 0.99),
        pct(&mut after, 0.5),
        pct(&mut after, 0.99)
    );
    if let Ok(c) = Arc::try_unwrap(c) {
        let _ = c.cancel().await;
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();

    // (b) The cost of a check.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("d.db")).unwrap();
    let defaults = Limits::new(registry(store.clone(), None));
    cost("lane check, defaults (breaker only)", &defaults, true);
    cost(
        "normal path check, defaults (breaker only)",
        &defaults,
        false,
    );
    let all = LimitSettings {
        rate: Some(Rate {
            count: 1_000_000_000,
            per_ms: 1_000,
            burst: Some(1_000_000_000),
        }),
        tool_rate: Some(Rate {
            count: 1_000_000_000,
            per_ms: 1_000,
            burst: Some(1_000_000_000),
        }),
        concurrency: Some(64),
        ..LimitSettings::default()
    };
    let set = Limits::new(registry(store.clone(), Some(&all)));
    cost("lane check, rate + tool rate + cap + breaker", &set, true);
    cost(
        "normal path check, rate + tool rate + cap + breaker",
        &set,
        false,
    );

    // (a) Accuracy on one replica.
    for (count, burst) in [(1_000, 200), (100, 10)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("d.db")).unwrap();
        let l = Arc::new(Limits::new(registry(store, Some(&rate(count, burst)))));
        accuracy("one replica", &[l], count, burst);
    }
    // (a) Across two replicas on one PostgreSQL.
    let pg = pg_server::PgServer::start();
    for (i, (count, burst)) in [(1_000, 200), (100, 10)].into_iter().enumerate() {
        let url = pg.create_database(&format!("limits{i}"));
        let first = registry(Store::open_url(&url).unwrap(), Some(&rate(count, burst)));
        let second = registry(Store::open_url(&url).unwrap(), None);
        let replicas = [Arc::new(Limits::new(first)), Arc::new(Limits::new(second))];
        accuracy("two replicas on PostgreSQL", &replicas, count, burst);
    }
    drop(pg);

    // (c) The breaker, end to end.
    rt.block_on(breaker());
}
