//! One attempt at a server: spawn it under the child guard (own process group, empty HOME and working directory,
//! only PATH and locale from our environment), `initialize`, every page of `tools/list` (lenient), `prompts/list` and
//! `resources/list` when advertised, then teardown (stdin closed, SIGTERM to the group, SIGKILL after the grace).
//!
//! The child's stdout goes through a line filter before rmcp: JSON lines are passed on, anything else is kept as
//! evidence (`non_json_stdout`) and dropped, so a server that logs to stdout is still enumerated (and flagged).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::*;
use rmcp::service::ServiceError;
use rmcp::{ClientHandler, ServiceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::watch;

use crate::child_env::base_env;
use crate::options::Options;
use crate::types::{StageTime, clip, stage};
use ad_proxy::spawn::{self, Isolation, StderrRing};

/// Lines of noise (non-JSON stdout) kept as evidence.
const NOISE_KEPT: usize = 20;
/// How long an answer already written by a process that has ended may take to come through.
const DRAIN: Duration = Duration::from_millis(500);
/// Upper bound on pages followed in one list.
const MAX_PAGES: usize = 100;

/// What the server said about itself in `initialize`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
}

/// A listed tool, kept even when its schema is odd.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntrospectedTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub input_schema: Value,
    /// The schema had no `"type"` (or no schema at all): kept, and `{"type": "object"}` assumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub untyped_schema: bool,
    /// Listed only once placeholder values were filled in (second pass).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub under_placeholders: bool,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum End {
    /// Tools were listed (possibly none).
    Listed,
    /// The guard could not be started.
    SpawnFailed(String),
    /// The process ended before `initialize` was answered.
    Exited,
    InitTimeout,
    /// `initialize` got a JSON-RPC error.
    InitError(String),
    /// `initialize` failed otherwise (closed stream, undecodable answer) while the process lived.
    InitBroken(String),
    ProtocolMismatch(String),
    ListTimeout,
    ListError(String),
    /// The process ended while tools were being listed.
    ListExited,
    /// The hard limit of the attempt passed in this stage.
    HardTimeout(String),
}

/// Everything one attempt observed.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    pub stages: Vec<StageTime>,
    pub end: End,
    pub stderr: Vec<String>,
    pub stdout_noise: Vec<String>,
    pub noise_count: usize,
    pub json_lines: usize,
    /// Why the process ended, when it did before teardown.
    pub exit: Option<String>,
    pub exit_code: Option<i32>,
    pub server: Option<ServerInfo>,
    pub tools: Vec<IntrospectedTool>,
    pub prompts: Option<usize>,
    pub resources: Option<usize>,
    pub flags: Vec<String>,
    pub left_behind: usize,
}

impl Attempt {
    pub(crate) fn new() -> Attempt {
        Attempt {
            stages: Vec::new(),
            end: End::Listed,
            stderr: Vec::new(),
            stdout_noise: Vec::new(),
            noise_count: 0,
            json_lines: 0,
            exit: None,
            exit_code: None,
            server: None,
            tools: Vec::new(),
            prompts: None,
            resources: None,
            flags: Vec::new(),
            left_behind: 0,
        }
    }
}

/// The client side of an introspection: no capabilities offered, so servers cannot ask us for anything.
struct Introspector;

