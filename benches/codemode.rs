//! Code mode benchmark (issue 28; not a test). In process, on the `mcp` command's single-threaded runtime: the time a
//! run of `return 1` takes (a thread, a QuickJS runtime and context, the prelude, the script, the teardown: the
//! engine's ready time is below it), and an inner call's cost over the same proxied call made directly (100
//! sequential `fx__echo` calls of the test server either way). Through `agent-discover mcp` over stdio, against the
//! real filesystem server and server-everything: a 5-call workflow made call by call and as one script, with the
//! bytes of tool output that reach the agent, the bytes the agent sends, and the round trips.
//!
//! Run: `cargo build --release -p agent-discover -p ad-fixture && cargo bench --bench codemode` after
//! `scripts/test.sh` installed the npm servers into `.ci/cache/node`.

use std::path::PathBuf;
use std::time::Instant;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::model::ServerSpec;
use agent_discover::proxy::Caller;
use agent_discover::scripts::RunRequest;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const READY_RUNS: usize = 300;
const ROUNDS: usize = 50;
const CALLS: usize = 100;
const WORKFLOW_RUNS: usize = 20;

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

fn npm_bin(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(".ci/cache/node/node_modules/.bin")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh",
        p.display()
    );
    p
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn pct(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)]
}

fn main() {
    // The runtime of agent-discover's `mcp` command.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            in_process().await;
            workflow().await;
        });
}

async fn in_process() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::in_dir(dir.path());
    config.guard_exe = Some(release("agent-discover"));
    let app = App::open(config).unwrap();
    let spec = ServerSpec {
        name: "fx".into(),
        command: Some(release("agent-discover-fixture").display().to_string()),
        args: vec!["--name".into(), "fx".into()],
        ..Default::default()
    };
    app.add_server(spec, "manual").await.unwrap();
    app.proxy.activate("fx").await.unwrap();
    let run = |code: &str| {
        let app = app.clone();
        let req = RunRequest {
            code: code.to_owned(),
            timeout_ms: None,
        };
        async move {
            let started = Instant::now();
            let step = app.run_script(req, Caller::default()).await.unwrap();
            let took = started.elapsed();
            match step {
                agent_discover::codemode::Step::Done(o) => {
                    assert!(!o.failed(), "{}", o.to_json());
                }
                other => panic!("{other:?}"),
            }
            took
        }
    };
    for _ in 0..20 {
        run("return 1").await;
    }
    let mut ready = Vec::new();
    for _ in 0..READY_RUNS {
        ready.push(run("return 1").await.as_secs_f64() * 1e6);
    }
    let ready_median = median(ready.clone());
    println!("## in process (current-thread runtime, release)");
    println!(
        "run of `return 1` (thread + runtime + context + prelude + script + teardown): median {:.0} us, p90 {:.0} us, p99 {:.0} us ({READY_RUNS} runs)",
        ready_median,
        pct(ready.clone(), 0.9),
        pct(ready, 0.99)
    );

    let args = json!({"text": "ping"}).as_object().unwrap().clone();
    let script = format!(
        "for (let i = 0; i < {CALLS}; i++) await call('fx__echo', {{text: 'ping'}}); return 'done';"
    );
    // Each round: the calls made directly, then the same calls from a script, then a run of `return 1` whose time is
    // taken off the script's (so both sides of a round see the same machine).
    let (mut direct, mut scripted) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let started = Instant::now();
        for _ in 0..CALLS {
            let r = app
                .proxy
                .call_tool("fx", "echo", Some(args.clone()), Caller::default())
                .await
                .unwrap();
            assert_ne!(r.is_error, Some(true));
        }
        let d = started.elapsed().as_secs_f64() * 1e6 / CALLS as f64;
        let total = run(&script).await.as_secs_f64() * 1e6;
        let empty = run("return 1").await.as_secs_f64() * 1e6;
        let s = (total - empty) / CALLS as f64;
        if round > 0 {
            direct.push(d);
            scripted.push(s);
        }
    }
    let diffs: Vec<f64> = scripted.iter().zip(&direct).map(|(s, d)| s - d).collect();
    println!(
        "proxied fx__echo, {ROUNDS} rounds of {CALLS} sequential calls: direct median {:.1} us per call, from a script median {:.1} us per call; per-round difference median {:.1} us (p10 {:.1}, p90 {:.1})",
        median(direct),
        median(scripted),
        median(diffs.clone()),
        pct(diffs.clone(), 0.1),
        pct(diffs, 0.9)
    );
    app.proxy.shutdown().await;
}

type Client = RunningService<RoleClient, ()>;

