//! The proxy: owns every child MCP server (stdio processes and remote connections), activates and deactivates them,
//! forwards calls with timeouts, aggregates their tools, resources and prompts, and recovers from crashes.
//!
//! Every child has exactly one owner: the `Slot` in `Inner::children`. Its process group is killed when the slot is
//! stopped, when the proxy shuts down, and (through the child guard's lifeline) when this process dies.

mod client;
mod metrics;
pub mod names;
mod spawn;
mod sse;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientRequest, ContentBlock, GetPromptRequestParams, GetPromptResult,
    NumberOrString, ProgressNotificationParam, ProgressToken, Prompt, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, ResultType,
    ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::{Peer, RoleClient, RoleServer, ServiceExt};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::calllog::CallLog;
use crate::config::Timeouts;
use crate::error::{Error, Result};
use crate::events::{Event, EventBus};
use crate::model::{Server, ToolInfo, Transport};
use crate::registry::Registry;
use crate::secrets::Secrets;
use client::ChildClient;
pub use spawn::StderrRing;

/// Consecutive crashes after which a server stays down until activated again.
pub const MAX_FAILURES: u32 = 5;
const STOP_GRACE: Duration = Duration::from_millis(1500);

/// Outcome of `activate`.
#[derive(Debug, Clone, Serialize)]
pub struct Activation {
    pub name: String,
    /// `activated` or `already_active`.
    pub status: &'static str,
    pub tools: Vec<ToolInfo>,
}

/// A child as `status` and the dashboard show it.
#[derive(Debug, Clone, Serialize)]
pub struct ChildStatus {
    pub name: String,
    /// `ready` or `error` (crashed, waiting to be restarted on next use).
    pub status: &'static str,
    pub transport: Transport,
    pub pid: Option<u32>,
    pub tool_count: usize,
    pub tools: Vec<String>,
    pub stderr_tail: Vec<String>,
    pub last_error: Option<String>,
    pub started_at: String,
    pub restarts: u32,
}

/// Who is calling: the connected client's peer (to route progress and child requests back) and its progress token.
#[derive(Clone, Default)]
pub struct Caller {
    pub peer: Option<Peer<RoleServer>>,
    pub progress_token: Option<ProgressToken>,
    pub cancel: Option<tokio_util::sync::CancellationToken>,
}

/// The proxy handle; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proxy { .. }")
    }
}

pub(crate) struct Inner {
    registry: Registry,
    secrets: Secrets,
    events: EventBus,
    calllog: Arc<CallLog>,
    timeouts: Timeouts,
    guard_exe: PathBuf,
    children: Mutex<HashMap<String, Slot>>,
    /// Serialises activate/deactivate/restart of one server.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    progress: Mutex<HashMap<String, ProgressRoute>>,
    /// Connected MCP clients (legacy sessions), newest last, for forwarding child requests.
    clients: Mutex<Vec<(u64, Peer<RoleServer>)>>,
    /// Which client is calling each server right now (most recent last).
    callers: Mutex<HashMap<String, Vec<Peer<RoleServer>>>>,
    metrics: Arc<metrics::CallMetrics>,
    observer: Mutex<Option<Arc<dyn Fn(&str, &str, Duration, bool) + Send + Sync>>>,
}

enum Slot {
    Running(Arc<Child>),
    /// Crashed; restarted on next use once `retry_at` has passed.
    Crashed {
        server_id: i64,
        failures: u32,
        retry_at: Instant,
        error: String,
        tools: Vec<Tool>,
        stderr: Arc<StderrRing>,
        transport: Transport,
        started_at: String,
    },
}

impl Slot {
    fn has_tool(&self, tool: &str) -> bool {
        self.find_tool(|t| t == tool).is_some()
    }

    /// The name of the first tool for which `pred` holds.
    fn find_tool(&self, pred: impl Fn(&str) -> bool) -> Option<String> {
        let found = |tools: &[Tool]| {
            tools
                .iter()
                .find(|t| pred(&t.name))
                .map(|t| t.name.to_string())
        };
        match self {
            Slot::Running(c) => found(&lock(&c.tools)),
            Slot::Crashed { tools, .. } => found(tools),
        }
    }
}

struct ProgressRoute {
    caller: Option<(Peer<RoleServer>, ProgressToken)>,
    reset: tokio::sync::mpsc::UnboundedSender<()>,
}

struct Child {
    name: String,
    server_id: i64,
    transport: Transport,
    peer: Peer<RoleClient>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, ChildClient>>>,
    tools: Mutex<Vec<Tool>>,
    capabilities: ServerCapabilities,
    pid: Option<u32>,
    pgid: i32,
    lifeline: Mutex<Option<std::os::fd::OwnedFd>>,
    stderr: Arc<StderrRing>,
    /// Becomes `Some(cause)` when the child is gone.
    exited: watch::Receiver<Option<String>>,
    stopping: AtomicBool,
    started_at: String,
    failures: u32,
    call_timeout: Duration,
}

