//! What the proxy forwards besides calls and lists: the client's log level to every child and the children's log
//! messages back (the server named in `logger`), completions routed to the child owning the prompt or resource
//! template, and resource subscriptions with their update notifications, under the names clients see; and the
//! connected clients all of it goes to (registered, scoped to one server, forgotten).

// Logging and resources/subscribe are deprecated by SEP-2577 / 2026-07-28, but legacy clients and children use them.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{
    CompleteRequestParams, CompleteResult, LoggingLevel, LoggingMessageNotificationParam,
    Reference, ResourceUpdatedNotificationParam, ResultType, ServerNotification,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::{Peer, RoleServer};

use ad_core::error::{Error, Result};

use crate::caller::Caller;
use crate::failure::child_error;
use crate::names;
use crate::state::{Child, Inner, LogCaller, Proxy, Slot, Subscription};
use crate::sync::lock;

impl Proxy {
    /// Sets the log level of every running child that declares logging; children started later get it too.
    /// A legacy child lowered for a 2026-07-28 caller stays lower (see [`Inner::lower_log_level`]); legacy clients are
    /// then sent only what is at or above this level (`forward_log`).
    pub async fn set_log_level(&self, level: LoggingLevel) {
        *lock(&self.inner.log_level) = Some(level);
        // Only legacy clients set a level: on a child that speaks both eras, its legacy session's (`era.rs`).
        let children = self.inner.running_with(|_| true);
        let sets = children.iter().map(|child| async move {
            let session = child.for_legacy_client().await;
            if session.capabilities.logging.is_none() {
                return;
            }
            let level = child.settle_log_level(level);
            if let Err(e) = session
                .peer
                .set_level(SetLevelRequestParams::new(level))
                .await
            {
                tracing::warn!(server = %child.name, error = %e, "logging/setLevel failed");
            }
        });
        futures::future::join_all(sets).await;
    }

    /// Routes `completion/complete` to the child owning the prompt (`server__prompt`) or the resource template
    /// (`agent-discover://server/template`), under the child's own names.
    pub async fn complete(&self, params: CompleteRequestParams) -> Result<CompleteResult> {
        self.complete_as(params, &crate::Caller::default()).await
    }

    /// [`Proxy::complete`] for `caller`: on a token-exchange or per-user server the request carries the caller's
    /// credentials, as calls, reads and prompt gets do (issue 30).
    pub async fn complete_as(
        &self,
        mut params: CompleteRequestParams,
        caller: &crate::Caller,
    ) -> Result<CompleteResult> {
        let child = match &mut params.r#ref {
            Reference::Prompt(p) => {
                let (child, original) = self.find_prompt(&p.name).await?;
                p.name = original;
                child
            }
            Reference::Resource(r) => {
                let (server, original) = names::split_uri(&r.uri)
                    .ok_or_else(|| Error::not_found("resource template", r.uri.as_str()))?;
                let child = self.inner.ready_child(server).await?;
                r.uri = original.to_owned();
                child
            }
            _ => {
                return Err(Error::invalid(
                    "completion reference",
                    "expected ref/prompt or ref/resource",
                ));
            }
        };
        if child.capabilities.completions.is_none() {
            return Err(Error::Unavailable(format!(
                "server `{}` does not offer completions",
                child.name
            )));
        }
        params.meta = None;
        crate::call::name_user(&mut params.meta, &child, caller);
        let mut res = match child.peer.complete(params).await {
            Ok(res) => res,
            Err(e) => {
                let e = child_error(&child.name, e);
                return Err(self.inner.user_refusal(&child, caller, e).await);
            }
        };
        // A legacy child's result has no resultType; a 2026-07-28 client requires one.
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// Subscribes client `client` to an exposed resource URI; the child is subscribed on the first subscriber, and on
    /// a server that takes each user's own credentials (token exchange, per-user authorization; issue 30) on each
    /// user's first subscription, with that user's credentials, so the server authorizes every user who subscribes
    /// (a 2026-07-28 child: a listen stream of that user's own, `subscribe_child`).
    /// `raw`: the client is on a per-server endpoint and gets updates under the child's own URI.
    pub async fn subscribe(
        &self,
        client: u64,
        peer: Peer<RoleServer>,
        uri: &str,
        raw: bool,
        caller: &Caller,
    ) -> Result<()> {
        let (server, original) =
            names::split_uri(uri).ok_or_else(|| Error::not_found("resource", uri))?;
        let child = self.inner.ready_child(server).await?;
        // Only legacy clients subscribe: on a child that speaks both eras, through its legacy session (`era.rs`).
        let subscribable = child
            .for_legacy_client()
            .await
            .capabilities
            .resources
            .as_ref()
            .and_then(|r| r.subscribe);
        if subscribable != Some(true) {
            return Err(Error::Unavailable(format!(
                "server `{server}` does not offer resource subscriptions"
            )));
        }
        let user = crate::call::user_of(&child, caller);
        let first = {
            let mut subs = lock(&self.inner.subscriptions);
            subs.retain(|s| !s.peer.is_transport_closed());
            let first = !subs.iter().any(|s| s.uri == uri && s.user == user);
            if !subs.iter().any(|s| s.uri == uri && s.client == client) {
                subs.push(Subscription {
                    uri: uri.to_owned(),
                    client,
                    peer,
                    raw,
                    user: user.clone(),
                });
            }
            first
        };
        if first
            && let Err(e) = self
                .subscribe_child(&child, uri, original, user.as_deref())
                .await
        {
            lock(&self.inner.subscriptions).retain(|s| !(s.uri == uri && s.client == client));
            let e = Error::Upstream {
                server: server.to_owned(),
                message: e.to_string(),
            };
            // A user without credentials of their own is told where to authorize, as for a call.
            return Err(match user {
                Some(_) => self.inner.user_refusal(&child, caller, e).await,
                None => e,
            });
        }
        Ok(())
    }

