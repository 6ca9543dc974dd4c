//! Agents (#15, seed 003): discovery by capability and delegation over two executors. The in-process executor holds
//! agents an embedding program registers (`Agents::register`, the [`LocalAgent`] trait); the worker executor holds
//! A2A agents stored in the registry: remote ones (an agent card URL) and local workers (a command agent-discover
//! starts and owns, serving A2A on a loopback port it chooses).
//!
//! Resolution follows seed 003: the executor cache is filled by `start` and cleared on every registration; an
//! `agentId` is looked up in-process first, then among workers; without one, `defaultAgentId`, else the first
//! in-process agent, else the worker executor's first agent. A session stays with the executor that created it.
//! Routing failures are [`BridgeError`]s typed `config`, `upstream` or `internal` with the seed's messages.
//!
//! Must not know: the composition root, MCP or HTTP fronts (they adapt `Agents`), or SQL (the store's agent rows).
#![forbid(unsafe_code)]

mod inprocess;
mod session;
mod worker;
pub use worker::headers_aad;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::{Value, json};

pub use inprocess::{LocalAgent, LocalAgentInfo, PromptRequest};
pub use session::{PromptOutcome, SessionView};
pub use worker::{AddAgent, WORKER_PORT_ENV};

use ad_a2a::TaskState;
use ad_registry::secrets::Secrets;
use ad_store::Store;

/// Seed 003's error types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeErrorKind {
    Config,
    Upstream,
    Internal,
}

/// A routing or delegation failure (seed 003's `BridgeError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeError {
    pub kind: BridgeErrorKind,
    pub message: String,
}

impl BridgeError {
    pub fn config(m: impl Into<String>) -> BridgeError {
        BridgeError {
            kind: BridgeErrorKind::Config,
            message: m.into(),
        }
    }
    pub fn upstream(m: impl Into<String>) -> BridgeError {
        BridgeError {
            kind: BridgeErrorKind::Upstream,
            message: m.into(),
        }
    }
    pub fn internal(m: impl Into<String>) -> BridgeError {
        BridgeError {
            kind: BridgeErrorKind::Internal,
            message: m.into(),
        }
    }

    pub fn kind_str(&self) -> &'static str {
        match self.kind {
            BridgeErrorKind::Config => "config",
            BridgeErrorKind::Upstream => "upstream",
            BridgeErrorKind::Internal => "internal",
        }
    }
}

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for BridgeError {}

impl From<ad_core::error::Error> for BridgeError {
    fn from(e: ad_core::error::Error) -> Self {
        BridgeError::internal(e.to_string())
    }
}

pub type BridgeResult<T> = std::result::Result<T, BridgeError>;

pub fn agent_not_found(id: &str) -> BridgeError {
    BridgeError::upstream(format!("Agent not found: {id}"))
}

pub fn session_not_found(id: &str) -> BridgeError {
    BridgeError::upstream(format!("Session not found: {id}"))
}

pub fn unknown_provider(id: &str) -> BridgeError {
    BridgeError::config(format!(
        "Provider \"{id}\" is not registered in the ProviderRegistry"
    ))
}

/// A session may ask for `provider` only if the agent reports a provider with that id.
pub fn check_provider(providers: Option<&[Value]>, provider: Option<&str>) -> BridgeResult<()> {
    match provider {
        Some(p)
            if !providers
                .unwrap_or_default()
                .iter()
                .any(|x| x.get("id").and_then(Value::as_str) == Some(p)) =>
        {
            Err(unknown_provider(p))
        }
        _ => Ok(()),
    }
}

/// Which executor serves an agent or owns a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExecutorKind {
    InProcess,
    Worker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Ready,
    Busy,
    Unavailable,
}

impl AgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStatus::Ready => "ready",
            AgentStatus::Busy => "busy",
            AgentStatus::Unavailable => "unavailable",
        }
    }
    fn parse(s: &str) -> AgentStatus {
        match s {
            "busy" => AgentStatus::Busy,
            "unavailable" => AgentStatus::Unavailable,
            _ => AgentStatus::Ready,
        }
    }
}

/// One agent as `agents_discover` shows it: seed 003's `{id, capabilities, status, providers?}` plus where it runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentInfo {
    pub id: String,
    pub capabilities: Vec<String>,
    pub status: AgentStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<Value>>,
    pub executor: ExecutorKind,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Worker agents: the card URL, or the command agent-discover runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Worker agents: the A2A protocol version used (`1.0` or `0.3`).
    #[serde(rename = "protocolVersion", skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<&'static str>,
    #[serde(rename = "maxConcurrent")]
    pub max_concurrent: u32,
    #[serde(rename = "lastError", skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// Capabilities from skills: each skill's id, then its tags, without repeats.
