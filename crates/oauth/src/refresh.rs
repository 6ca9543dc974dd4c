//! Keeping a server's token usable: the token to send now, a refresh shared by every caller in every process (under
//! a lease in the store), and the client credentials grant for machine clients.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::discovery;
use crate::error::OAuthError;
use crate::flow;
use crate::model::{Credential, Tokens, now_secs};
use crate::service::{OAuth, lock, server_url};
use ad_core::error::{Error, Result};
use ad_core::model::Server;
use ad_store::{RefreshClaim, RefreshOutcome};

/// A token this close to its expiry is refreshed before use.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// How long a process may hold a server's refresh lease: longer than the HTTP client's timeout (20 s), so a lease
/// outlives its refresh unless its holder died.
const LEASE: Duration = Duration::from_secs(30);
/// How often a process waiting for another process's refresh looks at the stored tokens again.
const LEASE_POLL: Duration = Duration::from_millis(50);

impl OAuth {
    fn refresh_lock(&self, server_id: i64) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.inner.refresh_locks)
            .entry(server_id)
            .or_default()
            .clone()
    }

    /// The token to send to `server` now: refreshed first when it expires within a minute, obtained with the client
    /// credentials grant when the server is set up for it. `None` when there is none (the server's 401 then starts
    /// an authorization).
    pub async fn access_token(&self, server: &Server) -> Result<Option<String>> {
        Ok(self.credential(server).await?.map(|c| c.token))
    }

    /// The token to send to `server` now and how (bearer, or DPoP-bound): see [`OAuth::access_token`].
    pub async fn credential(&self, server: &Server) -> Result<Option<Credential>> {
        // Tokens issued for another resource (the server's URL changed since) are never sent.
        let url = server_url(server)?;
        let tokens = self
            .tokens(server.id)?
            .filter(|t| discovery::resource_matches(&t.resource, &url));
        let (token, dpop) = match tokens {
            Some(t) if !expiring(&t) => (Some(t.access_token), t.dpop),
            Some(t) => (self.refresh(server, &t.access_token).await?, t.dpop),
            // Settings are read only when there is no token (they are secrets: a read and a decryption).
            None => match self.machine_grant(server).filter(|g| g != "token_exchange") {
                Some(g) => {
                    let token = self.machine_tokens(server, &g, None).await?;
                    let dpop = self.tokens(server.id)?.is_some_and(|t| t.dpop);
                    (Some(token), dpop)
                }
                None => (None, false),
            },
        };
        Ok(token.map(|token| Credential { token, dpop }))
    }

    /// Replaces the token `stale` (rejected or expiring) once, however many callers ask at the same time, in this
    /// process or in any other process or replica on the same database: the first refreshes, the others wait and
    /// receive its token. A refresh token the server rejects removes the tokens (`None`: a new authorization is
    /// needed).
    ///
    /// Across processes the refresh runs under a lease row claimed in a short write transaction serialized per server
    /// (see `store::oauth`); the HTTP call to the token endpoint happens with no transaction open, so a slow
    /// authorization server holds neither SQLite's write lock nor a PostgreSQL connection. A process that finds the
    /// lease taken re-checks the stored tokens every [`LEASE_POLL`] until the holder stored new ones, or the lease
    /// expired (its holder died) and it claims the lease itself.
    pub async fn refresh(&self, server: &Server, stale: &str) -> Result<Option<String>> {
        self.refresh_as(server, "", stale).await
    }

    /// [`OAuth::refresh`] of the tokens of `suffix`: the server's own (`""`) or one user's (`@<hash>`).
    pub(crate) async fn refresh_as(
        &self,
        server: &Server,
        suffix: &str,
        stale: &str,
    ) -> Result<Option<String>> {
        let kind = format!("tokens{suffix}");
        let kind = kind.as_str();
        let lock = self.refresh_lock(server.id);
        let _held = lock.lock().await;
        let holder = holder_id();
        let needs_refresh =
            |blob: Option<&[u8]>| match blob.and_then(|b| self.open_tokens(server.id, kind, b)) {
                // Refreshed by someone else (this process earlier, another one while we waited) and good: used as it is.
                Some(t) => t.access_token == stale || expiring(&t),
                None => false,
            };
        let give_up = tokio::time::Instant::now() + LEASE + LEASE_POLL;
        let tokens = loop {
            let claim = self.inner.registry.store().claim_oauth_refresh(
                server.id,
                kind,
                &holder,
                now_secs(),
                LEASE.as_secs(),
                needs_refresh,
            )?;
            match claim {
                RefreshClaim::Fresh(blob) => {
                    return Ok(blob
                        .and_then(|b| self.open_tokens(server.id, kind, &b))
                        .map(|t| t.access_token));
                }
                RefreshClaim::Claimed(blob) => {
                    break blob.and_then(|b| self.open_tokens(server.id, kind, &b));
                }
                RefreshClaim::Busy if tokio::time::Instant::now() < give_up => {
                    tokio::time::sleep(LEASE_POLL).await;
                }
                RefreshClaim::Busy => {
                    return Err(Error::Internal(format!(
                        "another agent-discover process has been refreshing the token of '{}' for too long",
                        server.name
                    )));
                }
            }
        };
        // The lease is ours: release it whatever happens, with what the refresh produced.
        let (outcome, answer) = self.refresh_claimed(server, tokens).await;
        let sealed = match &outcome {
            Ok(Some(new)) => Some(self.seal(server.id, kind, new)?),
            _ => None,
        };
        let write = match (&outcome, &sealed) {
            (_, Some(blob)) => RefreshOutcome::Store(blob),
            (Ok(None), None) if answer.is_none() => RefreshOutcome::Delete,
            _ => RefreshOutcome::Keep,
        };
        let released = self
            .inner
            .registry
            .store()
            .finish_oauth_refresh(server.id, kind, &holder, write)?;
        if !released {
            tracing::warn!(server = %server.name, "the token refresh outlived its lease; its result was dropped");
        }
        outcome?;
        if matches!(write, RefreshOutcome::Store(_)) {
            tracing::info!(server = %server.name, "OAuth token refreshed");
        }
        Ok(answer)
    }

    /// The refresh itself, under the lease: `Ok(Some(tokens))` to store, `Ok(None)` with the answer to give (the
    /// token from the client credentials grant, which stores its own tokens; `None` when the tokens must go).
    async fn refresh_claimed(
        &self,
        server: &Server,
        tokens: Option<Tokens>,
    ) -> (Result<Option<Tokens>>, Option<String>) {
        let Some(tokens) = tokens else {
            return (Ok(None), None);
        };
        if matches!(
            tokens.grant.as_str(),
            "client_credentials" | "jwt_bearer" | "id_jag"
        ) {
            return match self
                .machine_tokens(server, &tokens.grant, tokens.scope.clone())
                .await
            {
                Ok(token) => (Ok(None), Some(token)),
                Err(e) => (Err(e), None),
            };
        }
        let Some(refresh_token) = tokens.refresh_token.clone() else {
            return (Ok(None), None);
        };
        let dpop = match tokens.dpop {
            true => match self.dpop(server.id) {
                Ok(d) => Some(d),
                Err(e) => return (Err(e), None),
            },
            false => None,
        };
        match flow::refresh(self.http(), &tokens, &refresh_token, dpop.as_ref()).await {
            Ok(new) => {
                let token = new.access_token.clone();
                (Ok(Some(new)), Some(token))
            }
            Err(OAuthError::Refused(reason)) => {
                tracing::warn!(server = %server.name, %reason, "the refresh token was rejected; a new authorization is needed");
                (Ok(None), None)
            }
            Err(e) => (Err(e.into_error(&server.name)), None),
        }
    }
}

/// Names one refresh attempt, unique across processes (and across `App`s in one process).
fn holder_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

pub(crate) fn expiring(t: &Tokens) -> bool {
    t.expires_at
        .is_some_and(|at| at <= now_secs() + REFRESH_MARGIN.as_secs())
}
