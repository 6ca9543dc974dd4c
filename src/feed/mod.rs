//! Registry snapshots for subscribers (seed 001's `subscribe`): `{seq, servers: [ListedEntry]}`, the full registered
//! set after every change. Transports (WebSocket, SSE, the MCP resource `agent-discover://registry`) only forward.
//!
//! One feed per `App`, started on first use. It rebuilds the snapshot when this process's event bus reports a change,
//! and when another agent-discover process commits to the same database (the `PRAGMA data_version` watch the dashboard
//! uses, `ad_store::watch`). `seq` grows by one only when the servers actually differ, so an unchanged re-apply or a
//! foreign commit that touches no server (a call log, metrics) sends nothing.
//!
//! Each subscriber holds a `tokio::sync::watch` receiver: one slot, the newest snapshot, so a subscriber that never
//! reads costs one `Arc` and never stalls the feed or the others (it skips to the latest when it reads again). Its
//! first delivery is the current set with `seq: 0` (the bootstrap); later ones carry the feed's counter.
//!
//! The feed also reconciles this process with the stored intent: a child running here whose server was disabled or
//! removed by another process is stopped, and approval rules another process set reach the fast lane.

use std::sync::{Arc, Weak};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::error::{Result, ToolError};
use crate::events::{Event, Received};
use crate::model::{ListFilter, ServerStatus, Transport};

pub mod snapshot;
pub use snapshot::{Feed, FeedCell, ListedEntry, ListedTool, Snapshot, Subscription};

impl App {
    /// The registry feed, started on first use (inside a Tokio runtime). Building the first snapshot reads the
    /// database once.
    pub fn feed(self: &Arc<Self>) -> &Feed {
        self.feed_cell().get_or_init(|| Feed::start(self))
    }

    /// Subscribes to registry snapshots: the bootstrap first, then one snapshot per change.
    pub fn subscribe_registry(self: &Arc<Self>) -> Subscription {
        let rx = self.feed().tx.subscribe();
        Subscription {
            rx,
            bootstrapped: false,
        }
    }

    /// The newest snapshot (its `seq` is the feed's counter).
    pub fn registry_snapshot(self: &Arc<Self>) -> Arc<Snapshot> {
        self.feed().tx.borrow().clone()
    }

    /// Reads the registered set as subscribers see it: one state of the database, never a mix of two. The rows, their
    /// tools and filters come from several statements, so the read is repeated when a commit (this process's or
    /// another's) fell between its first and last statement.
    pub fn listed_entries(&self) -> Result<Vec<ListedEntry>> {
        const ATTEMPTS: usize = 50;
        let store = self.registry.store();
        let mut before = store.change_marker()?;
        for _ in 0..ATTEMPTS {
            let entries = self.read_entries()?;
            let after = store.change_marker()?;
            if after == before {
                return Ok(entries);
            }
            before = after;
        }
        Err(crate::error::Error::Unavailable(format!(
            "the registry changed during each of {ATTEMPTS} reads of it; try again"
        )))
    }

    fn read_entries(&self) -> Result<Vec<ListedEntry>> {
        let rows = self.registry.list(&ListFilter::default())?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let s = r.server;
            let filter = self.registry.tool_filter(s.id)?;
            let tools: Vec<ListedTool> = if r.tool_count == 0 {
                vec![]
            } else {
                self.registry
                    .tools(s.id)?
                    .into_iter()
                    .filter(|t| filter.allows(&t.name))
                    .map(|t| ListedTool {
                        name: t.name,
                        description: t.description,
                        input_schema: t.input_schema,
                    })
                    .collect()
            };
            let authenticating = s.status == ServerStatus::Authenticating;
            let auth_mode = if authenticating || s.auth_url.is_some() {
                "authorizationCode"
            } else if s
                .headers
                .keys()
                .any(|k| k.eq_ignore_ascii_case("authorization"))
            {
                "apiKey"
            } else {
                "none"
            };
            let error = (s.status == ServerStatus::Error).then(|| ToolError {
                kind: s
                    .error_kind
                    .unwrap_or(crate::error::ToolErrorKind::TransportError),
                message: s.last_error.clone().unwrap_or_default(),
                details: None,
            });
            out.push(ListedEntry {
                sandbox: self.sandbox_brief(&s)?,
                capabilities: self
                    .proxy
                    .capabilities_of(&s.name)
                    .and_then(|c| serde_json::to_value(c).ok()),
                tool_count: tools.len(),
                transport: match s.transport {
                    Transport::Stdio => "stdio",
                    Transport::StreamableHttp | Transport::Sse => "http",
                },
                auth_mode,
                auth_url: if authenticating {
                    s.auth_url.clone()
                } else {
                    None
                },
                error,
                tools,
                status: s.status,
                name: s.name,
            });
        }
        Ok(out)
    }
}