impl Proxy {
    pub fn new(
        registry: Registry,
        secrets: Secrets,
        events: EventBus,
        calllog: Arc<CallLog>,
        timeouts: Timeouts,
        guard_exe: PathBuf,
    ) -> Proxy {
        let inner = Arc::new(Inner {
            registry: registry.clone(),
            secrets,
            events,
            calllog,
            timeouts,
            guard_exe,
            children: Mutex::default(),
            locks: Mutex::default(),
            progress: Mutex::default(),
            clients: Mutex::default(),
            callers: Mutex::default(),
            metrics: metrics::CallMetrics::start(registry.store().clone()),
            observer: Mutex::new(None),
        });
        Proxy { inner }
    }

    /// Registers a hook called after every proxied call (server, tool, latency, ok): the HTTP layer's histograms.
    pub fn set_call_observer(&self, f: Arc<dyn Fn(&str, &str, Duration, bool) + Send + Sync>) {
        *lock(&self.inner.observer) = Some(f);
    }

    pub fn is_active(&self, name: &str) -> bool {
        lock(&self.inner.children).contains_key(name)
    }

    pub fn active_names(&self) -> Vec<String> {
        let mut v: Vec<String> = lock(&self.inner.children).keys().cloned().collect();
        v.sort();
        v
    }

