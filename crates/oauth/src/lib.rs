//! OAuth for remote MCP servers, the client side of the MCP authorization specification (2025-11-25, with the
//! 2026-07-28 changes): discovery (`discovery.rs`), client identity and the authorization code flow with PKCE S256
//! (`flow.rs`), and the HTTP client that puts the token on every request to the server it was issued for
//! (`client.rs`).
//!
//! Tokens, client registrations and pending authorizations are kept per server in `server_oauth`, each encrypted by
//! the secrets store and bound to its server and kind; they are never logged and leave only masked.
//!
//! A server's OAuth settings are its environment values or secrets (secrets win): `OAUTH_CLIENT_ID` and
//! `OAUTH_CLIENT_SECRET` (a pre-registered client), `OAUTH_CLIENT_METADATA_URL` (a Client ID Metadata Document URL,
//! used when the authorization server supports it), `OAUTH_GRANT=client_credentials` (a machine client, with
//! `OAUTH_CLIENT_SECRET` or `OAUTH_PRIVATE_KEY`: a PKCS#8 PEM key for private-key JWT client authentication, ES256 or
//! RS256, `OAUTH_SIGNING_ALG` to force one) and `OAUTH_SCOPES` (scopes to request instead of the discovered ones).

mod client;
pub mod discovery;
mod flow;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use client::{AuthedClient, Session};
pub use discovery::Challenge;

use ad_core::error::{Error, Result};
use ad_core::events::{Event, EventBus};
use ad_core::model::Server;
use ad_registry::registry::Registry;
use ad_registry::secrets::Secrets;
use ad_store::{RefreshClaim, RefreshOutcome};

/// Authorizations in one chain of scope step-ups (the first one included) before agent-discover gives up.
pub const MAX_AUTHORIZATIONS: u32 = 3;
/// A token this close to its expiry is refreshed before use.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);
/// How long a process may hold a server's refresh lease: longer than the HTTP client's timeout (20 s), so a lease
/// outlives its refresh unless its holder died.
const LEASE: Duration = Duration::from_secs(30);
/// How often a process waiting for another process's refresh looks at the stored tokens again.
const LEASE_POLL: Duration = Duration::from_millis(50);
/// Environment variable naming the URL the dashboard is reached at (redirect URIs are built on it).
pub const ENV_PUBLIC_URL: &str = "AGENT_DISCOVER_PUBLIC_URL";

/// What went wrong talking to an authorization server; turned into an [`Error`] naming the server.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    #[error("{0}")]
    Http(String),
    #[error("{0}")]
    Metadata(String),
    /// The authorization server answered with an OAuth error.
    #[error("{0}")]
    Refused(String),
    /// The callback or a setting is wrong.
    #[error("{0}")]
    Invalid(String),
}

impl OAuthError {
    fn into_error(self, server: &str) -> Error {
        match self {
            OAuthError::Invalid(reason) => Error::Invalid {
                what: "authorization",
                reason,
            },
            other => Error::Upstream {
                server: server.to_owned(),
                message: format!("OAuth: {other}"),
            },
        }
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenAuth {
    ClientSecretBasic,
    ClientSecretPost,
    None,
}

/// The client identity used with one authorization server.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClientIdentity {
    pub issuer: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    pub auth: TokenAuth,
    /// The redirect URI a dynamic registration was made for (a registration is reused only for the same one).
    #[serde(default)]
    pub redirect_uri: Option<String>,
    /// `preregistered`, `metadata_document` or `dynamic`.
    pub source: String,
}

/// Tokens of one server, with what refreshing them needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scope: Option<String>,
    pub token_endpoint: String,
    pub resource: String,
    pub client: ClientIdentity,
    /// Authorizations so far in the current chain of scope step-ups.
    #[serde(default)]
    pub authorizations: u32,
    /// `authorization_code` or `client_credentials`.
    #[serde(default = "default_grant")]
    pub grant: String,
}

fn default_grant() -> String {
    "authorization_code".into()
}

/// An authorization in progress: what the callback is checked against and the token request needs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pending {
    pub state: String,
    pub verifier: String,
    pub auth_url: String,
    pub redirect_uri: String,
    pub resource: String,
    #[serde(default)]
    pub scope: Option<String>,
    pub server: discovery::AuthServer,
    pub client: ClientIdentity,
    pub authorizations: u32,
}

/// A server's authorization as shown to people and agents (tokens masked).
#[derive(Debug, Clone, Serialize)]
pub struct AuthStatus {
    /// `authenticating` (an authorize URL waits), `authorized` or `none`.
    pub state: &'static str,
    #[serde(rename = "authUrl", skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

/// The OAuth service of a process: one per `App`.
#[derive(Clone)]
pub struct OAuth {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OAuth { .. }")
    }
}

