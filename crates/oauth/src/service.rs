//! The OAuth service of a process: where redirect URIs point, the HTTP client, and the per-server records sealed by
//! the secrets store (load, save, status, logout) with the server's OAuth settings. Obtaining tokens is in
//! `refresh.rs` (keeping them fresh) and `authorize.rs` (a person's authorization).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::discovery::AuthServer;
use crate::dpop::{Dpop, DpopKey, Nonces, StoredKey};
use crate::model::{AuthStatus, Pending, Tokens};
use ad_core::error::{Error, Result};
use ad_core::events::{Event, EventBus};
use ad_core::model::Server;
use ad_registry::registry::Registry;
use ad_registry::secrets::Secrets;

/// Environment variable naming the URL the dashboard is reached at (redirect URIs are built on it).
pub const ENV_PUBLIC_URL: &str = "AGENT_DISCOVER_PUBLIC_URL";

/// The OAuth service of a process: one per `App`.
#[derive(Clone)]
pub struct OAuth {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuth { .. }")
    }
}

pub(crate) struct Inner {
    http: std::sync::OnceLock<reqwest::Client>,
    pub(crate) registry: Registry,
    secrets: Secrets,
    events: EventBus,
    /// Where redirect URIs point: the public URL setting, else the dashboard listener of this process once bound,
    /// else the configured dashboard port on loopback.
    public_url: Option<String>,
    bound: Mutex<Option<String>>,
    default_port: u16,
    /// One refresh at a time per server: concurrent callers wait and share its result.
    pub(crate) refresh_locks: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
    /// DPoP: each server's key once opened, and the nonces servers gave (by origin).
    dpop_keys: Mutex<HashMap<i64, Arc<DpopKey>>>,
    dpop_nonces: Nonces,
    /// Tokens obtained by token exchange (RFC 8693), per user and server, in this process only.
    pub(crate) exchanged: crate::model::Cache,
}

pub fn aad(server_id: i64, kind: &str) -> String {
    format!("server={server_id};oauth={kind}")
}

impl OAuth {
    pub fn new(registry: Registry, secrets: Secrets, events: EventBus) -> OAuth {
        let public_url = std::env::var(ENV_PUBLIC_URL)
            .ok()
            .map(|v| v.trim().trim_end_matches('/').to_owned())
            .filter(|v| !v.is_empty());
        let default_port = std::env::var("AGENT_DISCOVER_PORT")
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(ad_registry::config::DEFAULT_PORT);
        OAuth {
            inner: Arc::new(Inner {
                http: std::sync::OnceLock::new(),
                registry,
                secrets,
                events,
                public_url,
                bound: Mutex::new(None),
                default_port,
                refresh_locks: Mutex::default(),
                dpop_keys: Mutex::default(),
                dpop_nonces: Nonces::default(),
                exchanged: Default::default(),
            }),
        }
    }

