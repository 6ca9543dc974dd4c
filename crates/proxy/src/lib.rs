//! The proxy: owns every child MCP server (stdio processes and remote connections), activates and deactivates them,
//! forwards calls with timeouts, aggregates their tools, resources and prompts, and recovers from crashes.
//!
//! Every child has exactly one owner: the `Slot` in `Inner::children`. Its process group is killed when the slot is
//! stopped, when the proxy shuts down, and (through the child guard's lifeline) when this process dies.

mod aggregate;
mod call;
mod client;
pub mod coalesce;
mod forward;
pub mod guard;
mod held;
mod metrics;
pub mod names;
mod recovery;
pub mod relay;
mod single;
pub mod spawn;
mod sse;
mod start;
mod tasks;
mod typed;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, ProgressToken, ServerCapabilities, Tool,
};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, RoleServer};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use ad_core::error::{Error, Result};
use ad_core::events::{Event, EventBus};
use ad_core::model::{ServerStatus, ToolInfo, Transport};
use ad_registry::calllog::CallLog;
use ad_registry::config::Timeouts;
use ad_registry::registry::Registry;
use ad_registry::secrets::Secrets;
use ad_store::lifecycle::StatusChange;
use call::ProgressRoute;
use client::ChildClient;
pub use single::ServerError;
pub use spawn::StderrRing;

/// Consecutive crashes after which a server stays down until activated again.
pub const MAX_FAILURES: u32 = 5;
const STOP_GRACE: Duration = Duration::from_millis(1500);
/// How long a replica waits before trying again to start a server it follows (see [`Proxy::follow`]) that failed.
pub const FOLLOW_BACKOFF: Duration = Duration::from_secs(60);

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
    /// The protocol revision the running child speaks (`2026-07-28` when it answered `server/discover`, else the
    /// version `initialize` negotiated); absent while it is not running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// Told about every finished proxied call: server, tool, latency, success.
pub type CallObserver = Arc<dyn Fn(&str, &str, Duration, bool) + Send + Sync>;

/// Who is calling: the connected client's peer (to route progress and child requests back) and its progress token.
#[derive(Clone, Default)]
pub struct Caller {
    pub peer: Option<Peer<RoleServer>>,
    pub progress_token: Option<ProgressToken>,
    pub cancel: Option<tokio_util::sync::CancellationToken>,
    /// The protocol revision of the calling request (2026-07-28 clients take input-required results themselves).
    pub protocol: Option<rmcp::model::ProtocolVersion>,
    /// What the calling client declared it can do (passed on to 2026-07-28 children in the request's `_meta`).
    pub capabilities: Option<rmcp::model::ClientCapabilities>,
    /// A retry after an input-required result (SEP-2322): the client's answers and the echoed state, for the child.
    pub input_responses: Option<rmcp::model::InputResponses>,
    pub request_state: Option<String>,
    /// The request's `_meta` logLevel (2026-07-28, SEP-2575): passed on to 2026-07-28 children, which log nothing
    /// for a request without one.
    #[allow(deprecated)]
    pub log_level: Option<rmcp::model::LoggingLevel>,
    /// The caller is on a per-server endpoint: the child's log messages reach it with their own `logger` (the
    /// aggregated front names the server in it).
    pub scoped: bool,
    /// A legacy child's question (sampling, elicitation, roots) during this call is put to this caller only: asked of
    /// its client if it declared the capability, else the call ends with [`Error::InputRequired`]; never forwarded
    /// to another client. Set for the registry's `proxy_call`; implied for a caller without a client (REST, CLI).
    pub questions_to_caller: bool,
}

