//! Test harness for driving a real `agent-discover mcp` process with rmcp's client: spawn, call the registry tool,
//! watch notifications, and check that process groups are gone.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::*;
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

pub const BIN: &str = env!("CARGO_BIN_EXE_agent-discover");

/// The dev-only test MCP server `agent-discover-fixture` (package `ad-fixture`, crates/fixture) that tests start as a
/// child. Cargo names only this package's binaries in `CARGO_BIN_EXE_*`; the fixture is built into the same target
/// directory, as a sibling of agent-discover, by `cargo build -p ad-fixture` (scripts/test.sh runs it before the
/// tests). Tests use [`fixture`], which checks that the file is there.
pub const FIXTURE: &str = concat!(env!("CARGO_BIN_EXE_agent-discover"), "-fixture");

/// [`FIXTURE`], after checking that it was built: a test that needs the fixture fails loudly without it, never skips.
pub fn fixture() -> &'static str {
    assert!(
        Path::new(FIXTURE).is_file(),
        "the test MCP server {FIXTURE} does not exist: build it first: cargo build -p ad-fixture, which scripts/test.sh \
         does"
    );
    FIXTURE
}

/// What the test client saw from agent-discover.
#[derive(Default)]
pub struct Seen {
    /// When set before initialize: declare elicitation and accept every request with these values.
    pub elicit_answers: Mutex<Option<serde_json::Map<String, Value>>>,
    /// Messages of the elicitation requests received.
    pub elicited: Mutex<Vec<String>>,
    pub tool_list_changed: Mutex<usize>,
    pub progress: Mutex<Vec<f64>>,
    /// The `message` of each progress notification that had one.
    pub progress_messages: Mutex<Vec<String>>,
    /// When set before initialize: declare roots and list these URIs.
    pub roots: Mutex<Option<Vec<String>>>,
    /// Log messages (`notifications/message`) as (logger, data).
    pub logs: Mutex<Vec<(Option<String>, Value)>>,
    /// URIs of `notifications/resources/updated`.
    pub resources_updated: Mutex<Vec<String>>,
    /// agent-discover's stderr, line by line.
    pub stderr: Mutex<Vec<String>>,
    pub notify: Notify,
}

#[derive(Clone)]
pub struct TestClient {
    pub seen: Arc<Seen>,
    /// Declare sampling and answer it with this text.
    pub sampling_reply: Option<String>,
}

