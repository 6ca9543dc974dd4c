//! PostgreSQL `LISTEN/NOTIFY`: how a replica learns that another one changed the registry, without polling.
//!
//! Writers call [`notify`] inside their write transaction (PostgreSQL delivers it at commit, and not at all on
//! rollback). Each replica keeps one [`PgListener`]: a dedicated connection that counts the notifications on its
//! channel and wakes whoever waits for a change. When that connection drops, notifications sent meanwhile are lost,
//! so the listener reports the loss, reconnects with back-off, and counts the reconnection as a change: its
//! [`ListenState::version`] (the PostgreSQL counterpart of SQLite's `PRAGMA data_version`) moves on every
//! notification and after every reconnection, and whoever reloads on a new version misses nothing.

use crate::db::DbResult;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_postgres::{AsyncMessage, Client};

use super::{PgConfig, PgPool, run_on_runtime, runtime};
use crate::args;
use crate::db::{Conn, Dialect};
use ad_core::error::{Error, Result};

/// The first pause before reconnecting after a failed attempt, doubled up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Sends a notification on `channel` through `c`. Inside a transaction it is delivered when the transaction commits.
/// On SQLite it does nothing (other processes see the file's `data_version` change instead), so store code can call
/// it whatever the backend.
pub fn notify(c: &dyn Conn, channel: &str, payload: &str) -> Result<()> {
    if c.dialect() != Dialect::Postgres {
        return Ok(());
    }
    c.execute("SELECT pg_notify(?1, ?2)", &args![channel, payload])?;
    Ok(())
}

/// The payload of a notification that limit settings or a breaker changed (sent beside the commit's own), so a
/// replica follows them at once without reading them again after every other commit.
pub const LIMITS_PAYLOAD: &str = "limits";

/// What a listener has seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenState {
    /// Notifications received on the channel.
    pub notifications: u64,
    /// Of those, the ones whose payload is [`LIMITS_PAYLOAD`].
    pub limits: u64,
    /// Times the listening connection was lost.
    pub losses: u64,
    /// Times it was connected and listening again after a loss.
    pub reconnects: u64,
    /// Whether the channel is being listened to right now.
    pub connected: bool,
    /// The server process of the listening connection (for diagnostics; 0 while disconnected).
    pub backend_pid: i32,
}

impl ListenState {
    /// Moves on every notification and every reconnection (after which anything may have changed unseen).
    pub fn version(&self) -> u64 {
        self.notifications + self.reconnects
    }
}

struct Shared {
    state: Mutex<ListenState>,
    changed: Condvar,
    watch: tokio::sync::watch::Sender<ListenState>,
}

impl Shared {
    fn update(&self, f: impl FnOnce(&mut ListenState)) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut state);
        self.watch.send_replace(*state);
        drop(state);
        self.changed.notify_all();
    }
}

/// A connection listening on one channel, reconnecting by itself; stops when dropped.
pub struct PgListener {
    channel: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for PgListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgListener")
            .field("channel", &self.channel)
            .field("state", &self.state())
            .finish()
    }
}

/// One live listening connection: its client (dropping it closes the socket) and the notifications it receives.
struct Session {
    _client: Client,
    /// One message per notification: whether its payload is [`LIMITS_PAYLOAD`].
    notifications: tokio::sync::mpsc::UnboundedReceiver<bool>,
    pid: i32,
}

/// Connects, starts delivering the connection's messages, and listens on `channel`.
async fn establish(config: PgConfig, channel: String) -> std::result::Result<Session, Error> {
    let (client, mut connection) = config.connect().await.db()?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let wanted = channel.clone();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) if n.channel() == wanted => {
                    if tx.send(n.payload() == LIMITS_PAYLOAD).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!("PostgreSQL listener connection failed: {e}");
                    break;
                }
            }
        }
        // Dropping `tx` tells the session its connection is gone.
    });
    client
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .await
        .db()?;
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .db()?
        .try_get(0)
        .db()?;
    Ok(Session {
        _client: client,
        notifications: rx,
        pid,
    })
}

impl PgListener {
    /// Listens on `channel` (letters, digits and `_`) of `pool`'s server on a connection of its own. Returns once
    /// the channel is listened to, so a notification committed after this returns is counted.
    pub fn start(pool: &PgPool, channel: &str) -> Result<PgListener> {
        if channel.is_empty()
            || channel.len() > 63
            || !channel
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(Error::Invalid {
                what: "notification channel",
                reason: format!("`{channel}`: use 1 to 63 lowercase letters, digits and `_`"),
            });
        }
        let mut config = pool.config().clone();
        config
            .postgres_mut()
            .application_name("agent-discover listener");
        let session = run_on_runtime(establish(config.clone(), channel.to_owned()))?
            .map_err(|e| Error::Unavailable(format!("cannot listen on PostgreSQL: {e}")))?;
        let state = ListenState {
            connected: true,
            backend_pid: session.pid,
            ..ListenState::default()
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            changed: Condvar::new(),
            watch: tokio::sync::watch::Sender::new(state),
        });
        let task = runtime().spawn(supervise(
            config,
            channel.to_owned(),
            shared.clone(),
            session,
        ));
        Ok(PgListener {
            channel: channel.to_owned(),
            shared,
            task,
        })
    }

    /// The channel listened to.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// What the listener has seen so far.
    pub fn state(&self) -> ListenState {
        *self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Blocks until `done` holds for the state or `timeout` passes; returns the last state and whether `done` held.
    pub fn wait_until(
        &self,
        timeout: Duration,
        mut done: impl FnMut(&ListenState) -> bool,
    ) -> (ListenState, bool) {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if done(&state) {
                return (*state, true);
            }
            let now = Instant::now();
            if now >= deadline {
                return (*state, false);
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// The state as a watch channel, for async waiters (`changed().await`).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<ListenState> {
        self.shared.watch.subscribe()
    }
}

impl Drop for PgListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Counts notifications while the session lasts; on its loss, reconnects with growing pauses, forever (until the
/// listener is dropped).
async fn supervise(config: PgConfig, channel: String, shared: Arc<Shared>, mut session: Session) {
    loop {
        while let Some(limits) = session.notifications.recv().await {
            shared.update(|s| {
                s.notifications += 1;
                s.limits += u64::from(limits);
            });
        }
        drop(session);
        shared.update(|s| {
            s.connected = false;
            s.losses += 1;
            s.backend_pid = 0;
        });
        tracing::warn!("PostgreSQL listener on `{channel}` lost its connection; reconnecting");
        let mut pause = FIRST_BACKOFF;
        session = loop {
            match establish(config.clone(), channel.clone()).await {
                Ok(s) => break s,
                Err(e) => {
                    tracing::debug!("PostgreSQL listener reconnect failed: {e}");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
            }
        };
        let pid = session.pid;
        shared.update(|s| {
            s.connected = true;
            s.reconnects += 1;
            s.backend_pid = pid;
        });
        tracing::info!("PostgreSQL listener on `{channel}` reconnected");
    }
}
