//! Children with users' own keys benchmark (not a test): what each extra per-user child costs, and that the bound
//! holds. In one process (the proxy as `serve` runs it, sandboxed children under the guard), the fixture server is
//! registered with a shared secret and activated; then N users each set their own value and call it: the first call
//! of each starts their child (start cost = that call minus a warm call), whose memory is the resident set (VmRSS) of
//! every process in its process group (the guard and the server). Last, with the per-server bound at B and B users'
//! calls in flight, one more user's call must be refused (`personal_children_limit`), and how fast that is.
//!
//! Run: `cargo build --release -p agent-discover --bin agent-discover -p ad-fixture && cargo bench --bench
//! personal_keys`; unoptimized: `cargo build -p agent-discover --bin agent-discover -p ad-fixture &&
//! AGENT_DISCOVER_BIN_DIR=target/debug cargo bench --profile dev --bench personal_keys`. `PERSONAL_BENCH_USERS`
//! sets N (default 8).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::error::Error;
use agent_discover::model::ServerSpec;
use agent_discover::proxy::{Caller, PersonalBounds};
use serde_json::json;

/// A built program: from `AGENT_DISCOVER_BIN_DIR` (`target/debug` for an unoptimized run), else target/release.
fn program(name: &str) -> PathBuf {
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

fn user(sub: &str) -> Arc<ad_core::identity::Principal> {
    Arc::new(ad_core::identity::Principal {
        sub: sub.into(),
        issuer: "https://idp.bench".into(),
        groups: vec![],
        client_id: None,
        scopes: vec![],
        token: None,
    })
}

async fn call(
    app: &App,
    p: &Arc<ad_core::identity::Principal>,
    tool: &str,
    args: serde_json::Value,
) -> agent_discover::error::Result<()> {
    let caller = Caller {
        principal: Some(p.clone()),
        ..Caller::default()
    };
    app.proxy
        .call_tool("one", tool, args.as_object().cloned(), caller)
        .await
        .map(|_| ())
}

/// The resident set in KiB of every process whose process group is `pgid`.
fn group_rss_kib(pgid: u32) -> u64 {
    group_rss(pgid).iter().map(|(_, kib)| kib).sum()
}

/// (command name, resident set in KiB) of every process whose process group is `pgid`.
fn group_rss(pgid: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid, pgrp, ...
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        if rest.split(' ').nth(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        let name = status
            .lines()
            .find_map(|l| l.strip_prefix("Name:"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        out.push((name, kib));
    }
    out
}

fn self_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let users: usize = std::env::var("PERSONAL_BENCH_USERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::in_dir(dir.path());
    config.guard_exe = Some(program("agent-discover"));
    let app = App::open(config).expect("open the app");
    app.registry
        .register(ServerSpec {
            name: "one".into(),
            command: Some(program("agent-discover-fixture").display().to_string()),
            args: vec!["--name".into(), "one".into()],
            ..Default::default()
        })
        .unwrap();
    app.secrets.set("one", "API_KEY", "shared").unwrap();
    app.proxy.activate("one").await.unwrap();
    app.proxy.set_personal_bounds(PersonalBounds {
        total: users + 1,
        per_server: users + 1,
        idle: Duration::from_secs(3600),
    });
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at start: {}", load.trim());

    let env = json!({"key": "API_KEY"});
    // What the lookup costs a call: the shared child called without a user, and by a user without values of their
    // own (their values and the server's rule are read from the database on every call).
    let anonymous = Caller::default;
    let mut plain = Vec::new();
    let mut looked_up = Vec::new();
    let nobody = user("nobody");
    for _ in 0..5 {
        call(&app, &nobody, "env", env.clone()).await.unwrap();
    }
    for _ in 0..200 {
        let t = Instant::now();
        app.proxy
            .call_tool("one", "env", env.as_object().cloned(), anonymous())
            .await
            .unwrap();
        plain.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        call(&app, &nobody, "env", env.clone()).await.unwrap();
        looked_up.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    println!(
        "shared child, 200 calls each: without a user median {:.3} ms; by a user without own values median {:.3} ms",
        median(plain),
        median(looked_up)
    );
    let self_before = self_rss_kib();
    let (mut cold, mut warm, mut rss) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..users {
        let p = user(&format!("u{i}"));
        app.secrets
            .set_mine("one", &p.user_key(), "API_KEY", &format!("value-{i}"))
            .unwrap();
        let t = Instant::now();
        call(&app, &p, "env", env.clone()).await.unwrap();
        cold.push(t.elapsed().as_secs_f64() * 1000.0);
        let mut w = Vec::new();
        for _ in 0..10 {
            let t = Instant::now();
            call(&app, &p, "env", env.clone()).await.unwrap();
            w.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        warm.push(median(w));
        let pid = app
            .proxy
            .personal_children(Some("one"))
            .into_iter()
            .find(|c| c.user == p.user_key())
            .and_then(|c| c.pid)
            .expect("the user's child runs");
        if i == 0 {
            println!(
                "the first child's processes (name, VmRSS KiB): {:?}",
                group_rss(pid)
            );
        }
        rss.push(group_rss_kib(pid) as f64);
    }
    let self_after = self_rss_kib();
    let start: Vec<f64> = cold.iter().zip(&warm).map(|(c, w)| c - w).collect();
    println!(
        "{users} per-user children: first call (start + call) median {:.1} ms (min {:.1}, max {:.1}); warm call median {:.2} ms; start cost median {:.1} ms",
        median(cold.clone()),
        cold.iter().cloned().fold(f64::INFINITY, f64::min),
        cold.iter().cloned().fold(0.0, f64::max),
        median(warm.clone()),
        median(start),
    );
    println!(
        "memory per child (VmRSS of its process group: guard + server): median {:.0} KiB (min {:.0}, max {:.0}); agent-discover itself grew {} KiB for {users} children",
        median(rss.clone()),
        rss.iter().cloned().fold(f64::INFINITY, f64::min),
        rss.iter().cloned().fold(0.0, f64::max),
        self_after.saturating_sub(self_before)
    );

    // The bound: B children busy, one more user is refused at once.
    let bound = 4.min(users.max(1));
    app.proxy.shutdown().await;
    app.proxy.activate("one").await.unwrap();
    app.proxy.set_personal_bounds(PersonalBounds {
        total: 64,
        per_server: bound,
        idle: Duration::from_secs(3600),
    });
    let mut busy = Vec::new();
    for i in 0..bound {
        let p = user(&format!("u{i}"));
        let app = app.clone();
        busy.push(tokio::spawn(async move {
            call(&app, &p, "sleep", json!({"ms": 3000})).await
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !{
        let c = app.proxy.personal_children(Some("one"));
        c.len() == bound && c.iter().all(|c| c.busy)
    } {
        assert!(Instant::now() < deadline, "the busy children did not start");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let extra = user("u-extra");
    app.secrets
        .set_mine("one", &extra.user_key(), "API_KEY", "extra")
        .unwrap();
    let t = Instant::now();
    let refused = call(&app, &extra, "env", env.clone()).await;
    let refused_ms = t.elapsed().as_secs_f64() * 1000.0;
    match refused {
        Err(Error::PersonalChildrenLimit { limit, scope, .. }) => println!(
            "bound: with {bound} of {bound} children busy, user {} was refused ({scope} bound {limit}) in {refused_ms:.2} ms; children running: {}",
            bound + 1,
            app.proxy.personal_children(Some("one")).len()
        ),
        other => panic!("the bound was not enforced: {other:?}"),
    }
    for b in busy {
        b.await.unwrap().unwrap();
    }
    app.proxy.shutdown().await;
    println!(
        "load average at end: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