#[allow(deprecated)]
impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        let mut caps = if self.sampling_reply.is_some() {
            ClientCapabilities::builder().enable_sampling().build()
        } else {
            ClientCapabilities::default()
        };
        if self.seen.elicit_answers.lock().unwrap().is_some() {
            caps.elicitation = ClientCapabilities::builder()
                .enable_elicitation()
                .build()
                .elicitation;
        }
        if self.seen.roots.lock().unwrap().is_some() {
            caps.roots = ClientCapabilities::builder().enable_roots().build().roots;
        }
        ClientConfig::new(caps, Implementation::new("it", "0"))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _c: NotificationContext<RoleClient>) {
        *self.seen.tool_list_changed.lock().unwrap() += 1;
        self.seen.notify.notify_waiters();
    }

    async fn on_logging_message(
        &self,
        p: LoggingMessageNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        self.seen.logs.lock().unwrap().push((p.logger, p.data));
        self.seen.notify.notify_waiters();
    }

    async fn on_resource_updated(
        &self,
        p: ResourceUpdatedNotificationParam,
        _c: NotificationContext<RoleClient>,
    ) {
        self.seen.resources_updated.lock().unwrap().push(p.uri);
        self.seen.notify.notify_waiters();
    }

    async fn on_progress(&self, p: ProgressNotificationParam, _c: NotificationContext<RoleClient>) {
        self.seen.progress.lock().unwrap().push(p.progress);
        if let Some(m) = p.message {
            self.seen.progress_messages.lock().unwrap().push(m);
        }
        self.seen.notify.notify_waiters();
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        self.seen.elicited.lock().unwrap().push(message);
        self.seen.notify.notify_waiters();
        let answers = self.seen.elicit_answers.lock().unwrap().clone();
        // `with_elicitation(json!({"__never": true}))`: a person who never answers.
        if answers.as_ref().is_some_and(|a| a.contains_key("__never")) {
            std::future::pending::<()>().await;
        }
        Ok(match answers {
            Some(a) => ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(a)),
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    async fn list_roots(
        &self,
        _c: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self
            .seen
            .roots
            .lock()
            .unwrap()
            .clone()
            .ok_or_else(ErrorData::method_not_found::<ListRootsRequestMethod>)?;
        Ok(ListRootsResult::new(
            roots.into_iter().map(Root::new).collect(),
        ))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let reply = self
            .sampling_reply
            .clone()
            .ok_or_else(|| ErrorData::invalid_request("no sampling", None))?;
        let asked = params
            .messages
            .first()
            .and_then(|m| {
                m.content
                    .first()
                    .and_then(|c| c.as_text())
                    .map(|t| t.text.clone())
            })
            .unwrap_or_default();
        Ok(CreateMessageResult::new(
            SamplingMessage::assistant_text(format!("{reply} (asked: {asked})")),
            "test-model".into(),
        ))
    }
}

pub struct Agent {
    pub client: RunningService<RoleClient, TestClient>,
    pub seen: Arc<Seen>,
    pub pid: u32,
}

/// A command line for agent-discover processes in tests: this data dir, no dashboard.
pub fn command(dir: &Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.arg("--data-dir").arg(dir).args(args);
    cmd.env("AGENT_DISCOVER_DASHBOARD", "off")
        .env_remove("AGENT_DISCOVER_DB")
        // Never download the embedding model from the network in tests (tests/it/model.rs points it at a stub).
        .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
        // Debug logs of agent-discover's own code: the root package and the workspace's ad-* crates (a directive
        // matches targets by prefix: `ad_` covers `ad_core::events`, `ad_proxy`, ...).
        .env("AGENT_DISCOVER_LOG", "agent_discover=debug,ad_=debug,warn");
    cmd
}

pub async fn spawn(dir: &Path, extra: &[&str], sampling_reply: Option<&str>) -> Agent {
    spawn_env(dir, extra, sampling_reply, &[]).await
}

/// `spawn` with extra environment variables for the agent-discover process.
pub async fn spawn_env(
    dir: &Path,
    extra: &[&str],
    sampling_reply: Option<&str>,
    env: &[(&str, String)],
) -> Agent {
    let mut args = vec!["mcp"];
    args.extend_from_slice(extra);
    let mut cmd = command(dir, &args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-discover mcp");
    let pid = transport.id().expect("pid");
    let seen = Arc::new(Seen::default());
    if let Some(stderr) = stderr {
        // Drain so the child never blocks on a full pipe; keep it for assertions and show it when a test fails.
        let seen = seen.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                eprintln!("[agent-discover {pid}] {l}");
                seen.stderr.lock().unwrap().push(l);
            }
        });
    }
    *seen.elicit_answers.lock().unwrap() = ELICIT.with(|e| e.borrow_mut().take());
    *seen.roots.lock().unwrap() = ROOTS.with(|r| r.borrow_mut().take());
    let client = TestClient {
        seen: seen.clone(),
        sampling_reply: sampling_reply.map(str::to_owned),
    }
    .serve(transport)
    .await
    .expect("initialize");
    Agent { client, seen, pid }
}

impl Agent {
    /// Calls the registry tool; returns (is_error, parsed JSON or text).
    pub async fn try_registry(&self, args: Value) -> Result<(bool, Value), ErrorData> {
        let Value::Object(map) = args else {
            panic!("args must be an object")
        };
        match self
            .client
            .call_tool(CallToolRequestParams::new("registry").with_arguments(map))
            .await
        {
            Ok(r) => Ok((r.is_error == Some(true), parse(&r))),
            Err(rmcp::ServiceError::McpError(e)) => Err(e),
            Err(e) => panic!("transport failure: {e}"),
        }
    }

