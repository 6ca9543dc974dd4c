//! Limits on proxied calls, per server: token-bucket rate limits (the server, each tool, named tools, each caller),
//! a concurrency cap with a bounded queue and a wait limit, and a circuit breaker. Every path a call takes asks here
//! first: the normal path ([`Limits::admit`], which may wait in the queue) and the fast lane
//! ([`Limits::admit_in_lane`], which never waits or touches the database: it takes the call only when it can be let
//! through at once, and otherwise leaves it to the normal path, which refuses or queues it).
//!
//! Settings are the registry's (`ad_core::limits::LimitSettings`, one row per server), read again after a commit
//! (SQLite's change marker, looked at no more than every [`RECHECK`]; on PostgreSQL when a replica's change of limits
//! or breakers is notified, else every [`RECHECK_PG`] while the listener is down). In team mode the rate buckets are
//! shared by the replicas through the database (`shared.rs`) and so is the breaker's opening.
//!
//! What it must not know: HTTP, MCP's wire, the fronts. It answers with `ad_core::error::Error`'s typed refusals.

mod api;
mod breaker;
mod bucket;
mod gate;
mod shared;
mod view;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ad_core::error::{Error, Result};
use ad_core::limits::{LimitSettings, Rate};
use ad_registry::registry::Registry;

use breaker::{CircuitBreaker, Pass};
use bucket::Bucket;
use gate::{Gate, Permit};
use shared::Shared;

use crate::sync::lock;

/// How often the settings' change marker is looked at (SQLite).
const RECHECK: Duration = Duration::from_millis(250);
/// How often settings are read again where the store has no cheap marker (PostgreSQL while its listener is down).
const RECHECK_PG: Duration = Duration::from_secs(1);
/// How often they are read again when changes are notified (PostgreSQL with its listener up): a safety net only.
const RECHECK_PUSHED: Duration = Duration::from_secs(30);
/// Callers remembered per server for caller rate limits before the idle ones are forgotten.
const MAX_CALLERS: usize = 10_000;

/// Every server's limits in this process.
pub struct Limits {
    registry: Registry,
    servers: Mutex<HashMap<String, Arc<ServerLimits>>>,
    loaded: Mutex<Loaded>,
    /// Breaker openings told to the other processes on the registry; in team mode (PostgreSQL), rate buckets leased
    /// from the database.
    shared: Option<Shared>,
}

struct Loaded {
    marker: Option<(i64, u64)>,
    /// The pushed marker (PostgreSQL's notifications of limit changes) when the settings were read.
    pushed: Option<u64>,
    checked: Option<Instant>,
    /// The stored settings by server name (servers without a row have the defaults).
    stored: HashMap<String, LimitSettings>,
}

/// One server's limits and their state.
pub struct ServerLimits {
    pub(crate) name: String,
    pub(crate) settings: LimitSettings,
    buckets: Mutex<Buckets>,
    gate: Option<Gate>,
    breaker: Option<Mutex<CircuitBreaker>>,
    refused: Refusals,
    shared: Option<Shared>,
}

#[derive(Default)]
struct Buckets {
    server: Option<Bucket>,
    tools: HashMap<String, Bucket>,
    callers: HashMap<String, Bucket>,
}

/// Refusals counted since start, for `/metrics` and `status`.
#[derive(Default)]
pub(crate) struct Refusals {
    pub(crate) rate_limited: AtomicU64,
    pub(crate) server_busy: AtomicU64,
    pub(crate) server_unavailable: AtomicU64,
}

/// A call let through: holds its concurrency slot and the breaker's pass until it ends.
#[derive(Default)]
pub struct Admission {
    server: Option<Arc<ServerLimits>>,
    pass: Option<Pass>,
    _permit: Option<Permit>,
}

impl Admission {
    /// Takes a slot under the server's concurrency cap, waiting in its queue up to the wait limit; refused with
    /// `server_busy` when the queue is full or the wait ends.
    pub async fn enter(&mut self) -> Result<()> {
        let Some(s) = self.server.clone() else {
            return Ok(());
        };
        let Some(gate) = &s.gate else {
            return Ok(());
        };
        match gate.enter(Duration::from_millis(s.settings.wait_ms)).await {
            Ok(permit) => {
                self._permit = Some(permit);
                Ok(())
            }
            Err(why) => {
                s.refused.server_busy.fetch_add(1, Ordering::Relaxed);
                Err(Error::ServerBusy {
                    server: s.name.clone(),
                    why,
                    retry_after_ms: s.settings.wait_ms.clamp(100, 1_000),
                })
            }
        }
    }