impl ClientHandler for Introspector {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agent-discover-introspect", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

#[derive(Default)]
struct StdoutLog {
    noise: Vec<String>,
    noise_count: usize,
    json_lines: usize,
}

/// Runs one attempt of `program args` with `env` (on top of the base environment). `tag` separates the scratch
/// directories of the two passes.
pub(crate) async fn run(
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    scratch: &Path,
    options: &Options,
    tag: &str,
) -> Attempt {
    let mut a = Attempt::new();
    let limits = options.limits;
    let t = Instant::now();
    let base = scratch.join(match tag {
        "" => "pass1".to_owned(),
        "2" => "pass2".to_owned(),
        t => format!("pass-{t}"),
    });
    let home = base.join("home");
    let cwd = base.join("cwd");
    if let Err(e) = std::fs::create_dir_all(&home).and_then(|()| std::fs::create_dir_all(&cwd)) {
        a.end = End::SpawnFailed(format!("cannot create the scratch directories: {e}"));
        a.stages.push(stage("spawn", t, "failed"));
        return a;
    }
    let mut full_env = base_env(&home);
    full_env.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
    // A missing launcher (`uvx`, `npx`) is fetched as for servers (`ad_proxy::launcher`); a program that is still
    // missing is left to the start, whose exit the diagnosis names (`no_entry_point`).
    if let Err(e) =
        ad_proxy::launcher::prepare(&options.runtimes, "introspection", program, &mut full_env)
            .await
    {
        tracing::debug!(program, error = %e, "the program is not installed");
    }
    let ring = Arc::new(StderrRing::default());
    let isolation = Isolation {
        cwd: cwd.clone(),
        clear_env: true,
    };
    let spawned = match crate::child_env::spawn_confined(
        options,
        &base,
        program,
        args,
        &full_env,
        ring.clone(),
        &isolation,
    ) {
        Ok(s) => s,
        Err(e) => {
            a.end = End::SpawnFailed(e.to_string());
            a.stages.push(stage("spawn", t, "failed"));
            return a;
        }
    };
    a.stages.push(stage("spawn", t, "ok"));
    let pgid = spawned.pgid;
    let lifeline = spawned.lifeline;
    let stderr_done = spawned.stderr_done;
    let mut child = spawned.child;
    // The guard's exit (= the server's, whose status it passes on) is watched apart from the protocol.
    let (exit_tx, exit_rx) = watch::channel::<Option<(String, Option<i32>)>>(None);
    let waiter = tokio::spawn(async move {
        let res = child.wait().await;
        let (cause, code) = match res {
            Ok(status) => describe(status),
            Err(e) => (format!("wait failed: {e}"), None),
        };
        let _ = exit_tx.send(Some((cause, code)));
    });

    // stdout line filter: JSON lines to rmcp, the rest kept as evidence.
    let log = Arc::new(Mutex::new(StdoutLog::default()));
    let (filtered_rd, mut filtered_wr) = tokio::io::duplex(256 * 1024);
    let filter_log = log.clone();
    let stdout = spawned.stdout;
    let filter = tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).split(b'\n');
        while let Ok(Some(line)) = lines.next_segment().await {
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() {
                continue;
            }
            if serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).is_ok() {
                filter_log
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .json_lines += 1;
                if filtered_wr.write_all(trimmed).await.is_err()
                    || filtered_wr.write_all(b"\n").await.is_err()
                {
                    break;
                }
            } else {
                let mut l = filter_log.lock().unwrap_or_else(|p| p.into_inner());
                l.noise_count += 1;
                if l.noise.len() < NOISE_KEPT {
                    let mut s = String::from_utf8_lossy(trimmed).into_owned();
                    clip(&mut s, 500);
                    l.noise.push(s);
                }
            }
        }
    });

    let transport =
        rmcp::transport::async_rw::AsyncRwTransport::new_client(filtered_rd, spawned.stdin)
            .with_max_line_length(64 * 1024 * 1024);
    let hard_deadline = Instant::now() + limits.hard;
    let mut service = None;
    let protocol = async {
        // initialize
        let t = Instant::now();
        let mut exit_watch = exit_rx.clone();
        let init = tokio::time::timeout(limits.initialize, async {
            let serve = Introspector.serve(transport);
            tokio::pin!(serve);
            tokio::select! {
                r = &mut serve => Some(r),
                // What the server wrote before it ended may still be on its way: read it before calling this an exit.
                _ = exit_watch.wait_for(|c| c.is_some()) => tokio::time::timeout(DRAIN, &mut serve).await.ok(),
            }
        })
        .await;
        let running = match init {
            Err(_) => {
                a.stages.push(stage("initialize", t, "timeout"));
                a.end = End::InitTimeout;
                return;
            }
            Ok(None) => {
                a.stages.push(stage("initialize", t, "failed"));
                a.end = End::Exited;
                return;
            }
            Ok(Some(Err(e))) => {
                a.stages.push(stage("initialize", t, "failed"));
                // A closed stream usually means the process is ending: give it a moment to say so.
                let mut w = exit_rx.clone();
                let exited =
                    tokio::time::timeout(Duration::from_millis(1000), w.wait_for(|c| c.is_some()))
                        .await
                        .is_ok();
                a.end = match e {
                    // A refusal is an init error even when the server exits right after sending it.
                    rmcp::service::ClientInitializeError::JsonRpcError(err) => {
                        End::InitError(format!("{} (code {})", err.message, err.code.0))
                    }
                    _ if exited => End::Exited,
                    rmcp::service::ClientInitializeError::ExpectedInitResult(other) => {
                        End::ProtocolMismatch(format!(
                            "answered initialize with something that is not an initialize result: {}",
                            short_json(&other)
                        ))
                    }
                    other => End::InitBroken(other.to_string()),
                };
                return;
            }
            Ok(Some(Ok(s))) => s,
        };
        let peer = running.peer().clone();
        service = Some(running);
        let info = peer.peer_info();
        let version = info
            .as_ref()
            .map(|i| i.protocol_version.clone())
            .unwrap_or_default();
        let version_text = serde_json::to_value(&version)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        a.server = info.as_ref().map(|i| ServerInfo {
            name: i
                .server_info
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default(),
            version: i
                .server_info
                .as_ref()
                .map(|s| s.version.clone())
                .unwrap_or_default(),
            protocol_version: version_text.clone(),
        });
        if !ProtocolVersion::KNOWN_VERSIONS.contains(&version) {
            a.stages.push(stage("initialize", t, "failed"));
            a.end = End::ProtocolMismatch(format!(
                "the server answered with protocol version {version_text:?}, which is not one of {}",
                ProtocolVersion::KNOWN_VERSIONS
                    .iter()
                    .filter_map(|v| serde_json::to_value(v).ok())
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return;
        }
        a.stages.push(stage("initialize", t, "ok"));
        let caps = info.map(|i| i.capabilities.clone()).unwrap_or_default();

        // tools/list, every page, under one limit.
        let t = Instant::now();
        let mut exit_watch = exit_rx.clone();
        let listed = tokio::time::timeout(limits.list, async {
            let listing = list_tools(&peer);
            tokio::pin!(listing);
            tokio::select! {
                r = &mut listing => Some(r),
                _ = exit_watch.wait_for(|c| c.is_some()) => tokio::time::timeout(DRAIN, &mut listing).await.ok(),
            }
        })
        .await;
        match listed {
            Err(_) => {
                a.stages.push(stage("tools/list", t, "timeout"));
                a.end = End::ListTimeout;
                return;
            }
            Ok(None) => {
                a.stages.push(stage("tools/list", t, "failed"));
                a.end = End::ListExited;
                return;
            }
            Ok(Some(Err((e, refused)))) => {
                a.stages.push(stage("tools/list", t, "failed"));
                // A broken stream from a process that has ended is an exit, not an answer.
                a.end = if !refused && exit_rx.borrow().is_some() {
                    End::ListExited
                } else {
                    End::ListError(e)
                };
                return;
            }
            Ok(Some(Ok((tools, flags)))) => {
                a.stages.push(stage("tools/list", t, "ok"));
                a.tools = tools;
                a.flags.extend(flags);
            }
        }
        a.end = End::Listed;

        // prompts/list and resources/list only when advertised; their failures are flags, not categories.
        if caps.prompts.is_some() {
            let t = Instant::now();
            match tokio::time::timeout(limits.list, peer.list_all_prompts()).await {
                Ok(Ok(p)) => {
                    a.prompts = Some(p.len());
                    a.stages.push(stage("prompts/list", t, "ok"));
                }
                Ok(Err(e)) => {
                    a.flags
                        .push(format!("prompts/list failed: {}", short(&e.to_string())));
                    a.stages.push(stage("prompts/list", t, "failed"));
                }
                Err(_) => {
                    a.flags.push("prompts/list timed out".into());
                    a.stages.push(stage("prompts/list", t, "timeout"));
                }
            }
        }
        if caps.resources.is_some() {
            let t = Instant::now();
            match tokio::time::timeout(limits.list, peer.list_all_resources()).await {
                Ok(Ok(r)) => {
                    a.resources = Some(r.len());
                    a.stages.push(stage("resources/list", t, "ok"));
                }
                Ok(Err(e)) => {
                    a.flags
                        .push(format!("resources/list failed: {}", short(&e.to_string())));
                    a.stages.push(stage("resources/list", t, "failed"));
                }
                Err(_) => {
                    a.flags.push("resources/list timed out".into());
                    a.stages.push(stage("resources/list", t, "timeout"));
                }
            }
        }
    };
    if tokio::time::timeout_at(hard_deadline.into(), protocol)
        .await
        .is_err()
    {
        let at = a
            .stages
            .last()
            .map(|s| format!("after {}", s.stage))
            .unwrap_or_else(|| "during start-up".into());
        a.flags.push(format!(
            "hard limit of {} s reached {at}",
            limits.hard.as_secs()
        ));
        // The stage that was running when the limit passed decides the ending.
        let done = |name: &str| a.stages.iter().any(|s| s.stage == name);
        let ending = if !done("initialize") {
            Some(End::InitTimeout)
        } else if !done("tools/list") && a.server.is_some() {
            Some(End::ListTimeout)
        } else if !done("tools/list") {
            Some(End::HardTimeout(at))
        } else {
            None
        };
        if let Some(end) = ending {
            a.end = end;
            a.stages.push(StageTime {
                stage: "hard limit".into(),
                ms: limits.hard.as_millis() as u64,
                outcome: "timeout".into(),
            });
        }
    }

    // Teardown: close stdin (dropping the client drops the transport), SIGTERM the group, SIGKILL after the grace.
    let t = Instant::now();
    if let Some(s) = service.take() {
        let _ = tokio::time::timeout(Duration::from_millis(500), s.cancel()).await;
    }
    let exited_before_teardown = exit_rx.borrow().clone();
    // SIGTERM to the whole group (the guard, the server and whatever it started); the grace ends early once every
    // process of the group is gone, else SIGKILL ends the rest.
    spawn::signal_group(pgid, libc::SIGTERM);
    let graceful = wait_group_gone(pgid, limits.term_grace).await;
    if !graceful {
        spawn::kill_group(pgid);
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), waiter).await;
    drop(lifeline);
    wait_group_gone(pgid, Duration::from_secs(1)).await;
    // Drained stderr and stdout end when the last process holding the pipes is gone.
    if let Some(h) = stderr_done {
        let _ = tokio::time::timeout(Duration::from_millis(500), h).await;
    }
    let _ = tokio::time::timeout(Duration::from_millis(500), filter).await;
    a.left_behind = spawn::live_group_members(pgid);
    if a.left_behind > 0 {
        // Nothing may outlive an introspection: the count is recorded, and the group is killed once more.
        spawn::kill_group(pgid);
    }
    a.stages
        .push(stage("teardown", t, if graceful { "ok" } else { "killed" }));
    if let Some((cause, code)) = exited_before_teardown {
        a.exit = Some(cause);
        a.exit_code = code;
    }
    a.stderr = ring.tail(spawn::STDERR_LINES);
    let log = log.lock().unwrap_or_else(|p| p.into_inner());
    a.stdout_noise = log.noise.clone();
    a.noise_count = log.noise_count;
    a.json_lines = log.json_lines;
    if log.noise_count > 0 && a.end == End::Listed {
        a.flags.push(format!(
            "stdout_noise: {} non-JSON line(s) on stdout, first: {}",
            log.noise_count,
            log.noise.first().cloned().unwrap_or_default()
        ));
    }
    a
}

