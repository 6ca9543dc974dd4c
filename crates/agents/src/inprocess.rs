//! The in-process executor: agents an embedding program registers with `Agents::register` (seed 003's
//! `InProcessExecutor`), consulted before workers.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;

use super::session::{PromptOutcome, SessionStatus, SessionView, Sessions};
use super::{AgentInfo, AgentStatus, BridgeError, BridgeResult, ExecutorKind, Progress};
use ad_a2a::TaskState;

/// What an in-process agent says about itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalAgentInfo {
    pub id: String,
    pub capabilities: Vec<String>,
    pub description: String,
    /// Seed 003's provider entries (`{id, models, kind, ...}`); `None` for an agent without providers.
    pub providers: Option<Vec<Value>>,
    /// How many prompts may run at once (busy beyond that); 0 means 4.
    pub max_concurrent: u32,
}

/// One prompt to an in-process agent.
pub struct PromptRequest {
    pub session_id: String,
    pub text: String,
    pub provider: Option<String>,
    pub progress: Progress,
}

/// An agent living in the embedding program.
pub trait LocalAgent: Send + Sync + 'static {
    fn info(&self) -> LocalAgentInfo;
    /// Answers one prompt: the final state and text. Dropping the future cancels it.
    fn prompt(
        &self,
        request: PromptRequest,
    ) -> BoxFuture<'static, BridgeResult<(TaskState, String)>>;
}

struct Registered {
    agent: Arc<dyn LocalAgent>,
    info: LocalAgentInfo,
    running: Arc<AtomicU32>,
}

#[derive(Default)]
pub(crate) struct InProcessExecutor {
    agents: RwLock<Vec<Registered>>,
    pub sessions: Arc<Sessions>,
    started: AtomicBool,
}

impl InProcessExecutor {
    pub fn start(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    pub fn register(&self, agent: Arc<dyn LocalAgent>) -> ad_core::error::Result<()> {
        let mut info = agent.info();
        info.id.parse::<ad_core::model::ServerName>().map_err(|_| {
            ad_core::error::Error::invalid(
                "agent id",
                format!(
                    "{:?}: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                    ad_core::model::truncate_for_message(&info.id)
                ),
            )
        })?;
        if info.max_concurrent == 0 {
            info.max_concurrent = 4;
        }
        let mut agents = self.agents.write().unwrap_or_else(|p| p.into_inner());
        agents.retain(|a| a.info.id != info.id);
        agents.push(Registered {
            agent,
            info,
            running: Arc::default(),
        });
        Ok(())
    }

    pub fn ids(&self) -> Vec<String> {
        self.agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|a| a.info.id.clone())
            .collect()
    }

    pub fn has(&self, id: &str) -> bool {
        self.ids().iter().any(|a| a == id)
    }

    pub fn infos(&self) -> Vec<AgentInfo> {
        self.agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|a| AgentInfo {
                id: a.info.id.clone(),
                capabilities: a.info.capabilities.clone(),
                status: if a.running.load(Ordering::SeqCst) >= a.info.max_concurrent {
                    AgentStatus::Busy
                } else {
                    AgentStatus::Ready
                },
                providers: a.info.providers.clone(),
                executor: ExecutorKind::InProcess,
                description: a.info.description.clone(),
                source: None,
                protocol_version: None,
                max_concurrent: a.info.max_concurrent,
                last_error: None,
            })
            .collect()
    }

    fn get(&self, id: &str) -> Option<(Arc<dyn LocalAgent>, LocalAgentInfo, Arc<AtomicU32>)> {
        self.agents
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .find(|a| a.info.id == id)
            .map(|a| (a.agent.clone(), a.info.clone(), a.running.clone()))
    }

    pub fn create_session(&self, id: &str, provider: Option<&str>) -> BridgeResult<SessionView> {
        if !self.started.load(Ordering::SeqCst) {
            return Err(BridgeError::internal("Executor not started"));
        }
        let (_, info, _) = self.get(id).ok_or_else(|| super::agent_not_found(id))?;
        super::check_provider(info.providers.as_deref(), provider)?;
        Ok(self.sessions.open(id, ExecutorKind::InProcess, provider))
    }

    pub async fn prompt(
        &self,
        session_id: &str,
        text: &str,
        progress: Progress,
    ) -> BridgeResult<PromptOutcome> {
        let view = self.sessions.view(session_id)?;
        // The session stays with this executor: its agent is looked up here only.
        let (agent, info, running) = self
            .get(&view.agent_id)
            .ok_or_else(|| super::agent_not_found(&view.agent_id))?;
        let busy = running.fetch_add(1, Ordering::SeqCst);
        let _slot = Slot(running.clone());
        if busy >= info.max_concurrent {
            return Err(BridgeError::upstream(format!(
                "Agent {} is busy ({busy} tasks running, limit {})",
                info.id, info.max_concurrent
            )));
        }
        let request = PromptRequest {
            session_id: session_id.to_owned(),
            text: text.to_owned(),
            provider: view.provider.clone(),
            progress,
        };
        let fut = agent.prompt(request);
        let (sid, aid) = (session_id.to_owned(), view.agent_id.clone());
        self.sessions
            .run(session_id, async move {
                let (state, text) = fut.await?;
                Ok(PromptOutcome {
                    session_id: sid,
                    agent_id: aid,
                    task_id: None,
                    state,
                    status: SessionStatus::after(state),
                    text,
                })
            })
            .await
    }
}

/// Counts a running prompt for the busy status until dropped.
struct Slot(Arc<AtomicU32>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