    /// Starts `name` (if it is not running), lists and stores its tools, sets its `active` flag and tells clients.
    pub async fn activate(&self, name: &str) -> Result<Activation> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        if let Some(Slot::Running(child)) = lock(&self.inner.children).get(name) {
            if child.exited.borrow().is_none() {
                return Ok(Activation {
                    name: name.to_owned(),
                    status: "already_active",
                    tools: child.tool_infos(),
                });
            }
        }
        let server = self.inner.registry.get(name)?;
        let child = match self.inner.start(&server, 0).await {
            Ok(c) => c,
            Err(e) => {
                let _ = self
                    .inner
                    .registry
                    .set_active(server.id, false, Some(&e.to_string()));
                return Err(e);
            }
        };
        let tools = child.tool_infos();
        self.inner.registry.save_tools(server.id, &tools)?;
        self.inner.registry.set_active(server.id, true, None)?;
        lock(&self.inner.children).insert(name.to_owned(), Slot::Running(child));
        self.inner.events.emit(Event::ServerActivated {
            name: name.to_owned(),
            tool_count: tools.len(),
        });
        Ok(Activation {
            name: name.to_owned(),
            status: "activated",
            tools,
        })
    }

    /// Stops `name`, clears its `active` flag and tells clients. Returns false when it was not running.
    /// Its tools stay stored, so search still finds them.
    pub async fn deactivate(&self, name: &str) -> Result<bool> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        let slot = lock(&self.inner.children).remove(name);
        let Some(slot) = slot else {
            if let Ok(server) = self.inner.registry.get(name) {
                if server.active {
                    self.inner.registry.set_active(server.id, false, None)?;
                }
            }
            return Ok(false);
        };
        let server_id = match &slot {
            Slot::Running(c) => c.server_id,
            Slot::Crashed { server_id, .. } => *server_id,
        };
        if let Slot::Running(child) = slot {
            child.stop().await;
        }
        // The server may have been removed meanwhile; its flag went with it.
        let _ = self.inner.registry.set_active(server_id, false, None);
        self.inner.events.emit(Event::ServerDeactivated {
            name: name.to_owned(),
        });
        Ok(true)
    }

    /// Stops every child (agent-discover is shutting down). The `active` flags stay, so the next start restores them.
    pub async fn shutdown(&self) {
        self.flush_metrics().await;
        let slots: Vec<Slot> = lock(&self.inner.children).drain().map(|(_, s)| s).collect();
        let stops = slots.into_iter().filter_map(|s| {
            if let Slot::Running(c) = s {
                Some(async move { c.stop().await })
            } else {
                None
            }
        });
        futures::future::join_all(stops).await;
    }

    /// Writes pending call metrics now.
    pub async fn flush_metrics(&self) {
        self.inner.metrics.flush().await;
    }

    /// Re-activates, in the background, every server flagged active and installed; a server that fails to come up
    /// has its flag cleared and its error recorded. Returns at once.
    pub fn restore_in_background(&self) {
        let proxy = self.clone();
        tokio::spawn(async move {
            let servers = match proxy.inner.registry.store().servers_to_restore() {
                Ok(s) => s,
                Err(e) => return tracing::warn!(error = %e, "cannot read servers to restore"),
            };
            let starts = servers.into_iter().map(|s| {
                let proxy = proxy.clone();
                async move {
                    if let Err(e) = proxy.activate(&s.name).await {
                        tracing::warn!(server = %s.name, error = %e, "could not restore active server; its active flag is cleared");
                    }
                }
            });
            futures::future::join_all(starts).await;
        });
    }

    /// The exposed tools of every running (or crashed, restartable) child.
    pub fn tools(&self) -> Vec<Tool> {
        let children = lock(&self.inner.children);
        let mut out = Vec::new();
        let mut names: Vec<&String> = children.keys().collect();
        names.sort();
        for name in names {
            let tools = match &children[name] {
                Slot::Running(c) => lock(&c.tools).clone(),
                Slot::Crashed { tools, .. } => tools.clone(),
            };
            for t in tools {
                let mut t = t;
                t.name = names::expose(name, &t.name).into();
                out.push(t);
            }
        }
        out
    }

    /// Resolves an exposed or qualified tool name (`server__tool`, `mcp__server__tool`) to (server, tool).
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        // The usual case, on every proxied call: `server__tool` with the tool's own name, no allocation.
        if let Some((server, tool)) = names::split(name, children.keys().map(String::as_str)) {
            if children[server].has_tool(tool) {
                return Some((server.to_owned(), tool.to_owned()));
            }
        }
        // A shortened name (too long or with characters a client may not see): compare exposed names.
        let wanted = names::strip_mcp(name);
        for (server, slot) in children.iter() {
            if let Some(tool) = slot.find_tool(|t| names::expose(server, t) == wanted) {
                return Some((server.clone(), tool));
            }
        }
        drop(children);
        let servers = self.inner.registry.list(&Default::default()).ok()?;
        names::split(name, servers.iter().map(|s| s.server.name.as_str()))
            .map(|(s, t)| (s.to_owned(), t.to_owned()))
    }

    /// Calls `tool` on `server` with the server's call timeout (reset by progress), forwarding progress and
    /// cancellation, and recording metrics and the call log. A child that dies mid-call fails the call at once.
    pub async fn call_tool(
        &self,
        server: &str,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResult> {
        let started = Instant::now();
        let child = self.inner.ready_child(server).await?;
        if !lock(&child.tools).iter().any(|t| t.name == tool) {
            return Err(Error::not_found("tool", format!("{server}__{tool}")));
        }
        let res = self.inner.call(&child, tool, args.clone(), &caller).await;
        let latency = started.elapsed();
        let (ok, text) = match &res {
            Ok(r) => (
                r.is_error != Some(true),
                crate::calllog::excerpt(
                    r.content
                        .iter()
                        .filter_map(|c| c.as_text().map(|t| t.text.as_str())),
                ),
            ),
            Err(e) => (false, crate::calllog::excerpt([e.to_string().as_str()])),
        };
        self.inner
            .metrics
            .record(child.server_id, tool, latency, ok);
        self.inner.calllog.record(
            server,
            tool,
            args.map(Value::Object).unwrap_or(Value::Null),
            text,
            latency,
            ok,
        );
        let observer = lock(&self.inner.observer).clone();
        if let Some(observe) = observer {
            observe(server, tool, latency, ok);
        }
        res
    }

    /// Tool names similar to `name` across every known server (stored catalog), best first.
    pub fn did_you_mean(&self, name: &str, limit: usize) -> Vec<Value> {
        let wanted = names::strip_mcp(name);
        let wanted_tool = wanted.rsplit("__").next().unwrap_or(wanted);
        let Ok(servers) = self.inner.registry.list(&Default::default()) else {
            return vec![];
        };
        let mut scored: Vec<(f64, Value)> = Vec::new();
        for s in servers {
            let Ok(tools) = self.inner.registry.tools(s.server.id) else {
                continue;
            };
            for t in tools {
                let exposed = names::expose(&s.server.name, &t.name);
                if exposed == wanted {
                    continue;
                }
                let score = names::similarity(wanted, &exposed)
                    .max(names::similarity(wanted_tool, &t.name));
                if score >= 0.3 {
                    scored.push((score, json!({"call_as": exposed, "server": s.server.name, "tool": t.name, "description": t.description, "score": (score * 100.0).round() / 100.0})));
                }
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().take(limit).map(|(_, v)| v).collect()
    }

    pub fn children(&self) -> Vec<ChildStatus> {
        let children = lock(&self.inner.children);
        let mut out: Vec<ChildStatus> = children
            .iter()
            .map(|(name, slot)| match slot {
                Slot::Running(c) => {
                    let tools = lock(&c.tools);
                    ChildStatus {
                        name: name.clone(),
                        status: if c.exited.borrow().is_some() {
                            "error"
                        } else {
                            "ready"
                        },
                        transport: c.transport,
                        pid: c.pid,
                        tool_count: tools.len(),
                        tools: tools.iter().map(|t| t.name.to_string()).collect(),
                        stderr_tail: c.stderr.tail(20),
                        last_error: c.exited.borrow().clone(),
                        started_at: c.started_at.clone(),
                        restarts: c.failures,
                    }
                }
                Slot::Crashed {
                    failures,
                    error,
                    tools,
                    stderr,
                    transport,
                    started_at,
                    ..
                } => ChildStatus {
                    name: name.clone(),
                    status: "error",
                    transport: *transport,
                    pid: None,
                    tool_count: tools.len(),
                    tools: tools.iter().map(|t| t.name.to_string()).collect(),
                    stderr_tail: stderr.tail(20),
                    last_error: Some(error.clone()),
                    started_at: started_at.clone(),
                    restarts: *failures,
                },
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// A connected client, for forwarding child requests. `id` identifies the connection.
    pub fn register_client(&self, id: u64, peer: Peer<RoleServer>) {
        let mut clients = lock(&self.inner.clients);
        clients.retain(|(i, p)| *i != id && !p.is_transport_closed());
        clients.push((id, peer));
    }

    pub fn unregister_client(&self, id: u64) {
        lock(&self.inner.clients).retain(|(i, _)| *i != id);
    }

    /// Resources of every running child, their URIs namespaced so reads route back.
    pub async fn list_resources(&self) -> Vec<Resource> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.resources.is_some()) {
            if let Ok(items) = child.peer.list_all_resources().await {
                for mut r in items {
                    r.uri = names::expose_uri(&child.name, &r.uri);
                    out.push(r);
                }
            }
        }
        out
    }

    pub async fn list_resource_templates(&self) -> Vec<ResourceTemplate> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.resources.is_some()) {
            if let Ok(items) = child.peer.list_all_resource_templates().await {
                for mut r in items {
                    r.uri_template = names::expose_uri(&child.name, &r.uri_template);
                    out.push(r);
                }
            }
        }
        out
    }

    pub async fn read_resource(&self, uri: &str) -> Result<ReadResourceResult> {
        let (server, original) =
            names::split_uri(uri).ok_or_else(|| Error::not_found("resource", uri))?;
        let child = self.inner.ready_child(server).await?;
        let mut res = child
            .peer
            .read_resource(ReadResourceRequestParams::new(original))
            .await
            .map_err(|e| Error::Upstream {
                server: server.to_owned(),
                message: e.to_string(),
            })?;
        res.result_type.get_or_insert(ResultType::COMPLETE);
        for c in &mut res.contents {
            match c {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => {
                    *uri = names::expose_uri(server, uri)
                }
                #[allow(unreachable_patterns)]
                _ => {}
            }
        }
        Ok(res)
    }

    pub async fn list_prompts(&self) -> Vec<Prompt> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.prompts.is_some()) {
            if let Ok(items) = child.peer.list_all_prompts().await {
                for mut p in items {
                    p.name = names::expose(&child.name, &p.name);
                    out.push(p);
                }
            }
        }
        out
    }

    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult> {
        let mut target = None;
        for child in self.inner.running_with(|c| c.prompts.is_some()) {
            if let Ok(items) = child.peer.list_all_prompts().await {
                if let Some(p) = items
                    .into_iter()
                    .find(|p| names::expose(&child.name, &p.name) == names::strip_mcp(name))
                {
                    target = Some((child, p.name));
                    break;
                }
            }
        }
        let (child, prompt) = target.ok_or_else(|| Error::not_found("prompt", name))?;
        let mut params = GetPromptRequestParams::new(prompt);
        params.arguments = arguments;
        let mut res = child
            .peer
            .get_prompt(params)
            .await
            .map_err(|e| Error::Upstream {
                server: child.name.clone(),
                message: e.to_string(),
            })?;
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }
}