impl Caller {
    /// The client making one `tools/call`: its peer, its progress token (the request's `_meta` first, then the
    /// context's) and the request's cancellation.
    pub fn of_call(
        request: &rmcp::model::CallToolRequestParams,
        context: &rmcp::service::RequestContext<RoleServer>,
    ) -> Caller {
        let progress_token = request
            .meta
            .as_ref()
            .and_then(|m| m.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        Caller {
            peer: Some(context.peer.clone()),
            progress_token,
            cancel: Some(context.ct.clone()),
            protocol: context.protocol_version(),
            capabilities: context.client_capabilities(),
            input_responses: request.input_responses.clone(),
            request_state: request.request_state.clone(),
            log_level: request
                .meta
                .as_ref()
                .and_then(|m| m.log_level())
                .or_else(|| context.meta.log_level()),
            scoped: false,
            questions_to_caller: false,
        }
    }

    /// The client making a `prompts/get` or `resources/read`: as [`Caller::of_call`], with that request's retry
    /// fields (SEP-2322).
    pub fn of_request(
        context: &rmcp::service::RequestContext<RoleServer>,
        input_responses: Option<rmcp::model::InputResponses>,
        request_state: Option<String>,
    ) -> Caller {
        Caller {
            peer: Some(context.peer.clone()),
            progress_token: context.meta.get_progress_token(),
            cancel: Some(context.ct.clone()),
            protocol: context.protocol_version(),
            capabilities: context.client_capabilities(),
            input_responses,
            request_state,
            log_level: context.meta.log_level(),
            scoped: false,
            questions_to_caller: false,
        }
    }

    /// Whether a 2026-07-28 caller's request to `child`, a legacy child, has the child's requests minted into
    /// input-required results (`held.rs`).
    fn mints_for(&self, child: &Child) -> bool {
        self.takes_input_required() && child.protocol.has_initialize()
    }

    /// Whether a call of `child` runs as an exchange of `held.rs`, where the child's questions go to this caller
    /// alone: minted into input-required results for a 2026-07-28 caller, asked of a legacy caller's client that
    /// declared the capability, else refused with [`Error::InputRequired`].
    fn holds_questions(&self, child: &Child) -> bool {
        child.protocol.has_initialize()
            && (self.takes_input_required() || self.questions_to_caller || self.peer.is_none())
    }

    /// Whether the caller speaks 2026-07-28 or later, and so takes input-required results itself.
    pub fn takes_input_required(&self) -> bool {
        self.protocol.as_ref().is_some_and(|v| !v.has_initialize())
    }
}

/// A 2026-07-28 request that asked for log messages (`_meta` logLevel) while it waits on a child: it gets the
/// child's messages at or above its level on its own stream.
#[allow(deprecated)]
struct LogCaller {
    /// Unique in this process, to remove it when the request ends.
    id: u64,
    peer: Peer<RoleServer>,
    level: rmcp::model::LoggingLevel,
    /// On a per-server endpoint: `logger` as the child sent it.
    scoped: bool,
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
    oauth: ad_oauth::OAuth,
    events: EventBus,
    calllog: Arc<CallLog>,
    timeouts: Timeouts,
    guard_exe: PathBuf,
    children: Mutex<HashMap<String, Slot>>,
    /// Serialises activate/deactivate/restart of one server.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// When following an active flag last failed here, by server (see [`Proxy::follow`]).
    follow_failures: Mutex<HashMap<String, Instant>>,
    progress: Mutex<HashMap<ProgressToken, ProgressRoute>>,
    /// Connected MCP clients (legacy sessions), newest last, for forwarding child requests.
    clients: Mutex<Vec<(u64, Peer<RoleServer>)>>,
    /// Which client is calling each server right now (most recent last).
    callers: Mutex<HashMap<String, Vec<Peer<RoleServer>>>>,
    /// 2026-07-28 callers that set a logLevel on their request, per server called: they get its log messages at or
    /// above that level while the call runs (they have no session to be pushed to otherwise).
    log_callers: Mutex<HashMap<String, Vec<LogCaller>>>,
    /// Ids of [`LogCaller`]s.
    log_caller_ids: std::sync::atomic::AtomicU64,
    /// How many children's log messages are being forwarded now (`forward::flush_logs`).
    logs_in_flight: watch::Sender<usize>,
    metrics: Arc<metrics::CallMetrics>,
    observer: Mutex<Option<CallObserver>>,
    /// The log level clients last set (`logging/setLevel`), applied to every child.
    #[allow(deprecated)]
    log_level: Mutex<Option<rmcp::model::LoggingLevel>>,
    /// Clients' resource subscriptions, by exposed URI.
    subscriptions: Mutex<Vec<forward::Subscription>>,
    /// The `subscriptions/listen` streams that stand for `resources/subscribe` with 2026-07-28 children, by exposed URI.
    resource_listens: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// Clients of a per-server endpoint, by client id: the one server they see.
    scopes: Mutex<HashMap<u64, String>>,
    /// Legacy children's requests held for 2026-07-28 clients as input-required results (`held.rs`).
    held: held::Held,
    /// The sessions that created children's tasks, by (server, the child's task id): where `notifications/tasks` go.
    task_owners: Mutex<tasks::Owners>,
    /// Tool calls relayed by the fast lane (`relay.rs`), counted by each child's lane.
    fast_calls: Arc<std::sync::atomic::AtomicU64>,
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
    /// The protocol revision negotiated with the child (its era).
    protocol: rmcp::model::ProtocolVersion,
    /// The server's OAuth session (Streamable HTTP servers without a configured Authorization header).
    auth: Option<Arc<ad_oauth::Session>>,
    /// Progress notifications read from a stdio child, per token (`typed.rs`); empty for other transports.
    progress_seen: typed::ProgressSeen,
    /// The level agent-discover last set on a legacy child with `logging/setLevel` (the lowest any client wants;
    /// each client is then sent what it asked for, `forward.rs`); `None` until one is set.
    #[allow(deprecated)]
    log_floor: Mutex<Option<rmcp::model::LoggingLevel>>,
    /// The fast lane to a stdio child (`relay.rs`); `None` for other transports.
    lane: Option<Arc<relay::ChildLane>>,
}

impl Proxy {
    pub fn new(
        registry: Registry,
        secrets: Secrets,
        oauth: ad_oauth::OAuth,
        events: EventBus,
        calllog: Arc<CallLog>,
        timeouts: Timeouts,
        guard_exe: PathBuf,
    ) -> Proxy {
        let inner = Arc::new(Inner {
            registry: registry.clone(),
            secrets,
            oauth,
            events,
            calllog,
            timeouts,
            guard_exe,
            children: Mutex::default(),
            locks: Mutex::default(),
            follow_failures: Mutex::default(),
            progress: Mutex::default(),
            clients: Mutex::default(),
            callers: Mutex::default(),
            log_callers: Mutex::default(),
            log_caller_ids: std::sync::atomic::AtomicU64::new(1),
            logs_in_flight: watch::Sender::new(0),
            metrics: metrics::CallMetrics::start(registry.store().clone()),
            observer: Mutex::new(None),
            log_level: Mutex::new(None),
            subscriptions: Mutex::default(),
            resource_listens: Mutex::default(),
            scopes: Mutex::default(),
            held: held::Held::new(),
            task_owners: Mutex::default(),
            fast_calls: Arc::default(),
        });
        Proxy { inner }
    }

