//! Crash recovery: a child that exits without being asked is recorded as crashed (its tools stay listed), restarted
//! on its next use once a doubling back-off has passed, and left down after `MAX_FAILURES` failures in a row.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::Tool;

use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_core::model::Transport;

use crate::spawn::StderrRing;
use crate::state::{Child, Inner, Slot};
use crate::sync::lock;

/// Consecutive crashes after which a server stays down until activated again.
pub const MAX_FAILURES: u32 = 5;

impl Inner {
    /// The running child for `server`, restarting a crashed one whose back-off has passed.
    pub(super) async fn ready_child(self: &Arc<Self>, server: &str) -> Result<Arc<Child>> {
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
            // Flagged active and still starting since this process began: wait for it (`restore.rs`).
            if let Some(restored) = self.restored_child(server).await {
                return restored;
            }
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
                self.registry.store().set_status(
                    srv.id,
                    &ad_store::lifecycle::StatusChange {
                        status: ad_core::model::ServerStatus::Ready,
                        active: Some(true),
                        error: None,
                        auth_url: None,
                    },
                )?;
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
    pub(super) fn record_crash(
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
            self.record_error(server_id, false, &msg);
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
        self.record_error(server_id, true, &error);
        self.events.emit(Event::ServerError {
            name: server.to_owned(),
            error,
        });
    }

    /// A crash recorded as the server's status: `error` with a transport error, the active flag as given (kept while
    /// it will be restarted on next use).
    fn record_error(&self, server_id: i64, active: bool, message: &str) {
        let _ = self.registry.store().set_status(
            server_id,
            &ad_store::lifecycle::StatusChange {
                status: ad_core::model::ServerStatus::Error,
                active: Some(active),
                error: Some((message, ad_core::error::ToolErrorKind::TransportError)),
                auth_url: None,
            },
        );
    }

    /// The child's process ended. An exit we did not ask for is a crash: recorded, announced, restarted on next use.
    pub(super) fn on_child_exit(&self, name: &str, cause: &str, stderr: &Arc<StderrRing>) {
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
}
