//! Children started with a user's own keys (team mode with identity): a tool call of a user who has their own values
//! of a server's secrets (`ad_registry::personal`) goes to a child of that server started for them alone, with their
//! values over the shared ones in its environment (stdio) or its headers and URL (Streamable HTTP, SSE); a user
//! without values of their own uses the shared child when the server allows it, else the call is refused with
//! [`Error::PersonalKeyRequired`], which names how to add theirs.
//!
//! Each such child has one owner, the map here, keyed by (server, user). It is started on the user's first call
//! (sandboxed as any child, `start.rs`), started again when their values change, stopped when idle for
//! [`PersonalBounds::idle`] (a reaper task), when its server is deactivated or restarted, and at shutdown. Their
//! number is bounded in total and per server: at a bound, the least recently used idle child (no call in flight) is
//! stopped to make room; with none idle, the call is refused with [`Error::PersonalChildrenLimit`].
//!
//! Such a child's progress notifications, log messages and requests (sampling, elicitation, roots) are routed under
//! a name of its own ([`route_name`]), so they reach the calls of its user only, never the shared child's callers.
//! The fast lanes never see these calls: a caller with a user exists only on the HTTP front with identity on, where
//! the HTTP lane is not installed, and the stdio front has no users.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::{ClientCapabilities, NumberOrString, ProgressToken};
use rmcp::{Peer, RoleServer};

use ad_core::error::{Error, Result};
use ad_core::model::Server;

use crate::caller::Caller;
use crate::state::{Child, ChildClient, Inner, Personal, Place, Proxy};
use crate::sync::lock;

pub(crate) mod bounds;

pub use bounds::PersonalBounds;

/// One running child with a user's own keys, as status and the admin's view show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PersonalChild {
    pub server: String,
    pub user: String,
    pub pid: Option<u32>,
    pub started_at: String,
    /// Milliseconds since its last call began.
    pub idle_ms: u64,
    /// A call of it is in flight (it is not stopped to make room, nor as idle).
    pub busy: bool,
}

tokio::task_local! {
    /// The start in progress is for this user, with these values (`Inner::personal_child`, read by `start.rs`).
    static STARTING: (Arc<str>, BTreeMap<String, String>);
}

/// For `start.rs`: when the child being started is a user's own, puts their values over the shared `secrets` and
/// returns the user.
pub(super) fn overlay(secrets: &mut BTreeMap<String, String>) -> Option<Arc<str>> {
    STARTING
        .try_with(|(user, env)| {
            secrets.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
            user.clone()
        })
        .ok()
}

/// The name of a child's state directory (its HOME and TMPDIR, `sandbox.rs`): its server's, or for a child being
/// started with a user's own keys one of that user's, beside it (`SERVER@user-HASH`), so what a user's child keeps on
/// disk (a cached token, say) is never another user's child's.
pub fn state_name(server: &str) -> String {
    match STARTING.try_with(|(user, _)| user.clone()) {
        Ok(user) => {
            use sha2::Digest;
            let digest = sha2::Sha256::digest(user.as_bytes());
            let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
            format!("{server}@user-{hex}")
        }
        Err(_) => server.to_owned(),
    }
}

/// The name a child's progress routes, callers and log watchers are filed under: its server's, or for a user's own
/// child one of its own.
pub(super) fn route_name(child: &Child) -> String {
    routed(&child.name, child.personal.as_deref())
}

fn routed(server: &str, user: Option<&str>) -> String {
    match user {
        None => server.to_owned(),
        Some(u) => format!("{server}\u{1f}{u}"),
    }
}

/// A user's own child's progress token as its route is keyed: its connection numbers tokens as the shared child's
/// does, so the token alone would name calls of both.
pub(super) fn user_token(user: &str, token: &ProgressToken) -> ProgressToken {
    ProgressToken(NumberOrString::String(
        format!("personal:{user}:{}", token.0).into(),
    ))
}

/// The route of a call of `child` whose token is `token`: the name its callers are filed under, and its progress
/// route's token.
pub(super) fn route_of(child: &Child, token: &ProgressToken) -> (String, ProgressToken) {
    match child.personal.as_deref() {
        None => (child.name.clone(), token.clone()),
        Some(u) => (route_name(child), user_token(u, token)),
    }
}

impl ChildClient {
    /// [`route_name`] of this handler's child.
    pub(super) fn route(&self) -> String {
        routed(&self.server, self.personal.as_deref())
    }

    /// The client a request of this child goes to: for the shared child the usual choice (`Inner::client_for`); for
    /// a user's own child only the client of that user's call in flight, if it declared the capability.
    pub(super) fn asked_client(
        &self,
        inner: &Inner,
        has: impl Fn(&ClientCapabilities) -> bool,
    ) -> Option<Peer<RoleServer>> {
        if self.personal.is_none() {
            return inner.client_for(&self.server, has);
        }
        let peer = lock(&inner.callers)
            .get(&self.route())
            .and_then(|v| v.last().map(|(_, p, _)| p.clone()))?;
        peer.peer_info()
            .is_some_and(|i| has(&i.capabilities))
            .then_some(peer)
    }
}