    /// Calls the registry tool and expects success.
    pub async fn registry(&self, args: Value) -> Value {
        let (is_error, v) = self
            .try_registry(args.clone())
            .await
            .unwrap_or_else(|e| panic!("{args} -> protocol error {e:?}"));
        assert!(!is_error, "{args} -> {v}");
        v
    }

    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let Value::Object(map) = args else {
            panic!("args must be an object")
        };
        self.client
            .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(map))
            .await
            .expect("tools/call")
    }

    pub async fn tool_names(&self) -> Vec<String> {
        self.client
            .list_all_tools()
            .await
            .expect("tools/list")
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Waits (bounded) until `n` tools/list_changed notifications have arrived.
    pub async fn wait_list_changed(&self, n: usize) {
        let seen = self.seen.clone();
        wait_for(Duration::from_secs(10), || {
            *seen.tool_list_changed.lock().unwrap() >= n
        })
        .await;
    }

    /// Installs the fixture server under `name` with extra fixture flags and install arguments.
    pub async fn install_fixture(&self, name: &str, flags: &[&str], extra: Value) -> Value {
        let mut args = vec!["--name".to_owned(), name.into()];
        args.extend(flags.iter().map(|s| s.to_string()));
        let mut req = json!({"action": "install", "name": name, "command": fixture(), "args": args, "description": format!("fixture {name}")});
        if let (Value::Object(r), Value::Object(e)) = (&mut req, extra) {
            r.extend(e);
        }
        self.registry(req).await
    }

    pub async fn stop(self) {
        let _ = self.client.cancel().await;
    }
}

pub fn parse(r: &CallToolResult) -> Value {
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("");
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

pub fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// Polls `cond` until it holds or `limit` passes (then panics). For effects that have no event to wait on,
/// such as a process disappearing.
pub async fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < limit,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pids of live processes in process group `pgid` (zombies excluded).
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`: state ppid pgrp ...
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() > 2 && f[0] != "Z" && f[2].parse::<u32>().ok() == Some(pgid) {
            out.push(pid);
        }
    }
    out
}

pub fn pid_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rfind(')').is_some_and(|i| !s[i + 2..].starts_with('Z')))
}

/// Pids of live processes whose command line contains `args` consecutively.
pub fn processes_with_args(args: &[&str]) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        if argv
            .windows(args.len())
            .any(|w| w.iter().zip(args).all(|(a, b)| *a == b.as_bytes()))
            && pid_alive(pid)
        {
            out.push(pid);
        }
    }
    out
}

/// A value shortened for assertion messages (test inputs can be a megabyte).
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!("{}… ({} bytes)", &s[..200], s.len())
    } else {
        s
    }
}

thread_local! {
    /// Answers the next `spawn` on this thread declares elicitation with (see `with_elicitation`).
    static ELICIT: std::cell::RefCell<Option<serde_json::Map<String, Value>>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Roots the next `spawn` on this thread declares (see `with_roots`).
    static ROOTS: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Makes the next agent spawned on this thread a client that declares roots and lists `uris`.
pub fn with_roots(uris: &[&str]) {
    ROOTS.with(|r| *r.borrow_mut() = Some(uris.iter().map(|u| u.to_string()).collect()));
}

/// Makes the next agent spawned on this thread a client that supports elicitation and answers with `answers`.
pub fn with_elicitation(answers: Value) {
    let Value::Object(map) = answers else {
        panic!("answers must be an object")
    };
    ELICIT.with(|e| *e.borrow_mut() = Some(map));
}

/// Where scripts/test.sh installs test dependencies (`AGENT_DISCOVER_TEST_CACHE`); a missing piece fails the test with
/// the fix.
pub fn cache_path(rel: &str) -> std::path::PathBuf {
    let p =
        std::path::PathBuf::from(std::env::var_os("AGENT_DISCOVER_TEST_CACHE").expect(
            "AGENT_DISCOVER_TEST_CACHE is set by scripts/test.sh: run the tests through it",
        ))
        .join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh",
        p.display()
    );
    p
}

/// mcp-server-time, activated as `time` under `dir`'s data dir, converts 12:00 UTC to Tokyo, and ran confined: uv's
/// cache is in the server's state directory (its HOME), the only place it may write.
pub async fn time_server_answers_confined(a: &Agent, dir: &Path) {
    let r = a
        .call(
            "time__convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await;
    assert!(text(&r).contains("21:00"), "{}", text(&r));
    assert!(
        dir.join("sandbox/time/home/.cache/uv").is_dir(),
        "uv's cache is in the server's state directory"
    );
}