impl Feed {
    fn start(app: &Arc<App>) -> Feed {
        // Subscribed before the first snapshot is built, so no change can fall between the two (a change made by
        // this process moves no `data_version`: the bus is the only way the feed hears of it).
        // Not woken by every proxied call's `call:logged` (ignored below anyway): one task wake-up less per call.
        let events = app.events.subscribe_except("*", "call:");
        let dirty = Arc::new(Notify::new());
        // Records the agents present now, so the first change another process makes is announced.
        app.agents.notice_changes_elsewhere();
        let servers = app.listed_entries().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "building the first registry snapshot failed; building it again");
            dirty.notify_one();
            vec![]
        });
        let (tx, _) = watch::channel(Arc::new(Snapshot { seq: 0, servers }));
        let cancel = CancellationToken::new();
        tokio::spawn(listen(events, dirty.clone(), cancel.clone()));
        let elsewhere = Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(rebuild(
            Arc::downgrade(app),
            tx.clone(),
            dirty.clone(),
            elsewhere.clone(),
            cancel.clone(),
        ));
        let kick = dirty.clone();
        ad_store::watch::spawn(
            app.registry.store().clone(),
            &app.config.db_path,
            move || {
                elsewhere.store(true, std::sync::atomic::Ordering::SeqCst);
                kick.notify_one()
            },
            cancel.clone(),
        );
        Feed {
            tx,
            dirty,
            _stop: cancel.drop_guard(),
        }
    }

    /// Asks for a rebuild now (tests, and changes the event bus does not carry).
    pub fn refresh(&self) {
        self.dirty.notify_one();
    }

    /// How many subscribers hold a receiver.
    pub fn subscriber_count(&self) -> usize {
        self.tx.receiver_count()
    }
}

/// Event bus to feed: anything about servers marks it dirty (call logs and warm-ups do not change the set).
async fn listen(
    mut sub: crate::events::Subscription,
    dirty: Arc<Notify>,
    cancel: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            _ = cancel.cancelled() => return,
            r = sub.recv() => r,
        };
        match received {
            None => return,
            Some(Received::Event(
                Event::CallLogged { .. }
                | Event::Warmup { .. }
                | Event::ApprovalRequested { .. }
                | Event::ApprovalDecided { .. },
            )) => {}
            Some(_) => dirty.notify_one(),
        }
    }
}