    /// Ends client `client`'s subscription; the child is unsubscribed when its last subscriber leaves: a legacy
    /// child's subscription when the resource's last one leaves, a 2026-07-28 child's listen stream when the last of
    /// the user's (or, for shared credentials, of all) subscribers leaves.
    pub async fn unsubscribe(&self, client: u64, uri: &str) -> Result<()> {
        let (server, original) =
            names::split_uri(uri).ok_or_else(|| Error::not_found("resource", uri))?;
        let (last, user) = {
            let mut subs = lock(&self.inner.subscriptions);
            let user = subs
                .iter()
                .find(|s| s.uri == uri && s.client == client)
                .and_then(|s| s.user.clone());
            subs.retain(|s| !(s.peer.is_transport_closed() || s.uri == uri && s.client == client));
            (!subs.iter().any(|s| s.uri == uri), user)
        };
        self.inner.end_unheard_listens();
        let Some(child) = self.inner.running(server).filter(|_| last) else {
            return Ok(());
        };
        let session = child.for_legacy_client().await;
        if !session.protocol.has_initialize() {
            return Ok(());
        }
        session
            .peer
            .unsubscribe({
                let mut p = UnsubscribeRequestParams::new(original);
                if let Some(user) = &user {
                    crate::call::name_in(&mut p.meta, user);
                }
                p
            })
            .await
            .map_err(|e| Error::Upstream {
                server: server.to_owned(),
                message: e.to_string(),
            })?;
        Ok(())
    }