    /// The call ended: its outcome goes to the breaker. `failed`: it timed out or the server broke.
    pub fn finish(mut self, failed: bool) {
        if let (Some(s), Some(pass)) = (&self.server, self.pass.take())
            && let Some(b) = &s.breaker
        {
            let now = Instant::now();
            let mut b = lock(b);
            let was_closed = b.is_closed();
            b.record(now, pass, failed);
            let opened = was_closed && !b.is_closed() || pass == Pass::Trial && failed;
            let closed = pass == Pass::Trial && !failed;
            let (until, after) = (b.open_for_ms(now), b.opened_after());
            drop(b);
            if opened {
                tracing::warn!(server = %s.name, failures = after, "circuit breaker opened");
            }
            if closed {
                tracing::info!(server = %s.name, "circuit breaker closed after a successful trial call");
            }
            if let Some(shared) = &s.shared {
                if opened && let Some(ms) = until {
                    shared.breaker_opened(&s.name, ms, after);
                }
                if closed {
                    shared.breaker_closed(&s.name);
                }
            }
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        // Ended without an outcome (cancelled, or refused by a later limit): a trial may be tried again.
        if let (Some(s), Some(pass)) = (&self.server, self.pass.take())
            && let Some(b) = &s.breaker
        {
            lock(b).release(pass);
        }
    }
}

/// Who a call's caller rate limit counts: the authenticated user, else the client's session, else the local user.
pub fn caller_key(caller: &crate::caller::Caller) -> Option<String> {
    match (&caller.principal, &caller.session) {
        (Some(p), _) => Some(format!("user:{}", p.user_key())),
        (None, Some(session)) => Some(format!("session:{session}")),
        (None, None) => None,
    }
}

/// Whether a failed call counts against its server's breaker: it timed out, the server broke or went away, or it
/// would not start; a tool's own error (an `isError` result, a JSON-RPC error it answered) does not.
pub fn breaks(e: &Error) -> bool {
    matches!(
        e,
        Error::Timeout { .. } | Error::Upstream { .. } | Error::StartFailed { .. }
    )
}

impl Limits {
    /// Limits over `registry`'s settings; shared with the other replicas when its store is shared (PostgreSQL).
    pub fn new(registry: Registry) -> Limits {
        let shared = Some(Shared::new(registry.store().clone()));
        let limits = Limits {
            registry,
            servers: Mutex::new(HashMap::new()),
            loaded: Mutex::new(Loaded {
                marker: None,
                pushed: None,
                checked: None,
                stored: HashMap::new(),
            }),
            shared,
        };
        // Read once before any call: a server is never made with the defaults while its settings are being read.
        limits.refresh(true);
        limits
    }

    /// A server's limits, made with its stored settings (or the defaults) on first use, made again when they change.
    pub(crate) fn of(&self, server: &str) -> Arc<ServerLimits> {
        self.refresh(false);
        self.of_loaded(server)
    }

    /// [`Limits::of`] with the settings read last.
    fn of_loaded(&self, server: &str) -> Arc<ServerLimits> {
        if let Some(s) = lock(&self.servers).get(server) {
            return s.clone();
        }
        // Made and inserted under both locks, in `refresh`'s order: never with settings older than those stored.
        let loaded = lock(&self.loaded);
        let mut servers = lock(&self.servers);
        if let Some(s) = servers.get(server) {
            return s.clone();
        }
        let settings = loaded.stored.get(server).cloned().unwrap_or_default();
        let made = Arc::new(ServerLimits::new(server, settings, self.shared.clone()));
        servers.insert(server.to_owned(), made.clone());
        made
    }