/// Polls until no process of the group runs (true) or `limit` passes (false). There is no event for the death of
/// processes we are not the parent of, so this looks every 25 ms.
async fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if spawn::live_group_members(pgid) == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// `tools/list` page by page through rmcp, lenient: a result rmcp cannot type (a tool without `inputSchema`) is
/// read from its raw JSON; a tool whose schema lacks `type` is kept and flagged.
async fn list_tools(
    peer: &rmcp::Peer<rmcp::RoleClient>,
) -> Result<(Vec<IntrospectedTool>, Vec<String>), (String, bool)> {
    // The error is (message, whether the server answered with a JSON-RPC error).
    let mut tools = Vec::new();
    let mut flags = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let request = ClientRequest::ListToolsRequest(RequestOptionalParam {
            method: Default::default(),
            params: cursor
                .clone()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c))),
            extensions: Default::default(),
        });
        let result = peer.send_request(request).await.map_err(|e| match e {
            ServiceError::McpError(err) => (format!("{} (code {})", err.message, err.code.0), true),
            other => (other.to_string(), false),
        })?;
        let (page, next) = match result {
            ServerResult::ListToolsResult(r) => {
                let page = r
                    .tools
                    .into_iter()
                    .map(|t| {
                        let schema = Value::Object((*t.input_schema).clone());
                        tool(
                            t.name.into_owned(),
                            t.description.map(|d| d.into_owned()).unwrap_or_default(),
                            Some(schema),
                        )
                    })
                    .collect::<Vec<_>>();
                (page, r.next_cursor)
            }
            ServerResult::CustomResult(CustomResult(raw)) => {
                lenient_page(&raw).map_err(|e| (e, true))?
            }
            other => {
                return Err((
                    format!(
                        "tools/list answered with something that is not a tool list: {}",
                        short_json(&other)
                    ),
                    true,
                ));
            }
        };
        tools.extend(page);
        match next.filter(|c| !c.is_empty()) {
            Some(c) if seen.insert(c.clone()) => cursor = Some(c),
            Some(c) => {
                flags.push(format!(
                    "tools/list repeated the cursor {c:?}; stopped paging"
                ));
                break;
            }
            None => break,
        }
    }
    let untyped: Vec<&str> = tools
        .iter()
        .filter(|t| t.untyped_schema)
        .map(|t| t.name.as_str())
        .collect();
    if !untyped.is_empty() {
        flags.push(format!("untyped_schema: {}", untyped.join(", ")));
    }
    Ok((tools, flags))
}