    /// Registers a hook called after every proxied call (server, tool, latency, ok): the HTTP layer's histograms.
    pub fn set_call_observer(&self, f: CallObserver) {
        *lock(&self.inner.observer) = Some(f);
    }

    pub fn is_active(&self, name: &str) -> bool {
        lock(&self.inner.children).contains_key(name)
    }

    /// The tool names a running child exposes now (after its filter and pins); `None` when it does not run here.
    pub fn exposed_tool_names(&self, name: &str) -> Option<Vec<String>> {
        match lock(&self.inner.children).get(name)? {
            Slot::Running(c) => Some(lock(&c.tools).iter().map(|t| t.name.to_string()).collect()),
            Slot::Crashed { .. } => None,
        }
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
        if let Some(Slot::Running(child)) = lock(&self.inner.children).get(name)
            && child.exited.borrow().is_none()
        {
            return Ok(Activation {
                name: name.to_owned(),
                status: "already_active",
                tools: child.tool_infos(),
            });
        }
        self.start_locked(name, false).await
    }

    /// Starts `name` here because the registry flags it active (replicas that follow the shared active flags, see
    /// team mode, `Config::team`): like [`Proxy::activate`], except that a failure here is recorded without clearing the
    /// flag, which says what the team wants running, not whether this replica managed it. After a failure the server
    /// is not tried again here for [`FOLLOW_BACKOFF`]. `None` when it already runs here or is backing off.
    pub async fn follow(&self, name: &str) -> Option<Result<Activation>> {
        if lock(&self.inner.follow_failures)
            .get(name)
            .is_some_and(|at| at.elapsed() < FOLLOW_BACKOFF)
        {
            return None;
        }
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        if lock(&self.inner.children).contains_key(name) {
            return None;
        }
        let r = self.start_locked(name, true).await;
        let mut failures = lock(&self.inner.follow_failures);
        match &r {
            Ok(_) => failures.remove(name),
            Err(_) => failures.insert(name.to_owned(), Instant::now()),
        };
        Some(r)
    }