    /// Reads the settings again when they may have changed (or at once with `now`: after this process set them).
    pub(crate) fn refresh(&self, now: bool) {
        let at = Instant::now();
        let store = self.registry.store();
        let (marker, pushed) = {
            let mut loaded = lock(&self.loaded);
            // PostgreSQL with its listener up: another replica's change of settings or breakers is notified
            // (`Store::limits_marker`), so they are read when the marker moves, at once, and otherwise only as a
            // safety net every `RECHECK_PUSHED`.
            if let Some(pushed) = store.limits_marker() {
                let fresh = loaded.pushed == Some(pushed)
                    && loaded
                        .checked
                        .is_some_and(|c| at.duration_since(c) < RECHECK_PUSHED);
                if !now && fresh {
                    return;
                }
                loaded.checked = Some(at);
                // Taken now: the callers behind this one do not read them too.
                loaded.pushed = Some(pushed);
                (None, Some(pushed))
            } else {
                let every = if loaded.marker.is_some() {
                    RECHECK
                } else {
                    RECHECK_PG
                };
                if !now && loaded.checked.is_some_and(|c| at.duration_since(c) < every) {
                    return;
                }
                loaded.checked = Some(at);
                let marker = self.registry.rules_marker();
                if !now && marker.is_some() && marker == loaded.marker {
                    return;
                }
                (marker, None)
            }
        };
        let rows = match store.all_limit_settings() {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "reading the limits failed; the last ones read stay");
                // Read again on the next call.
                lock(&self.loaded).pushed = None;
                return;
            }
        };
        let stored: HashMap<String, LimitSettings> = rows.into_iter().collect();
        {
            let mut loaded = lock(&self.loaded);
            let mut servers = lock(&self.servers);
            // A server whose settings changed starts again with them (full buckets, a closed breaker).
            servers.retain(|name, s| {
                let same = stored.get(name).unwrap_or(&LimitSettings::default()) == &s.settings;
                if !same && let Some(shared) = &self.shared {
                    shared.forget(name);
                }
                same
            });
            loaded.stored = stored;
            loaded.marker = marker;
            loaded.pushed = pushed;
        }
        if let Some(shared) = &self.shared {
            shared.follow_breakers(self);
        }
    }

    /// Lets a call of the normal path through, or refuses it with a typed error: the breaker first (an open one
    /// refuses at once), then the rate limits. The concurrency cap comes after the call is approved
    /// ([`Admission::enter`]), so a call waiting for a person holds no slot.
    pub fn admit(&self, server: &str, tool: &str, caller: Option<&str>) -> Result<Admission> {
        let s = self.of(server);
        let pass = s.breaker_admit()?;
        let admission = Admission {
            server: Some(s.clone()),
            pass,
            _permit: None,
        };
        s.take_tokens(tool, caller, self.leasing())?;
        Ok(admission)
    }

    /// The fast lane's check, in the lane: `Some` lets the call through at once (its concurrency slot and tokens
    /// taken), `None` leaves it to the normal path (the breaker is not closed, a token or a slot is not there now,
    /// a caller rate limit needs the caller, or in team mode the local budget is spent).
    pub fn admit_in_lane(&self, server: &str, tool: &str) -> Option<Admission> {
        let s = self.of(server);
        if s.settings.caller_rate.is_some() {
            return None;
        }
        if let Some(b) = &s.breaker
            && !lock(b).is_closed()
        {
            return None;
        }
        let permit = match &s.gate {
            Some(gate) => Some(gate.try_enter()?),
            None => None,
        };
        if s.settings.has_rates() {
            let taken = match self.leasing() {
                Some(shared) => {
                    shared.try_local(&s.name, s.rates(tool, None).map(|(_, _, k)| k.to_string()))
                }
                // A refusal is the normal path's to count and answer; the lane's try is not one.
                None => s.take_local(tool, None).is_ok(),
            };
            if !taken {
                return None;
            }
        }
        Some(Admission {
            server: Some(s.clone()),
            pass: s.breaker.as_ref().map(|_| Pass::Normal),
            _permit: permit,
        })
    }

    /// Closes a server's breaker (a person's reset), here and for the other replicas.
    pub(crate) fn reset(&self, server: &str) {
        let s = self.of(server);
        if let Some(b) = &s.breaker {
            lock(b).close();
        }
        if let Some(shared) = &self.shared {
            shared.breaker_closed(server);
        }
    }

    /// The shared buckets, in team mode.
    fn leasing(&self) -> Option<&Shared> {
        self.shared.as_ref().filter(|s| s.leases())
    }

    fn known(&self) -> Vec<Arc<ServerLimits>> {
        let mut all: Vec<_> = lock(&self.servers).values().cloned().collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }
}

impl ServerLimits {
    fn new(name: &str, settings: LimitSettings, shared: Option<Shared>) -> ServerLimits {
        let now = Instant::now();
        ServerLimits {
            name: name.to_owned(),
            buckets: Mutex::new(Buckets {
                server: settings.rate.as_ref().map(|r| Bucket::new(r, now)),
                ..Buckets::default()
            }),
            gate: settings.concurrency.map(|c| Gate::new(c, settings.queue)),
            breaker: settings.breaker.map(|b| Mutex::new(CircuitBreaker::new(b))),
            settings,
            refused: Refusals::default(),
            shared,
        }
    }

