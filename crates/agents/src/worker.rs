//! The worker executor: A2A agents stored in the registry (seed 003's `WorkerExecutor`). A remote agent is reached
//! at the JSON-RPC interface of its card; a local worker is a command agent-discover starts under the child guard
//! (its own process group, so nothing is orphaned), telling it the loopback port to serve on in
//! `AGENT_DISCOVER_A2A_PORT`, and uses once its card answers there.
//!
//! Status is tracked for real: a probe reads the card (`unavailable` when it does not answer or the worker exited),
//! and an agent running as many tasks as its concurrency limit is `busy`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::io::AsyncBufReadExt;

use super::session::{PromptOutcome, SessionStatus, SessionView, Sessions};
use super::{
    AgentInfo, AgentStatus, BridgeError, BridgeResult, ExecutorKind, Progress, agent_not_found,
    capabilities_of,
};
use ad_a2a::{self as a2a, Card, Client, Outgoing, TaskState, Update};
use ad_core::error::{Error, Result};
use ad_proxy::spawn::{self, StderrRing};
use ad_registry::secrets::Secrets;
use ad_store::Store;
use ad_store::agents::AgentRow;

mod ids;
pub use ids::headers_aad;
use ids::{check_id, id_from_name};

/// The environment variable that tells a worker which loopback port to serve A2A on.
pub const WORKER_PORT_ENV: &str = "AGENT_DISCOVER_A2A_PORT";
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
const CARD_TIMEOUT: Duration = Duration::from_secs(10);
const WORKER_START_TIMEOUT: Duration = Duration::from_secs(30);
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// A stream may stay silent this long between events (a long task reports progress or nothing at all).
const STREAM_IDLE: Duration = Duration::from_secs(600);
const DEFAULT_MAX_CONCURRENT: u32 = 4;

/// An agent to add: from a card URL or a worker command.
#[derive(Debug, Clone, Default)]
pub struct AddAgent {
    /// The agent's id; by default the card's `name`, made into a valid id.
    pub id: Option<String>,
    pub url: Option<String>,
    /// A worker: the program and its arguments (no shell).
    pub command: Option<(String, Vec<String>)>,
    /// Auth headers sent with every request to the agent (stored sealed, like secrets).
    pub headers: BTreeMap<String, String>,
    pub max_concurrent: Option<u32>,
}

struct WorkerProc {
    pgid: i32,
    child: tokio::process::Child,
    _lifeline: Option<spawn::Lifeline>,
    ring: Arc<StderrRing>,
    card: Card,
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        spawn::kill_group(self.pgid);
    }
}

pub(crate) struct WorkerExecutor {
    store: Store,
    secrets: Secrets,
    guard_exe: PathBuf,
    /// How workers are confined (as servers are).
    sandbox: ad_registry::config::SandboxConfig,
    /// Built on first use: building a client loads the system's root certificates (milliseconds at every start of
    /// every process, which most never use).
    http: std::sync::OnceLock<reqwest::Client>,
    pub sessions: Arc<Sessions>,
    started: AtomicBool,
    procs: tokio::sync::Mutex<HashMap<String, WorkerProc>>,
    running: Mutex<usize>,
    inflight: Arc<Mutex<HashMap<String, u32>>>,
}

fn card_of(row: &AgentRow) -> Option<Card> {
    let raw = row.card.as_ref()?;
    let base = reqwest::Url::parse(row.card_url.as_deref().unwrap_or("http://127.0.0.1/")).ok()?;
    a2a::parse_card(raw, &base).ok()
}

/// What a prompt's updates added up to.
#[derive(Default)]
struct Acc {
    state: Option<TaskState>,
    task_id: Option<String>,
    answer: Vec<String>,
    last_status: Option<String>,
}

/// Slot counting one running task of an agent until dropped.
struct Inflight {
    map: Arc<Mutex<HashMap<String, u32>>>,
    id: String,
}

impl Drop for Inflight {
    fn drop(&mut self) {
        let mut m = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.id) {
            *n = n.saturating_sub(1);
        }
    }
}

