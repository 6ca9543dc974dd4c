//! The live stream at `/ws`: a full state snapshot with a sequence number on connect and after every change, plus
//! each call-log entry as it happens.
//!
//! One [`Hub`] per router builds snapshots; connections only forward. Changes come from the event bus (this process)
//! and from `ad_store::watch` (other processes on the same database). Snapshots are coalesced: a burst of events while
//! one is being built costs one more build, not one per event. A client that falls behind gets the latest snapshot.
//!
//! Messages (server to client): `{type:"state", seq, version, servers, active, approvals}` (`approvals`: the calls
//! waiting for a person), `{type:"registry", seq, servers}`
//! (seed 001's snapshot from `crate::feed`: `seq` 0 first on each connection, then one per change), `{type:"log_entry", entry}`,
//! `{type:"logs_cleared"}`, `{type:"error", error}`. Client to server: `{type:"refresh"}` resends the snapshot.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use axum::extract::State;
use axum::extract::ws::{Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;
use tokio::sync::{Notify, broadcast};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::error::ApiError;
use crate::app::App;
use crate::events::{Event, Received};
use crate::model::{ListFilter, ServerSummary, ToolRecord};
use crate::proxy::ChildStatus;

/// Most concurrent dashboard connections; more are refused with 503.
pub const MAX_CONNECTIONS: usize = 64;
/// Largest message a client may send (they only ever send `{"type":"refresh"}`).
pub const MAX_INCOMING: usize = 4096;

pub(crate) struct Hub {
    app: Arc<App>,
    /// The newest state message and its sequence number, replaced as a whole.
    latest: Mutex<(u64, Utf8Bytes)>,
    tx: broadcast::Sender<Utf8Bytes>,
    dirty: Arc<Notify>,
    connections: AtomicUsize,
    cancel: CancellationToken,
    /// Cancels `cancel` when the hub goes (the router was dropped), which ends the hub's tasks and file watch.
    _stop: tokio_util::sync::DropGuard,
}

/// A server as the dashboard shows it: the stored row, whether it runs in this process, and its tools.
#[derive(Serialize)]
pub(crate) struct ServerView {
    #[serde(flatten)]
    pub summary: ServerSummary,
    /// Runs in this process (the `active` flag is the cross-process intent; another process may run it).
    pub running: bool,
    pub tools: Vec<ToolView>,
    /// A stdio server's sandbox (`enabled`, `effective`, `network`); absent for a remote server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox::SandboxBrief>,
    /// Its approval policy rules (#27; none: every tool is `allow`).
    pub tool_policy: Vec<serde_json::Value>,
}

#[derive(Serialize)]
pub(crate) struct ToolView {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

impl From<ToolRecord> for ToolView {
    fn from(t: ToolRecord) -> ToolView {
        ToolView {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
        }
    }
}

#[derive(Serialize)]
struct StateMessage {
    r#type: &'static str,
    seq: u64,
    version: &'static str,
    servers: Vec<ServerView>,
    active: Vec<ChildStatus>,
    /// Calls waiting for a person's approval (#27), newest first.
    approvals: Vec<serde_json::Value>,
}

/// Reads the state the dashboard shows. Synchronous SQL: run it off the async workers.
pub(crate) fn server_views(app: &App) -> crate::error::Result<Vec<ServerView>> {
    app.registry
        .list(&ListFilter::default())?
        .into_iter()
        .map(|summary| {
            let tools = app
                .registry
                .tools(summary.server.id)?
                .into_iter()
                .map(ToolView::from)
                .collect();
            Ok(ServerView {
                running: app.proxy.is_active(&summary.server.name),
                sandbox: app.sandbox_brief(&summary.server)?,
                tool_policy: crate::approvals::rules_json(
                    &app.registry.approval_rules(summary.server.id)?,
                ),
                summary,
                tools,
            })
        })
        .collect()
}

fn state_message(app: &App, seq: u64) -> crate::error::Result<Utf8Bytes> {
    let msg = StateMessage {
        r#type: "state",
        seq,
        version: env!("CARGO_PKG_VERSION"),
        servers: server_views(app)?,
        active: app.proxy.children(),
        approvals: app.approvals(false)?,
    };
    serde_json::to_string(&msg)
        .map(Utf8Bytes::from)
        .map_err(|e| crate::error::Error::Internal(e.to_string()))
}

impl Hub {
    /// Builds the first snapshot and starts the tasks that keep it current; they end with `cancel` or when the hub
    /// is dropped (checked on their next wake-up).
    pub(crate) fn start(app: Arc<App>, shutdown: &CancellationToken) -> Arc<Hub> {
        let cancel = shutdown.child_token();
        let first = state_message(&app, 1).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "building the first dashboard snapshot failed");
            Utf8Bytes::from_static(
                r#"{"type":"state","seq":1,"servers":[],"active":[],"approvals":[]}"#,
            )
        });
        let hub = Arc::new(Hub {
            app: app.clone(),
            latest: Mutex::new((1, first)),
            tx: broadcast::channel(256).0,
            dirty: Arc::new(Notify::new()),
            connections: AtomicUsize::new(0),
            cancel: cancel.clone(),
            _stop: cancel.clone().drop_guard(),
        });
        tokio::spawn(forward_events(
            Arc::downgrade(&hub),
            app.clone(),
            cancel.clone(),
        ));
        tokio::spawn(rebuild_when_dirty(
            Arc::downgrade(&hub),
            hub.dirty.clone(),
            cancel.clone(),
        ));
        let weak = Arc::downgrade(&hub);
        ad_store::watch::spawn(
            app.registry.store().clone(),
            &app.config.db_path,
            move || {
                if let Some(hub) = weak.upgrade() {
                    tracing::debug!("another process changed the database");
                    hub.dirty.notify_one();
                }
            },
            cancel,
        );
        hub
    }

    pub(crate) fn latest(&self) -> (u64, Utf8Bytes) {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Tells connected dashboards that the call log was emptied.
    pub(crate) fn logs_cleared(&self) {
        let _ = self
            .tx
            .send(Utf8Bytes::from_static(r#"{"type":"logs_cleared"}"#));
    }

    pub(crate) fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Event bus to hub: call-log entries are forwarded as they are, everything else marks the state dirty.
async fn forward_events(hub: Weak<Hub>, app: Arc<App>, cancel: CancellationToken) {
    let mut sub = app.events.subscribe("*");
    loop {
        let received = tokio::select! {
            _ = cancel.cancelled() => return,
            r = sub.recv() => r,
        };
        let Some(received) = received else { return };
        let Some(hub) = hub.upgrade() else { return };
        match received {
            Received::Event(Event::CallLogged { id, .. }) => {
                // Built only for a dashboard that is connected (no receiver: it would be dropped unread).
                if hub.tx.receiver_count() == 0 {
                    continue;
                }
                if let Some(entry) = app.calllog.get(id) {
                    let msg = json!({"type": "log_entry", "entry": entry}).to_string();
                    let _ = hub.tx.send(Utf8Bytes::from(msg));
                }
            }
            Received::Event(_) | Received::Lagged(_) => hub.dirty.notify_one(),
        }
    }
}

async fn rebuild_when_dirty(hub: Weak<Hub>, dirty: Arc<Notify>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = dirty.notified() => {}
        }
        let Some(hub) = hub.upgrade() else { return };
        let app = hub.app.clone();
        let seq = hub.latest().0 + 1;
        let built = tokio::task::spawn_blocking(move || state_message(&app, seq)).await;
        match built {
            Ok(Ok(msg)) => {
                *hub.latest.lock().unwrap_or_else(|p| p.into_inner()) = (seq, msg.clone());
                let _ = hub.tx.send(msg);
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "building a dashboard snapshot failed"),
            Err(e) => tracing::warn!(error = %e, "the snapshot task failed"),
        }
    }
}

/// `GET /ws`: upgrades (Origin and Host were checked by the security layer) and streams.
pub(crate) async fn upgrade(
    State(state): State<AppState>,
    principal: Option<axum::Extension<Arc<ad_core::identity::Principal>>>,
    ws: WebSocketUpgrade,
) -> Response {
    let hub = state.hub.clone();
    // A team's user sees the stream as theirs: their own authorization of per-user servers, and, when not an admin,
    // only their part of it (`ws_view.rs`, issue 30).
    let viewer = principal.map(|axum::Extension(p)| super::ws_view::Viewer {
        restricted: !state.app.proxy.sees_all(Some(&p)),
        principal: p,
    });
    if hub.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        hub.connections.fetch_sub(1, Ordering::SeqCst);
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("too many dashboard connections (at most {MAX_CONNECTIONS})"),
        )
        .into_response();
    }
    ws.max_message_size(MAX_INCOMING)
        .max_frame_size(MAX_INCOMING)
        .on_upgrade(move |socket| async move {
            connection(socket, &hub, viewer).await;
            hub.connections.fetch_sub(1, Ordering::SeqCst);
        })
}