async fn call(client: &Client, name: &str, args: Value) -> CallToolResult {
    client
        .call_tool(
            CallToolRequestParams::new(name.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .unwrap()
}

/// A log file of `lines` lines, one in `every` an ERROR.
fn log_text(name: &str, lines: usize, every: usize) -> String {
    (0..lines)
        .map(|i| {
            let level = if i % every == 0 { "ERROR" } else { "INFO" };
            format!(
                "2026-11-27T10:{:02}:{:02}.{:03}Z {level} {name} request {i} handled in {} ms (user {}, route /api/items/{})\n",
                (i / 60) % 60,
                i % 60,
                (i * 7) % 1000,
                (i * 13) % 250,
                1000 + i % 17,
                i % 97
            )
        })
        .collect()
}

async fn workflow() {
    let dir = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    for (name, lines, every) in [("api", 400, 9), ("worker", 300, 7), ("web", 500, 11)] {
        std::fs::write(
            logs.path().join(format!("{name}.log")),
            log_text(name, lines, every),
        )
        .unwrap();
    }
    let mut cmd = tokio::process::Command::new(release("agent-discover"));
    cmd.arg("--data-dir")
        .arg(dir.path())
        .arg("mcp")
        .env("AGENT_DISCOVER_DASHBOARD", "off");
    let (t, _stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client: Client = ().serve(t).await.unwrap();
    let root = logs.path().display().to_string();
    for (name, bin, args) in [
        (
            "files",
            npm_bin("mcp-server-filesystem"),
            vec![root.clone()],
        ),
        ("everything", npm_bin("mcp-server-everything"), vec![]),
    ] {
        let r = call(
            &client,
            "registry",
            json!({"action": "install", "name": name, "command": bin, "args": args}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let r = call(
            &client,
            "registry",
            json!({"action": "activate", "name": name}),
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    let path = |f: &str| format!("{root}/{f}");

    // Call by call: every result reaches the agent.
    let direct = || async {
        let mut received = 0usize;
        let mut sent = 0usize;
        let mut one = |name: &str, args: Value| {
            sent += args.to_string().len() + name.len();
            let client = &client;
            let name = name.to_owned();
            async move { call(client, &name, args).await }
        };
        let listing = one("files__list_directory", json!({"path": root})).await;
        received += serde_json::to_string(&listing).unwrap().len();
        let mut counts = Vec::new();
        for f in ["api.log", "worker.log", "web.log"] {
            let r = one("files__read_text_file", json!({"path": path(f)})).await;
            received += serde_json::to_string(&r).unwrap().len();
            let text = r.content[0].as_text().unwrap().text.clone();
            counts.push(text.lines().filter(|l| l.contains(" ERROR ")).count());
        }
        let r = one(
            "everything__get-sum",
            json!({"a": counts[0] + counts[1], "b": counts[2]}),
        )
        .await;
        received += serde_json::to_string(&r).unwrap().len();
        (received, sent, counts)
    };
    let script = format!(
        r#"const dir = {root:?};
const listing = (await tools.files.list_directory({{path: dir}})).content;
const logs = listing.split("\n").filter((l) => l.startsWith("[FILE]") && l.endsWith(".log")).map((l) => l.slice(7));
const texts = await Promise.all(logs.map((f) => tools.files.read_text_file({{path: dir + "/" + f}})));
const counts = {{}};
logs.forEach((f, i) => counts[f] = texts[i].content.split("\n").filter((l) => l.includes(" ERROR ")).length);
const n = Object.values(counts);
const total = await tools.everything.get_sum({{a: n[0] + n[1], b: n[2]}});
return {{counts, total}};"#
    );
    let scripted = || async {
        let r = call(&client, "run_script", json!({"code": script})).await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let received = serde_json::to_string(&r).unwrap().len();
        let sent = json!({"code": script}).to_string().len() + "run_script".len();
        (received, sent, r)
    };
    let (received_direct, sent_direct, counts) = direct().await;
    let (received_script, sent_script, answer) = scripted().await;
    let (mut t_direct, mut t_script) = (Vec::new(), Vec::new());
    for _ in 0..WORKFLOW_RUNS {
        let started = Instant::now();
        direct().await;
        t_direct.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        scripted().await;
        t_script.push(started.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "\n## 5-call workflow through `agent-discover mcp` (filesystem server + server-everything, release)"
    );
    println!(
        "counts {counts:?}; the script's answer: {}",
        answer.content[0].as_text().unwrap().text
    );
    println!(
        "| | tool calls by the agent | round trips | bytes of tool output reaching the agent | bytes the agent sends | wall time (median of {WORKFLOW_RUNS}) |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| call by call | 5 | 5 | {received_direct} | {sent_direct} | {:.1} ms |",
        median(t_direct)
    );
    println!(
        "| one script (`run_script`) | 1 | 1 | {received_script} | {sent_script} | {:.1} ms |",
        median(t_script)
    );
    let _ = client.cancel().await;
}
