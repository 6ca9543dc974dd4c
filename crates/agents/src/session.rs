//! Sessions of one executor: each bound to its agent and to the executor that created it (seed 003's affinity),
//! with the A2A context and task it continues, and the status its tasks' states map to.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use super::{BridgeError, BridgeResult, ExecutorKind, session_not_found};
use ad_a2a::TaskState;

/// A session's status: `active` (open, idle), `working` (a task runs), `input-required` / `auth-required` (the
/// agent waits for the caller; the next prompt continues the task), `closed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionStatus {
    Active,
    Working,
    InputRequired,
    AuthRequired,
    Closed,
}

impl SessionStatus {
    /// The status a session has once a task ended in `state`.
    pub fn after(state: TaskState) -> SessionStatus {
        match state {
            TaskState::InputRequired => SessionStatus::InputRequired,
            TaskState::AuthRequired => SessionStatus::AuthRequired,
            TaskState::Submitted | TaskState::Working => SessionStatus::Working,
            _ => SessionStatus::Active,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionView {
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "agentId")]
    pub agent_id: String,
    pub executor: ExecutorKind,
    pub status: SessionStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(rename = "contextId", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(rename = "taskState", skip_serializing_if = "Option::is_none")]
    pub task_state: Option<TaskState>,
}

/// What a prompt produced: the final task state and the answer's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptOutcome {
    #[serde(rename = "sessionId")]
    pub session_id: String,
    #[serde(rename = "agentId")]
    pub agent_id: String,
    #[serde(rename = "taskId", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The task's A2A state (`completed`, `canceled`, `failed`, `input-required`, ...).
    pub state: TaskState,
    /// The session's status after it.
    pub status: SessionStatus,
    pub text: String,
}

#[derive(Debug)]
pub(crate) struct Session {
    pub view: SessionView,
    pub running: Option<tokio::task::AbortHandle>,
}

#[derive(Debug, Default)]
pub(crate) struct Sessions(Mutex<HashMap<String, Session>>);

pub(crate) fn new_session_id() -> String {
    let b = ad_registry::secrets::random_bytes();
    b[..16].iter().map(|x| format!("{x:02x}")).collect()
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn open(
        &self,
        agent_id: &str,
        executor: ExecutorKind,
        provider: Option<&str>,
    ) -> SessionView {
        let view = SessionView {
            session_id: new_session_id(),
            agent_id: agent_id.to_owned(),
            executor,
            status: SessionStatus::Active,
            provider: provider.map(str::to_owned),
            context_id: None,
            task_id: None,
            task_state: None,
        };
        self.lock().insert(
            view.session_id.clone(),
            Session {
                view: view.clone(),
                running: None,
            },
        );
        view
    }

    pub fn view(&self, id: &str) -> BridgeResult<SessionView> {
        self.lock()
            .get(id)
            .map(|s| s.view.clone())
            .ok_or_else(|| session_not_found(id))
    }

    /// Changes a session in place; `Session not found` when it is gone (closed meanwhile).
    pub fn update<T>(&self, id: &str, f: impl FnOnce(&mut Session) -> T) -> BridgeResult<T> {
        self.lock()
            .get_mut(id)
            .map(f)
            .ok_or_else(|| session_not_found(id))
    }

    /// Marks a session working, refusing a second concurrent prompt in it.
    pub fn begin(&self, id: &str) -> BridgeResult<SessionView> {
        self.update(id, |s| {
            if s.view.status == SessionStatus::Working {
                return Err(BridgeError::upstream(format!(
                    "Session {id} is already working on a task; wait for it or cancel it"
                )));
            }
            s.view.status = SessionStatus::Working;
            Ok(s.view.clone())
        })?
    }

    /// Ends a running prompt: its final state (or `None` when it failed before one).
    pub fn finish(&self, id: &str, state: Option<TaskState>) {
        let _ = self.update(id, |s| {
            s.running = None;
            if let Some(st) = state {
                s.view.task_state = Some(st);
                s.view.status = SessionStatus::after(st);
            } else {
                s.view.status = SessionStatus::Active;
            }
            if s.view.status == SessionStatus::Working {
                s.view.status = SessionStatus::Active;
            }
        });
    }

    /// Aborts the running prompt in-process (its `prompt` call answers `canceled`).
    pub fn abort(&self, id: &str) -> BridgeResult<SessionView> {
        self.update(id, |s| {
            if let Some(h) = s.running.take() {
                h.abort();
                s.view.task_state = Some(TaskState::Canceled);
                s.view.status = SessionStatus::Active;
            }
            s.view.clone()
        })
    }

    pub fn close(&self, id: &str) -> BridgeResult<SessionView> {
        let mut s = self
            .lock()
            .remove(id)
            .ok_or_else(|| session_not_found(id))?;
        if let Some(h) = s.running.take() {
            h.abort();
        }
        s.view.status = SessionStatus::Closed;
        Ok(s.view)
    }

    /// Runs a prompt's work as its own task so `abort` can stop it; an aborted run answers `canceled`.
    pub async fn run(
        &self,
        id: &str,
        work: impl std::future::Future<Output = BridgeResult<PromptOutcome>> + Send + 'static,
    ) -> BridgeResult<PromptOutcome> {
        let started = self.begin(id)?;
        let handle = tokio::spawn(work);
        let _ = self.update(id, |s| s.running = Some(handle.abort_handle()));
        let result = match handle.await {
            Ok(r) => r,
            Err(e) if e.is_cancelled() => Ok(PromptOutcome {
                session_id: id.to_owned(),
                agent_id: started.agent_id.clone(),
                task_id: self.view(id).ok().and_then(|v| v.task_id),
                state: TaskState::Canceled,
                status: SessionStatus::Active,
                text: String::new(),
            }),
            Err(e) => Err(BridgeError::internal(format!(
                "the prompt task failed: {e}"
            ))),
        };
        self.finish(id, result.as_ref().ok().map(|o| o.state));
        result.map(|mut o| {
            o.status = self
                .view(id)
                .map(|v| v.status)
                .unwrap_or(SessionStatus::Closed);
            o
        })
    }
}