pub fn capabilities_of<'a>(
    skills: impl IntoIterator<Item = (&'a str, &'a [String])>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (id, tags) in skills {
        for c in std::iter::once(id).chain(tags.iter().map(String::as_str)) {
            if !c.is_empty() && !out.iter().any(|x| x == c) {
                out.push(c.to_owned());
            }
        }
    }
    out
}

/// An agent skill found by `find_tool`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillMatch {
    pub agent: String,
    pub skill: String,
    pub description: String,
    pub score: f64,
    pub status: &'static str,
}

/// Where a session's progress goes (the MCP front turns each text into a progress notification).
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// The agents service; cheap to clone.
#[derive(Clone)]
pub struct Agents {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Agents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Agents { .. }")
    }
}

struct Inner {
    inproc: inprocess::InProcessExecutor,
    worker: worker::WorkerExecutor,
    /// agent id -> executor, filled by `start`, cleared on registration.
    cache: Mutex<HashMap<String, ExecutorKind>>,
    default_agent_id: RwLock<Option<String>>,
    started: AtomicBool,
    events: ad_core::events::EventBus,
    /// The agent ids as of the last `server:agents_changed` this process sent (`None` until first read), so a change
    /// another process made is announced once, and one made here is not announced twice.
    announced: Mutex<Option<Vec<String>>>,
}

impl Agents {
    pub fn new(
        store: Store,
        secrets: Secrets,
        guard_exe: PathBuf,
        events: ad_core::events::EventBus,
        sandbox: ad_registry::config::SandboxConfig,
    ) -> Agents {
        Agents {
            inner: Arc::new(Inner {
                events,
                inproc: inprocess::InProcessExecutor::default(),
                worker: worker::WorkerExecutor::new(store, secrets, guard_exe, sandbox),
                cache: Mutex::new(HashMap::new()),
                default_agent_id: RwLock::new(None),
                started: AtomicBool::new(false),
                announced: Mutex::new(None),
            }),
        }
    }

    /// Seed 003's `McpAgenticServerConfig.defaultAgentId`: the agent used when a call names none.
    pub fn set_default_agent_id(&self, id: Option<String>) {
        *self
            .inner
            .default_agent_id
            .write()
            .unwrap_or_else(|p| p.into_inner()) = id;
    }

    /// Starts both executors and fills the executor cache. Idempotent.
    pub fn start(&self) -> BridgeResult<()> {
        self.inner.inproc.start();
        self.inner.worker.start();
        self.inner.started.store(true, Ordering::SeqCst);
        let mut cache = self.cache();
        for id in self.inner.inproc.ids() {
            cache.entry(id).or_insert(ExecutorKind::InProcess);
        }
        for id in self.inner.worker.ids()? {
            cache.entry(id).or_insert(ExecutorKind::Worker);
        }
        Ok(())
    }

    /// Whether any agent is registered (in-process or stored); the MCP front lists the agent tools then.
    pub fn has_agents(&self) -> bool {
        !self.inner.inproc.ids().is_empty() || self.inner.worker.ids().is_ok_and(|v| !v.is_empty())
    }