impl Inner {
    /// The child a call of `server` by `caller` goes to: the shared child (started again if it crashed,
    /// `recovery.rs`), or the caller's own (started on demand) when they have their own values; refused when they
    /// have none and the server does not let them use the shared ones.
    pub(super) async fn child_for(
        self: &Arc<Self>,
        server: &str,
        caller: &Caller,
    ) -> Result<Arc<Child>> {
        let Some(principal) = &caller.principal else {
            return self.ready_child(server).await;
        };
        let srv = self.registry.get(server)?;
        let user = principal.user_key();
        match self.secrets.personal_fingerprint(srv.id, &user)? {
            Some((fingerprint, _)) => self.personal_child(&srv, &user, fingerprint).await,
            None if self.secrets.allows_shared(srv.id)? => self.ready_child(server).await,
            None => {
                let keys: Vec<String> = self
                    .registry
                    .store()
                    .secrets_of(srv.id)?
                    .into_iter()
                    .map(|r| format!("`{}`", r.key))
                    .collect();
                Err(Error::PersonalKeyRequired {
                    server: srv.name,
                    keys: match keys.is_empty() {
                        true => "its keys".into(),
                        false => keys.join(", ").into(),
                    },
                })
            }
        }
    }

    async fn personal_child(
        self: &Arc<Self>,
        srv: &Server,
        user: &str,
        fingerprint: u64,
    ) -> Result<Arc<Child>> {
        if !srv.active {
            return Err(Error::Unavailable(format!(
                "server `{}` is not active; activate it first (registry action `activate`)",
                srv.name
            )));
        }
        let key = (srv.name.clone(), user.to_owned());
        if let Some(child) = self.personal.hit(&key, fingerprint) {
            return Ok(child);
        }
        let gate = lock(&self.personal.gates)
            .entry(key.clone())
            .or_default()
            .clone();
        let _held = gate.lock().await;
        if let Some(child) = self.personal.hit(&key, fingerprint) {
            return Ok(child);
        }
        // Started with values that changed since, or gone: stopped, and started again below.
        let stale = self.personal.take(&key);
        let bounds = *lock(&self.personal.bounds);
        let evicted = self.personal.reserve(&key, &bounds);
        if let Some(old) = stale {
            old.stop().await;
        }
        for child in evicted? {
            tracing::info!(server = %child.name, "stopping the least recently used child with a user's own keys to make room");
            child.stop().await;
        }
        let started = async {
            let env = self.secrets.personal_env(srv.id, user)?;
            // Boxed: a start is rare, and its large future would otherwise be part of every call's.
            STARTING
                .scope((Arc::from(user), env), Box::pin(self.start(srv, 0)))
                .await
        }
        .await;
        match started {
            Ok(child) => {
                lock(&self.personal.places).insert(
                    key,
                    Place::Running {
                        child: child.clone(),
                        fingerprint,
                        last_used: Instant::now(),
                    },
                );
                self.reap_idle();
                Ok(child)
            }
            Err(e) => {
                lock(&self.personal.places).remove(&key);
                Err(e)
            }
        }
    }

    /// Starts the task that stops idle children (once).
    fn reap_idle(self: &Arc<Self>) {
        if self.personal.reaper.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let (tick, wake) = match weak.upgrade() {
                    Some(inner) => (
                        (lock(&inner.personal.bounds).idle / 4)
                            .clamp(Duration::from_millis(100), Duration::from_secs(30)),
                        inner.personal.wake.clone(),
                    ),
                    None => return,
                };
                tokio::select! {
                    _ = tokio::time::sleep(tick) => {}
                    _ = wake.notified() => {}
                }
                let Some(inner) = weak.upgrade() else { return };
                let idle = lock(&inner.personal.bounds).idle;
                let done = inner.personal.drain(|child, last_used| {
                    child.exited.borrow().is_some()
                        || (Arc::strong_count(child) == 1 && last_used.elapsed() >= idle)
                });
                for child in done {
                    tracing::info!(server = %child.name, "stopping an idle child with a user's own keys");
                    child.stop().await;
                }
            }
        });
    }

    /// Stops the children with users' own keys of `server` (every server's with `None`).
    pub(super) async fn stop_personal(&self, server: Option<&str>) {
        let done = self
            .personal
            .drain_where(|(s, _)| server.is_none_or(|name| *s == name));
        futures::future::join_all(done.iter().map(|c| c.stop())).await;
    }
}

