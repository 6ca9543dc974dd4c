//! The call log: an in-memory ring of the last 500 proxied calls, pruned by age, announced on the event bus; in team
//! mode also appended, in batches, to the call log the replicas share (`store::calls`), which reads then come from.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::value::RawValue;

use ad_core::events::{Event, EventBus};

pub const CAPACITY: usize = 500;
/// Longest response text kept per entry.
pub const RESPONSE_CHARS: usize = 2000;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogEntry {
    pub id: u64,
    /// Milliseconds since the epoch; serialised as `timestamp`, RFC 3339 in UTC (formatted when read, not per call).
    #[serde(rename = "timestamp", serialize_with = "serialize_rfc3339")]
    pub unix_ms: u64,
    pub server: String,
    pub tool: String,
    pub args: Args,
    pub response: String,
    pub latency_ms: u64,
    pub success: bool,
    /// The replica that proxied the call, for entries read from the shared call log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Who made the call (issue 30): `issuer#sub` of its access token; absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The OAuth client the caller's access token was issued to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Who made a call: the user (`issuer#sub`) and the OAuth client of the access token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Who {
    pub user: String,
    pub client: Option<String>,
}

impl Who {
    pub fn of(p: &ad_core::identity::Principal) -> Who {
        Who {
            user: p.user_key(),
            client: p.client_id.clone(),
        }
    }
}

/// A call's arguments as JSON text: kept as they came, so that recording a call never parses or re-serialises them.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct Args(Box<RawValue>);

impl Args {
    pub fn as_str(&self) -> &str {
        self.0.get()
    }

    /// The arguments as a JSON value (a string when the text is not JSON).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::from_str(self.as_str()).unwrap_or_else(|_| self.as_str().into())
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<Box<RawValue>> for Args {
    fn from(raw: Box<RawValue>) -> Self {
        Args(raw)
    }
}

impl From<serde_json::Value> for Args {
    fn from(value: serde_json::Value) -> Self {
        // Serialising a `Value` cannot fail (its map keys are strings).
        Args(serde_json::value::to_raw_value(&value).expect("a JSON value serialises"))
    }
}

impl From<String> for Args {
    /// JSON text as it was stored; anything that is not JSON is kept as a JSON string.
    fn from(text: String) -> Self {
        match RawValue::from_string(text.clone()) {
            Ok(raw) => Args(raw),
            Err(_) => serde_json::Value::String(text).into(),
        }
    }
}

#[derive(Debug)]
pub struct CallLog {
    inner: Mutex<Inner>,
    retention: Duration,
    events: EventBus,
    shared: Option<Shared>,
}

/// The team's call log: calls recorded here wait in `pending` until the flusher (or a read) appends them.
#[derive(Debug)]
struct Shared {
    store: ad_store::Store,
    replica: String,
    pending: Mutex<Vec<ad_store::StoredCall>>,
    kick: Arc<tokio::sync::Notify>,
    /// Signalled after each batch appended.
    flushed: tokio::sync::Notify,
}

/// Calls waiting for the shared call log are appended at most this often (one transaction per batch).
pub const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// How often calls older than the retention are deleted from the shared call log.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    entries: VecDeque<LogEntry>,
}

impl CallLog {
    pub fn new(retention_days: u32, events: EventBus) -> CallLog {
        CallLog {
            inner: Mutex::new(Inner {
                next_id: 1,
                entries: VecDeque::new(),
            }),
            retention: Duration::from_secs(u64::from(retention_days) * 86_400),
            events,
            shared: None,
        }
    }

    /// A call log that also appends to the call log shared by a team's replicas in `store`, as `replica`; start its
    /// flusher with [`CallLog::spawn_flusher`].
    pub fn shared(
        retention_days: u32,
        events: EventBus,
        store: ad_store::Store,
        replica: String,
    ) -> CallLog {
        CallLog {
            shared: Some(Shared {
                store,
                replica,
                pending: Mutex::default(),
                kick: Arc::default(),
                flushed: tokio::sync::Notify::new(),
            }),
            ..CallLog::new(retention_days, events)
        }
    }

