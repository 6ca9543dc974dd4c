//! [`CodeMode`]: starts runs and follows them to their answer. A run whose inner call must ask the caller something
//! (an approval, a 2026-07-28 child's question) is paused: the caller gets one input-required result gathering the
//! questions of every call waiting at that moment (each key prefixed with its call's, `c3.approval`) and a
//! `requestState` naming the run; its retry (the same code, with `inputResponses`) hands each call its answers and
//! follows the run on. A paused run waits in this process at most until its wall-clock limit; dropping it (or the
//! caller going away while it runs) stops the script and cancels its calls.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::model::{InputRequests, InputRequiredResult, InputResponses};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use ad_core::error::{Error, Result};
use ad_proxy::{Caller, Proxy};

use crate::answer::{Failure, Outcome};
use crate::engine::{self, Job, Running};
use crate::host::{Ask, Catalog, Host};
use crate::limits::{CODE_BYTES, Limits, MAX_RUNS};
use crate::meter::Stop;

/// The `requestState` prefix of a paused run.
pub const STATE_PREFIX: &str = "adsc1.";

/// A script to run: the body of an async function (`return` gives the result), and the CPU time limit in ms.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub code: String,
    pub timeout_ms: Option<u64>,
}

/// How a run call ends: with the run's outcome, or with questions for the caller (retry with the answers).
#[derive(Debug)]
pub enum Step {
    Done(Outcome),
    Asked(InputRequiredResult),
}

/// Code mode for one application: its proxy, its catalog, the default limits and the paused runs.
#[derive(Clone)]
pub struct CodeMode {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CodeMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeMode")
            .field("limits", &self.shared.limits)
            .field("live", &self.live())
            .finish_non_exhaustive()
    }
}

struct Shared {
    proxy: Proxy,
    limits: Limits,
    paused: Mutex<HashMap<String, Paused>>,
    runs: Arc<AtomicUsize>,
}

/// A run in progress, owned by whoever follows it: dropped, it is stopped.
struct Run {
    running: Running,
    cancel: CancellationToken,
    done: oneshot::Receiver<Outcome>,
    asks: mpsc::UnboundedReceiver<Ask>,
    /// The engine's requests in flight while it waits (`None` while it runs).
    idle: watch::Receiver<Option<usize>>,
    digest: [u8; 32],
    deadline: Instant,
    id: Option<String>,
}

impl Drop for Run {
    fn drop(&mut self) {
        // A run that finished is past stopping; otherwise this stops the script and its calls.
        self.running.stop(Stop::Cancelled);
        self.cancel.cancel();
    }
}

/// A run waiting for the caller's answers.
struct Paused {
    run: Run,
    asks: Vec<Ask>,
}