    /// Called by whoever serves `/oauth/callback/{server}` in this process, with the address it listens on.
    pub fn set_listener(&self, addr: std::net::SocketAddr) {
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            addr.ip().to_string()
        };
        *lock(&self.inner.bound) = Some(format!("http://{host}:{}", addr.port()));
    }

    /// The redirect URI for `server`: `<public_url or dashboard>/oauth/callback/<server>`.
    pub fn redirect_uri(&self, server: &str) -> String {
        let base = self
            .inner
            .public_url
            .clone()
            .or_else(|| lock(&self.inner.bound).clone())
            .unwrap_or_else(|| format!("http://127.0.0.1:{}", self.inner.default_port));
        format!("{base}/oauth/callback/{server}")
    }

    /// The port redirect URIs point at on loopback, when they do (what `agent-discover auth` listens on).
    pub fn loopback_port(&self) -> Option<u16> {
        if self.inner.public_url.is_some() || lock(&self.inner.bound).is_some() {
            return None;
        }
        Some(self.inner.default_port)
    }

    /// The HTTP client, built on first use: building one loads the system's root certificates, which most processes
    /// (every CLI command, every `mcp` without remote servers) never need.
    pub(crate) fn http(&self) -> &reqwest::Client {
        self.inner.http.get_or_init(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(Duration::from_secs(20))
                .build()
                .unwrap_or_default()
        })
    }

    pub(crate) fn load<T: for<'de> Deserialize<'de>>(
        &self,
        server_id: i64,
        kind: &str,
    ) -> Result<Option<T>> {
        let Some(blob) = self.inner.registry.store().oauth(server_id, kind)? else {
            return Ok(None);
        };
        let Some(clear) = self.inner.secrets.open_bytes(&aad(server_id, kind), &blob) else {
            tracing::warn!(
                server_id,
                kind,
                "an OAuth record does not decrypt (was the key replaced?); ignored"
            );
            return Ok(None);
        };
        Ok(serde_json::from_slice(&clear).ok())
    }

    pub(crate) fn seal<T: Serialize>(
        &self,
        server_id: i64,
        kind: &str,
        value: &T,
    ) -> Result<Vec<u8>> {
        let clear = serde_json::to_vec(value).map_err(|e| Error::Internal(e.to_string()))?;
        self.inner.secrets.seal_bytes(&aad(server_id, kind), &clear)
    }

    /// Stored tokens of `kind` (`tokens`, or a user's `tokens@<hash>`), decrypted; `None` when they do not decrypt
    /// or parse.
    pub(crate) fn open_tokens(&self, server_id: i64, kind: &str, blob: &[u8]) -> Option<Tokens> {
        let clear = self.inner.secrets.open_bytes(&aad(server_id, kind), blob)?;
        serde_json::from_slice(&clear).ok()
    }

    pub(crate) fn save<T: Serialize>(
        &self,
        server_id: i64,
        kind: &str,
        value: &T,
        auth_url: Option<&str>,
    ) -> Result<()> {
        let blob = self.seal(server_id, kind, value)?;
        self.inner
            .registry
            .store()
            .put_oauth(server_id, kind, &blob, auth_url)
    }

    /// The server's tokens, in clear (for the proxy; shown to people only through [`OAuth::status`], masked).
    pub fn tokens(&self, server_id: i64) -> Result<Option<Tokens>> {
        self.load(server_id, "tokens")
    }

    pub(crate) fn pending(&self, server_id: i64) -> Result<Option<Pending>> {
        self.load(server_id, "pending")
    }

    /// The authorize URL waiting for a person, if any.
    pub fn auth_url(&self, server_id: i64) -> Option<String> {
        self.pending(server_id).ok().flatten().map(|p| p.auth_url)
    }

    /// Every server's waiting authorize URL, by server id (one query, for lists).
    pub fn auth_urls(&self) -> HashMap<i64, String> {
        self.inner
            .registry
            .store()
            .pending_auth_urls()
            .unwrap_or_default()
    }

    /// The server's authorization, masked.
    pub fn status(&self, server: &Server) -> Result<AuthStatus> {
        Ok(status_of(self.pending(server.id)?, self.tokens(server.id)?))
    }

    /// Forgets the server's tokens and any pending authorization (its client registration stays for reuse).
    pub fn logout(&self, server: &Server) -> Result<bool> {
        let store = self.inner.registry.store();
        let a = store.delete_oauth(server.id, "tokens")?;
        let b = store.delete_oauth(server.id, "pending")?;
        self.changed(&server.name);
        Ok(a || b)
    }

    pub(crate) fn changed(&self, name: &str) {
        self.inner.events.emit(Event::ServerUpdated {
            name: name.to_owned(),
        });
    }

    /// A server's OAuth setting from its secrets, else its environment.
    pub(crate) fn setting(&self, server: &Server, key: &str) -> Option<String> {
        self.inner
            .secrets
            .env_for(server.id)
            .ok()
            .and_then(|s| s.get(key).cloned())
            .or_else(|| server.env.get(key).cloned())
            .filter(|v| !v.trim().is_empty())
    }

    /// Whether the server is set up for the client credentials grant (no person involved).
    pub fn uses_client_credentials(&self, server: &Server) -> bool {
        self.setting(server, "OAUTH_GRANT")
            .is_some_and(|g| g.trim() == "client_credentials")
    }

    /// The grant that obtains the server's tokens without a person (`client_credentials`, `jwt_bearer`, `id_jag`,
    /// `token_exchange`), if it is set up for one: such a server never gets a browser authorization.
    pub fn machine_grant(&self, server: &Server) -> Option<String> {
        self.setting(server, "OAUTH_GRANT")
            .map(|g| g.trim().to_owned())
            .filter(|g| {
                matches!(
                    g.as_str(),
                    "client_credentials" | "jwt_bearer" | "id_jag" | "token_exchange"
                )
            })
    }

    /// The DPoP signer for the server's token requests to the authorization server `meta`: used when `OAUTH_DPOP`
    /// is `on`, or when it is not `off` and the server advertises ES256 in `dpop_signing_alg_values_supported`.
    pub(crate) fn dpop_for(&self, server: &Server, meta: &AuthServer) -> Result<Option<Dpop>> {
        let setting = self
            .setting(server, "OAUTH_DPOP")
            .map(|v| v.trim().to_ascii_lowercase());
        let wanted = match setting.as_deref() {
            Some("on" | "true" | "1" | "yes") => true,
            Some("off" | "false" | "0" | "no") => false,
            _ => meta
                .dpop_signing_alg_values_supported
                .as_ref()
                .is_some_and(|algs| algs.iter().any(|a| a == "ES256")),
        };
        if !wanted {
            return Ok(None);
        }
        self.dpop(server.id).map(Some)
    }

    /// The server's DPoP signer: its key (created and stored sealed on first use) with the process's nonces.
    pub fn dpop(&self, server_id: i64) -> Result<Dpop> {
        if let Some(k) = lock(&self.inner.dpop_keys).get(&server_id) {
            return Ok(Dpop::new(k.clone(), self.inner.dpop_nonces.clone()));
        }
        let key = match self.load::<StoredKey>(server_id, "dpop_key")? {
            Some(stored) => DpopKey::from_stored(&stored)
                .map_err(|e| Error::Internal(format!("DPoP key of server {server_id}: {e}")))?,
            None => {
                // Created once: when processes race, every one of them uses the key stored first.
                let (_, stored) =
                    DpopKey::generate().map_err(|e| Error::Internal(e.to_string()))?;
                let blob = self.seal(server_id, "dpop_key", &stored)?;
                let kept = self
                    .inner
                    .registry
                    .store()
                    .put_oauth_once(server_id, "dpop_key", &blob)?;
                let stored: StoredKey = self
                    .inner
                    .secrets
                    .open_bytes(&aad(server_id, "dpop_key"), &kept)
                    .and_then(|clear| serde_json::from_slice(&clear).ok())
                    .ok_or_else(|| {
                        Error::Internal(format!("the DPoP key of server {server_id} does not open"))
                    })?;
                DpopKey::from_stored(&stored)
                    .map_err(|e| Error::Internal(format!("DPoP key of server {server_id}: {e}")))?
            }
        };
        let key = lock(&self.inner.dpop_keys)
            .entry(server_id)
            .or_insert_with(|| Arc::new(key))
            .clone();
        Ok(Dpop::new(key, self.inner.dpop_nonces.clone()))
    }
}

