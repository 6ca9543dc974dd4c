//! What the policies cost per call, through `Policies::evaluate` as the proxy calls it, over a realistic set (a
//! filesystem allow-list by group with a path forbid, repository owners, amounts that ask, a script rule, and 20
//! per-user rules): `cargo bench -p ad-policy` (release profile). Prints the mean and p50/p99 per call for a tool no
//! policy is scoped to, a policed call that is allowed, one that is denied and one that asks. `POLICY_BENCH_CALLS`
//! sets the calls per case (default 200,000).

use std::time::Instant;

use ad_policy::{Call, Outcome, Policies};
use serde_json::{Map, Value, json};

fn policies() -> (tempfile::TempDir, Policies) {
    let mut text = String::from(
        r#"
@id("no-etc") forbid (principal, action == Action::"call", resource in Server::"fs")
when { context.args has path && context.args.path like "/etc/*" };
@id("fs-dev") permit (principal in Group::"dev", action == Action::"call", resource in Server::"fs");
@id("gh-acme") forbid (principal, action, resource in Server::"github")
when { context.args has owner && context.args.owner != "acme" } unless { principal in Group::"admins" };
@id("gh-all") permit (principal, action, resource in Server::"github");
@id("big-charge") @ask("") permit (principal, action, resource == Tool::"pay/charge")
when { context.args has amount && context.args.amount > 100 };
@id("small-charge") permit (principal, action, resource == Tool::"pay/charge")
when { context.args has amount && context.args.amount <= 100 };
@id("no-script-delete") forbid (principal, action, resource == Tool::"fs/delete") when { context.script };
"#,
    );
    for i in 0..20 {
        text.push_str(&format!(
            "@id(\"u{i}\") forbid (principal == User::\"u{i}\", action, resource == Tool::\"s{i}/t{i}\") when {{ context.client == \"c{i}\" }};\n"
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bench.cedar"), text).unwrap();
    let p = Policies::open(dir.path().to_path_buf());
    assert_eq!(p.list().len(), 27);
    (dir, p)
}

fn measure(name: &str, p: &Policies, call: &Call<'_>, want: Option<Outcome>) {
    assert_eq!(p.evaluate(call).map(|d| d.outcome), want, "{name}");
    // `POLICY_BENCH_CALLS` (default 200,000) calls per case; a multiple of 100.
    let n: usize = std::env::var("POLICY_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000)
        .max(100);
    let mut samples = Vec::with_capacity(n / 100);
    let started = Instant::now();
    for _ in 0..n / 100 {
        let t = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(p.evaluate(std::hint::black_box(call)));
        }
        samples.push(t.elapsed().as_nanos() as f64 / 100.0);
    }
    let mean = started.elapsed().as_nanos() as f64 / n as f64;
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q) as usize];
    println!(
        "{name:<44} mean {:>8.0} ns  p50 {:>8.0} ns  p99 {:>8.0} ns",
        mean,
        at(0.5),
        at(0.99)
    );
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn main() {
    let (_dir, p) = policies();
    let dev = vec!["dev".to_owned()];
    let file = args(json!({"path": "/home/alice/notes.md", "content": "x".repeat(2000)}));
    let etc = args(json!({"path": "/etc/passwd", "content": "x"}));
    let charge = args(json!({"amount": 250, "currency": "EUR", "to": "acct-1"}));
    let call = |server, tool, args| Call {
        user: Some("alice"),
        groups: &dev,
        client: Some("claude-code"),
        script: false,
        server,
        tool,
        args: Some(args),
    };
    measure(
        "unpoliced tool (no policy scoped to it)",
        &p,
        &call("time", "now", &file),
        None,
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
    let empty = Policies::default();
    measure(
        "no policies at all",
        &empty,
        &call("fs", "write_file", &file),
        None,
    );
}
