//! What a limit and a policy set add to a call (benchmark, not a test).
//!
//! (a) The per-call work of the two steps as the call path does them, in this process: the policy step
//! (`ad_proxy::police`: who calls, from the caller; the Cedar request built from the call and its arguments; the
//! evaluation by the tool's slice) and the limit step (`Limits::admit` with the caller's key, and the outcome told to
//! the breaker). The set is `crates/policy/benches/set.cedar` (41 policies, 4 of them apply to `fx/echo`); the limits
//! are a rate on the server and one on every tool (never exhausted here) with the default breaker. Four cases, run
//! in interleaved rounds: both off (no policies, default limits: the breaker only), the policy step alone, the limit
//! step alone, both. Best round and median of the rounds, per call.
//!
//! (b) The whole call, both on against both off: two `agent-discover mcp` processes over the test server `fx`, one
//! with the policy set in its policy directory and the limits set, one without; one rmcp client each, batches of
//! calls alternating between them. Two ways in: `fx__echo` (with both off it takes the fast lane; with a policy
//! scoped to it, the normal path) and the `registry` tool's `proxy_call` with `page_bytes` (the normal path for
//! both), so the second compares the same path with and without the two steps.
//!
//! Run: `cargo build --release -p agent-discover --bin agent-discover -p ad-fixture && cargo bench --bench
//! policy_call`. `POLICY_CALL_ROUNDS` (default 10) sets the rounds of both parts.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ad_core::identity::Principal;
use ad_core::limits::{LimitSettings, Rate};
use ad_policy::Policies;
use agent_discover::events::EventBus;
use agent_discover::proxy::Caller;
use agent_discover::proxy::limits::{Limits, caller_key};
use agent_discover::registry::Registry;
use agent_discover::store::Store;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};

const SET: &str = include_str!("../crates/policy/benches/set.cedar");

fn rounds() -> usize {
    std::env::var("POLICY_CALL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
}

fn release(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/release")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: cargo build --release -p agent-discover --bin agent-discover -p ad-fixture",
        p.display()
    );
    p
}

fn huge() -> Rate {
    Rate {
        count: 1_000_000_000,
        per_ms: 1_000,
        burst: Some(1_000_000_000),
    }
}

fn registry(store: Store, settings: Option<&LimitSettings>) -> Registry {
    let reg = Registry::new(store, EventBus::default());
    let spec = serde_json::from_value(json!({"name": "fx", "command": "true"})).unwrap();
    reg.register(spec).unwrap();
    if let Some(s) = settings {
        reg.set_limit_settings("fx", Some(s.clone())).unwrap();
    }
    reg
}

struct Case<'a> {
    name: &'static str,
    policies: Option<&'a Policies>,
    limits: &'a Limits,
}

fn per_call(case: &Case<'_>, caller: &Caller, args: &Map<String, Value>, n: u32) -> f64 {
    let t = Instant::now();
    for _ in 0..n {
        let asked = agent_discover::proxy::police(
            std::hint::black_box(case.policies),
            "fx",
            "echo",
            Some(args),
            caller,
        );
        assert!(matches!(asked, Ok(None)), "{asked:?}");
        let admitted = case
            .limits
            .admit("fx", "echo", caller_key(caller).as_deref())
            .expect("let through");
        admitted.finish(false);
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn steps() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("set.cedar"), SET).unwrap();
    let policies = Policies::open(dir.path().to_path_buf());
    assert_eq!(policies.list().len(), 41, "{}", policies.status());
    let off = Limits::new(registry(
        Store::open(&dir.path().join("off.db")).unwrap(),
        None,
    ));
    let on = Limits::new(registry(
        Store::open(&dir.path().join("on.db")).unwrap(),
        Some(&LimitSettings {
            rate: Some(huge()),
            tool_rate: Some(huge()),
            ..LimitSettings::default()
        }),
    ));
    let caller = Caller {
        principal: Some(Arc::new(Principal {
            sub: "alice".into(),
            issuer: "https://id.example".into(),
            groups: vec!["dev".into(), "staff".into()],
            client_id: Some("claude-code".into()),
            scopes: vec![],
            token: None,
        })),
        ..Caller::default()
    };
    let args = json!({"text": "hello"}).as_object().unwrap().clone();
    let cases = [
        Case {
            name: "both off (no policies; default limits: the breaker)",
            policies: None,
            limits: &off,
        },
        Case {
            name: "policy step only (41 policies, 4 apply)",
            policies: Some(&policies),
            limits: &off,
        },
        Case {
            name: "limit step only (server rate + tool rate + breaker)",
            policies: None,
            limits: &on,
        },
        Case {
            name: "both on",
            policies: Some(&policies),
            limits: &on,
        },
    ];
    for c in &cases {
        per_call(c, &caller, &args, 10_000);
    }
    let mut seen: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..rounds() {
        for (i, c) in cases.iter().enumerate() {
            seen[i].push(per_call(c, &caller, &args, 50_000));
        }
    }
    println!(
        "(a) per call, {} interleaved rounds of 50,000 calls:",
        rounds()
    );
    for (c, s) in cases.iter().zip(&mut seen) {
        s.sort_by(f64::total_cmp);
        println!(
            "  {:<56} best {:>6.0} ns  median {:>6.0} ns",
            c.name,
            s[0],
            s[s.len() / 2]
        );
    }
}

