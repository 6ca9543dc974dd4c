//! Per-user authorization of a remote server (issue 30, client side): with `OAUTH_PER_USER=on`, each user of a team
//! authorizes the server for themselves with the authorization code flow, and the requests made for that user carry
//! that user's token. A user's records are the server's kinds with the user's suffix (`tokens@<h>`, `pending@<h>`,
//! `<h>` the first 16 hex digits of the SHA-256 of `Principal::user_key`, so no identity is written in clear), sealed
//! like the server's own, refreshed once across processes under the same lease; the client registration is shared.
//! A user's authorize URL carries `state` = `<random>.<h>`, which is how the callback (`OAuth::finish`) finds whose it
//! is. A user without tokens is `authenticating` with their own URL once they asked, else `none`.

use sha2::{Digest, Sha256};

use crate::discovery::{self, Challenge};
use crate::model::{AuthStatus, Credential, Pending, Tokens};
use crate::service::{OAuth, server_url};
use ad_core::error::Result;
use ad_core::identity::Principal;
use ad_core::model::Server;

/// The suffix of a user's records: `@` and 16 hex digits of the SHA-256 of the user's key.
pub fn user_suffix(user_key: &str) -> String {
    let digest = Sha256::digest(user_key.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("@{hex}")
}

impl OAuth {
    /// Whether each user authorizes `server` for themselves (`OAUTH_PER_USER=on`).
    pub fn per_user(&self, server: &Server) -> bool {
        self.setting(server, "OAUTH_PER_USER")
            .is_some_and(|v| matches!(v.trim(), "on" | "true" | "1" | "yes"))
            && self.machine_grant(server).is_none()
    }

    /// The user's tokens for `server`, in clear.
    pub fn user_tokens(&self, server_id: i64, principal: &Principal) -> Result<Option<Tokens>> {
        let kind = format!("tokens{}", user_suffix(&principal.user_key()));
        self.load(server_id, &kind)
    }

    /// The token to send to `server` for `principal` now (refreshed first when it expires within a minute), or
    /// `None` when the user has not authorized it.
    pub async fn user_credential(
        &self,
        server: &Server,
        principal: &Principal,
    ) -> Result<Option<Credential>> {
        let url = server_url(server)?;
        let suffix = user_suffix(&principal.user_key());
        let tokens = self
            .user_tokens(server.id, principal)?
            .filter(|t| discovery::resource_matches(&t.resource, &url));
        let Some(t) = tokens else {
            return Ok(None);
        };
        let dpop = t.dpop;
        let token = if crate::refresh::expiring(&t) {
            self.refresh_as(server, &suffix, &t.access_token).await?
        } else {
            Some(t.access_token)
        };
        Ok(token.map(|token| Credential { token, dpop }))
    }

    /// Replaces the user's token `stale` after the server refused it (see [`OAuth::refresh`]).
    pub async fn user_refresh(
        &self,
        server: &Server,
        principal: &Principal,
        stale: &str,
    ) -> Result<Option<String>> {
        self.refresh_as(server, &user_suffix(&principal.user_key()), stale)
            .await
    }

    /// Starts the user's own authorization of `server` (after the server's challenge to that user's request, or when
    /// the user asks); returns the authorize URL, which only this user is shown.
    pub async fn begin_for_user(
        &self,
        server: &Server,
        principal: &Principal,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Result<String> {
        let suffix = user_suffix(&principal.user_key());
        self.begin_as(server, &suffix, challenge, step_up).await
    }

    /// Starts the user's own authorization of `server` before any request of theirs was refused (a listing shows the
    /// user their URL): the server's challenge is asked for by an unauthenticated GET of its endpoint (the stream a
    /// Streamable HTTP client may open), whose 401 names the protected resource metadata (RFC 9728).
    pub async fn begin_for_user_unasked(
        &self,
        server: &Server,
        principal: &Principal,
    ) -> Result<String> {
        let url = server_url(server)?;
        let challenge = match self
            .http()
            .get(url.as_str())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .send()
            .await
        {
            Ok(resp) if matches!(resp.status().as_u16(), 401 | 403) => resp
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(Challenge::parse),
            _ => None,
        };
        self.begin_for_user(server, principal, challenge.as_ref(), false)
            .await
    }

    /// The user's authorization of `server`, masked: `authenticating` with the user's own URL, `authorized`, or
    /// `none`.
    pub fn user_status(&self, server: &Server, principal: &Principal) -> Result<AuthStatus> {
        let suffix = user_suffix(&principal.user_key());
        let pending: Option<Pending> = self.load(server.id, &format!("pending{suffix}"))?;
        let tokens = self.user_tokens(server.id, principal)?;
        Ok(crate::service::status_of(pending, tokens))
    }

    /// Forgets the user's tokens and pending authorization of `server`.
    pub fn user_logout(&self, server: &Server, principal: &Principal) -> Result<bool> {
        let suffix = user_suffix(&principal.user_key());
        let store = self.inner.registry.store();
        let a = store.delete_oauth(server.id, &format!("tokens{suffix}"))?;
        let b = store.delete_oauth(server.id, &format!("pending{suffix}"))?;
        Ok(a || b)
    }
}

#[cfg(test)]
#[path = "peruser_tests.rs"]
mod tests;