    pub fn is_started(&self) -> bool {
        self.inner.started.load(Ordering::SeqCst)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, HashMap<String, ExecutorKind>> {
        self.inner.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Clears the executor cache after agent `id` was registered, added or removed, and says so on the event bus
    /// (connected MCP clients get `tools/list_changed`: the agent tools depend on there being an agent).
    fn invalidate(&self, id: &str) {
        self.cache().clear();
        *self.announced() = self.all_ids();
        self.inner
            .events
            .emit(ad_core::events::Event::AgentsChanged { id: id.to_owned() });
    }

    fn announced(&self) -> std::sync::MutexGuard<'_, Option<Vec<String>>> {
        self.inner
            .announced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Every agent id, in-process and stored, sorted; `None` if the store cannot be read.
    fn all_ids(&self) -> Option<Vec<String>> {
        let mut ids = self.inner.worker.ids().ok()?;
        ids.extend(self.inner.inproc.ids());
        ids.sort();
        ids.dedup();
        Some(ids)
    }

    /// Called when another process may have committed (the registry feed's rebuild): if the agents differ from the
    /// ones last announced, clears the executor cache and sends `server:agents_changed` for the first id that came or
    /// went, so this process's MCP clients re-list their tools. The first call only records the current set.
    pub fn notice_changes_elsewhere(&self) {
        let Some(now) = self.all_ids() else { return };
        let mut announced = self.announced();
        let Some(before) = announced.replace(now.clone()) else {
            return;
        };
        if before == now {
            return;
        }
        let changed = now
            .iter()
            .find(|id| !before.contains(id))
            .or_else(|| before.iter().find(|id| !now.contains(id)))
            .cloned()
            .unwrap_or_default();
        drop(announced);
        self.cache().clear();
        self.inner
            .events
            .emit(ad_core::events::Event::AgentsChanged { id: changed });
    }

    /// Registers an agent in-process (seed 003's `register()`); clears the executor cache.
    pub fn register(&self, agent: Arc<dyn LocalAgent>) -> ad_core::error::Result<()> {
        let id = agent.info().id;
        self.inner.inproc.register(agent)?;
        self.invalidate(&id);
        Ok(())
    }

    /// Adds an A2A agent to the registry (seed 003's `registerWorker()`): a card URL or a worker command. Clears the
    /// executor cache.
    pub async fn add(&self, spec: AddAgent) -> ad_core::error::Result<AgentInfo> {
        let info = self.inner.worker.add(spec).await?;
        self.invalidate(&info.id);
        Ok(info)
    }

    /// Removes a stored agent, stopping its worker process if it runs here. Open sessions with it fail on next use.
    pub async fn remove(&self, id: &str) -> ad_core::error::Result<()> {
        self.inner.worker.remove(id).await?;
        self.invalidate(id);
        Ok(())
    }

    /// Stored agents with their last known status (no probing: for listings).
    pub fn list_stored(&self) -> ad_core::error::Result<Vec<AgentInfo>> {
        self.inner.worker.list_stored()
    }

    fn ensure_started(&self) -> BridgeResult<()> {
        if self.is_started() {
            Ok(())
        } else {
            Err(BridgeError::internal("Executor not started"))
        }
    }

    /// Seed 003's `agents_discover`: every agent (in-process first; a worker agent whose id an in-process agent
    /// has is shadowed, as resolution would never reach it), worker agents probed now, filtered by `capability`.
    pub async fn discover(&self, capability: Option<&str>) -> BridgeResult<Vec<AgentInfo>> {
        self.ensure_started()?;
        let mut all = self.inner.inproc.infos();
        let shadowed: Vec<String> = all.iter().map(|a| a.id.clone()).collect();
        let workers = self.inner.worker.probe_all().await?;
        all.extend(workers.into_iter().filter(|w| !shadowed.contains(&w.id)));
        if let Some(c) = capability {
            all.retain(|a| a.capabilities.iter().any(|x| x == c));
        }
        Ok(all)
    }

    /// Which executor serves `agent_id` (or the default agent), by seed 003's order.
    pub fn resolve(&self, agent_id: Option<&str>) -> BridgeResult<(ExecutorKind, String)> {
        self.ensure_started()?;
        let default = self
            .inner
            .default_agent_id
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let id = match agent_id.map(str::to_owned).or(default) {
            Some(id) => id,
            None => {
                if let Some(first) = self.inner.inproc.ids().into_iter().next() {
                    return Ok((ExecutorKind::InProcess, first));
                }
                return match self.inner.worker.ids()?.into_iter().next() {
                    Some(first) => Ok((ExecutorKind::Worker, first)),
                    None => Err(BridgeError::config("No agents registered")),
                };
            }
        };
        let cached = self.cache().get(&id).copied();
        match cached {
            Some(ExecutorKind::InProcess) => return Ok((ExecutorKind::InProcess, id)),
            // Another process may have removed it since.
            Some(ExecutorKind::Worker) if self.inner.worker.has(&id)? => {
                return Ok((ExecutorKind::Worker, id));
            }
            _ => {}
        }
        let kind = if self.inner.inproc.has(&id) {
            ExecutorKind::InProcess
        } else if self.inner.worker.has(&id)? {
            ExecutorKind::Worker
        } else {
            return Err(agent_not_found(&id));
        };
        self.cache().insert(id.clone(), kind);
        Ok((kind, id))
    }

    /// Opens a session with an agent (seed 003's `sessions_create`); `provider` is checked against the agent's.
    pub async fn create_session(
        &self,
        agent_id: Option<&str>,
        provider: Option<&str>,
    ) -> BridgeResult<SessionView> {
        let (kind, id) = self.resolve(agent_id)?;
        match kind {
            ExecutorKind::InProcess => self.inner.inproc.create_session(&id, provider),
            ExecutorKind::Worker => self.inner.worker.create_session(&id, provider).await,
        }
    }

    /// The executor that owns `session_id`: in-process first, then workers.
    fn owner(&self, session_id: &str) -> BridgeResult<ExecutorKind> {
        self.ensure_started()?;
        if self.inner.inproc.sessions.contains(session_id) {
            Ok(ExecutorKind::InProcess)
        } else if self.inner.worker.sessions.contains(session_id) {
            Ok(ExecutorKind::Worker)
        } else {
            Err(session_not_found(session_id))
        }
    }

    /// Sends a prompt in a session and waits for the agent's answer; its progress goes to `progress`.
    pub async fn prompt(
        &self,
        session_id: &str,
        text: &str,
        progress: Progress,
    ) -> BridgeResult<PromptOutcome> {
        match self.owner(session_id)? {
            ExecutorKind::InProcess => self.inner.inproc.prompt(session_id, text, progress).await,
            ExecutorKind::Worker => self.inner.worker.prompt(session_id, text, progress).await,
        }
    }

    /// [`Agents::prompt`] that also cancels the session's task when `cancel` fires (the caller gave up: an MCP
    /// client cancelled its `tools/call`); the answer is then the task's `canceled` end.
    pub async fn prompt_or_cancel(
        &self,
        session_id: &str,
        text: &str,
        progress: Progress,
        cancel: Option<tokio_util::sync::CancellationToken>,
    ) -> BridgeResult<PromptOutcome> {
        let Some(ct) = cancel else {
            return self.prompt(session_id, text, progress).await;
        };
        let fut = self.prompt(session_id, text, progress);
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => r,
            _ = ct.cancelled() => {
                if let Err(e) = self.cancel(session_id).await {
                    tracing::warn!(session = session_id, error = %e, "cancelling the agent's task failed");
                }
                fut.await
            }
        }
    }

    pub async fn session_status(&self, session_id: &str) -> BridgeResult<SessionView> {
        match self.owner(session_id)? {
            ExecutorKind::InProcess => self.inner.inproc.sessions.view(session_id),
            ExecutorKind::Worker => self.inner.worker.status(session_id).await,
        }
    }

    /// Cancels the session's running task (upstream `CancelTask` for A2A agents); the session stays open.
    pub async fn cancel(&self, session_id: &str) -> BridgeResult<SessionView> {
        match self.owner(session_id)? {
            ExecutorKind::InProcess => self.inner.inproc.sessions.abort(session_id),
            ExecutorKind::Worker => self.inner.worker.cancel(session_id).await,
        }
    }

    /// Closes a session (cancelling a running task first).
    pub async fn close(&self, session_id: &str) -> BridgeResult<SessionView> {
        let kind = self.owner(session_id)?;
        if self.session_status(session_id).await?.status == session::SessionStatus::Working {
            self.cancel(session_id).await?;
        }
        match kind {
            ExecutorKind::InProcess => self.inner.inproc.sessions.close(session_id),
            ExecutorKind::Worker => self.inner.worker.sessions.close(session_id),
        }
    }

    /// Seed 003's `tasks_delegate`: one task in a session of its own, which is closed afterwards.
    pub async fn delegate(
        &self,
        agent_id: Option<&str>,
        provider: Option<&str>,
        text: &str,
        progress: Progress,
        cancel: Option<tokio_util::sync::CancellationToken>,
    ) -> BridgeResult<PromptOutcome> {
        let session = self.create_session(agent_id, provider).await?;
        let outcome = self
            .prompt_or_cancel(&session.session_id, text, progress, cancel)
            .await;
        let _ = self.close(&session.session_id).await;
        outcome
    }

    /// Seed 003's `bridge_health`.
    pub fn health(&self) -> Value {
        let started = self.is_started();
        json!({
            "status": if started { "ok" } else { "not_started" },
            "started": started,
            "executors": {
                "inProcess": {"agents": self.inner.inproc.ids().len(), "sessions": self.inner.inproc.sessions.len()},
                "worker": {
                    "agents": self.inner.worker.ids().map(|v| v.len()).unwrap_or(0),
                    "runningWorkers": self.inner.worker.running(),
                    "sessions": self.inner.worker.sessions.len(),
                },
            },
        })
    }

    /// The stored agent skill that best fits `query`, scored like `find_tool` scores its best tool (the share of
    /// the query's terms the skill's name, description and tags cover), or `None`.
    pub fn best_skill(&self, query: &str) -> Option<SkillMatch> {
        let terms = ad_search::query::terms(query);
        let fts = ad_search::query::fts(&terms)?;
        let hits = self.inner.worker.store().search_skills(&fts, 10).ok()?;
        let best = hits
            .into_iter()
            .map(|h| {
                let cov = ad_search::query::coverage(
                    &terms,
                    &format!("{} {} {} {}", h.skill_id, h.name, h.description, h.tags),
                );
                (h, cov)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        let status = self
            .inner
            .worker
            .store()
            .agent(&best.0.agent_id)
            .ok()
            .flatten()
            .map(|r| AgentStatus::parse(&r.status).as_str())
            .unwrap_or("ready");
        Some(SkillMatch {
            agent: best.0.agent_id,
            skill: best.0.skill_id,
            description: best.0.description,
            score: best.1,
            status,
        })
    }

    /// Stops every worker process this process started.
    pub async fn shutdown(&self) {
        self.inner.worker.shutdown().await;
    }
}

/// Maps a final A2A state to what the session shows.
pub(crate) fn state_is_interrupted(s: Option<TaskState>) -> bool {
    s.is_some_and(TaskState::is_interrupted)
}
