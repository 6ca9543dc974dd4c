//! Issue 12 integrity: every request with an id is answered with that id (seeded random requests against the stdio and
//! HTTP fronts), registry argument problems are tool results (SEP-1303), tool pinning, allow/deny filters.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use crate::harness;

/// xorshift64*: a seeded generator, so a failing run can be replayed from the seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn string(&mut self) -> String {
        let pool = [
            "",
            "x",
            "registry",
            "a__b",
            "../../etc/passwd",
            "🙂",
            "\u{0}",
            "NEAR(a",
            "status",
            "ping",
            "-1",
        ];
        let s = self.pick(&pool).to_string();
        if self.chance(10) {
            s.repeat(1 + self.below(3000) as usize)
        } else {
            s
        }
    }
    fn value(&mut self, depth: u32) -> Value {
        match self.below(if depth > 2 { 5 } else { 7 }) {
            0 => Value::Null,
            1 => Value::Bool(self.chance(50)),
            2 => json!(self.next() as i64 >> self.below(64)),
            3 => json!((self.next() % 1000) as f64 / 7.0),
            4 => Value::String(self.string()),
            5 => Value::Array((0..self.below(4)).map(|_| self.value(depth + 1)).collect()),
            _ => {
                let keys = [
                    "name",
                    "arguments",
                    "uri",
                    "cursor",
                    "_meta",
                    "action",
                    "query",
                    "x",
                ];
                let mut m = Map::new();
                for _ in 0..self.below(4) {
                    m.insert(self.pick(&keys).to_string(), self.value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }
}

/// Methods a client may send (`subscriptions/listen` is left out: it is answered only when it ends).
const METHODS: &[&str] = &[
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "initialize",
    "no/such/method",
    "notifications/initialized",
];

/// Registry actions without side effects beyond this data dir (no marketplace, no child processes).
const ACTIONS: &[&str] = &[
    "find_tool",
    "find_tools",
    "list",
    "uninstall",
    "activate",
    "deactivate",
    "proxy_call",
    "get_schema",
    "set_secret",
    "delete_secret",
    "list_secrets",
    "status",
    "explode",
];
const ARGS: &[&str] = &[
    "query",
    "intents",
    "limit",
    "auto_activate",
    "installed_only",
    "name",
    "call_as",
    "server",
    "tool",
    "arguments",
    "key",
    "value",
];

/// One random message. Returns it and, when it is a request with a usable id, that id (as JSON) plus whether it is
/// a well-formed `tools/call` of the registry tool (which must be answered with a result, never an error).
fn message(rng: &mut Rng, n: u64) -> (Value, Option<Value>, bool) {
    let mut m = Map::new();
    if !rng.chance(3) {
        m.insert(
            "jsonrpc".into(),
            json!(if rng.chance(97) { "2.0" } else { "1.0" }),
        );
    }
    let method = *rng.pick(METHODS);
    let usable_id = match rng.below(20) {
        0 => {
            // A notification: never answered.
            None
        }
        1 => {
            m.insert("id".into(), rng.value(3));
            None
        }
        2..=9 => Some(json!(format!("s-{n}"))),
        _ => Some(json!(n as i64 * if rng.chance(20) { -1 } else { 1 })),
    };
    if let Some(id) = &usable_id {
        m.insert("id".into(), id.clone());
    }
    m.insert("method".into(), json!(method));
    let mut registry_call = false;
    if method == "tools/call" && rng.chance(60) {
        let mut args = Map::new();
        args.insert("action".into(), json!(*rng.pick(ACTIONS)));
        for _ in 0..rng.below(4) {
            args.insert(rng.pick(ARGS).to_string(), rng.value(1));
        }
        m.insert(
            "params".into(),
            json!({"name": "registry", "arguments": args}),
        );
        registry_call = m.get("jsonrpc") == Some(&json!("2.0"));
    } else if !rng.chance(15) {
        m.insert("params".into(), rng.value(0));
    }
    (Value::Object(m), usable_id, registry_call)
}

const COUNT: u64 = 250;

/// What a batch of answers must show: every expected id answered, registry calls answered with results.
fn check_answers(seed: u64, answers: &[Value], expected: &[(Value, bool, String)]) {
    let by_id = |id: &Value| answers.iter().find(|a| a.get("id") == Some(id));
    for (id, registry_call, sent) in expected {
        let a = by_id(id).unwrap_or_else(|| panic!("seed {seed}: no answer to {sent:.300}"));
        if *registry_call {
            assert!(
                a.get("result").is_some(),
                "seed {seed}: a registry call got a protocol error (SEP-1303): {sent:.300} -> {a:.300}"
            );
        }
    }
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}"#;

#[tokio::test]
async fn every_request_with_an_id_is_answered_over_stdio() {
    let seed = 0x5EED_0012_u64 ^ std::process::id() as u64;
    eprintln!("fuzz seed {seed}");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let mut child = harness::command(dir.path(), &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let stderr_task = tokio::spawn(async move {
        let mut all = String::new();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(format!("{INIT}\n").as_bytes())
        .await
        .unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    let mut expected = Vec::new();
    for n in 1..=COUNT {
        let (msg, id, registry_call) = message(&mut rng, n);
        let line = msg.to_string();
        if let Some(id) = id {
            expected.push((id, registry_call, line.clone()));
        }
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    // A final good request: the process is still up and serving after all that.
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"tools/call\",\"params\":{\"name\":\"registry\",\"arguments\":{\"action\":\"status\"}}}\n")
        .await
        .unwrap();
    let mut answers = Vec::new();
    let mut want: BTreeSet<String> = expected.iter().map(|(id, ..)| id.to_string()).collect();
    want.insert("\"last\"".into());
    want.insert("\"init\"".into());
    let collect = async {
        while !want.is_empty() {
            let line = out.next_line().await.unwrap().expect("stdout closed early");
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|_| panic!("non-JSON on stdout: {line:.200}"));
            if let Some(id) = v.get("id") {
                want.remove(&id.to_string());
            }
            answers.push(v);
        }
    };
    if tokio::time::timeout(Duration::from_secs(60), collect)
        .await
        .is_err()
    {
        panic!("seed {seed}: unanswered ids after 60 s: {want:?}");
    }
    check_answers(seed, &answers, &expected);
    let last = answers.iter().find(|a| a["id"] == "last").unwrap();
    assert_eq!(last["result"]["isError"], json!(false), "{last}");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit on stdin EOF")
        .unwrap();
    assert!(status.success(), "agent-discover exited with {status}");
    let log = stderr_task.await.unwrap();
    assert!(!log.contains("panicked"), "seed {seed}: a panic:\n{log}");
}

/// The body of an MCP POST answer: the JSON-RPC messages in it (plain JSON or server-sent events).
fn messages_in(body: &str) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return vec![v];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str(d.trim()).ok())
        .collect()
}

#[tokio::test]
async fn every_request_with_an_id_is_answered_over_http() {
    let seed = 0x5EED_1012_u64 ^ std::process::id() as u64;
    eprintln!("fuzz seed {seed}");
    let mut rng = Rng(seed | 1);
    let dir = tempfile::tempdir().unwrap();
    let served = crate::http::serve(dir.path(), &[]).await;
    let url = format!("{}/mcp", served.url);
    let http = reqwest::Client::new();
    let post = |body: String, session: Option<String>| {
        let mut req = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    let init = post(INIT.to_owned(), None).await.expect("initialize");
    let session = init
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let init_answer = messages_in(&init.text().await.unwrap());
    assert!(
        init_answer
            .iter()
            .any(|m| m["id"] == "init" && m.get("result").is_some()),
        "{init_answer:?}"
    );
    post(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into(),
        session.clone(),
    )
    .await
    .unwrap();
    let mut expected = Vec::new();
    let mut answers = Vec::new();
    let run = async {
        for n in 1..=COUNT {
            let (msg, id, registry_call) = message(&mut rng, n);
            let line = msg.to_string();
            let resp = post(line.clone(), session.clone())
                .await
                .expect("the server is up");
            let status = resp.status().as_u16();
            let got = messages_in(&resp.text().await.unwrap());
            if let Some(id) = id {
                assert!(
                    got.iter().any(|m| m.get("id") == Some(&id)),
                    "seed {seed}: HTTP {status} without an answer for {line:.300}: {got:?}"
                );
                expected.push((id, registry_call, line));
            }
            answers.extend(got);
        }
    };
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("seed {seed}: the fuzz run took over 120 s"));
    check_answers(seed, &answers, &expected);
    let last = post(
        r#"{"jsonrpc":"2.0","id":"last","method":"tools/call","params":{"name":"registry","arguments":{"action":"status"}}}"#.into(),
        session.clone(),
    )
    .await
    .expect("still up");
    let last = messages_in(&last.text().await.unwrap());
    assert!(
        last.iter()
            .any(|m| m["id"] == "last" && m["result"]["isError"] == false),
        "{last:?}"
    );
    assert!(
        !served.stderr_text().contains("panicked"),
        "seed {seed}: a panic"
    );
    served.stop().await;
}