    /// Subscribes the child to one of its resources: `resources/subscribe` for a legacy child; for a 2026-07-28
    /// child, which has no such method, a `subscriptions/listen` stream for that URI whose updates are forwarded.
    /// `user`: the user whose credentials the request carries (`call::user_of`).
    async fn subscribe_child(
        &self,
        child: &Arc<Child>,
        exposed: &str,
        original: &str,
        user: Option<&str>,
    ) -> std::result::Result<(), rmcp::ServiceError> {
        let session = child.for_legacy_client().await;
        if session.protocol.has_initialize() {
            return session
                .peer
                .subscribe({
                    let mut p = SubscribeRequestParams::new(original);
                    if let Some(user) = user {
                        crate::call::name_in(&mut p.meta, user);
                    }
                    p
                })
                .await;
        }
        let filter = SubscriptionFilter::builder()
            .resource_subscription(original)
            .build();
        // A user's stream carries that user's credentials: the OAuth client is told whose the next listen with this
        // filter is (rmcp's `Peer::listen` sends no `_meta` to name the user in), one opening at a time (a shared
        // stream's too, which must not take a user's note).
        let mut sub = match child.auth.as_ref() {
            Some(auth) => {
                let _one = self.inner.listen_opening.lock().await;
                if let Some(user) = user {
                    auth.listen_as(&filter, user);
                }
                // Bounded: a server that never acknowledges must not hold every user's listens.
                let timeout = child.call_timeout;
                let sub = tokio::time::timeout(timeout, child.peer.listen(filter.clone()))
                    .await
                    .unwrap_or(Err(rmcp::ServiceError::Timeout { timeout }));
                auth.listened(&filter);
                sub?
            }
            None => child.peer.listen(filter).await?,
        };
        let (inner, server) = (Arc::downgrade(&self.inner), child.name.clone());
        let key = (exposed.to_owned(), user.map(str::to_owned));
        let for_user = key.1.clone();
        let task = tokio::spawn(async move {
            while let Ok(Some(n)) = sub.next().await {
                let Some(inner) = inner.upgrade() else { return };
                if let ServerNotification::ResourceUpdatedNotification(u) = n {
                    inner
                        .forward_resource_updated(&server, u.params, Some(&for_user))
                        .await;
                }
            }
        });
        if let Some(old) = lock(&self.inner.resource_listens).insert(key, task.abort_handle()) {
            old.abort();
        }
        // Its subscribers may all have left while it was opened.
        self.inner.end_unheard_listens();
        Ok(())
    }

    /// A connected client, for forwarding child requests. `id` identifies the connection.
    pub fn register_client(&self, id: u64, peer: Peer<RoleServer>) {
        let mut clients = lock(&self.inner.clients);
        clients.retain(|(i, p)| *i != id && !p.is_transport_closed());
        clients.push((id, peer));
    }

    /// Whether a connected client declared sampling, elicitation or roots. A child's request during a call that
    /// registered no caller (a fast-lane call) goes to the newest such client: with more than one client (the HTTP
    /// front's sessions) that may not be the caller, so the HTTP front's lane is taken only while this is false.
    pub fn some_client_takes_requests(&self) -> bool {
        lock(&self.inner.clients).iter().any(|(_, p)| {
            !p.is_transport_closed()
                && p.peer_info().is_some_and(|i| {
                    let c = &i.capabilities;
                    c.sampling.is_some() || c.elicitation.is_some() || c.roots.is_some()
                })
        })
    }

    pub fn unregister_client(&self, id: u64) {
        lock(&self.inner.clients).retain(|(i, _)| *i != id);
        self.drop_subscriptions(id);
        lock(&self.inner.scopes).remove(&id);
    }

    /// Registers a client of the per-server endpoint of `server`: it gets that server's log messages (logger
    /// unchanged) and its requests, and nothing of other servers.
    pub fn register_scoped_client(&self, id: u64, peer: Peer<RoleServer>, server: &str) {
        lock(&self.inner.scopes).insert(id, server.to_owned());
        self.register_client(id, peer);
    }

    /// Forgets a disconnected client's subscriptions.
    pub(super) fn drop_subscriptions(&self, client: u64) {
        lock(&self.inner.subscriptions).retain(|s| s.client != client);
        self.inner.end_unheard_listens();
    }
}

/// A log level's severity, lowest first (RFC 5424 order).
pub(super) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Child {
    /// The level to set on this child when clients want `level`: `level`, unless the child was set lower already
    /// (a 2026-07-28 caller wants more), which it stays at; recorded as the child's level.
    fn settle_log_level(&self, level: LoggingLevel) -> LoggingLevel {
        let mut floor = lock(&self.log_floor);
        let level = match *floor {
            Some(f) if rank(f) < rank(level) => f,
            _ => level,
        };
        *floor = Some(level);
        level
    }
}

/// Removes a [`LogCaller`] when the request it stands for stops waiting on the child.
pub(super) struct LogWatch<'a> {
    inner: &'a Inner,
    server: String,
    id: u64,
}

impl Drop for LogWatch<'_> {
    fn drop(&mut self) {
        let mut all = lock(&self.inner.log_callers);
        if let Some(v) = all.get_mut(&self.server) {
            v.retain(|c| c.id != self.id);
            if v.is_empty() {
                all.remove(&self.server);
            }
        }
    }
}