impl Proxy {
    /// Checks that `name` answers, without changing its active flag or telling clients: a running server must list
    /// its tools within `timeout`; a stopped one is started, listed and stopped again. Returns its tool count.
    pub async fn probe(&self, name: &str, timeout: Duration) -> Result<usize> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        let running = match lock(&self.inner.children).get(name) {
            Some(Slot::Running(c)) if c.exited.borrow().is_none() => Some(c.clone()),
            Some(Slot::Running(c)) => {
                return Err(Error::Upstream {
                    server: name.to_owned(),
                    message: c.exited.borrow().clone().unwrap_or_default(),
                });
            }
            Some(Slot::Crashed { error, .. }) => {
                return Err(Error::Upstream {
                    server: name.to_owned(),
                    message: error.clone(),
                });
            }
            None => None,
        };
        let ms = timeout.as_millis() as u64;
        if let Some(child) = running {
            return match tokio::time::timeout(timeout, child.peer.list_all_tools()).await {
                Ok(Ok(tools)) => Ok(tools.len()),
                Ok(Err(e)) => Err(Error::Upstream {
                    server: name.to_owned(),
                    message: format!("tools/list failed: {e}"),
                }),
                Err(_) => Err(Error::Timeout {
                    server: name.to_owned(),
                    what: "health check (tools/list)",
                    ms,
                }),
            };
        }
        let mut server = self.inner.registry.get(name)?;
        server.activate_timeout_ms = Some(ms.max(1));
        let child = self.inner.start(&server, 0).await?;
        let n = lock(&child.tools).len();
        child.stop().await;
        Ok(n)
    }
}