async fn rebuild(
    app: Weak<App>,
    tx: watch::Sender<Arc<Snapshot>>,
    dirty: Arc<Notify>,
    elsewhere: Arc<std::sync::atomic::AtomicBool>,
    cancel: CancellationToken,
) {
    // The servers as of the last rebuild that followed another process's commit: what such a commit changed is the
    // difference from it (a rebuild for this process's own events in between may already show the change).
    let mut baseline = tx.borrow().clone();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = dirty.notified() => {}
        }
        // Whether another process committed since the last rebuild (read before building, so none is missed).
        let external = elsewhere.swap(false, std::sync::atomic::Ordering::SeqCst);
        let Some(app) = app.upgrade() else { return };
        let reader = app.clone();
        let built = tokio::task::spawn_blocking(move || {
            // Agents added or removed by another process change what this process's MCP clients list.
            reader.agents.notice_changes_elsewhere();
            reader.listed_entries()
        })
        .await;
        let servers = match built {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "building a registry snapshot failed");
                elsewhere.fetch_or(external, std::sync::atomic::Ordering::SeqCst);
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the registry snapshot task failed");
                elsewhere.fetch_or(external, std::sync::atomic::Ordering::SeqCst);
                continue;
            }
        };
        if external {
            // Another process may have changed approval rules: which tools the fast lane leaves to the normal path
            // follows (#27; the normal path reads the rules on every call), and this process's listeners hear of it.
            for name in app.proxy.reload_approvals(None) {
                app.events.emit(Event::ToolPolicyChanged { name });
            }
            // Another process changed what a running server exposes (its allow/deny filter): the tools of this
            // process's child are listed again, which tells this process's MCP clients (`list_changed`).
            let store = app.registry.store();
            let relist: Vec<String> = servers
                .iter()
                .filter(|n| {
                    let Some(exposed) = app.proxy.exposed_tool_names(&n.name) else {
                        return false;
                    };
                    let changed = baseline
                        .servers
                        .iter()
                        .any(|o| o.name == n.name && o.tools != n.tools);
                    // What the child exposes here against what the registry now allows: a tool exposed that the
                    // filter now hides, or an allowed tool missing here that no pin withholds.
                    let hidden = exposed
                        .iter()
                        .any(|e| !n.tools.iter().any(|t| &t.name == e));
                    let missing = n.tools.iter().any(|t| {
                        !exposed.contains(&t.name)
                            && !matches!(store.pin(&n.name, &t.name), Ok(Some(p)) if p.pending())
                    });
                    // Or another process changed its tool overrides (`ad_registry::overrides`).
                    let overridden = app
                        .registry
                        .get(&n.name)
                        .is_ok_and(|s| app.registry.overrides_stale(s.id))
                        || app.registry.profile_overrides_stale(&n.name);
                    changed || hidden || missing || overridden
                })
                .map(|n| n.name.clone())
                .collect();
            for name in relist {
                app.proxy.relist_tools(&name).await;
            }
        }
        reconcile(&app).await;
        // `send_if_modified` never waits for receivers: slow subscribers just see the newest later.
        tx.send_if_modified(|current| {
            if current.servers == servers {
                return false;
            }
            *current = Arc::new(Snapshot {
                seq: current.seq + 1,
                servers,
            });
            true
        });
        if external {
            // The snapshot now holds `servers` (sent, or equal to them): cheap to keep, it is shared.
            baseline = tx.borrow().clone();
        }
    }
}

/// Stops children of this process whose server another process disabled or removed (checked against the stored row
/// itself, not the snapshot, so a server registered and started since the snapshot was read is left alone). A replica
/// that follows the shared active flags (team mode, `Config::team`) also stops those another replica deactivated, and
/// starts, in the background, those another replica activated.
async fn reconcile(app: &Arc<App>) {
    let follow = app.config.team;
    let running = app.proxy.active_names();
    for child in &running {
        let target = match app.registry.store().server_by_name(child) {
            Ok(None) => ServerStatus::Stopped,
            Ok(Some(s)) if s.status == ServerStatus::Disabled => ServerStatus::Disabled,
            Ok(Some(s)) if follow && !s.active => ServerStatus::Stopped,
            _ => continue,
        };
        tracing::info!(server = %child, status = target.as_str(), "stopping a server changed by another process");
        if let Err(e) = app.proxy.deactivate_to(child, target).await {
            tracing::warn!(server = %child, error = %e, "could not stop it");
        }
    }
    if !follow {
        return;
    }
    let wanted = match app.registry.store().servers_to_restore() {
        Ok(w) => w,
        Err(e) => return tracing::warn!(error = %e, "cannot read the active servers to follow"),
    };
    for server in wanted {
        if running.contains(&server.name) {
            continue;
        }
        let proxy = app.proxy.clone();
        tokio::spawn(async move {
            match proxy.follow(&server.name).await {
                Some(Ok(_)) => {
                    tracing::info!(server = %server.name, "started a server another replica activated")
                }
                Some(Err(e)) => {
                    tracing::warn!(server = %server.name, error = %e, "could not start a server another replica activated; trying again later")
                }
                None => {}
            }
        });
    }
}