fn tool(name: String, description: String, schema: Option<Value>) -> IntrospectedTool {
    let typed = schema.as_ref().is_some_and(|s| s.get("type").is_some());
    let input_schema = match schema {
        Some(Value::Object(mut m)) => {
            if !typed {
                m.insert("type".into(), Value::String("object".into()));
            }
            Value::Object(m)
        }
        _ => serde_json::json!({"type": "object"}),
    };
    IntrospectedTool {
        name,
        description,
        input_schema,
        untyped_schema: !typed,
        under_placeholders: false,
    }
}

/// A tools/list result rmcp could not type: each entry with a string `name` is kept.
pub(crate) fn lenient_page(raw: &Value) -> Result<(Vec<IntrospectedTool>, Option<String>), String> {
    let list = raw.get("tools").and_then(Value::as_array).ok_or_else(|| {
        format!(
            "tools/list answered without a `tools` list: {}",
            short(&raw.to_string())
        )
    })?;
    let tools = list
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?.to_owned();
            let description = t
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            Some(tool(name, description, t.get("inputSchema").cloned()))
        })
        .collect();
    let next = raw
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((tools, next))
}

fn describe(status: std::process::ExitStatus) -> (String, Option<i32>) {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return (format!("killed by signal {sig}"), None);
        }
    }
    match status.code() {
        Some(127) => ("exit code 127 (command not found)".into(), Some(127)),
        Some(c) => (format!("exit code {c}"), Some(c)),
        None => ("exited".into(), None),
    }
}

fn short(s: &str) -> String {
    let mut s = s.replace('\n', " ");
    clip(&mut s, 300);
    s
}

fn short_json<T: Serialize>(v: &T) -> String {
    short(&serde_json::to_string(v).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_tools() {
        let raw = json!({"tools": [
            {"name": "a", "description": "A", "inputSchema": {"type": "object"}},
            {"name": "b", "inputSchema": {"properties": {"x": {"type": "string"}}}},
            {"name": "c"},
            {"description": "no name"}
        ], "nextCursor": "2"});
        let (tools, next) = lenient_page(&raw).unwrap();
        assert_eq!(tools.len(), 3);
        assert!(!tools[0].untyped_schema);
        assert!(tools[1].untyped_schema);
        assert_eq!(tools[1].input_schema["type"], "object");
        assert_eq!(tools[1].input_schema["properties"]["x"]["type"], "string");
        assert!(tools[2].untyped_schema);
        assert_eq!(next.as_deref(), Some("2"));
        assert!(lenient_page(&json!({"items": []})).is_err());
    }
}
