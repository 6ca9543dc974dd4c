//! The OAuth use cases behind the CLI (`auth`), REST (`/api/servers/{name}/auth...`), the `registry` actions
//! (`finish_auth`, `reauthorize`) and the dashboard's callback route: start, finish, re-run and forget a remote
//! server's authorization, over `oauth::OAuth` and the proxy.

use serde::Serialize;

use crate::app::App;
use crate::error::{Error, Result};
use crate::oauth::AuthStatus;

/// The answer to starting or finishing an authorization.
#[derive(Debug, Clone, Serialize)]
pub struct AuthOutcome {
    pub name: String,
    /// `ready` (connected with its tools listed) or `authenticating` (a person must open `authUrl`).
    pub state: &'static str,
    #[serde(rename = "authUrl", skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<usize>,
}

impl App {
    /// Connects `name` (a remote server), authorizing first when it asks: `ready`, or `authenticating` with the URL
    /// a person must open. An authorization already waiting is returned as it is.
    pub async fn start_auth(&self, name: &str) -> Result<AuthOutcome> {
        let server = self.registry.get(name)?;
        if let Some(url) = self.oauth.auth_url(server.id) {
            return Ok(authenticating(name, url));
        }
        // Running here without tokens (forgotten by another process): connect again so the server can say whether
        // it wants authorization.
        if server.url.is_some()
            && self.proxy.is_active(name)
            && self.oauth.tokens(server.id)?.is_none()
        {
            self.proxy.deactivate(name).await?;
        }
        self.connect(name).await
    }

    /// Completes the waiting authorization of `name` with the callback URL (or its query, or a code typed by hand),
    /// then connects it.
    pub async fn finish_auth(&self, name: &str, callback: &str) -> Result<AuthOutcome> {
        let server = self.registry.get(name)?;
        self.oauth.finish(&server, callback).await?;
        self.connect(name).await
    }

    /// Starts a new authorization of `name` while its tokens (if any) keep serving: the entry and its tools stay
    /// listed until the new tokens replace the old ones.
    pub async fn reauthorize(&self, name: &str) -> Result<AuthOutcome> {
        let server = self.registry.get(name)?;
        if server.url.is_none() {
            return Err(Error::invalid(
                "server",
                format!("`{name}` is not a remote server; only remote servers use OAuth"),
            ));
        }
        let url = self.oauth.begin(&server, None, false).await?;
        Ok(authenticating(name, url))
    }

    /// Forgets `name`'s tokens and any waiting authorization, and stops it here if it runs.
    pub async fn logout(&self, name: &str) -> Result<bool> {
        let server = self.registry.get(name)?;
        let had = self.oauth.logout(&server)?;
        self.proxy.deactivate(name).await?;
        Ok(had)
    }

    /// `name`'s authorization, tokens masked.
    pub fn auth_status(&self, name: &str) -> Result<AuthStatus> {
        let server = self.registry.get(name)?;
        self.oauth.status(&server)
    }

    async fn connect(&self, name: &str) -> Result<AuthOutcome> {
        match self.proxy.activate(name).await {
            Ok(a) => Ok(AuthOutcome {
                name: name.to_owned(),
                state: "ready",
                auth_url: None,
                tool_count: Some(a.tools.len()),
            }),
            Err(Error::AuthRequired { auth_url, .. }) => Ok(authenticating(name, auth_url)),
            Err(e) => Err(e),
        }
    }
}

fn authenticating(name: &str, url: String) -> AuthOutcome {
    AuthOutcome {
        name: name.to_owned(),
        state: "authenticating",
        auth_url: Some(url),
        tool_count: None,
    }
}

impl App {
    /// What a team's user is shown of a server each user authorizes for themselves (`OAUTH_PER_USER=on`, issue 30),
    /// as a patch to a listing row: `authenticating` with that user's own `authUrl` (started now when none waits)
    /// until the user has a token, then the server's own status (`ready` once the shared connection runs) without any `authUrl`. Nothing for other servers or
    /// callers without an identity, who see the server's own state; never another user's URL.
    pub async fn personal_auth(
        &self,
        server: &crate::model::Server,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Option<serde_json::Value> {
        let p = principal?;
        if server.url.is_none() || !self.oauth.per_user(server) {
            return None;
        }
        let mine = self.oauth.user_status(server, p).ok()?;
        if mine.state == "authorized" {
            return Some(serde_json::json!({"authUrl": null}));
        }
        let url = match mine.auth_url {
            Some(url) => url,
            None => match self.oauth.begin_for_user_unasked(server, p).await {
                Ok(url) => url,
                Err(e) => {
                    tracing::warn!(server = %server.name, error = %e, "could not start the user's authorization");
                    return Some(serde_json::json!({"status": "authenticating", "authUrl": null}));
                }
            },
        };
        Some(serde_json::json!({"status": "authenticating", "authUrl": url}))
    }

    /// [`App::personal_auth`] applied to a listing row `v` of `server` (a JSON object).
    pub async fn apply_personal_auth(
        &self,
        v: &mut serde_json::Value,
        server: &crate::model::Server,
        principal: Option<&ad_core::identity::Principal>,
    ) {
        let Some(serde_json::Value::Object(patch)) = self.personal_auth(server, principal).await
        else {
            return;
        };
        if let Some(row) = v.as_object_mut() {
            for (k, val) in patch {
                if val.is_null() {
                    row.remove(&k);
                } else {
                    row.insert(k, val);
                }
            }
            // The stored server's own `auth_url` (its shared authorization) is not this user's either.
            if row.contains_key("auth_url") {
                let mine = row.get("authUrl").cloned().unwrap_or_default();
                row.insert("auth_url".into(), mine);
            }
        }
    }
}