    /// Restarts `name` if this process runs it (its stored configuration changed): the old child is stopped and a new
    /// one started, the entry staying in place (`connecting`, then `ready` or `error`). `None` when it does not run here.
    pub async fn restart(&self, name: &str) -> Result<Option<Activation>> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        let slot = lock(&self.inner.children).remove(name);
        let Some(slot) = slot else {
            return Ok(None);
        };
        if let Slot::Running(child) = slot {
            child.stop().await;
        }
        self.start_locked(name, false).await.map(Some)
    }

    /// Starts `name`; the caller holds its lock and no slot exists. `keep_flag`: a failure leaves the active flag.
    async fn start_locked(&self, name: &str, keep_flag: bool) -> Result<Activation> {
        let server = self.inner.registry.get(name)?;
        if !server.installed {
            return Err(Error::Invalid {
                what: "name",
                reason: format!(
                    "`{name}` is a catalog entry (introspected, not installed); install it first (registry install)"
                ),
            });
        }
        if server.status == ServerStatus::Disabled {
            return Err(Error::Unavailable(format!(
                "server `{name}` is disabled; enable it first (registry action `enable`)"
            )));
        }
        self.inner
            .set_status(name, server.id, ServerStatus::Connecting, None, None);
        let child = match self.inner.start(&server, 0).await {
            Ok(c) => c,
            Err(e) => {
                self.inner
                    .record_start_failure(name, server.id, &e, keep_flag);
                return Err(e);
            }
        };
        let tools = child.tool_infos();
        // The tools and `ready` in one commit: no snapshot shows one without the other.
        self.inner.registry.store().set_tools_and_status(
            server.id,
            &tools,
            &StatusChange {
                status: ServerStatus::Ready,
                // A replica following the flag leaves it as it is now: a deactivation made elsewhere while this start
                // ran must not be undone by it.
                active: if keep_flag { None } else { Some(true) },
                error: None,
                auth_url: None,
            },
        )?;
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
        self.deactivate_to(name, ServerStatus::Stopped).await
    }