impl Personal {
    /// The running child of `key` started with these values, marked used now.
    fn hit(&self, key: &(String, String), fingerprint: u64) -> Option<Arc<Child>> {
        let mut places = lock(&self.places);
        match places.get_mut(key) {
            Some(Place::Running {
                child,
                fingerprint: f,
                last_used,
            }) if *f == fingerprint && child.exited.borrow().is_none() => {
                *last_used = Instant::now();
                Some(child.clone())
            }
            _ => None,
        }
    }

    /// Takes `key`'s running child out (the caller stops it).
    fn take(&self, key: &(String, String)) -> Option<Arc<Child>> {
        let mut places = lock(&self.places);
        match places.remove(key) {
            Some(Place::Running { child, .. }) => Some(child),
            Some(Place::Starting) => {
                places.insert(key.clone(), Place::Starting);
                None
            }
            None => None,
        }
    }

    /// Reserves a place for `key` within `bounds`, taking out the least recently used idle children (no call in
    /// flight) while a bound is reached; they are returned to be stopped. Refused when a bound is reached and no
    /// child is idle.
    fn reserve(&self, key: &(String, String), bounds: &PersonalBounds) -> Result<Vec<Arc<Child>>> {
        let mut places = lock(&self.places);
        let mut evicted = Vec::new();
        loop {
            let of_server = places.keys().filter(|(s, _)| *s == key.0).count();
            let scope = if of_server >= bounds.per_server {
                Some(("server", bounds.per_server))
            } else if places.len() >= bounds.total {
                Some(("total", bounds.total))
            } else {
                None
            };
            let Some((scope, limit)) = scope else { break };
            let idlest = places
                .iter()
                .filter(|((s, _), _)| scope == "total" || *s == key.0)
                .filter_map(|(k, p)| match p {
                    Place::Running {
                        child, last_used, ..
                    } if Arc::strong_count(child) == 1 => Some((k.clone(), *last_used)),
                    _ => None,
                })
                .min_by_key(|(_, used)| *used)
                .map(|(k, _)| k);
            let Some(k) = idlest else {
                return Err(Error::PersonalChildrenLimit {
                    server: key.0.clone(),
                    scope,
                    limit,
                });
            };
            if let Some(Place::Running { child, .. }) = places.remove(&k) {
                evicted.push(child);
            }
        }
        places.insert(key.clone(), Place::Starting);
        Ok(evicted)
    }

    /// Takes out the running children `done` says are finished with (given each one's last use).
    fn drain(&self, done: impl Fn(&Arc<Child>, Instant) -> bool) -> Vec<Arc<Child>> {
        let mut places = lock(&self.places);
        let keys: Vec<(String, String)> = places
            .iter()
            .filter(|(_, p)| matches!(p, Place::Running { child, last_used, .. } if done(child, *last_used)))
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| match places.remove(&k) {
                Some(Place::Running { child, .. }) => Some(child),
                _ => None,
            })
            .collect()
    }

    /// Takes out the running children whose (server, user) `which` picks.
    fn drain_where(&self, which: impl Fn(&(String, String)) -> bool) -> Vec<Arc<Child>> {
        let mut places = lock(&self.places);
        let keys: Vec<(String, String)> = places
            .iter()
            .filter(|(k, p)| which(k) && matches!(p, Place::Running { .. }))
            .map(|(k, _)| k.clone())
            .collect();
        keys.into_iter()
            .filter_map(|k| match places.remove(&k) {
                Some(Place::Running { child, .. }) => Some(child),
                _ => None,
            })
            .collect()
    }
}

impl Proxy {
    /// Sets the bounds of the children with users' own keys (read from the environment at start).
    pub fn set_personal_bounds(&self, bounds: PersonalBounds) {
        *lock(&self.inner.personal.bounds) = bounds;
        self.inner.personal.wake.notify_one();
    }

    pub fn personal_bounds(&self) -> PersonalBounds {
        *lock(&self.inner.personal.bounds)
    }

    /// The running children with users' own keys (of `server`, or every server's).
    pub fn personal_children(&self, server: Option<&str>) -> Vec<PersonalChild> {
        let places = lock(&self.inner.personal.places);
        let mut out: Vec<PersonalChild> = places
            .iter()
            .filter(|((s, _), _)| server.is_none_or(|name| *s == name))
            .filter_map(|((s, u), p)| match p {
                Place::Running {
                    child, last_used, ..
                } => Some(PersonalChild {
                    server: s.clone(),
                    user: u.clone(),
                    pid: child.pid,
                    started_at: child.started_at.clone(),
                    idle_ms: last_used.elapsed().as_millis() as u64,
                    busy: Arc::strong_count(child) > 1,
                }),
                Place::Starting => None,
            })
            .collect();
        out.sort_by(|a, b| (&a.server, &a.user).cmp(&(&b.server, &b.user)));
        out
    }
}