/// Counts a live run until its engine thread ends.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(runs: &Arc<AtomicUsize>) -> Result<Slot> {
        if runs.fetch_add(1, Ordering::AcqRel) >= MAX_RUNS {
            runs.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::Unavailable(format!(
                "{MAX_RUNS} scripts are running or waiting for answers in this process; try again when one ends"
            )));
        }
        Ok(Slot(runs.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn digest(code: &str) -> [u8; 32] {
    Sha256::digest(code.as_bytes()).into()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl CodeMode {
    pub fn new(proxy: Proxy) -> CodeMode {
        CodeMode::with_limits(proxy, Limits::default())
    }

    pub fn with_limits(proxy: Proxy, limits: Limits) -> CodeMode {
        CodeMode {
            shared: Arc::new(Shared {
                proxy,
                limits,
                paused: Mutex::default(),
                runs: Arc::default(),
            }),
        }
    }

    /// The default limits of a run.
    pub fn limits(&self) -> Limits {
        self.shared.limits
    }

    /// How many runs are live in this process (running, or paused for an answer).
    pub fn live(&self) -> usize {
        self.shared.runs.load(Ordering::Acquire)
    }

    /// Runs `script` for `caller` (its `find_tool` and `find_tools` answered by `catalog`), or, when the caller's
    /// `requestState` names a paused run, answers that run's questions with the caller's `inputResponses` and follows
    /// it on. Errors are the caller's (bad code, a stale `requestState`, too many runs); a script that fails ends in
    /// `Step::Done` with its typed error.
    pub async fn run(
        &self,
        script: Script,
        caller: Caller,
        catalog: Arc<dyn Catalog>,
    ) -> Result<Step> {
        self.expire();
        if let Some(state) = caller.request_state.as_deref()
            && let Some(id) = state.strip_prefix(STATE_PREFIX)
        {
            return self
                .resume(id, &script, caller.input_responses.unwrap_or_default())
                .await;
        }
        if script.code.len() > CODE_BYTES {
            return Err(Error::invalid(
                "code",
                format!("over {} KiB", CODE_BYTES / 1024),
            ));
        }
        let limits = self.shared.limits.with_timeout_ms(script.timeout_ms);
        let slot = Slot::take(&self.shared.runs)?;
        let cancel = CancellationToken::new();
        let (asks_tx, asks) = mpsc::unbounded_channel();
        let host = Arc::new(Host::new(
            self.shared.proxy.clone(),
            catalog,
            tokio::runtime::Handle::current(),
            inner_caller(caller, &cancel),
            cancel.clone(),
            asks_tx,
        ));
        let (done_tx, done) = oneshot::channel();
        let digest = digest(&script.code);
        let (idle_tx, idle) = watch::channel(None);
        let job = Job {
            tools: crate::bridge::Dispatch::tools(&*host),
            code: script.code,
            limits,
            dispatch: host,
            idle: idle_tx,
        };
        let running = engine::start(job, move |outcome| {
            drop(slot);
            let _ = done_tx.send(outcome);
        })
        .map_err(|e| Error::Internal(format!("cannot start a script thread: {e}")))?;
        let run = Run {
            running,
            cancel,
            done,
            asks,
            idle,
            digest,
            deadline: Instant::now() + limits.wall,
            id: None,
        };
        self.follow(run).await
    }

    /// Follows a run to its outcome, or pauses it for its questions: once the engine waits and every request in flight
    /// is a question (so the calls asking at the same moment are asked together, whatever order they come in).
    async fn follow(&self, mut run: Run) -> Result<Step> {
        let mut asks: Vec<Ask> = Vec::new();
        loop {
            tokio::select! {
                biased;
                outcome = &mut run.done => {
                    return Ok(Step::Done(outcome.unwrap_or_else(|_| lost(self.shared.limits))));
                }
                Some(ask) = run.asks.recv() => asks.push(ask),
                changed = run.idle.changed() => {
                    if changed.is_err() {
                        // The engine has ended: its outcome is on its way.
                        let outcome = (&mut run.done).await;
                        return Ok(Step::Done(outcome.unwrap_or_else(|_| lost(self.shared.limits))));
                    }
                }
            }
            while let Ok(more) = run.asks.try_recv() {
                asks.push(more);
            }
            if !asks.is_empty() && *run.idle.borrow() == Some(asks.len()) {
                return Ok(Step::Asked(self.pause(run, asks)));
            }
        }
    }

    /// Keeps a run until its questions are answered; the input-required result that asks them.
    fn pause(&self, mut run: Run, asks: Vec<Ask>) -> InputRequiredResult {
        let id = run
            .id
            .get_or_insert_with(|| hex(&ad_registry::secrets::random_bytes()[..16]))
            .clone();
        let mut requests = InputRequests::new();
        for ask in &asks {
            for (key, request) in ask.result.input_requests.iter().flatten() {
                requests.insert(format!("{}.{key}", ask.key), request.clone());
            }
        }
        lock(&self.shared.paused).insert(id.clone(), Paused { run, asks });
        InputRequiredResult::new(Some(requests), Some(format!("{STATE_PREFIX}{id}")))
    }

    /// The retry of a paused run: each waiting call gets the answers under its key; a call left unanswered is asked
    /// again.
    async fn resume(&self, id: &str, script: &Script, responses: InputResponses) -> Result<Step> {
        let Some(paused) = lock(&self.shared.paused).remove(id) else {
            return Err(Error::invalid(
                "requestState",
                "no script run waits under it here: it ended, waited past its wall-clock limit, or was started by \
                 another agent-discover process",
            ));
        };
        if paused.run.digest != digest(&script.code) {
            lock(&self.shared.paused).insert(id.to_owned(), paused);
            return Err(Error::invalid(
                "code",
                "a retry must carry the same code as the run it answers",
            ));
        }
        let Paused { run, asks } = paused;
        let mut unanswered = Vec::new();
        for ask in asks {
            let prefix = format!("{}.", ask.key);
            let mine: InputResponses = responses
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_owned(), v.clone())))
                .collect();
            if mine.is_empty() {
                unanswered.push(ask);
            } else {
                let _ = ask.answer.send(mine);
            }
        }
        if unanswered.is_empty() {
            self.follow(run).await
        } else {
            Ok(Step::Asked(self.pause(run, unanswered)))
        }
    }

    /// Drops the paused runs past their wall-clock limit (which stops them).
    fn expire(&self) {
        let now = Instant::now();
        lock(&self.shared.paused).retain(|_, p| p.run.deadline > now);
    }
}

/// The caller of a run's inner calls: the calling client's peer, protocol, capabilities (without the tasks extension:
/// a script cannot follow a task) and session; a child's questions go to this caller only; no progress token; the
/// run's cancellation; marked as a script's.
fn inner_caller(outer: Caller, cancel: &CancellationToken) -> Caller {
    let mut capabilities = outer.capabilities;
    if let Some(ext) = capabilities.as_mut().and_then(|c| c.extensions.as_mut()) {
        ext.remove(rmcp::model::TASKS_EXTENSION_ID);
    }
    Caller {
        peer: outer.peer,
        progress_token: None,
        cancel: Some(cancel.clone()),
        protocol: outer.protocol,
        capabilities,
        input_responses: None,
        request_state: None,
        log_level: outer.log_level,
        scoped: false,
        questions_to_caller: true,
        session: outer.session,
        script: true,
        trace: outer.trace,
        in_exchange: false,
        principal: outer.principal,
        // Never paged: the script gets the whole result.
        page_bytes: Some(0),
        profile: outer.profile,
    }
}

/// The outcome of a run whose engine thread ended without one (it panicked).
fn lost(limits: Limits) -> Outcome {
    Outcome {
        result: Err(Failure::Internal {
            message: "the script's thread ended without an answer".into(),
        }),
        logs: vec![],
        calls: vec![],
        result_cut: None,
        logs_dropped: 0,
        limits,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