impl Inner {
    fn lock_for(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks)
            .entry(name.to_owned())
            .or_default()
            .clone()
    }

    fn running_with(&self, pred: impl Fn(&ServerCapabilities) -> bool) -> Vec<Arc<Child>> {
        let mut v: Vec<Arc<Child>> = lock(&self.children)
            .values()
            .filter_map(|s| {
                if let Slot::Running(c) = s {
                    Some(c.clone())
                } else {
                    None
                }
            })
            .filter(|c| c.exited.borrow().is_none() && pred(&c.capabilities))
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The running child for `server`, restarting a crashed one whose back-off has passed.
    async fn ready_child(self: &Arc<Self>, server: &str) -> Result<Arc<Child>> {
        let crashed = match lock(&self.children).get(server) {
            Some(Slot::Running(c)) => return Ok(c.clone()),
            Some(Slot::Crashed {
                failures,
                retry_at,
                error,
                ..
            }) => Some((*failures, *retry_at, error.clone())),
            None => None,
        };
        let Some((failures, retry_at, error)) = crashed else {
            return Err(Error::Unavailable(format!(
                "server `{server}` is not active; activate it first (registry action `activate`)"
            )));
        };
        let now = Instant::now();
        if now < retry_at {
            let wait = retry_at - now;
            return Err(Error::Unavailable(format!(
                "server `{server}` crashed ({error}); it restarts on the next call after {} ms",
                wait.as_millis()
            )));
        }
        let guard = self.lock_for(server);
        let _held = guard.lock().await;
        // Someone else may have restarted it while we waited for the lock.
        if let Some(Slot::Running(c)) = lock(&self.children).get(server) {
            return Ok(c.clone());
        }
        let srv = self.registry.get(server)?;
        // Boxed: a restart is rare, and its large future would otherwise be part of every call's.
        match Box::pin(self.start(&srv, failures)).await {
            Ok(child) => {
                let tools = child.tool_infos();
                self.registry.save_tools(srv.id, &tools)?;
                self.registry.set_active(srv.id, true, None)?;
                lock(&self.children).insert(server.to_owned(), Slot::Running(child.clone()));
                self.events.emit(Event::ToolsChanged {
                    name: server.to_owned(),
                });
                Ok(child)
            }
            Err(e) => {
                self.record_crash(
                    server,
                    srv.id,
                    failures + 1,
                    e.to_string(),
                    Vec::new(),
                    Arc::default(),
                    srv.transport,
                    String::new(),
                );
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record_crash(
        &self,
        server: &str,
        server_id: i64,
        failures: u32,
        error: String,
        tools: Vec<Tool>,
        stderr: Arc<StderrRing>,
        transport: Transport,
        started_at: String,
    ) {
        let mut children = lock(&self.children);
        let tools = match children.get(server) {
            Some(Slot::Crashed { tools: old, .. }) if tools.is_empty() => old.clone(),
            _ => tools,
        };
        if failures >= MAX_FAILURES {
            children.remove(server);
            drop(children);
            let msg =
                format!("{error} (gave up after {failures} failures; activate it again to retry)");
            let _ = self.registry.set_active(server_id, false, Some(&msg));
            self.events.emit(Event::ServerError {
                name: server.to_owned(),
                error: msg,
            });
            return;
        }
        let backoff = Duration::from_millis(250u64 << failures.saturating_sub(1).min(6));
        children.insert(
            server.to_owned(),
            Slot::Crashed {
                server_id,
                failures,
                retry_at: Instant::now() + backoff,
                error: error.clone(),
                tools,
                stderr,
                transport,
                started_at,
            },
        );
        drop(children);
        let _ = self.registry.set_active(server_id, true, Some(&error));
        self.events.emit(Event::ServerError {
            name: server.to_owned(),
            error,
        });
    }

    /// Connects to a server and lists its tools, within the activation timeout.
    async fn start(self: &Arc<Self>, server: &Server, failures: u32) -> Result<Arc<Child>> {
        let timeout = server
            .activate_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.timeouts.activate);
        let call_timeout = server
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.timeouts.call);
        let secrets = self.secrets.env_for(server.id)?;
        let handler = ChildClient {
            proxy: Arc::downgrade(self),
            server: server.name.clone(),
        };
        let stderr = Arc::new(StderrRing::default());
        let (exit_tx, exit_rx) = watch::channel(None);
        let started_at = crate::calllog::rfc3339(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        );
        let upstream = |message: String| Error::Upstream {
            server: server.name.clone(),
            message,
        };

        let (service, pid, pgid, lifeline) = match server.transport {
            Transport::Stdio => {
                let command = server.command.as_deref().ok_or_else(|| {
                    Error::invalid(
                        "command",
                        format!("server `{}` has no command", server.name),
                    )
                })?;
                let mut env = server.env.clone();
                env.extend(secrets);
                let spawned =
                    spawn::spawn(&self.guard_exe, command, &server.args, &env, stderr.clone())?;
                let pid = spawned.child.id();
                let pgid = spawned.pgid;
                let mut child_proc = spawned.child;
                let weak = Arc::downgrade(self);
                let name = server.name.clone();
                let ring = stderr.clone();
                tokio::spawn(async move {
                    let cause = match child_proc.wait().await {
                        Ok(status) => describe_exit(status),
                        Err(e) => format!("wait failed: {e}"),
                    };
                    spawn::kill_group(pgid);
                    let _ = exit_tx.send(Some(cause.clone()));
                    if let Some(inner) = weak.upgrade() {
                        inner.on_child_exit(&name, &cause, &ring);
                    }
                });
                let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
                    spawned.stdout,
                    spawned.stdin,
                )
                .with_max_line_length(64 * 1024 * 1024);
                let mut exit_watch = exit_rx.clone();
                let connect = async {
                    tokio::select! {
                        r = handler.serve(transport) => r.map_err(|e| upstream(format!("initialize failed: {e}"))),
                        _ = exit_watch.wait_for(|c| c.is_some()) => Err(upstream(String::new())),
                    }
                };
                let service = match tokio::time::timeout(timeout, connect).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        spawn::kill_group(pgid);
                        // Give the exit watcher a moment to report why the process ended.
                        let mut w = exit_rx.clone();
                        let _ = tokio::time::timeout(
                            Duration::from_millis(500),
                            w.wait_for(|c| c.is_some()),
                        )
                        .await;
                        let cause = exit_rx.borrow().clone();
                        return Err(failure(server, e, cause, &stderr));
                    }
                    Err(_) => {
                        spawn::kill_group(pgid);
                        return Err(with_stderr(
                            Error::Timeout {
                                server: server.name.clone(),
                                what: "activation (initialize)",
                                ms: timeout.as_millis() as u64,
                            },
                            &stderr,
                        ));
                    }
                };
                (service, pid, pgid, spawned.lifeline)
            }
            Transport::StreamableHttp => {
                let url = substitute(
                    server.url.as_deref().unwrap_or_default(),
                    &secrets,
                    &server.env,
                );
                let mut headers = HashMap::new();
                for (k, v) in &server.headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| Error::invalid("headers", e.to_string()))?;
                    let value = http::HeaderValue::try_from(substitute(v, &secrets, &server.env))
                        .map_err(|e| Error::invalid("headers", e.to_string()))?;
                    headers.insert(name, value);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
                let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                    reqwest::Client::new(),
                    config,
                );
                let service = tokio::time::timeout(timeout, handler.serve(transport))
                    .await
                    .map_err(|_| Error::Timeout {
                        server: server.name.clone(),
                        what: "activation (initialize)",
                        ms: timeout.as_millis() as u64,
                    })?
                    .map_err(|e| upstream(format!("initialize failed: {e}")))?;
                (service, None, 0, None)
            }
            Transport::Sse => {
                let url = substitute(
                    server.url.as_deref().unwrap_or_default(),
                    &secrets,
                    &server.env,
                );
                let headers: HashMap<String, String> = server
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), substitute(v, &secrets, &server.env)))
                    .collect();
                let (sink, stream) =
                    sse::connect(&url, &headers, timeout)
                        .await
                        .map_err(|e| match e {
                            Error::Upstream { message, .. } => upstream(message),
                            other => other,
                        })?;
                let service = tokio::time::timeout(timeout, handler.serve((sink, stream)))
                    .await
                    .map_err(|_| Error::Timeout {
                        server: server.name.clone(),
                        what: "activation (initialize)",
                        ms: timeout.as_millis() as u64,
                    })?
                    .map_err(|e| upstream(format!("initialize failed: {e}")))?;
                (service, None, 0, None)
            }
        };
        let peer = service.peer().clone();
        let capabilities = peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let tools = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                spawn::kill_group(pgid);
                return Err(with_stderr(
                    upstream(format!("tools/list failed: {e}")),
                    &stderr,
                ));
            }
            Err(_) => {
                spawn::kill_group(pgid);
                return Err(with_stderr(
                    Error::Timeout {
                        server: server.name.clone(),
                        what: "tools/list",
                        ms: timeout.as_millis() as u64,
                    },
                    &stderr,
                ));
            }
        };
        Ok(Arc::new(Child {
            name: server.name.clone(),
            server_id: server.id,
            transport: server.transport,
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
            tools: Mutex::new(tools),
            capabilities,
            pid,
            pgid,
            lifeline: Mutex::new(lifeline),
            stderr,
            exited: exit_rx,
            stopping: AtomicBool::new(false),
            started_at,
            failures,
            call_timeout,
        }))
    }

    /// The child's process ended. An exit we did not ask for is a crash: recorded, announced, restarted on next use.
    fn on_child_exit(&self, name: &str, cause: &str, stderr: &Arc<StderrRing>) {
        let child = match lock(&self.children).get(name) {
            // The ring is unique to one start: a watcher of an earlier run or of a health probe is not this child's.
            Some(Slot::Running(c)) if Arc::ptr_eq(&c.stderr, stderr) => c.clone(),
            _ => return,
        };
        if child.stopping.load(Ordering::SeqCst) {
            return;
        }
        let tail = stderr.tail(5).join(" | ");
        let error = if tail.is_empty() {
            format!("exited: {cause}")
        } else {
            format!("exited: {cause}; stderr: {tail}")
        };
        tracing::warn!(server = name, %error, "child server crashed");
        let tools = lock(&child.tools).clone();
        self.record_crash(
            name,
            child.server_id,
            child.failures + 1,
            error,
            tools,
            stderr.clone(),
            child.transport,
            child.started_at.clone(),
        );
    }

    /// Re-lists a child's tools after it said they changed, stores them and tells clients.
    async fn refresh_tools(&self, name: &str) {
        let child = match lock(&self.children).get(name) {
            Some(Slot::Running(c)) => c.clone(),
            _ => return,
        };
        match child.peer.list_all_tools().await {
            Ok(tools) => {
                *lock(&child.tools) = tools;
                let _ = self
                    .registry
                    .save_tools(child.server_id, &child.tool_infos());
                self.events.emit(Event::ToolsChanged {
                    name: name.to_owned(),
                });
            }
            Err(e) => tracing::warn!(server = name, error = %e, "re-listing tools failed"),
        }
    }

    async fn call(
        &self,
        child: &Arc<Child>,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: &Caller,
    ) -> Result<CallToolResult> {
        let upstream = |message: String| Error::Upstream {
            server: child.name.clone(),
            message,
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = args;
        // rmcp assigns the outgoing progress token itself; we learn it from the handle and route by it.
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match child
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(h) => h,
            Err(e) => return Err(child.explain_failure(e.to_string()).await),
        };
        let token = token_key(&handle.progress_token);
        let request_id = handle.id.clone();
        let (reset_tx, mut reset_rx) = tokio::sync::mpsc::unbounded_channel();
        let route = ProgressRoute {
            caller: caller.peer.clone().zip(caller.progress_token.clone()),
            reset: reset_tx,
        };
        lock(&self.progress).insert(token.clone(), route);
        if let Some(peer) = &caller.peer {
            let mut callers = lock(&self.callers);
            match callers.get_mut(&child.name) {
                Some(v) => v.push(peer.clone()),
                None => {
                    callers.insert(child.name.clone(), vec![peer.clone()]);
                }
            }
        }
        let _cleanup = scopeguard(|| {
            lock(&self.progress).remove(&token);
            if caller.peer.is_some() {
                if let Some(v) = lock(&self.callers).get_mut(&child.name) {
                    v.pop();
                }
            }
        });
        let response = handle.await_response();
        tokio::pin!(response);
        let mut exited = child.exited.clone();
        let cancelled = caller.cancel.clone().unwrap_or_default();
        let timeout = child.call_timeout;
        let mut deadline = tokio::time::Instant::now() + timeout;
        let cancel_child = |reason: &str| {
            let peer = child.peer.clone();
            let param =
                CancelledNotificationParam::new(Some(request_id.clone()), Some(reason.to_owned()));
            tokio::spawn(async move { peer.notify_cancelled(param).await });
        };
        let res = loop {
            tokio::select! {
                res = &mut response => break res,
                Some(()) = reset_rx.recv() => deadline = tokio::time::Instant::now() + timeout,
                _ = tokio::time::sleep_until(deadline) => {
                    cancel_child("timed out in agent-discover");
                    return Err(Error::Timeout { server: child.name.clone(), what: "tool call", ms: timeout.as_millis() as u64 });
                }
                Ok(_) = exited.wait_for(|c| c.is_some()) => {
                    let cause = child.exited.borrow().clone().unwrap_or_default();
                    return Err(with_stderr(upstream(format!("exited during the call: {cause}")), &child.stderr));
                }
                _ = cancelled.cancelled() => {
                    cancel_child("cancelled by the client");
                    return Err(upstream("cancelled by the client".into()));
                }
            }
        };
        match res {
            // A legacy child's result has no resultType; a 2026-07-28 client requires one.
            Ok(ServerResult::CallToolResult(mut r)) => {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(r)
            }
            Ok(_) => Err(upstream("the server answered with input requests or a task, which agent-discover does not relay yet".into())),
            Err(e) => Err(child.explain_failure(e.to_string()).await),
        }
    }

    async fn route_progress(&self, params: ProgressNotificationParam) {
        let key = token_key(&params.progress_token);
        let target = {
            let routes = lock(&self.progress);
            let Some(route) = routes.get(&key) else {
                return;
            };
            let _ = route.reset.send(());
            route.caller.clone()
        };
        if let Some((peer, token)) = target {
            let mut forwarded = params;
            forwarded.progress_token = token;
            let _ = peer.notify_progress(forwarded).await;
        }
    }

    /// The client to forward a child's request to: the one calling that child now, else the newest connected one,
    /// provided it declared the capability.
    fn client_for(
        &self,
        server: &str,
        has: impl Fn(&ClientCapabilities) -> bool,
    ) -> Option<Peer<RoleServer>> {
        let declared = |p: &Peer<RoleServer>| p.peer_info().is_some_and(|i| has(&i.capabilities));
        if let Some(p) = lock(&self.callers)
            .get(server)
            .and_then(|v| v.last().cloned())
        {
            return declared(&p).then_some(p);
        }
        lock(&self.clients)
            .iter()
            .rev()
            .map(|(_, p)| p.clone())
            .find(|p| !p.is_transport_closed() && declared(p))
    }
}