impl WorkerExecutor {
    pub fn new(
        store: Store,
        secrets: Secrets,
        guard_exe: PathBuf,
        sandbox: ad_registry::config::SandboxConfig,
    ) -> WorkerExecutor {
        WorkerExecutor {
            store,
            secrets,
            guard_exe,
            sandbox,
            http: std::sync::OnceLock::new(),
            sessions: Arc::default(),
            started: AtomicBool::new(false),
            procs: tokio::sync::Mutex::new(HashMap::new()),
            running: Mutex::new(0),
            inflight: Arc::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The HTTP client for agents' cards and A2A calls.
    fn http(&self) -> &reqwest::Client {
        self.http.get_or_init(|| a2a::http_client(CARD_TIMEOUT))
    }

    pub fn start(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    pub fn ids(&self) -> BridgeResult<Vec<String>> {
        Ok(self.store.agents()?.into_iter().map(|r| r.id).collect())
    }

    pub fn has(&self, id: &str) -> BridgeResult<bool> {
        Ok(self.store.agent(id)?.is_some())
    }

    pub fn running(&self) -> usize {
        *self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn inflight_of(&self, id: &str) -> u32 {
        self.inflight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .copied()
            .unwrap_or(0)
    }

    fn headers(&self, row: &AgentRow) -> BTreeMap<String, String> {
        row.headers
            .as_deref()
            .and_then(|blob| self.secrets.open_bytes(&headers_aad(&row.id), blob))
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    fn info(&self, row: &AgentRow, status: AgentStatus, card: Option<&Card>) -> AgentInfo {
        let card = card.cloned().or_else(|| card_of(row));
        let skills: Vec<(&str, &[String])> = card
            .as_ref()
            .map(|c| {
                c.skills
                    .iter()
                    .map(|s| (s.id.as_str(), s.tags.as_slice()))
                    .collect()
            })
            .unwrap_or_default();
        AgentInfo {
            id: row.id.clone(),
            capabilities: capabilities_of(skills),
            status,
            providers: card.as_ref().and_then(|c| c.providers.clone()),
            executor: ExecutorKind::Worker,
            description: card
                .as_ref()
                .map(|c| c.description.clone())
                .unwrap_or_default(),
            source: row.url.clone().or_else(|| {
                row.command.as_ref().map(|c| {
                    std::iter::once(c.clone())
                        .chain(row.args.iter().cloned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
            }),
            protocol_version: card.as_ref().map(|c| c.version.as_str()),
            max_concurrent: row.max_concurrent,
            last_error: row.last_error.clone(),
        }
    }

    /// Adds (or replaces) an agent: reads its card (starting the worker for a command), stores it with its skills.
    pub async fn add(&self, spec: AddAgent) -> Result<AgentInfo> {
        if let Some(id) = &spec.id {
            check_id(id)?;
        }
        for (k, v) in &spec.headers {
            if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(v).is_err()
            {
                return Err(Error::invalid(
                    "header",
                    format!("`{k}` is not a valid HTTP header"),
                ));
            }
        }
        if let Some(url) = &spec.url {
            let ok = reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
            if !ok {
                return Err(Error::invalid(
                    "url",
                    format!(
                        "`{}` is not an http(s) URL",
                        ad_core::model::truncate_for_message(url)
                    ),
                ));
            }
        }
        let max_concurrent = spec.max_concurrent.unwrap_or(DEFAULT_MAX_CONCURRENT);
        if !(1..=1024).contains(&max_concurrent) {
            return Err(Error::invalid(
                "max_concurrent",
                "must be between 1 and 1024",
            ));
        }
        let (card, raw, card_url, proc) = match (&spec.url, &spec.command) {
            (Some(url), None) => {
                let (card, raw, card_url) =
                    a2a::fetch_card(self.http(), url, &spec.headers, CARD_TIMEOUT)
                        .await
                        .map_err(|e| Error::Upstream {
                            server: url.clone(),
                            message: e.0,
                        })?;
                (card, raw, card_url, None)
            }
            (None, Some((command, args))) => {
                if command.trim().is_empty() {
                    return Err(Error::invalid("command", "is empty"));
                }
                let (proc, raw, card_url) = self
                    .spawn_worker(
                        spec.id.as_deref().unwrap_or(command),
                        command,
                        args,
                        &spec.headers,
                    )
                    .await
                    .map_err(|message| Error::Upstream {
                        server: command.clone(),
                        message,
                    })?;
                (proc.card.clone(), raw, card_url, Some(proc))
            }
            _ => {
                return Err(Error::invalid(
                    "agent",
                    "give either a card URL or a worker command",
                ));
            }
        };
        let id = spec.id.clone().unwrap_or_else(|| id_from_name(&card.name));
        check_id(&id)?;
        let headers = if spec.headers.is_empty() {
            None
        } else {
            let json =
                serde_json::to_vec(&spec.headers).map_err(|e| Error::Internal(e.to_string()))?;
            Some(self.secrets.seal_bytes(&headers_aad(&id), &json)?)
        };
        let row = AgentRow {
            id: id.clone(),
            url: spec.url.clone(),
            command: spec.command.as_ref().map(|c| c.0.clone()),
            args: spec
                .command
                .as_ref()
                .map(|c| c.1.clone())
                .unwrap_or_default(),
            card: Some(raw),
            card_url: Some(card_url),
            headers,
            max_concurrent,
            status: "ready".into(),
            last_error: None,
            created_at: String::new(),
        };
        self.store_row(&row, &card)?;
        if let Some(p) = proc {
            self.put_proc(id.clone(), p).await;
        }
        Ok(self.info(&row, AgentStatus::Ready, Some(&card)))
    }

    fn store_row(&self, row: &AgentRow, card: &Card) -> Result<()> {
        let skills: Vec<(&str, &str, &str, String)> = card
            .skills
            .iter()
            .map(|s| {
                (
                    s.id.as_str(),
                    s.name.as_str(),
                    s.description.as_str(),
                    s.tags.join(" "),
                )
            })
            .collect();
        self.store.upsert_agent(row, &skills)
    }

    async fn put_proc(&self, id: String, p: WorkerProc) {
        let mut procs = self.procs.lock().await;
        procs.insert(id, p);
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = procs.len();
    }

    async fn take_proc(&self, id: &str) -> Option<WorkerProc> {
        let mut procs = self.procs.lock().await;
        let p = procs.remove(id);
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = procs.len();
        p
    }

    pub async fn remove(&self, id: &str) -> Result<()> {
        if !self.store.remove_agent(id)? {
            return Err(Error::not_found("agent", id));
        }
        drop(self.take_proc(id).await);
        Ok(())
    }

    pub fn list_stored(&self) -> Result<Vec<AgentInfo>> {
        Ok(self
            .store
            .agents()?
            .iter()
            .map(|r| self.info(r, AgentStatus::parse(&r.status), None))
            .collect())
    }

    /// Starts a worker on a free loopback port and waits until its card answers there (or it exits).
    async fn spawn_worker(
        &self,
        label: &str,
        command: &str,
        args: &[String],
        headers: &BTreeMap<String, String>,
    ) -> std::result::Result<(WorkerProc, Value, String), String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free loopback port: {e}"))?
            .port();
        let command = &ad_proxy::launcher::absolute(command);
        let mut env = BTreeMap::from([(WORKER_PORT_ENV.to_owned(), port.to_string())]);
        // A missing program: a launcher (`uvx`, `npx`) is fetched as for servers, anything else is named as missing.
        if let Some(note) = ad_proxy::launcher::prepare(
            &ad_proxy::runtime::root_in(&self.sandbox.data_dir),
            label,
            command,
            &mut env,
        )
        .await
        .map_err(|e| e.to_string())?
        {
            tracing::info!(agent = label, "{note}");
        }
        let ring = Arc::new(StderrRing::default());
        // Confined like a server (with the network: it serves A2A on the loopback port), in a state directory
        // named after its label.
        let name = ad_proxy::sandbox::dir_name(&format!("agent-{label}"));
        let settings = ad_core::sandbox::SandboxSettings::default();
        let spawned = ad_proxy::sandbox::spawn(
            &self.sandbox,
            &self.guard_exe,
            &name,
            command,
            args,
            &env,
            &settings,
            ring.clone(),
        )
        .map_err(|e| e.to_string())?;
        let mut proc_parts = (spawned.child, spawned.lifeline, spawned.pgid);
        // A worker's stdout is not a protocol channel: its lines join the stderr ring.
        let out_ring = ring.clone();
        let stdout = spawned.stdout;
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                out_ring.push(line);
            }
        });
        drop(spawned.stdin);
        let base = format!("http://127.0.0.1:{port}/");
        let deadline = Instant::now() + WORKER_START_TIMEOUT;
        tracing::info!(agent = label, port, "starting A2A worker");
        loop {
            if let Ok(Some(status)) = proc_parts.0.try_wait() {
                spawn::kill_group(proc_parts.2);
                return Err(format!(
                    "the worker exited ({status}) before serving its agent card on port {port}: {}",
                    ring.tail(5).join(" | ")
                ));
            }
            match a2a::fetch_card(self.http(), &base, headers, PROBE_TIMEOUT).await {
                Ok((card, raw, card_url)) => {
                    let proc = WorkerProc {
                        pgid: proc_parts.2,
                        child: proc_parts.0,
                        _lifeline: proc_parts.1.take(),
                        ring,
                        card,
                    };
                    return Ok((proc, raw, card_url));
                }
                Err(e) if Instant::now() >= deadline => {
                    spawn::kill_group(proc_parts.2);
                    return Err(format!(
                        "the worker did not serve its agent card on port {port} within {} s: {e}",
                        WORKER_START_TIMEOUT.as_secs()
                    ));
                }
                // The port is not answering yet: the worker is still starting.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    /// The client for an agent and its card; a worker is started when it does not run here yet.
    async fn client_for(&self, row: &AgentRow) -> BridgeResult<(Client, Card)> {
        let headers = self.headers(row);
        if let Some(command) = &row.command {
            let mut procs = self.procs.lock().await;
            if let Some(p) = procs.get_mut(&row.id)
                && matches!(p.child.try_wait(), Ok(None))
            {
                return Ok((
                    Client::new(self.http().clone(), &p.card, headers),
                    p.card.clone(),
                ));
            }
            procs.remove(&row.id);
            drop(procs);
            match self
                .spawn_worker(&row.id, command, &row.args, &headers)
                .await
            {
                Ok((proc, _, _)) => {
                    let card = proc.card.clone();
                    self.put_proc(row.id.clone(), proc).await;
                    let _ = self.store.set_agent_status(&row.id, "ready", None);
                    Ok((Client::new(self.http().clone(), &card, headers), card))
                }
                Err(e) => {
                    let _ = self
                        .store
                        .set_agent_status(&row.id, "unavailable", Some(&e));
                    Err(BridgeError::upstream(format!(
                        "Agent {} is unavailable: {e}",
                        row.id
                    )))
                }
            }
        } else {
            let card = card_of(row).ok_or_else(|| {
                BridgeError::internal(format!(
                    "the stored card of agent {} cannot be read",
                    row.id
                ))
            })?;
            Ok((Client::new(self.http().clone(), &card, headers), card))
        }
    }

    /// Probes one agent: reads its card (a worker that exited is unavailable; one not running here is started on
    /// first use and reported by its last known status).
    async fn probe(&self, row: &AgentRow) -> AgentInfo {
        let headers = self.headers(row);
        let result: std::result::Result<Option<(Card, Value)>, String> = if row.command.is_some() {
            let mut procs = self.procs.lock().await;
            match procs.get_mut(&row.id) {
                Some(p) => match p.child.try_wait() {
                    Ok(None) => {
                        let endpoint = p.card.endpoint.clone();
                        drop(procs);
                        a2a::fetch_card(self.http(), &endpoint, &headers, PROBE_TIMEOUT)
                            .await
                            .map(|(c, raw, _)| Some((c, raw)))
                            .map_err(|e| e.0)
                    }
                    _ => {
                        let tail = p.ring.tail(3).join(" | ");
                        procs.remove(&row.id);
                        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = procs.len();
                        Err(format!("the worker exited: {tail}"))
                    }
                },
                None if row.status == "unavailable" => {
                    Err(row.last_error.clone().unwrap_or_default())
                }
                None => Ok(None),
            }
        } else {
            let url = row
                .card_url
                .clone()
                .or_else(|| row.url.clone())
                .unwrap_or_default();
            a2a::fetch_card(self.http(), &url, &headers, PROBE_TIMEOUT)
                .await
                .map(|(c, raw, _)| Some((c, raw)))
                .map_err(|e| e.0)
        };
        match result {
            Ok(fresh) => {
                let max = row.max_concurrent;
                let status = if self.inflight_of(&row.id) >= max {
                    AgentStatus::Busy
                } else {
                    AgentStatus::Ready
                };
                let mut row = row.clone();
                if let Some((card, raw)) = &fresh
                    && row.url.is_some()
                    && row.card.as_ref() != Some(raw)
                {
                    // The card changed: its skills are re-indexed.
                    row.card = Some(raw.clone());
                    let _ = self.store_row(&row, card);
                }
                let _ = self.store.set_agent_status(&row.id, "ready", None);
                row.last_error = None;
                self.info(&row, status, fresh.as_ref().map(|f| &f.0))
            }
            Err(e) => {
                let _ = self
                    .store
                    .set_agent_status(&row.id, "unavailable", Some(&e));
                let mut row = row.clone();
                row.last_error = Some(e);
                self.info(&row, AgentStatus::Unavailable, None)
            }
        }
    }

    pub async fn probe_all(&self) -> BridgeResult<Vec<AgentInfo>> {
        let rows = self.store.agents()?;
        Ok(futures::future::join_all(rows.iter().map(|r| self.probe(r))).await)
    }

    pub async fn create_session(
        &self,
        id: &str,
        provider: Option<&str>,
    ) -> BridgeResult<SessionView> {
        if !self.started.load(Ordering::SeqCst) {
            return Err(BridgeError::internal("Executor not started"));
        }
        let row = self.store.agent(id)?.ok_or_else(|| agent_not_found(id))?;
        let card = if row.command.is_some() {
            // Starting the worker (if needed) is its health check.
            self.client_for(&row).await?.1
        } else {
            let info = self.probe(&row).await;
            if info.status == AgentStatus::Unavailable {
                return Err(BridgeError::upstream(format!(
                    "Agent {id} is unavailable: {}",
                    info.last_error.unwrap_or_default()
                )));
            }
            card_of(&self.store.agent(id)?.unwrap_or(row)).ok_or_else(|| agent_not_found(id))?
        };
        super::check_provider(card.providers.as_deref(), provider)?;
        Ok(self.sessions.open(id, ExecutorKind::Worker, provider))
    }

    pub async fn prompt(
        &self,
        session_id: &str,
        text: &str,
        progress: Progress,
    ) -> BridgeResult<PromptOutcome> {
        let view = self.sessions.view(session_id)?;
        // Affinity: the session's agent is looked up among workers only, never rerouted in-process.
        let row = self
            .store
            .agent(&view.agent_id)?
            .ok_or_else(|| agent_not_found(&view.agent_id))?;
        let (client, card) = self.client_for(&row).await?;
        let busy = {
            let mut m = self.inflight.lock().unwrap_or_else(|p| p.into_inner());
            let n = m.entry(row.id.clone()).or_insert(0);
            let before = *n;
            if before < row.max_concurrent {
                *n += 1;
            }
            before
        };
        if busy >= row.max_concurrent {
            return Err(BridgeError::upstream(format!(
                "Agent {} is busy ({busy} tasks running, limit {})",
                row.id, row.max_concurrent
            )));
        }
        let slot = Inflight {
            map: self.inflight.clone(),
            id: row.id.clone(),
        };
        let mut metadata = Map::new();
        if let Some(p) = &view.provider {
            metadata.insert("provider".into(), json!(p));
        }
        let continues = super::state_is_interrupted(view.task_state);
        let out = Outgoing {
            text: text.to_owned(),
            context_id: view.context_id.clone(),
            task_id: if continues {
                view.task_id.clone()
            } else {
                None
            },
            metadata,
        };
        let sessions = self.sessions.clone();
        let (sid, aid) = (session_id.to_owned(), row.id.clone());
        self.sessions
            .run(session_id, async move {
                let _slot = slot;
                let mut acc = Acc::default();
                let apply = |acc: &mut Acc, u: Update| {
                    let _ = sessions.update(&sid, |s| {
                        if let Some(t) = &u.task_id {
                            s.view.task_id = Some(t.clone());
                        }
                        if let Some(c) = &u.context_id {
                            s.view.context_id = Some(c.clone());
                        }
                        if let Some(st) = u.state {
                            s.view.task_state = Some(st);
                        }
                    });
                    if u.task_id.is_some() {
                        acc.task_id = u.task_id.clone();
                    }
                    if let Some(st) = u.state {
                        acc.state = Some(st);
                    }
                    if u.is_message {
                        acc.state = Some(TaskState::Completed);
                    }
                    if let Some(t) = u.status_text {
                        progress(&t);
                        acc.last_status = Some(t);
                    }
                    acc.answer.extend(u.artifact_text);
                };
                let sent = if card.streaming {
                    client
                        .stream(&out, STREAM_IDLE, |u| apply(&mut acc, u))
                        .await
                } else {
                    client
                        .send(&out, CALL_TIMEOUT)
                        .await
                        .map(|u| apply(&mut acc, u))
                };
                sent.map_err(|e| BridgeError::upstream(format!("Agent {aid}: {e}")))?;
                if !acc
                    .state
                    .is_some_and(|s| s.is_terminal() || s.is_interrupted())
                    && let Some(t) = acc.task_id.clone()
                {
                    // The stream ended before a final state: ask for the task.
                    let u = client
                        .get_task(&t, CALL_TIMEOUT)
                        .await
                        .map_err(|e| BridgeError::upstream(format!("Agent {aid}: {e}")))?;
                    apply(&mut acc, u);
                }
                let state = acc.state.unwrap_or(TaskState::Unknown);
                let task_id = acc.task_id;
                let text = if acc.answer.is_empty() {
                    acc.last_status.unwrap_or_default()
                } else {
                    acc.answer.join("\n")
                };
                Ok(PromptOutcome {
                    session_id: sid,
                    agent_id: aid,
                    task_id,
                    state,
                    status: SessionStatus::after(state),
                    text,
                })
            })
            .await
    }

    /// Cancels the running task upstream (`CancelTask` / `tasks/cancel`); before the agent named its task, the
    /// request itself is abandoned.
    pub async fn cancel(&self, session_id: &str) -> BridgeResult<SessionView> {
        let view = self.sessions.view(session_id)?;
        if view.status != SessionStatus::Working {
            return Ok(view);
        }
        let Some(task) = view.task_id.clone() else {
            return self.sessions.abort(session_id);
        };
        let row = self
            .store
            .agent(&view.agent_id)?
            .ok_or_else(|| agent_not_found(&view.agent_id))?;
        let (client, _) = self.client_for(&row).await?;
        let u = client
            .cancel_task(&task, CALL_TIMEOUT)
            .await
            .map_err(|e| BridgeError::upstream(format!("Agent {}: {e}", row.id)))?;
        self.sessions.update(session_id, |s| {
            if let Some(st) = u.state {
                s.view.task_state = Some(st);
            }
            s.view.clone()
        })
    }

    /// A session's view; a task that is neither running here nor final is asked for (`GetTask` / `tasks/get`).
    pub async fn status(&self, session_id: &str) -> BridgeResult<SessionView> {
        let view = self.sessions.view(session_id)?;
        let stale = view.status != SessionStatus::Working
            && view
                .task_state
                .is_some_and(|s| !s.is_terminal() && !s.is_interrupted());
        if let (true, Some(task)) = (stale, view.task_id.clone())
            && let Some(row) = self.store.agent(&view.agent_id)?
        {
            let (client, _) = self.client_for(&row).await?;
            if let Ok(u) = client.get_task(&task, CALL_TIMEOUT).await {
                return self.sessions.update(session_id, |s| {
                    if let Some(st) = u.state {
                        s.view.task_state = Some(st);
                        s.view.status = SessionStatus::after(st);
                    }
                    s.view.clone()
                });
            }
        }
        Ok(view)
    }

    pub async fn shutdown(&self) {
        let mut procs = self.procs.lock().await;
        procs.clear();
        *self.running.lock().unwrap_or_else(|p| p.into_inner()) = 0;
    }
}