    /// Appends waiting calls to the shared call log every [`FLUSH_EVERY`] while there are any, and prunes it by age;
    /// ends when the call log is dropped. Does nothing for a call log that is not shared.
    pub fn spawn_flusher(self: &Arc<Self>) {
        let Some(shared) = &self.shared else { return };
        let kick = shared.kick.clone();
        let log = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut pruned = tokio::time::Instant::now() - PRUNE_EVERY;
            loop {
                // A pruning pass is due at start and then every PRUNE_EVERY, whether or not calls come.
                let _ = tokio::time::timeout_at(pruned + PRUNE_EVERY, kick.notified()).await;
                // Batch what comes in the next moment into one transaction.
                tokio::time::sleep(FLUSH_EVERY).await;
                let Some(log) = log.upgrade() else { return };
                let prune = pruned.elapsed() >= PRUNE_EVERY;
                if prune {
                    pruned = tokio::time::Instant::now();
                }
                let done = tokio::task::spawn_blocking(move || {
                    log.flush();
                    if prune {
                        log.prune_shared();
                    }
                })
                .await;
                if let Err(e) = done {
                    tracing::warn!(error = %e, "the call log flusher failed");
                }
            }
        });
    }

    /// Appends the calls waiting for the shared call log now (blocking; a failed batch is kept for the next try).
    pub fn flush(&self) {
        let Some(shared) = &self.shared else { return };
        let batch = std::mem::take(&mut *shared.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if batch.is_empty() {
            return;
        }
        let appended = shared.store.append_calls(&batch);
        if appended.is_ok() {
            shared.flushed.notify_waiters();
        }
        if let Err(e) = appended {
            tracing::warn!(error = %e, calls = batch.len(), "appending to the shared call log failed; trying again later");
            let mut pending = shared.pending.lock().unwrap_or_else(|p| p.into_inner());
            let newer = std::mem::replace(&mut *pending, batch);
            pending.extend(newer);
            // Never more than the in-memory ring holds: what is older is dropped, as it would be from the ring.
            let excess = pending.len().saturating_sub(CAPACITY);
            pending.drain(..excess);
        }
    }

    fn prune_shared(&self) {
        let Some(shared) = &self.shared else { return };
        let cutoff = now_ms().saturating_sub(self.retention.as_millis() as u64);
        match shared
            .store
            .prune_calls(Some(i64::try_from(cutoff).unwrap_or(i64::MAX)))
        {
            Ok(0) => {}
            Ok(n) => tracing::debug!(calls = n, "pruned the shared call log"),
            Err(e) => tracing::warn!(error = %e, "pruning the shared call log failed"),
        }
    }

    /// Appends a finished call and returns its id. `response` is already cut to size (see [`excerpt`]).
    pub fn record(
        &self,
        server: &str,
        tool: impl Into<String>,
        args: impl Into<Args>,
        response: String,
        latency: Duration,
        success: bool,
    ) -> u64 {
        self.record_by(server, tool, args, response, latency, success, None)
    }

    /// [`CallLog::record`] with who made the call.
    #[allow(clippy::too_many_arguments)]
    pub fn record_by(
        &self,
        server: &str,
        tool: impl Into<String>,
        args: impl Into<Args>,
        response: String,
        latency: Duration,
        success: bool,
        who: Option<Who>,
    ) -> u64 {
        self.record_at(
            now_ms(),
            server,
            tool.into(),
            args.into(),
            response,
            latency,
            success,
            who,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn record_at(
        &self,
        now: u64,
        server: &str,
        tool: String,
        args: Args,
        response: String,
        latency: Duration,
        success: bool,
        who: Option<Who>,
    ) -> u64 {
        let (user, client) = match who {
            Some(w) => (Some(w.user), w.client),
            None => (None, None),
        };
        let id = {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let id = inner.next_id;
            inner.next_id += 1;
            let cutoff = now.saturating_sub(self.retention.as_millis() as u64);
            while inner.entries.front().is_some_and(|e| e.unix_ms < cutoff)
                || inner.entries.len() >= CAPACITY
            {
                inner.entries.pop_front();
            }
            let entry = LogEntry {
                id,
                unix_ms: now,
                server: server.to_owned(),
                tool,
                args,
                response,
                latency_ms: latency.as_millis() as u64,
                success,
                // In a team, the replica that proxied the call (issue 30: who made each call, and where).
                replica: self.shared.as_ref().map(|s| s.replica.clone()),
                user,
                client,
            };
            if let Some(shared) = &self.shared {
                shared
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(ad_store::StoredCall {
                        id: 0,
                        replica: shared.replica.clone(),
                        unix_ms: i64::try_from(now).unwrap_or(i64::MAX),
                        server: entry.server.clone(),
                        tool: entry.tool.clone(),
                        args: entry.args.as_str().to_owned(),
                        response: entry.response.clone(),
                        latency_ms: i64::try_from(entry.latency_ms).unwrap_or(i64::MAX),
                        success,
                        user: entry.user.clone(),
                        client: entry.client.clone(),
                    });
                shared.kick.notify_one();
            }
            let logged = Event::CallLogged {
                id,
                user: entry.user.clone(),
                client: entry.client.clone(),
                replica: entry.replica.clone(),
            };
            inner.entries.push_back(entry);
            (id, logged)
        };
        let (id, logged) = id;
        self.events.emit(logged);
        id
    }

    /// Whether calls go to the call log a team's replicas share (which every replica's calls are read from).
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Newest first, skipping `offset`; also returns how many entries there are. A shared call log is read from the
    /// store (every replica's calls, this one's waiting calls appended first); if that fails, from memory.
    pub fn entries(&self, limit: usize, offset: usize) -> (Vec<LogEntry>, usize) {
        self.entries_of(None, limit, offset)
    }

    /// [`CallLog::entries`], only `user`'s calls when given (a user reads only their own, issue 30).
    pub fn entries_of(
        &self,
        user: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> (Vec<LogEntry>, usize) {
        if let Some(shared) = &self.shared {
            self.flush();
            let cutoff = now_ms().saturating_sub(self.retention.as_millis() as u64);
            match shared.store.recent_calls_of(
                i64::try_from(cutoff).unwrap_or(i64::MAX),
                user,
                limit,
                offset,
            ) {
                Ok((calls, total)) => {
                    let entries = calls
                        .into_iter()
                        .map(|c| LogEntry {
                            id: u64::try_from(c.id).unwrap_or(0),
                            unix_ms: u64::try_from(c.unix_ms).unwrap_or(0),
                            server: c.server,
                            tool: c.tool,
                            args: c.args.into(),
                            response: c.response,
                            latency_ms: u64::try_from(c.latency_ms).unwrap_or(0),
                            success: c.success,
                            replica: Some(c.replica),
                            user: c.user,
                            client: c.client,
                        })
                        .collect();
                    return (entries, total);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reading the shared call log failed; showing this replica's calls")
                }
            }
        }
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let cutoff = now_ms().saturating_sub(self.retention.as_millis() as u64);
        let live: Vec<&LogEntry> = inner
            .entries
            .iter()
            .rev()
            .filter(|e| e.unix_ms >= cutoff)
            .filter(|e| user.is_none_or(|u| e.user.as_deref() == Some(u)))
            .collect();
        let total = live.len();
        (
            live.into_iter().skip(offset).take(limit).cloned().collect(),
            total,
        )
    }

    pub fn get(&self, id: u64) -> Option<LogEntry> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .iter()
            .rev()
            .find(|e| e.id == id)
            .cloned()
    }

    /// Empties the call log (the shared one too: every replica's calls).
    pub fn clear(&self) {
        if let Some(shared) = &self.shared {
            shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clear();
            if let Err(e) = shared.store.prune_calls(None) {
                tracing::warn!(error = %e, "clearing the shared call log failed");
            }
        }
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .clear();
    }
}

fn serialize_rfc3339<S: serde::Serializer>(unix_ms: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*unix_ms))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The logged form of a response made of text parts: joined with newlines and cut at `RESPONSE_CHARS` characters,
/// without copying more than that (a 10 MB result costs the log 2,000 characters).
pub fn excerpt<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let (mut chars, mut total, mut cut) = (0usize, 0usize, false);
    for (i, part) in parts.into_iter().enumerate() {
        let sep = if i == 0 { "" } else { "\n" };
        total += sep.len() + part.len();
        for piece in [sep, part] {
            if cut {
                break;
            }
            // Whole slices, not a character at a time: answers are often long, and this runs for every call.
            let room = RESPONSE_CHARS - chars;
            match piece.char_indices().nth(room) {
                Some((at, _)) => {
                    out.push_str(&piece[..at]);
                    chars = RESPONSE_CHARS;
                    cut = true;
                }
                None => {
                    out.push_str(piece);
                    chars += piece.chars().count();
                }
            }
        }
    }
    if cut {
        out.push_str(&format!("… ({total} bytes in all)"));
    }
    out
}