/// An authorization as shown: `authenticating` while `pending` waits, else `authorized` with `tokens`, else `none`.
pub(crate) fn status_of(pending: Option<Pending>, tokens: Option<Tokens>) -> AuthStatus {
    AuthStatus {
        state: if pending.is_some() {
            "authenticating"
        } else if tokens.is_some() {
            "authorized"
        } else {
            "none"
        },
        auth_url: pending.map(|p| p.auth_url),
        access_token: tokens
            .as_ref()
            .map(|t| ad_registry::secrets::mask(&t.access_token)),
        expires_at: tokens.as_ref().and_then(|t| t.expires_at),
        scope: tokens.as_ref().and_then(|t| t.scope.clone()),
        issuer: tokens.as_ref().map(|t| t.client.issuer.clone()),
        client_id: tokens.as_ref().map(|t| t.client.client_id.clone()),
        grant: tokens.as_ref().map(|t| t.grant.clone()),
        token_type: tokens
            .as_ref()
            .map(|t| if t.dpop { "DPoP" } else { "Bearer" }),
    }
}

pub(crate) fn server_url(server: &Server) -> Result<url::Url> {
    let raw = server.url.as_deref().unwrap_or_default();
    url::Url::parse(raw).map_err(|e| Error::invalid("url", format!("{raw:?}: {e}")))
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