struct Inner {
    http: std::sync::OnceLock<reqwest::Client>,
    registry: Registry,
    secrets: Secrets,
    events: EventBus,
    /// Where redirect URIs point: the public URL setting, else the dashboard listener of this process once bound,
    /// else the configured dashboard port on loopback.
    public_url: Option<String>,
    bound: Mutex<Option<String>>,
    default_port: u16,
    /// One refresh at a time per server: concurrent callers wait and share its result.
    refresh_locks: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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

    fn load<T: for<'de> Deserialize<'de>>(&self, server_id: i64, kind: &str) -> Result<Option<T>> {
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

    fn seal<T: Serialize>(&self, server_id: i64, kind: &str, value: &T) -> Result<Vec<u8>> {
        let clear = serde_json::to_vec(value).map_err(|e| Error::Internal(e.to_string()))?;
        self.inner.secrets.seal_bytes(&aad(server_id, kind), &clear)
    }

    /// Stored tokens, decrypted; `None` when they do not decrypt or parse.
    fn open_tokens(&self, server_id: i64, blob: &[u8]) -> Option<Tokens> {
        let clear = self
            .inner
            .secrets
            .open_bytes(&aad(server_id, "tokens"), blob)?;
        serde_json::from_slice(&clear).ok()
    }

    fn save<T: Serialize>(
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
        let pending = self.pending(server.id)?;
        let tokens = self.tokens(server.id)?;
        Ok(AuthStatus {
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
        })
    }

    /// Forgets the server's tokens and any pending authorization (its client registration stays for reuse).
    pub fn logout(&self, server: &Server) -> Result<bool> {
        let store = self.inner.registry.store();
        let a = store.delete_oauth(server.id, "tokens")?;
        let b = store.delete_oauth(server.id, "pending")?;
        self.changed(&server.name);
        Ok(a || b)
    }

    fn changed(&self, name: &str) {
        self.inner.events.emit(Event::ServerUpdated {
            name: name.to_owned(),
        });
    }

    /// A server's OAuth setting from its secrets, else its environment.
    fn setting(&self, server: &Server, key: &str) -> Option<String> {
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
        // Tokens issued for another resource (the server's URL changed since) are never sent.
        let url = server_url(server)?;
        let tokens = self
            .tokens(server.id)?
            .filter(|t| discovery::resource_matches(&t.resource, &url));
        match tokens {
            Some(t) if !expiring(&t) => Ok(Some(t.access_token)),
            Some(t) => self.refresh(server, &t.access_token).await,
            None if self.uses_client_credentials(server) => {
                self.client_credentials(server, None).await.map(Some)
            }
            None => Ok(None),
        }
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
        let lock = self.refresh_lock(server.id);
        let _held = lock.lock().await;
        let holder = holder_id();
        let needs_refresh =
            |blob: Option<&[u8]>| match blob.and_then(|b| self.open_tokens(server.id, b)) {
                // Refreshed by someone else (this process earlier, another one while we waited) and good: used as it is.
                Some(t) => t.access_token == stale || expiring(&t),
                None => false,
            };
        let give_up = tokio::time::Instant::now() + LEASE + LEASE_POLL;
        let tokens = loop {
            let claim = self.inner.registry.store().claim_oauth_refresh(
                server.id,
                "tokens",
                &holder,
                now_secs(),
                LEASE.as_secs(),
                needs_refresh,
            )?;
            match claim {
                RefreshClaim::Fresh(blob) => {
                    return Ok(blob
                        .and_then(|b| self.open_tokens(server.id, &b))
                        .map(|t| t.access_token));
                }
                RefreshClaim::Claimed(blob) => {
                    break blob.and_then(|b| self.open_tokens(server.id, &b));
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
            Ok(Some(new)) => Some(self.seal(server.id, "tokens", new)?),
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
            .finish_oauth_refresh(server.id, "tokens", &holder, write)?;
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
        if tokens.grant == "client_credentials" {
            return match self.client_credentials(server, tokens.scope.clone()).await {
                Ok(token) => (Ok(None), Some(token)),
                Err(e) => (Err(e), None),
            };
        }
        let Some(refresh_token) = tokens.refresh_token.clone() else {
            return (Ok(None), None);
        };
        match flow::refresh(self.http(), &tokens, &refresh_token).await {
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

    async fn client_credentials(&self, server: &Server, scope: Option<String>) -> Result<String> {
        let err = |e: OAuthError| e.into_error(&server.name);
        let url = server_url(server)?;
        let discovered = discovery::discover(self.http(), &url, None)
            .await
            .map_err(err)?;
        let client_id = self.setting(server, "OAUTH_CLIENT_ID").ok_or_else(|| {
            Error::invalid(
                "OAUTH_CLIENT_ID",
                "the client credentials grant needs a client id (and OAUTH_CLIENT_SECRET) as secrets of the server",
            )
        })?;
        // A private key (private_key_jwt) takes the place of the secret at the token endpoint.
        let key = self.setting(server, "OAUTH_PRIVATE_KEY");
        let secret = match key {
            Some(_) => None,
            None => self.setting(server, "OAUTH_CLIENT_SECRET"),
        };
        let assertion = match &key {
            Some(pem) => Some(
                flow::client_assertion(
                    pem,
                    self.setting(server, "OAUTH_SIGNING_ALG").as_deref(),
                    &client_id,
                    &discovered.server.issuer,
                )
                .map_err(err)?,
            ),
            None => None,
        };
        let client = flow::preregistered(&discovered.server, client_id, secret);
        let scope = scope
            .or_else(|| self.setting(server, "OAUTH_SCOPES"))
            .or_else(|| {
                discovered
                    .resource
                    .as_ref()
                    .and_then(|r| r.scopes_supported.as_ref())
                    .map(|s| s.join(" "))
            });
        let resource = discovered
            .resource
            .as_ref()
            .map(|r| r.resource.clone())
            .unwrap_or_else(|| url.to_string());
        let tokens = flow::client_credentials(
            self.http(),
            &discovered.server,
            client,
            &resource,
            scope.as_deref(),
            assertion,
        )
        .await
        .map_err(err)?;
        self.save(server.id, "tokens", &tokens, None)?;
        self.changed(&server.name);
        Ok(tokens.access_token)
    }

    /// Starts an authorization for `server` after its challenge (401, or 403 `insufficient_scope` when `step_up`):
    /// discovery, client identity, PKCE; stores it pending and returns the authorize URL. A step-up asks for the
    /// union of the scopes held and the scopes the challenge names; after [`MAX_AUTHORIZATIONS`] in one chain it
    /// gives up with an error instead of another URL.
    pub async fn begin(
        &self,
        server: &Server,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Result<String> {
        let err = |e: OAuthError| e.into_error(&server.name);
        let url = server_url(server)?;
        let held = self.tokens(server.id)?;
        let previous = self.pending(server.id)?;
        let authorizations = if step_up {
            held.as_ref()
                .map(|t| t.authorizations)
                .or(previous.as_ref().map(|p| p.authorizations))
                .unwrap_or(1)
                + 1
        } else {
            1
        };
        if authorizations > MAX_AUTHORIZATIONS {
            return Err(Error::Upstream {
                server: server.name.clone(),
                message: format!(
                    "OAuth: the server still answers insufficient_scope after {MAX_AUTHORIZATIONS} authorizations; not asking again"
                ),
            });
        }
        let discovered = discovery::discover(self.http(), &url, challenge)
            .await
            .map_err(err)?;
        let methods = discovered
            .server
            .code_challenge_methods_supported
            .clone()
            .unwrap_or_default();
        if !discovered.server.assumed && !methods.iter().any(|m| m == "S256") {
            return Err(err(OAuthError::Metadata(format!(
                "authorization server {} does not advertise PKCE S256 (code_challenge_methods_supported); refused",
                discovered.server.issuer
            ))));
        }
        let resource = discovered
            .resource
            .as_ref()
            .map(|r| r.resource.clone())
            .unwrap_or_else(|| url.to_string());
        // Scopes: configured, else the challenge's, else the resource's scopes_supported, else none; a step-up adds
        // what is held.
        let mut scope: Option<String> = self
            .setting(server, "OAUTH_SCOPES")
            .or_else(|| challenge.and_then(|c| c.scope.clone()))
            .or_else(|| {
                discovered
                    .resource
                    .as_ref()
                    .and_then(|r| r.scopes_supported.as_ref())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.join(" "))
            });
        if step_up {
            let before = held
                .as_ref()
                .and_then(|t| t.scope.clone())
                .or(previous.as_ref().and_then(|p| p.scope.clone()));
            scope = union_scopes(before.as_deref(), scope.as_deref());
        }
        let offline = discovered
            .server
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == "offline_access"));
        if offline {
            scope = union_scopes(scope.as_deref(), Some("offline_access"));
        }
        let redirect_uri = self.redirect_uri(&server.name);
        let client = self
            .client_identity(server, &discovered.server, &redirect_uri)
            .await?;
        let pending = flow::authorization(
            &discovered.server,
            client,
            &redirect_uri,
            &resource,
            scope,
            authorizations,
        )
        .map_err(err)?;
        self.save(server.id, "pending", &pending, Some(&pending.auth_url))?;
        self.changed(&server.name);
        Ok(pending.auth_url)
    }

    /// The client identity for this authorization server, in the specification's order: pre-registered, a Client ID
    /// Metadata Document URL (when supported), a stored registration with this issuer, dynamic registration.
    async fn client_identity(
        &self,
        server: &Server,
        meta: &discovery::AuthServer,
        redirect_uri: &str,
    ) -> Result<ClientIdentity> {
        if let Some(id) = self.setting(server, "OAUTH_CLIENT_ID") {
            let secret = self.setting(server, "OAUTH_CLIENT_SECRET");
            return Ok(flow::preregistered(meta, id, secret));
        }
        if meta.client_id_metadata_document_supported
            && let Some(url) = self.setting(server, "OAUTH_CLIENT_METADATA_URL")
        {
            return Ok(ClientIdentity {
                issuer: meta.issuer.clone(),
                client_id: url,
                client_secret: None,
                auth: TokenAuth::None,
                redirect_uri: None,
                source: "metadata_document".into(),
            });
        }
        if let Some(stored) = self.load::<ClientIdentity>(server.id, "client")?
            && stored.issuer == meta.issuer
            && stored.redirect_uri.as_deref() == Some(redirect_uri)
        {
            return Ok(stored);
        }
        let Some(endpoint) = meta.registration_endpoint.as_deref() else {
            return Err(Error::invalid(
                "OAUTH_CLIENT_ID",
                format!(
                    "authorization server {} offers no dynamic client registration; register a client there and set OAUTH_CLIENT_ID (and OAUTH_CLIENT_SECRET) as secrets of `{}`",
                    meta.issuer, server.name
                ),
            ));
        };
        let client = flow::register(self.http(), meta, endpoint, redirect_uri)
            .await
            .map_err(|e| e.into_error(&server.name))?;
        self.save(server.id, "client", &client, None)?;
        Ok(client)
    }

    /// Completes the pending authorization of `server` with the callback URL (or its query, or the bare code when
    /// the authorization server shows it): checks `state` and `iss`, exchanges the code, stores the tokens.
    pub async fn finish(&self, server: &Server, callback: &str) -> Result<()> {
        let pending = self.pending(server.id)?.ok_or_else(|| {
            Error::invalid(
                "authorization",
                format!("no authorization of `{}` is waiting", server.name),
            )
        })?;
        let params = flow::callback_params(callback);
        if let Some(error) = params.get("error") {
            let description = params
                .get("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(Error::Upstream {
                server: server.name.clone(),
                message: format!("OAuth: the authorization server answered {error}{description}"),
            });
        }
        let code = params
            .get("code")
            .cloned()
            .or_else(|| (!callback.contains(['=', '?', '/'])).then(|| callback.trim().to_owned()))
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Error::invalid("authorization", "the callback carries no code"))?;
        // A bare code (typed by hand) has no state to compare; a URL or query must carry the right one.
        if params.contains_key("code") && params.get("state") != Some(&pending.state) {
            return Err(Error::invalid(
                "state",
                "the callback's state does not match the authorization in progress; refused",
            ));
        }
        match params.get("iss") {
            Some(iss) if iss != &pending.server.issuer => {
                return Err(Error::invalid(
                    "iss",
                    format!(
                        "the callback names the issuer {iss:?}, not {:?}; refused (RFC 9207)",
                        pending.server.issuer
                    ),
                ));
            }
            None if params.contains_key("code")
                && pending
                    .server
                    .authorization_response_iss_parameter_supported =>
            {
                return Err(Error::invalid(
                    "iss",
                    "the authorization server advertises the iss parameter but the callback lacks it; refused (RFC 9207)",
                ));
            }
            _ => {}
        }
        let tokens = flow::exchange(self.http(), &pending, &code)
            .await
            .map_err(|e| e.into_error(&server.name))?;
        self.save(server.id, "tokens", &tokens, None)?;
        self.inner
            .registry
            .store()
            .delete_oauth(server.id, "pending")?;
        self.changed(&server.name);
        Ok(())
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

fn expiring(t: &Tokens) -> bool {
    t.expires_at
        .is_some_and(|at| at <= now_secs() + REFRESH_MARGIN.as_secs())
}

fn union_scopes(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

fn server_url(server: &Server) -> Result<url::Url> {
    let raw = server.url.as_deref().unwrap_or_default();
    url::Url::parse(raw).map_err(|e| Error::invalid("url", format!("{raw:?}: {e}")))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_union_keeps_order_and_drops_repeats() {
        assert_eq!(
            union_scopes(Some("a b"), Some("b c")).as_deref(),
            Some("a b c")
        );
        assert_eq!(union_scopes(None, None), None);
        assert_eq!(union_scopes(None, Some("x")).as_deref(), Some("x"));
    }
}