    fn breaker_admit(&self) -> Result<Option<Pass>> {
        let Some(b) = &self.breaker else {
            return Ok(None);
        };
        match lock(b).admit(Instant::now()) {
            Ok(pass) => Ok(Some(pass)),
            Err(refused) => {
                self.refused
                    .server_unavailable
                    .fetch_add(1, Ordering::Relaxed);
                Err(Error::ServerUnavailable {
                    server: self.name.clone(),
                    failures: refused.failures,
                    retry_after_ms: refused.retry_after_ms,
                })
            }
        }
    }

    /// The rates a call of `tool` by `caller` draws on, each with its scope and key.
    fn rates<'a>(
        &'a self,
        tool: &'a str,
        caller: Option<&'a str>,
    ) -> impl Iterator<Item = (&'static str, &'a Rate, Key<'a>)> {
        let s = &self.settings;
        let tool_rate = s.tools.get(tool).or(s.tool_rate.as_ref());
        [
            s.rate.as_ref().map(|r| ("server", r, Key::Server)),
            tool_rate.map(|r| ("tool", r, Key::Tool(tool))),
            s.caller_rate
                .as_ref()
                .map(|r| ("caller", r, Key::Caller(caller.unwrap_or("local")))),
        ]
        .into_iter()
        .flatten()
    }

    /// Takes a token from every bucket the call draws on, or none and refuses it.
    fn take_tokens(&self, tool: &str, caller: Option<&str>, shared: Option<&Shared>) -> Result<()> {
        if !self.settings.has_rates() {
            return Ok(());
        }
        let taken = match shared {
            Some(shared) => shared.take(
                &self.name,
                self.rates(tool, caller)
                    .map(|(scope, r, k)| (scope, *r, k.to_string())),
            ),
            None => self.take_local(tool, caller),
        };
        taken.map_err(|(scope, ms)| {
            self.refused.rate_limited.fetch_add(1, Ordering::Relaxed);
            Error::RateLimited {
                server: self.name.clone(),
                tool: tool.to_owned(),
                scope,
                retry_after_ms: ms,
            }
        })
    }

    /// Takes a token from every local bucket the call draws on, or none: the scope and wait of the first without.
    fn take_local(&self, tool: &str, caller: Option<&str>) -> Result<(), (&'static str, u64)> {
        let mut buckets = lock(&self.buckets);
        let now = Instant::now();
        let mut taken: Vec<(Key, &Rate)> = Vec::with_capacity(3);
        for (scope, rate, key) in self.rates(tool, caller) {
            let bucket = buckets.get(&key, rate, now);
            if let Err(ms) = bucket.check(now) {
                for (k, r) in taken {
                    buckets.get(&k, r, now).give_back();
                }
                return Err((scope, ms));
            }
            bucket.take();
            taken.push((key, rate));
        }
        Ok(())
    }
}

/// Which bucket of a server.
#[derive(Debug, Clone, Copy)]
enum Key<'a> {
    Server,
    Tool(&'a str),
    Caller(&'a str),
}

impl std::fmt::Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Key::Server => f.write_str("server"),
            Key::Tool(t) => write!(f, "tool:{t}"),
            Key::Caller(c) => write!(f, "caller:{c}"),
        }
    }
}

impl Buckets {
    fn get(&mut self, key: &Key, rate: &Rate, now: Instant) -> &mut Bucket {
        match key {
            Key::Server => self.server.get_or_insert_with(|| Bucket::new(rate, now)),
            Key::Tool(t) => {
                if !self.tools.contains_key(*t) {
                    self.tools.insert((*t).to_owned(), Bucket::new(rate, now));
                }
                self.tools.get_mut(*t).expect("inserted above")
            }
            Key::Caller(c) => {
                if !self.callers.contains_key(*c) {
                    if self.callers.len() >= MAX_CALLERS {
                        // Forget the callers whose buckets are full again (idle ones).
                        self.callers
                            .retain(|_, b| b.available(now) < rate.capacity());
                    }
                    self.callers.insert((*c).to_owned(), Bucket::new(rate, now));
                }
                self.callers.get_mut(*c).expect("inserted above")
            }
        }
    }
}
