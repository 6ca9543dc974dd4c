//! What the policies cost per call, through `Policies::evaluate_call` as the proxy calls it, over a realistic set
//! (`set.cedar`: 41 policies, a few applying to each benchmarked tool, most with argument conditions):
//! `cargo bench -p ad-policy` (release profile). Prints the mean and p50/p99 per call for: no policies at all, a tool
//! no policy can apply to, a tool only the policy scoped to every tool applies to, policed calls that are allowed,
//! denied and asked (decided without a Cedar request: `direct.rs`), and one Cedar decides. `POLICY_BENCH_CALLS` sets
//! the calls per case (default 200,000), `POLICY_BENCH_ONLY=TEXT` runs only the cases whose name holds TEXT. Besides
//! the wall time,
//! the thread's CPU time per call (Linux's `/proc/thread-self/schedstat`): on a machine shared with other builds the
//! wall time includes the time the thread waited for a core, the CPU time does not.

use std::time::Instant;

use ad_policy::{Call, Outcome, Policies};
use serde_json::{Map, Value, json};

/// The benchmarks' policy set (shared with the workspace's `benches/policy_call.rs`).
const SET: &str = include_str!("set.cedar");

fn policies(text: &str, count: usize) -> (tempfile::TempDir, Policies) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bench.cedar"), text).unwrap();
    let p = Policies::open(dir.path().to_path_buf());
    assert_eq!(p.list().len(), count, "{}", p.status());
    (dir, p)
}

/// Nanoseconds this thread has run on a CPU (0 where the kernel does not say).
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn measure(name: &str, p: &Policies, call: &Call<'_>, want: Option<Outcome>) {
    // `POLICY_BENCH_ONLY=TEXT`: only the cases whose name holds TEXT (to profile one).
    if std::env::var("POLICY_BENCH_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return;
    }
    assert_eq!(p.evaluate_call(call).map(|d| d.outcome), want, "{name}");
    // `POLICY_BENCH_CALLS` (default 200,000) calls per case; a multiple of 100.
    let n: usize = std::env::var("POLICY_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
        .max(100);
    let mut samples = Vec::with_capacity(n / 100);
    let cpu = cpu_ns();
    let started = Instant::now();
    for _ in 0..n / 100 {
        let t = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(p.evaluate_call(std::hint::black_box(call)));
        }
        samples.push(t.elapsed().as_nanos() as f64 / 100.0);
    }
    let mean = started.elapsed().as_nanos() as f64 / n as f64;
    let cpu = cpu_ns().saturating_sub(cpu) as f64 / n as f64;
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    println!(
        "{name:<48} mean {:>8.0} ns  p50 {:>8.0} ns  p99 {:>8.0} ns  cpu {cpu:>8.0} ns",
        mean,
        at(0.5),
        at(0.99)
    );
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn main() {
    let (_dir, p) = policies(SET, 41);
    // The same set without the one policy scoped to every tool: a tool no policy names has no Cedar call.
    let without_every: String = SET
        .lines()
        .filter(|l| !l.contains("\"suspended\""))
        .collect::<Vec<_>>()
        .join("\n");
    let (_dir2, scoped) = policies(&without_every, 40);
    let groups = vec!["dev".to_owned(), "staff".to_owned()];
    let file = args(json!({"path": "/home/alice/notes.md", "content": "x".repeat(2000)}));
    let etc = args(json!({"path": "/etc/passwd", "content": "x"}));
    let charge = args(json!({"amount": 250, "currency": "EUR", "to": "acct-1"}));
    let echo = args(json!({"text": "x"}));
    // A fraction: Cedar's `decimal`, which the common forms do not model, so Cedar decides (and, comparing it with
    // an integer, finds both payment permits in error: refused by default).
    let cents = args(json!({"amount": 250.5, "currency": "EUR", "to": "acct-1"}));
    let call = |server, tool, args| Call {
        user: Some("alice"),
        groups: &groups,
        client: Some("claude-code"),
        script: false,
        server,
        tool,
        args: Some(args),
    };
    measure(
        "no policies at all",
        &Policies::default(),
        &call("fs", "write_file", &file),
        None,
    );
    measure(
        "a tool no policy can apply to",
        &scoped,
        &call("time", "now", &file),
        None,
    );
    measure(
        "a tool only the every-tool policy applies to",
        &p,
        &call("time", "now", &file),
        Some(Outcome::Allow),
    );
    measure(
        "policed, allowed (fs/write_file, 2 kB arg)",
        &p,
        &call("fs", "write_file", &file),
        Some(Outcome::Allow),
    );
    measure(
        "policed, denied (fs/write_file in /etc)",
        &p,
        &call("fs", "write_file", &etc),
        Some(Outcome::Deny),
    );
    measure(
        "policed, asks (pay/charge amount 250)",
        &p,
        &call("pay", "charge", &charge),
        Some(Outcome::Ask),
    );
    measure(
        "policed, allowed (fx/echo, 4 policies apply)",
        &p,
        &call("fx", "echo", &echo),
        Some(Outcome::Allow),
    );
    measure(
        "policed by Cedar (pay/charge 250.5, in error)",
        &p,
        &call("pay", "charge", &cents),
        Some(Outcome::Deny),
    );
}
