//! Token exchange per user (RFC 8693), for a remote server set up with `OAUTH_GRANT=token_exchange`: the calling
//! user's access token (`Principal::token`, the one that reached the front) is exchanged at the configured token
//! endpoint for a token whose audience is the remote server, with no browser. Exchanged tokens are cached per user
//! (`Principal::user_key`) and server until their expiry less a margin, in this process only (never stored: a
//! replica exchanges for itself, and a restart exchanges again); one exchange at a time per user and server.
//!
//! Settings (secrets or environment of the server): `OAUTH_EXCHANGE_TOKEN_ENDPOINT` (else the token endpoint of the
//! server's own authorization server, found by discovery), `OAUTH_EXCHANGE_AUDIENCE`, `OAUTH_EXCHANGE_RESOURCE`
//! (default: the server's URL, or the resource its metadata names), `OAUTH_SCOPES`, `OAUTH_CLIENT_ID` and
//! `OAUTH_CLIENT_SECRET` (client authentication at the endpoint, HTTP Basic), `OAUTH_ACTOR_TOKEN_FILE` or
//! `OAUTH_ACTOR_TOKEN` (agent-discover's own token as the actor, RFC 8693 delegation) with
//! `OAUTH_ACTOR_TOKEN_TYPE`, `OAUTH_SUBJECT_TOKEN_TYPE` and `OAUTH_REQUESTED_TOKEN_TYPE` (both default to
//! `urn:ietf:params:oauth:token-type:access_token`).

use std::time::Duration;

use crate::discovery;
use crate::error::OAuthError;
use crate::grants::{self, Exchange};
use crate::model::{Exchanged, Key, TokenAuth, now_secs};
use crate::service::{OAuth, lock, server_url};
use ad_core::error::{Error, Result};
use ad_core::identity::Principal;
use ad_core::model::Server;

/// An exchanged token this close to its expiry is exchanged again before use.
pub const EXCHANGE_MARGIN: Duration = Duration::from_secs(60);
/// How long a token is kept when the exchange did not say (`expires_in` absent).
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// The `_meta` key under which the proxy names a request's user (its [`Principal::user_key`]) for a server that
/// exchanges the caller's token; [`crate::AuthedClient`] takes it out before the request leaves.
pub const USER_META: &str = "io.agent-discover/user";

/// What a server's token exchange is set up with.
#[derive(Debug, Clone)]
pub struct ExchangeSettings {
    pub token_endpoint: Option<String>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub actor_token_type: Option<String>,
    pub subject_token_type: String,
    pub requested_token_type: String,
}

impl OAuth {
    /// Whether `server` obtains a token per user by exchanging the caller's token.
    pub fn uses_token_exchange(&self, server: &Server) -> bool {
        self.machine_grant(server).as_deref() == Some("token_exchange")
    }

    /// The server's token exchange settings (`None` unless `OAUTH_GRANT=token_exchange`).
    pub fn exchange_settings(&self, server: &Server) -> Option<ExchangeSettings> {
        if !self.uses_token_exchange(server) {
            return None;
        }
        let get = |k: &str| self.setting(server, k).map(|v| v.trim().to_owned());
        Some(ExchangeSettings {
            token_endpoint: get("OAUTH_EXCHANGE_TOKEN_ENDPOINT"),
            audience: get("OAUTH_EXCHANGE_AUDIENCE"),
            resource: get("OAUTH_EXCHANGE_RESOURCE"),
            scope: get("OAUTH_SCOPES"),
            client_id: get("OAUTH_CLIENT_ID"),
            client_secret: get("OAUTH_CLIENT_SECRET"),
            actor_token_type: get("OAUTH_ACTOR_TOKEN_TYPE"),
            subject_token_type: get("OAUTH_SUBJECT_TOKEN_TYPE")
                .unwrap_or_else(|| grants::ACCESS_TOKEN.to_owned()),
            requested_token_type: get("OAUTH_REQUESTED_TOKEN_TYPE")
                .unwrap_or_else(|| grants::ACCESS_TOKEN.to_owned()),
        })
    }