impl Child {
    fn tool_infos(&self) -> Vec<ToolInfo> {
        lock(&self.tools)
            .iter()
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect()
    }

    /// A transport error is often the first sign of an exit: wait briefly for the exit watcher so the error names
    /// the real cause (exit code, stderr) instead of "transport closed".
    async fn explain_failure(&self, transport_error: String) -> Error {
        if self.pid.is_some() {
            let mut exited = self.exited.clone();
            let _ = tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|c| c.is_some()))
                .await;
        }
        let cause = self.exited.borrow().clone();
        match cause {
            Some(c) => with_stderr(
                Error::Upstream {
                    server: self.name.clone(),
                    message: format!("exited during the call: {c}"),
                },
                &self.stderr,
            ),
            None => Error::Upstream {
                server: self.name.clone(),
                message: transport_error,
            },
        }
    }

    /// Ends the connection, then the process group: close stdin, give the child a moment, then SIGKILL the group.
    async fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(service) = self.service.lock().await.take() {
            let _ = tokio::time::timeout(STOP_GRACE, service.cancel()).await;
        }
        if self.pid.is_some() {
            let mut exited = self.exited.clone();
            let _ = tokio::time::timeout(STOP_GRACE, exited.wait_for(|c| c.is_some())).await;
            spawn::kill_group(self.pgid);
        }
        lock(&self.lifeline).take();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct ScopeGuard<F: FnMut()>(F);