impl Inner {
    /// A 2026-07-28 request that set a logLevel gets `server`'s log messages at or above it on its own stream while
    /// the returned guard lives; `None` (nothing registered) for other callers.
    pub(super) fn watch_logs(&self, server: &str, caller: &Caller) -> Option<LogWatch<'_>> {
        let level = caller.log_level.filter(|_| caller.takes_input_required())?;
        let peer = caller.peer.clone()?;
        let id = self
            .log_caller_ids
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.log_callers)
            .entry(server.to_owned())
            .or_default()
            .push(LogCaller {
                id,
                peer,
                level,
                scoped: caller.scoped,
            });
        Some(LogWatch {
            inner: self,
            server: server.to_owned(),
            id,
        })
    }

    /// A legacy child has only `logging/setLevel`: for a 2026-07-28 caller that wants `level`, the child is set to it
    /// when it was set to a higher one (it stays there; each client is sent only what it asked for). A child whose
    /// level nobody has set logs at its default, everything in the SDKs, and is left alone.
    pub(super) async fn lower_log_level(&self, child: &Child, level: LoggingLevel) {
        if child.capabilities.logging.is_none() || !child.protocol.has_initialize() {
            return;
        }
        {
            let mut floor = lock(&child.log_floor);
            match *floor {
                Some(f) if rank(level) < rank(f) => *floor = Some(level),
                _ => return,
            }
        }
        if let Err(e) = child
            .peer
            .set_level(SetLevelRequestParams::new(level))
            .await
        {
            tracing::warn!(server = %child.name, error = %e, "logging/setLevel failed");
        }
    }

    pub(super) fn running(&self, name: &str) -> Option<Arc<Child>> {
        match lock(&self.children).get(name) {
            Some(Slot::Running(c)) => Some(c.clone()),
            _ => None,
        }
    }

    /// Whether client `id` sees `server`: aggregated clients see every server, per-server clients their own.
    pub(super) fn sees(&self, id: u64, server: &str) -> bool {
        lock(&self.scopes).get(&id).is_none_or(|s| s == server)
    }

    /// A child's log message goes to every connected client that sees the server, at or above the level clients
    /// set (the child may have been set lower for a 2026-07-28 caller); aggregated clients get `logger` naming the
    /// server (`server` or `server/logger`), per-server clients get it unchanged. And to the 2026-07-28 requests
    /// waiting on this server that asked for it, at or above their own level, on their own streams.
    /// `counted`: the child's transport counted this message when it read it (`typed.rs`).
    pub(super) async fn forward_log(
        &self,
        server: &str,
        params: LoggingMessageNotificationParam,
        counted: bool,
    ) {
        let _forwarding = if counted {
            LogForward(&self.logs_in_flight)
        } else {
            LogForward::start(&self.logs_in_flight)
        };
        let mut named = params.clone();
        named.logger = Some(match &params.logger {
            Some(l) if !l.is_empty() => format!("{server}/{l}"),
            _ => server.to_owned(),
        });
        let wanted = lock(&self.log_level).is_none_or(|l| rank(params.level) >= rank(l));
        let scopes = lock(&self.scopes).clone();
        let peers: Vec<(bool, Peer<RoleServer>)> = lock(&self.clients)
            .iter()
            .filter(|_| wanted)
            .filter(|(_, p)| !p.is_transport_closed())
            .filter_map(|(id, p)| match scopes.get(id) {
                None => Some((false, p.clone())),
                Some(s) if s == server => Some((true, p.clone())),
                Some(_) => None,
            })
            .collect();
        // 2026-07-28 requests waiting on this server that asked for log messages on their stream (SEP-2575).
        let callers: Vec<(bool, Peer<RoleServer>)> = lock(&self.log_callers)
            .get(server)
            .into_iter()
            .flatten()
            .filter(|c| !c.peer.is_transport_closed() && rank(params.level) >= rank(c.level))
            .map(|c| (c.scoped, c.peer.clone()))
            .collect();
        for (raw, peer) in peers.into_iter().chain(callers) {
            let msg = if raw { params.clone() } else { named.clone() };
            let _ = peer.notify_logging_message(msg).await;
        }
    }

    /// A log message of a user's own child (its `route`): to the calls of that user that asked for log messages
    /// (2026-07-28 requests), never broadcast to other clients. `counted`: as for `Inner::forward_log`.
    #[allow(deprecated)] // Logging is deprecated by SEP-2577, but legacy children and clients use it.
    pub(super) async fn forward_personal_log(
        &self,
        route: &str,
        params: rmcp::model::LoggingMessageNotificationParam,
        counted: bool,
    ) {
        let server = route.split('\u{1f}').next().unwrap_or(route);
        let mut named = params.clone();
        named.logger = Some(match &params.logger {
            Some(l) if !l.is_empty() => format!("{server}/{l}"),
            _ => server.to_owned(),
        });
        let callers: Vec<(bool, Peer<RoleServer>)> = lock(&self.log_callers)
            .get(route)
            .into_iter()
            .flatten()
            .filter(|c| !c.peer.is_transport_closed() && rank(params.level) >= rank(c.level))
            .map(|c| (c.scoped, c.peer.clone()))
            .collect();
        for (raw, peer) in callers {
            let msg = if raw { params.clone() } else { named.clone() };
            let _ = peer.notify_logging_message(msg).await;
        }
        if counted {
            self.logs_in_flight
                .send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    /// Waits (bounded) for the log messages being forwarded now: a child's message that came before its result
    /// reaches a 2026-07-28 caller's stream before the result closes it. rmcp hands each notification to a task of
    /// its own, so the ones read just before the result are let run first.
    pub(super) async fn flush_logs(&self) {
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        let mut busy = self.logs_in_flight.subscribe();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            busy.wait_for(|n| *n == 0),
        )
        .await;
    }

    /// Ends the resource listen streams no subscriber is left for (the last one unsubscribed or went away).
    pub(super) fn end_unheard_listens(&self) {
        let subs = lock(&self.subscriptions);
        lock(&self.resource_listens).retain(|(uri, user), listen| {
            let heard = subs
                .iter()
                .any(|s| &s.uri == uri && &s.user == user && !s.peer.is_transport_closed());
            if !heard {
                listen.abort();
            }
            heard
        });
    }

    /// A child's resource update goes to the clients subscribed to that resource, under its exposed URI. `user`:
    /// the update came on the listen stream of that user (`Some(None)`: of the shared credentials), and goes to
    /// that user's subscribers only; `None`: on the child's connection, to every subscriber.
    pub(super) async fn forward_resource_updated(
        &self,
        server: &str,
        params: ResourceUpdatedNotificationParam,
        user: Option<&Option<String>>,
    ) {
        let mut exposed = params.clone();
        exposed.uri = names::expose_uri(server, &params.uri);
        let peers: Vec<(bool, Peer<RoleServer>)> = lock(&self.subscriptions)
            .iter()
            .filter(|s| s.uri == exposed.uri && !s.peer.is_transport_closed())
            .filter(|s| user.is_none_or(|u| &s.user == u))
            .map(|s| (s.raw, s.peer.clone()))
            .collect();
        for (raw, peer) in peers {
            let msg = if raw { params.clone() } else { exposed.clone() };
            let _ = peer.notify_resource_updated(msg).await;
        }
    }

    /// Gives a freshly started child the log level clients asked for.
    pub(super) async fn apply_log_level(&self, child: &Child) {
        let level = *lock(&self.log_level);
        if level.is_none() {
            return;
        }
        let session = child.for_legacy_client().await;
        if let Some(level) = level
            && session.capabilities.logging.is_some()
            && let level = child.settle_log_level(level)
            && let Err(e) = session
                .peer
                .set_level(SetLevelRequestParams::new(level))
                .await
        {
            tracing::warn!(server = %child.name, error = %e, "logging/setLevel failed");
        }
    }
}

/// Counts a log message being forwarded (`Inner::logs_in_flight`) while it lives.
struct LogForward<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> LogForward<'a> {
    fn start(count: &'a tokio::sync::watch::Sender<usize>) -> LogForward<'a> {
        count.send_modify(|n| *n += 1);
        LogForward(count)
    }
}

impl Drop for LogForward<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}