    /// The token to send to `server` for `principal`: the cached exchange while it has more than
    /// [`EXCHANGE_MARGIN`] left, else a new exchange of the principal's token (one at a time per user and server;
    /// concurrent callers share its result).
    pub async fn exchanged_token(
        &self,
        server: &Server,
        principal: &Principal,
    ) -> Result<Exchanged> {
        let settings = self.exchange_settings(server).ok_or_else(|| {
            Error::invalid(
                "OAUTH_GRANT",
                format!("`{}` is not set up for token exchange", server.name),
            )
        })?;
        let key = (principal.user_key(), server.id);
        if let Some(t) = self.cached_exchange(&key) {
            return Ok(t);
        }
        let flight = lock(&self.inner.exchanged.locks)
            .entry(key.clone())
            .or_default()
            .clone();
        let _held = flight.lock().await;
        if let Some(t) = self.cached_exchange(&key) {
            return Ok(t);
        }
        let subject = principal.token.clone().ok_or_else(|| Error::Upstream {
            server: server.name.clone(),
            message: "OAuth: token exchange needs the caller's access token, and this request carries none (no authenticated user)".into(),
        })?;
        let issued = self.exchange_now(server, &settings, subject).await?;
        let lifetime = issued.expires_in.unwrap_or(DEFAULT_LIFETIME.as_secs());
        let t = Exchanged {
            token: issued.token,
            expires_at: now_secs() + lifetime,
        };
        lock(&self.inner.exchanged.tokens).insert(key, t.clone());
        tracing::info!(server = %server.name, user = %principal.sub, "token exchanged for the user");
        Ok(t)
    }

    /// Files `principal` as its user's latest (its token the subject of that user's next exchange); returns the key a
    /// request names the user by ([`USER_META`]).
    pub fn remember_user(&self, principal: &Principal) -> String {
        let key = principal.user_key();
        lock(&self.inner.exchanged.users).insert(key.clone(), principal.clone());
        key
    }

    pub(crate) fn user(&self, key: &str) -> Option<Principal> {
        lock(&self.inner.exchanged.users).get(key).cloned()
    }

    /// Drops the cached exchange of `user_key` for the server (after the server refused it), or of every user.
    pub fn forget_exchanged(&self, server_id: i64, user_key: Option<&str>) {
        lock(&self.inner.exchanged.tokens)
            .retain(|(u, s), _| *s != server_id || user_key.is_some_and(|k| k != u));
    }

    fn cached_exchange(&self, key: &Key) -> Option<Exchanged> {
        lock(&self.inner.exchanged.tokens)
            .get(key)
            .filter(|t| t.expires_at > now_secs() + EXCHANGE_MARGIN.as_secs())
            .cloned()
    }

    async fn exchange_now(
        &self,
        server: &Server,
        settings: &ExchangeSettings,
        subject: String,
    ) -> Result<grants::Issued> {
        let err = |e: OAuthError| e.into_error(&server.name);
        let url = server_url(server)?;
        let (endpoint, resource) = match (&settings.token_endpoint, &settings.resource) {
            (Some(e), Some(r)) => (e.clone(), r.clone()),
            (endpoint, resource) => {
                // What is not configured comes from the server's own metadata.
                let d = discovery::discover(self.http(), &url, None)
                    .await
                    .map_err(err)?;
                let found = d
                    .resource
                    .map(|r| r.resource)
                    .unwrap_or_else(|| url.to_string());
                (
                    endpoint.clone().unwrap_or(d.server.token_endpoint),
                    resource.clone().unwrap_or(found),
                )
            }
        };
        let actor = match self
            .setting(server, "OAUTH_ACTOR_TOKEN_FILE")
            .or_else(|| self.setting(server, "OAUTH_ACTOR_TOKEN"))
        {
            Some(_) => Some(self.token_setting(server, "OAUTH_ACTOR_TOKEN")?),
            None => None,
        };
        let client = grants::client(
            "",
            settings.client_id.clone(),
            settings.client_secret.clone(),
            TokenAuth::ClientSecretBasic,
        );
        let exchange = Exchange {
            subject_token: subject,
            subject_token_type: settings.subject_token_type.clone(),
            requested_token_type: Some(settings.requested_token_type.clone()),
            audience: settings.audience.clone(),
            resource: Some(resource),
            scope: settings.scope.clone(),
            actor_token: actor,
            actor_token_type: settings.actor_token_type.clone(),
        };
        let issued = grants::token_exchange(self.http(), &endpoint, &client, &exchange)
            .await
            .map_err(err)?;
        if issued.token.is_empty() {
            return Err(err(OAuthError::Refused(
                "the token exchange answered no access_token".into(),
            )));
        }
        Ok(issued)
    }
}

#[cfg(test)]
#[path = "grant_tests.rs"]
mod tests;