impl<F: FnMut()> Drop for ScopeGuard<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}
fn scopeguard<F: FnMut()>(f: F) -> ScopeGuard<F> {
    ScopeGuard(f)
}

fn token_key(token: &ProgressToken) -> String {
    match &token.0 {
        NumberOrString::String(s) => format!("s:{s}"),
        NumberOrString::Number(n) => format!("n:{n}"),
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match status.code() {
        Some(127) => "exit code 127 (command not found)".into(),
        Some(c) => format!("exit code {c}"),
        None => "exited".into(),
    }
}

fn with_stderr(err: Error, stderr: &StderrRing) -> Error {
    let tail = stderr.tail(10);
    if tail.is_empty() {
        return err;
    }
    let joined = tail.join("\n");
    match err {
        Error::Upstream { server, message } => Error::Upstream {
            server,
            message: format!("{message}; last stderr lines:\n{joined}"),
        },
        Error::Timeout { server, what, ms } => Error::Upstream {
            server,
            message: format!("{what} timed out after {ms} ms; last stderr lines:\n{joined}"),
        },
        other => other,
    }
}

fn failure(server: &Server, err: Error, exit: Option<String>, stderr: &StderrRing) -> Error {
    let err = match (exit, err) {
        (Some(cause), _) => Error::Upstream {
            server: server.name.clone(),
            message: format!("exited before completing initialize ({cause})"),
        },
        (None, e) => e,
    };
    with_stderr(err, stderr)
}

/// Replaces `${NAME}` in a URL or header with a secret or env value of the server.
fn substitute(
    s: &str,
    secrets: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
) -> String {
    let mut out = s.to_owned();
    for (k, v) in env.iter().chain(secrets.iter()) {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}

/// Marks an error result's text for agents (`isError: true` with a message).
pub fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

#[doc(hidden)]
pub fn _assert_send() {
    fn is_send<T: Send + Sync>() {}
    is_send::<Proxy>();
    let _: Option<Weak<Inner>> = None;
}