async fn connection(mut socket: WebSocket, hub: &Hub, viewer: Option<super::ws_view::Viewer>) {
    // What this connection may see of a message: all of it, or its viewer's own view.
    let view = |m: Utf8Bytes| {
        let viewer = viewer.as_ref();
        async move {
            match viewer {
                None => Some(m),
                Some(v) => super::ws_view::for_viewer(&hub.app, v, m).await,
            }
        }
    };
    // Subscribe before reading the snapshot, so no change between the two is missed.
    let mut rx = hub.tx.subscribe();
    let mut registry = hub.app.subscribe_registry();
    if let Some(first) = view(hub.latest().1).await
        && socket.send(Message::Text(first)).await.is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            snapshot = registry.next() => {
                let Some(snapshot) = snapshot else { return };
                let msg = json!({"type": "registry", "seq": snapshot.seq, "servers": snapshot.servers}).to_string();
                let Some(msg) = view(Utf8Bytes::from(msg)).await else { continue };
                if socket.send(Message::Text(msg)).await.is_err() {
                    return;
                }
            }
            _ = hub.cancel.cancelled() => {
                let _ = socket.send(Message::Close(None)).await;
                return;
            }
            msg = rx.recv() => {
                let out = match msg {
                    Ok(m) => m,
                    Err(broadcast::error::RecvError::Lagged(_)) => hub.latest().1,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(out) = view(out).await else { continue };
                if socket.send(Message::Text(out)).await.is_err() {
                    return;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    let reply = match serde_json::from_str::<serde_json::Value>(&t) {
                        Ok(v) if v["type"] == "refresh" => match view(hub.latest().1).await {
                            Some(m) => m,
                            None => continue,
                        },
                        _ => Utf8Bytes::from(json!({"type": "error", "error": "unknown message; send {\"type\":\"refresh\"}"}).to_string()),
                    };
                    if socket.send(Message::Text(reply)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {} // pings are answered by the library; binary is ignored
            }
        }
    }
}