pub use ad_core::clock::rfc3339;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_newest_500() {
        let log = CallLog::new(30, EventBus::default());
        for i in 0..600 {
            log.record(
                "s",
                format!("t{i}"),
                serde_json::Value::Null,
                "ok".into(),
                Duration::from_millis(1),
                true,
            );
        }
        let (entries, total) = log.entries(10, 0);
        assert_eq!(total, CAPACITY);
        assert_eq!(entries[0].tool, "t599");
        log.clear();
        assert_eq!(log.entries(10, 0).1, 0);
    }

    #[test]
    fn entries_older_than_the_retention_are_pruned() {
        let log = CallLog::new(30, EventBus::default());
        let day = 86_400_000;
        let now = now_ms();
        let rec = |at: u64, tool: &str| {
            log.record_at(
                at,
                "s",
                tool.to_owned(),
                serde_json::Value::Null.into(),
                String::new(),
                Duration::ZERO,
                true,
                None,
            )
        };
        rec(now - 31 * day, "too-old");
        rec(now - 29 * day, "kept");
        // Reading hides expired entries even before the next write drops them.
        let (entries, total) = log.entries(10, 0);
        assert_eq!(total, 1);
        assert_eq!(entries[0].tool, "kept");
        // Writing drops them.
        rec(now, "new");
        assert_eq!(log.inner.lock().unwrap().entries.len(), 2);
        let (entries, _) = log.entries(10, 0);
        assert_eq!(
            entries.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(),
            ["new", "kept"]
        );
        // The timestamp is serialised as RFC 3339.
        let v = serde_json::to_value(&entries[0]).unwrap();
        assert_eq!(v["timestamp"], rfc3339(now));
    }

    /// Two replicas' shared call logs on one store: each reads both replicas' calls, newest first, with the replica
    /// named; waiting calls are appended by a read; clearing empties it for both.
    #[tokio::test]
    async fn a_shared_call_log_shows_every_replica_s_calls() {
        let dir = tempfile::tempdir().unwrap();
        let store = ad_store::Store::open(&dir.path().join("t.db")).unwrap();
        let a = CallLog::shared(30, EventBus::default(), store.clone(), "a".into());
        let b = CallLog::shared(30, EventBus::default(), store.clone(), "b".into());
        let call = |log: &CallLog, tool: &str| {
            log.record(
                "fx",
                tool,
                serde_json::json!({"t": tool}),
                "ok".into(),
                Duration::from_millis(2),
                true,
            )
        };
        call(&a, "one");
        call(&b, "two");
        b.flush();
        call(&a, "three");
        let (entries, total) = b.entries(10, 0);
        assert_eq!(
            total, 1,
            "a's waiting calls are not in the store before a flushes: {entries:?}"
        );
        let (entries, total) = a.entries(10, 0);
        assert_eq!(total, 3);
        let seen: Vec<(&str, Option<&str>)> = entries
            .iter()
            .map(|e| (e.tool.as_str(), e.replica.as_deref()))
            .collect();
        assert!(
            seen.contains(&("two", Some("b"))) && seen.contains(&("three", Some("a"))),
            "{seen:?}"
        );
        assert_eq!(
            entries[0].args.to_value(),
            serde_json::json!({"t": entries[0].tool})
        );
        assert_eq!(b.entries(10, 0).1, 3);
        let v = serde_json::to_value(&entries[0]).unwrap();
        assert!(v["replica"].is_string(), "{v}");
        b.clear();
        assert_eq!(a.entries(10, 0).1, 0);
        // The flusher appends waiting calls without a read.
        let a = Arc::new(a);
        a.spawn_flusher();
        let flushed = a.shared.as_ref().unwrap().flushed.notified();
        tokio::pin!(flushed);
        flushed.as_mut().enable();
        call(&a, "four");
        tokio::time::timeout(Duration::from_secs(10), flushed)
            .await
            .expect("the flusher appended the call");
        assert_eq!(store.recent_calls(0, 10, 0).unwrap().1, 1);
    }

    /// The call-logged event names who made the call (issue 30).
    #[tokio::test]
    async fn the_call_logged_event_names_who() {
        let bus = EventBus::default();
        let mut calls = bus.subscribe("call:*");
        let log = CallLog::new(30, bus);
        let who = Who {
            user: "https://idp.test#alice".into(),
            client: Some("team-client".into()),
        };
        let id = log.record_by(
            "s",
            "t",
            serde_json::Value::Null,
            "ok".into(),
            Duration::from_millis(1),
            true,
            Some(who),
        );
        let Some(ad_core::events::Received::Event(Event::CallLogged {
            id: got,
            user,
            client,
            replica,
        })) = calls.recv().await
        else {
            panic!("no call-logged event")
        };
        assert_eq!(got, id);
        assert_eq!(user.as_deref(), Some("https://idp.test#alice"));
        assert_eq!(client.as_deref(), Some("team-client"));
        assert_eq!(replica, None, "a call log of one process names no replica");
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_305_600_123), "2026-11-22T00:00:00.123Z");
        assert_eq!(excerpt(["héllo"]), "héllo");
        let long = "é".repeat(RESPONSE_CHARS);
        assert_eq!(excerpt([long.as_str()]), long);
        let cut = excerpt([long.as_str(), "x"]);
        assert!(cut.starts_with(&long));
        assert!(cut.ends_with(&format!("… ({} bytes in all)", long.len() + 2)));
        assert_eq!(
            cut.chars().count(),
            RESPONSE_CHARS + "… ( bytes in all)".chars().count() + 4
        );
    }
}
