//! What the registry feed hands out: snapshots of the registered set (`{seq, servers}`), a subscriber's end, and the
//! feed's handle that `App` keeps. A leaf: building and refreshing snapshots is the parent module's use case.

use std::sync::{Arc, OnceLock};

use serde::Serialize;
use tokio::sync::{Notify, watch};

use crate::error::ToolError;
use crate::model::ServerStatus;

/// One server as subscribers see it (seed 001's `ListedEntry`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedEntry {
    pub name: String,
    pub status: ServerStatus,
    /// Tools known for the server (stored at its last start), after its allow/deny filter.
    pub tool_count: usize,
    /// `stdio` or `http` (Streamable HTTP and SSE).
    pub transport: &'static str,
    /// `authorizationCode` while an OAuth flow is pending, `apiKey` when it sends an `Authorization` header, else `none`.
    pub auth_mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    pub tools: Vec<ListedTool>,
    /// What the server declared at initialize, when it runs in this process; `null` otherwise.
    pub capabilities: Option<serde_json::Value>,
    /// A stdio server's sandbox (`enabled`, `effective`, `network`); absent for a remote server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::types::SandboxBrief>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedTool {
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub input_schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub seq: u64,
    pub servers: Vec<ListedEntry>,
}

/// A subscriber's end: [`Subscription::next`] yields the bootstrap (`seq: 0`), then each newer snapshot.
pub struct Subscription {
    pub(super) rx: watch::Receiver<Arc<Snapshot>>,
    pub(super) bootstrapped: bool,
}

impl Subscription {
    /// The next snapshot to deliver; `None` when the feed has stopped (the app is gone).
    pub async fn next(&mut self) -> Option<Arc<Snapshot>> {
        if !self.bootstrapped {
            self.bootstrapped = true;
            let current = self.rx.borrow_and_update().clone();
            return Some(Arc::new(Snapshot {
                seq: 0,
                servers: current.servers.clone(),
            }));
        }
        self.rx.changed().await.ok()?;
        Some(self.rx.borrow_and_update().clone())
    }
}

pub struct Feed {
    pub(super) tx: watch::Sender<Arc<Snapshot>>,
    pub(super) dirty: Arc<Notify>,
    pub(super) _stop: tokio_util::sync::DropGuard,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("seq", &self.tx.borrow().seq)
            .finish_non_exhaustive()
    }
}

/// Where an `App` keeps its feed (a field of `App`).
pub type FeedCell = OnceLock<Feed>;