    /// [`Proxy::deactivate`] ending in `status` (`stopped` or `disabled`): one status change, no `stopped` in between.
    pub async fn deactivate_to(&self, name: &str, status: ServerStatus) -> Result<bool> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        let slot = lock(&self.inner.children).remove(name);
        let Some(slot) = slot else {
            if let Ok(server) = self.inner.registry.get(name)
                && (server.active || server.status != status)
            {
                self.inner.registry.store().set_status(
                    server.id,
                    &StatusChange {
                        status,
                        active: Some(false),
                        error: None,
                        auth_url: None,
                    },
                )?;
                self.inner.events.emit(Event::StatusChanged {
                    name: name.to_owned(),
                    status,
                });
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
        let _ = self.inner.registry.store().set_status(
            server_id,
            &StatusChange {
                status,
                active: Some(false),
                error: None,
                auth_url: None,
            },
        );
        self.inner.events.emit(Event::ServerDeactivated {
            name: name.to_owned(),
        });
        Ok(true)
    }

    /// Stops every child (agent-discover is shutting down). The `active` flags stay, so the next start restores them.
    pub async fn shutdown(&self) {
        // Calls waiting for the shared call log are written before the process ends.
        let calllog = self.inner.calllog.clone();
        let _ = tokio::task::spawn_blocking(move || calllog.flush()).await;
        self.flush_metrics().await;
        let slots: Vec<Slot> = lock(&self.inner.children).drain().map(|(_, s)| s).collect();
        // Nothing runs them any more; the active flags stay, so the next start restores them.
        for slot in &slots {
            let id = match slot {
                Slot::Running(c) => c.server_id,
                Slot::Crashed { server_id, .. } => *server_id,
            };
            let _ = self.inner.registry.store().set_status(
                id,
                &StatusChange {
                    status: ServerStatus::Stopped,
                    active: None,
                    error: None,
                    auth_url: None,
                },
            );
        }
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
    /// has its flag cleared and its error recorded, unless `team` (replicas of one registry: the flag is the team's,
    /// see [`Proxy::follow`]). Returns at once.
    pub fn restore_in_background(&self, team: bool) {
        let proxy = self.clone();
        tokio::spawn(async move {
            let servers = match proxy.inner.registry.store().servers_to_restore() {
                Ok(s) => s,
                Err(e) => return tracing::warn!(error = %e, "cannot read servers to restore"),
            };
            let starts = servers.into_iter().map(|s| {
                let proxy = proxy.clone();
                async move {
                    if team {
                        if let Some(Err(e)) = proxy.follow(&s.name).await {
                            tracing::warn!(server = %s.name, error = %e, "could not start an active server; trying again later");
                        }
                    } else if let Err(e) = proxy.activate(&s.name).await {
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
                expose_app_resource(name, &mut t);
                out.push(t);
            }
        }
        out
    }

    /// [`Proxy::resolve`] among running children only (no registry lookup).
    pub fn resolve_running(&self, name: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        if let Some((server, tool)) = names::split(name, children.keys().map(String::as_str))
            && children[server].has_tool(tool)
        {
            return Some((server.to_owned(), tool.to_owned()));
        }
        let wanted = names::strip_mcp(name);
        children.iter().find_map(|(server, slot)| {
            slot.find_tool(|t| names::expose(server, t) == wanted)
                .map(|tool| (server.clone(), tool))
        })
    }

    /// Resolves an exposed or qualified tool name (`server__tool`, `mcp__server__tool`) to (server, tool).
    pub fn resolve(&self, name: &str) -> Option<(String, String)> {
        let children = lock(&self.inner.children);
        // The usual case, on every proxied call: `server__tool` with the tool's own name, no allocation.
        if let Some((server, tool)) = names::split(name, children.keys().map(String::as_str))
            && children[server].has_tool(tool)
        {
            return Some((server.to_owned(), tool.to_owned()));
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
        match self.call_tool_response(server, tool, args, caller).await? {
            CallToolResponse::Complete(r) => Ok(r),
            _ => Err(Error::InputRequired {
                server: server.to_owned(),
                what: "input".into(),
            }),
        }
    }

    /// Calls a tool of a running (or restartable) server, for an MCP client: an input-required result of a
    /// 2026-07-28 child is passed on to a 2026-07-28 caller as it is (its `requestState` untouched).
    pub async fn call_tool_response(
        &self,
        server: &str,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResponse> {
        let started = Instant::now();
        let child = match self.inner.ready_child(server).await {
            Ok(c) => c,
            // Not running because it waits for an OAuth authorization: say where to give it.
            Err(e) => {
                let waiting = self
                    .inner
                    .registry
                    .get(server)
                    .ok()
                    .and_then(|s| self.inner.oauth.auth_url(s.id));
                return Err(match waiting {
                    Some(auth_url) => Error::AuthRequired {
                        server: server.to_owned(),
                        auth_url,
                    },
                    None => e,
                });
            }
        };
        if !lock(&child.tools).iter().any(|t| t.name == tool) {
            self.tool_missing(&child, tool).await?;
        }
        let mut res = if caller.holds_questions(&child) {
            // A legacy child asks the client with requests of its own: minted into input-required results for a
            // 2026-07-28 caller, or put to this caller alone (`held.rs`).
            self.call_held(&child, tool, args.clone(), &caller).await
        } else {
            self.inner.call(&child, tool, args.clone(), &caller).await
        };
        if let (Err(_), Some(session)) = (&res, &child.auth)
            && let Err(e) = res
        {
            // A 401 (the token is gone) or 403 insufficient_scope: start the authorization, answer with its URL.
            let server = self.inner.registry.get_by_id(child.server_id)?;
            res = Err(self.inner.auth_failure(&server, Some(session), e).await);
        }
        let latency = started.elapsed();
        self.inner
            .account(server, child.server_id, tool, args, latency, &res);
        res
    }

    /// The fast lane's target for an exposed tool name (`relay.rs`): the lane of a running, legacy stdio child that
    /// exposes the tool now (allowed and approved), and the tool's own name. `None` sends the call the normal way.
    pub(crate) fn fast_target(&self, name: &str) -> Option<(Arc<relay::ChildLane>, String)> {
        let children = lock(&self.inner.children);
        let (server, tool) = names::split(name, children.keys().map(String::as_str))?;
        let Slot::Running(child) = &children[server] else {
            return None;
        };
        if child.exited.borrow().is_some() || !child.protocol.has_initialize() {
            return None;
        }
        let lane = child.lane.clone()?;
        lock(&child.tools)
            .iter()
            .any(|t| t.name == tool)
            .then(|| (lane, tool.to_owned()))
    }

    /// The fast lanes of the running children.
    pub(crate) fn fast_lanes(&self) -> Vec<Arc<relay::ChildLane>> {
        lock(&self.inner.children)
            .values()
            .filter_map(|s| match s {
                Slot::Running(c) => c.lane.clone(),
                Slot::Crashed { .. } => None,
            })
            .collect()
    }

    /// How many tool calls went through the fast lane since this process started (`relay.rs`).
    pub fn fast_lane_calls(&self) -> u64 {
        self.inner.fast_calls.load(Ordering::Relaxed)
    }

    /// Lists a running server's tools again (after an approval or a filter change) so exposure follows at once.
    pub async fn relist_tools(&self, name: &str) {
        self.inner.refresh_tools(name).await;
    }

    /// A call named a tool the child does not expose: withheld since it changed (`ToolChanged`), approved meanwhile
    /// by another process (listed again, then it is there), or unknown or filtered (`NotFound`, alike).
    async fn tool_missing(&self, child: &Child, tool: &str) -> Result<()> {
        let server = child.name.as_str();
        let registry = &self.inner.registry;
        match registry.store().pin(server, tool)? {
            Some(pin) if registry.tool_allowed(server, tool) => {
                if pin.pending() {
                    return Err(Error::ToolChanged {
                        server: server.to_owned(),
                        tool: tool.to_owned(),
                    });
                }
                self.inner.refresh_tools(server).await;
                if lock(&child.tools).iter().any(|t| t.name == tool) {
                    return Ok(());
                }
            }
            _ => {}
        }
        Err(Error::not_found("tool", format!("{server}__{tool}")))
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
            // Filtered tools are never suggested.
            let Ok(filter) = self.inner.registry.tool_filter(s.server.id) else {
                continue;
            };
            for t in tools {
                let exposed = names::expose(&s.server.name, &t.name);
                if exposed == wanted || !filter.allows(&t.name) {
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

    /// `active` (running), `error` (crashed or exited) or `inactive` (not started): the owning server's state in
    /// `find_tool` hits.
    pub fn state_of(&self, name: &str) -> &'static str {
        match lock(&self.inner.children).get(name) {
            Some(Slot::Running(c)) if c.exited.borrow().is_some() => "error",
            Some(Slot::Running(_)) => "active",
            Some(Slot::Crashed { .. }) => "error",
            None => "inactive",
        }
    }

    /// The child of `name` as [`Proxy::children`] shows it, when this process has one.
    pub fn child_status(&self, name: &str) -> Option<ChildStatus> {
        let children = lock(&self.inner.children);
        children.get(name).map(|slot| slot_status(name, slot))
    }

    /// What a child running here declared at initialize.
    pub fn capabilities_of(&self, name: &str) -> Option<ServerCapabilities> {
        match lock(&self.inner.children).get(name) {
            Some(Slot::Running(c)) => Some(c.capabilities.clone()),
            _ => None,
        }
    }

    pub fn children(&self) -> Vec<ChildStatus> {
        let children = lock(&self.inner.children);
        let mut out: Vec<ChildStatus> = children
            .iter()
            .map(|(name, slot)| slot_status(name, slot))
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }
}

fn slot_status(name: &str, slot: &Slot) -> ChildStatus {
    match slot {
        Slot::Running(c) => {
            let tools = lock(&c.tools);
            ChildStatus {
                name: name.to_owned(),
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
                protocol: Some(c.protocol.to_string()),
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
            name: name.to_owned(),
            status: "error",
            transport: *transport,
            pid: None,
            tool_count: tools.len(),
            tools: tools.iter().map(|t| t.name.to_string()).collect(),
            stderr_tail: stderr.tail(20),
            last_error: Some(error.clone()),
            started_at: started_at.clone(),
            restarts: *failures,
            protocol: None,
        },
    }
}

impl Proxy {
    /// A connected client, for forwarding child requests. `id` identifies the connection.
    pub fn register_client(&self, id: u64, peer: Peer<RoleServer>) {
        let mut clients = lock(&self.inner.clients);
        clients.retain(|(i, p)| *i != id && !p.is_transport_closed());
        clients.push((id, peer));
    }

    pub fn unregister_client(&self, id: u64) {
        lock(&self.inner.clients).retain(|(i, _)| *i != id);
        self.drop_subscriptions(id);
        lock(&self.inner.scopes).remove(&id);
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
        if server.status == ServerStatus::Disabled {
            return Err(Error::Unavailable(format!(
                "server `{name}` is disabled; it is not started until it is enabled"
            )));
        }
        server.activate_timeout_ms = Some(ms.max(1));
        let child = self.inner.start(&server, 0).await?;
        let n = lock(&child.tools).len();
        child.stop().await;
        Ok(n)
    }
}

/// A call's success and the call log's excerpt of its answer.
fn outcome(res: &Result<CallToolResponse>) -> (bool, String) {
    match res {
        Ok(CallToolResponse::Complete(r)) => (
            r.is_error != Some(true),
            ad_registry::calllog::excerpt(
                r.content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str())),
            ),
        ),
        Ok(CallToolResponse::Task(t)) => (true, format!("task {}", t.task.task_id)),
        Ok(_) => (true, "input required".to_owned()),
        Err(e) => (
            false,
            ad_registry::calllog::excerpt([e.to_string().as_str()]),
        ),
    }
}

impl Inner {
    /// Records a finished proxied call: metrics, the call log (with an excerpt of the answer) and the observer
    /// (the Prometheus histogram).
    fn account(
        &self,
        server: &str,
        server_id: i64,
        tool: &str,
        args: Option<Map<String, Value>>,
        latency: Duration,
        res: &Result<CallToolResponse>,
    ) {
        let (ok, text) = outcome(res);
        let args = args.map(Value::Object).unwrap_or(Value::Null);
        self.record_call(
            server,
            server_id,
            tool.to_owned(),
            args.into(),
            latency,
            ok,
            text,
        );
    }

    /// [`Inner::account`] for a call whose outcome is already summed up: success and the call log's excerpt.
    #[allow(clippy::too_many_arguments)]
    fn record_call(
        &self,
        server: &str,
        server_id: i64,
        tool: String,
        args: ad_registry::calllog::Args,
        latency: Duration,
        ok: bool,
        text: String,
    ) {
        self.metrics.record(server_id, &tool, latency, ok);
        let observer = lock(&self.observer).clone();
        if let Some(observe) = observer {
            observe(server, &tool, latency, ok);
        }
        // Last: the call log keeps the tool's name (moved, not copied).
        self.calllog.record(server, tool, args, text, latency, ok);
    }

    /// Records a status (with its error, if any) and announces it: one write, one event.
    fn set_status(
        &self,
        name: &str,
        id: i64,
        status: ServerStatus,
        active: Option<bool>,
        error: Option<&Error>,
    ) {
        let message = error.map(|e| e.to_string());
        let change = StatusChange {
            status,
            active,
            error: error
                .zip(message.as_deref())
                .map(|(e, m)| (m, e.tool_error_kind())),
            auth_url: None,
        };
        if let Err(e) = self.registry.store().set_status(id, &change) {
            tracing::warn!(server = name, error = %e, "recording the status failed");
        }
        self.events.emit(Event::StatusChanged {
            name: name.to_owned(),
            status,
        });
    }

    /// A start that failed: `authenticating` with its URL when the server needs authorization, `error` otherwise;
    /// the active flag is cleared either way, unless `keep_flag`.
    fn record_start_failure(&self, name: &str, id: i64, e: &Error, keep_flag: bool) {
        let active = if keep_flag { None } else { Some(false) };
        if let Error::AuthRequired { auth_url, .. } = e {
            let change = StatusChange {
                status: ServerStatus::Authenticating,
                active,
                error: None,
                auth_url: Some(auth_url),
            };
            if let Err(err) = self.registry.store().set_status(id, &change) {
                tracing::warn!(server = name, error = %err, "recording the status failed");
            }
            self.events.emit(Event::StatusChanged {
                name: name.to_owned(),
                status: ServerStatus::Authenticating,
            });
        } else {
            self.set_status(name, id, ServerStatus::Error, active, Some(e));
        }
    }

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

    /// Re-lists a child's tools after it said they changed, stores them and tells clients.
    async fn refresh_tools(&self, name: &str) {
        let child = match lock(&self.children).get(name) {
            Some(Slot::Running(c)) => c.clone(),
            _ => return,
        };
        match child.peer.list_all_tools().await {
            Ok(tools) => {
                *lock(&child.tools) = self.registry.gate_tools(child.server_id, name, tools);
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
            Some(c) => exited_during_call(&self.name, &c, &self.stderr),
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
            // SIGKILL is delivered at once but a process takes a moment to go: return only when the group is gone
            // (bounded), so a caller that stopped a server never sees its processes afterwards.
            let pgid = self.pgid;
            let gone = async {
                while spawn::live_group_members(pgid) > 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            };
            let _ = tokio::time::timeout(STOP_GRACE, gone).await;
        }
        lock(&self.lifeline).take();
    }
}

/// A forwarded request's failure: the child's own JSON-RPC error as it sent it, or what broke on the way.
fn child_error(server: &str, e: rmcp::ServiceError) -> Error {
    match e {
        rmcp::ServiceError::McpError(error) => Error::Child {
            server: server.to_owned(),
            error,
        },
        e => Error::Upstream {
            server: server.to_owned(),
            message: e.to_string(),
        },
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A child's exit while a call waited on it: the cause, with the last lines it wrote on stderr.
fn exited_during_call(server: &str, cause: &str, stderr: &StderrRing) -> Error {
    with_stderr(
        Error::Upstream {
            server: server.to_owned(),
            message: format!("exited during the call: {cause}"),
        },
        stderr,
    )
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

/// MCP Apps (SEP-1865): a tool's `_meta.ui.resourceUri` names a `ui://` resource of its server; on the aggregated
/// front it becomes the exposed URI that `resources/read` routes back to that server, as its resource list shows it.
fn expose_app_resource(server: &str, tool: &mut Tool) {
    if let Some(meta) = tool.meta.as_mut()
        && let Some(Value::Object(ui)) = meta.get_mut("ui")
        && let Some(Value::String(uri)) = ui.get_mut("resourceUri")
    {
        *uri = names::expose_uri(server, uri);
    }
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
