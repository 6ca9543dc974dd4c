//! Starting and stopping children: activate, follow the shared active flags (team replicas), restart after a
//! configuration change, deactivate, shut down and probe (restore at startup is `restore.rs`); the status records and events each of
//! them leaves, and the per-server lock that serialises them.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;

use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_core::model::{ServerStatus, ToolInfo};
use ad_store::lifecycle::StatusChange;

use crate::spawn;
use crate::state::{Child, Inner, Proxy, Slot};
use crate::sync::lock;

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
    /// A launcher agent-discover fetched for this start (`uvx` or `npx` was not installed), to tell the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetched: Option<String>,
}

impl Proxy {
    /// Starts `name` (if it is not running), lists and stores its tools, sets its `active` flag and tells clients.
    pub async fn activate(&self, name: &str) -> Result<Activation> {
        // The built-in server is never started: it is always there (`local.rs`).
        if self.is_local(name) {
            let tools = self.local_tools().map(|(_, t)| t).unwrap_or_default();
            return Ok(Activation {
                name: name.to_owned(),
                status: "already_active",
                tools: tools
                    .iter()
                    .map(|t| ToolInfo {
                        name: t.name.to_string(),
                        description: t.description.as_deref().unwrap_or_default().to_owned(),
                        input_schema: serde_json::Value::Object((*t.input_schema).clone()),
                    })
                    .collect(),
                fetched: None,
            });
        }
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        if let Some(Slot::Running(child)) = lock(&self.inner.children).get(name)
            && child.exited.borrow().is_none()
        {
            return Ok(Activation {
                name: name.to_owned(),
                status: "already_active",
                tools: child.tool_infos(),
                fetched: None,
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
        if self.is_local(name) {
            return Ok(None);
        }
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        // Users' own children start again on their next call, with the server's new configuration.
        self.inner.stop_personal(Some(name)).await;
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
        let fetched = child.fetched.clone();
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
            fetched,
        })
    }

    /// Stops `name`, clears its `active` flag and tells clients. Returns false when it was not running.
    /// Its tools stay stored, so search still finds them.
    pub async fn deactivate(&self, name: &str) -> Result<bool> {
        if self.is_local(name) {
            return Ok(false);
        }
        self.deactivate_to(name, ServerStatus::Stopped).await
    }

    /// [`Proxy::deactivate`] ending in `status` (`stopped` or `disabled`): one status change, no `stopped` in between.
    pub async fn deactivate_to(&self, name: &str, status: ServerStatus) -> Result<bool> {
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        self.inner.stop_personal(Some(name)).await;
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
        self.inner.stop_personal(None).await;
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

    /// Checks that `name` answers, without changing its active flag or telling clients: a running server must list
    /// its tools within `timeout`; a stopped one is started, listed and stopped again. Returns its tool count.
    pub async fn probe(&self, name: &str, timeout: Duration) -> Result<usize> {
        if self.is_local(name) {
            return Ok(self.local_tools().map_or(0, |(_, t)| t.len()));
        }
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

    /// Starts `name` once as its next start would be (confined by its sandbox), lists its tools and stops it, without
    /// changing its status or telling clients: its tool count and what it printed on stderr meanwhile. A server that
    /// runs now is not started twice: its count and stderr so far. `sandbox check` reads the refusals from these.
    pub async fn check(&self, name: &str, timeout: Duration) -> Result<(usize, Vec<String>)> {
        if self.is_local(name) {
            return Ok((self.local_tools().map_or(0, |(_, t)| t.len()), Vec::new()));
        }
        let guard = self.inner.lock_for(name);
        let _held = guard.lock().await;
        if let Some(Slot::Running(c)) = lock(&self.inner.children).get(name)
            && c.exited.borrow().is_none()
        {
            return Ok((lock(&c.tools).len(), c.stderr.tail(40)));
        }
        let mut server = self.inner.registry.get(name)?;
        server.activate_timeout_ms = Some((timeout.as_millis() as u64).max(1));
        let child = self.inner.start(&server, 0).await?;
        let n = lock(&child.tools).len();
        let tail = child.stderr.tail(40);
        child.stop().await;
        Ok((n, tail))
    }
}

impl Inner {
    /// Records a status (with its error, if any) and announces it: one write, one event.
    pub(super) fn set_status(
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
    pub(super) fn record_start_failure(&self, name: &str, id: i64, e: &Error, keep_flag: bool) {
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

    pub(super) fn lock_for(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks)
            .entry(name.to_owned())
            .or_default()
            .clone()
    }
}

impl Child {
    /// Ends the connection, then the process group: close stdin, give the child a moment, then SIGKILL the group.
    pub(super) async fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(service) = self.service.lock().await.take() {
            let _ = tokio::time::timeout(STOP_GRACE, service.cancel()).await;
        }
        if let Some(Some(legacy)) = self.legacy.get()
            && let Some(service) = legacy.service.lock().await.take()
        {
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