type Client = RunningService<RoleClient, ()>;

async fn text(c: &Client, name: &str, args: Value) -> String {
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
    assert!(r.is_error != Some(true), "{name}: {text}");
    text
}

/// `agent-discover mcp` over a data directory with the test server `fx` active; `on`: the policy set in its policy
/// directory and a server and tool rate on `fx`.
async fn gateway(dir: &std::path::Path, on: bool) -> Client {
    if on {
        std::fs::create_dir_all(dir.join("policies")).unwrap();
        std::fs::write(dir.join("policies/set.cedar"), SET).unwrap();
    }
    let mut cmd = tokio::process::Command::new(release("agent-discover"));
    cmd.arg("--data-dir")
        .arg(dir)
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off")
        .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
        .env("AGENT_DISCOVER_LOG", "warn")
        .env_remove("AGENT_DISCOVER_POLICIES");
    let (t, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let c = ().serve(t).await.unwrap();
    let fixture = release("agent-discover-fixture");
    text(
        &c,
        "registry",
        json!({"action": "install", "name": "fx", "command": fixture, "args": ["--name", "fx"]}),
    )
    .await;
    text(&c, "registry", json!({"action": "activate", "name": "fx"})).await;
    if on {
        text(&c, "registry", json!({"action": "limits", "name": "fx", "rate": "1000000/s", "tool_rate": "1000000/s"})).await;
    }
    c
}

/// The median latency of `n` calls, in microseconds.
async fn batch(c: &Client, via_registry: bool, n: usize) -> f64 {
    let mut seen = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let out = if via_registry {
            text(c, "registry", json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "x"}, "page_bytes": 65536})).await
        } else {
            text(c, "fx__echo", json!({"text": "x"})).await
        };
        seen.push(t.elapsed());
        assert!(out.contains('x'), "{out}");
    }
    seen.sort();
    seen[n / 2].as_secs_f64() * 1e6
}

async fn whole() {
    let (d_off, d_on) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let off = gateway(d_off.path(), false).await;
    let on = gateway(d_on.path(), true).await;
    for via in [false, true] {
        batch(&off, via, 300).await;
        batch(&on, via, 300).await;
    }
    const N: usize = 500;
    // [way in][off, on]: each round's median.
    let mut seen = [[Vec::new(), Vec::new()], [Vec::new(), Vec::new()]];
    for _ in 0..rounds() {
        for (w, via) in [false, true].into_iter().enumerate() {
            seen[w][0].push(batch(&off, via, N).await);
            seen[w][1].push(batch(&on, via, N).await);
        }
    }
    println!(
        "(b) the whole call over stdio, {} interleaved rounds of {N} calls (each round's median; best and median of the rounds):",
        rounds()
    );
    for (w, label) in ["fx__echo", "registry proxy_call (page_bytes)"]
        .iter()
        .enumerate()
    {
        let mut line = format!("  {label:<34}");
        for (k, name) in ["both off", "both on"].iter().enumerate() {
            let s = &mut seen[w][k];
            s.sort_by(f64::total_cmp);
            line.push_str(&format!(
                "  {name}: best {:>6.1} us median {:>6.1} us",
                s[0],
                s[s.len() / 2]
            ));
        }
        println!("{line}");
    }
    let _ = off.cancel().await;
    let _ = on.cancel().await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let _guard = rt.enter();
    steps();
    if std::env::args().any(|a| a == "--steps-only") {
        return;
    }
    rt.block_on(whole());
}
