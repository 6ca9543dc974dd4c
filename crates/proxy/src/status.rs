//! The children as they stand: which run here, each one's state and the status `status` and the dashboard show.

use std::sync::Arc;

use rmcp::model::ServerCapabilities;
use serde::Serialize;

use ad_core::model::Transport;

use crate::state::{Child, Inner, Proxy, Slot};
use crate::sync::lock;

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
    /// The runtime that runs it (`{"kind":"node","version":"22.23.3","source":"cache"}`), for a Node child.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<crate::runtime::RuntimeInfo>,
}

impl Proxy {
    pub fn is_active(&self, name: &str) -> bool {
        lock(&self.inner.children).contains_key(name) || self.is_local(name)
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

    /// `active` (running), `error` (crashed or exited) or `inactive` (not started): the owning server's state in
    /// `find_tool` hits.
    pub fn state_of(&self, name: &str) -> &'static str {
        match lock(&self.inner.children).get(name) {
            Some(Slot::Running(c)) if c.exited.borrow().is_some() => "error",
            Some(Slot::Running(_)) => "active",
            Some(Slot::Crashed { .. }) => "error",
            None if self.is_local(name) => "active",
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
                runtime: c.runtime.clone(),
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
            runtime: None,
        },
    }
}

impl Inner {
    /// The running children (not exited) whose capabilities satisfy `pred`, by name.
    pub(super) fn running_with(
        &self,
        pred: impl Fn(&ServerCapabilities) -> bool,
    ) -> Vec<Arc<Child>> {
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
}
