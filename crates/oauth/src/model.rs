//! What is kept per server and shown about it: the client identity, the tokens, a pending authorization, the masked
//! status; and the clock their expiry times are measured by.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use ad_core::identity::Principal;

use serde::{Deserialize, Serialize};

use crate::discovery;

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
    /// `authorization_code`, `client_credentials`, `jwt_bearer` or `id_jag`.
    #[serde(default = "default_grant")]
    pub grant: String,
    /// A DPoP-bound token (`token_type` DPoP): sent as `Authorization: DPoP` with a proof of the server's key.
    #[serde(default)]
    pub dpop: bool,
}

fn default_grant() -> String {
    "authorization_code".into()
}

/// The token to present to a server, and whether it is DPoP-bound (then sent as `Authorization: DPoP` with a proof).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub token: String,
    pub dpop: bool,
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
    /// How the token was obtained (`authorization_code`, `client_credentials`, `jwt_bearer`, `id_jag`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant: Option<String>,
    /// `DPoP` for a token bound to the server's key, else `Bearer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_type: Option<&'static str>,
}

/// A token obtained by exchange (RFC 8693) for one user, with when it expires (seconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanged {
    pub token: String,
    pub expires_at: u64,
}

/// A user (`Principal::user_key`) and a server id.
pub(crate) type Key = (String, i64);

/// The exchanged tokens of a process, by user and server, and the lock each exchange runs under (`exchange.rs`).
#[derive(Default)]
pub(crate) struct Cache {
    pub(crate) tokens: Mutex<HashMap<Key, Exchanged>>,
    pub(crate) locks: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    /// The latest principal of each user that called through a token-exchange server (its token is the subject
    /// token of the next exchange); requests name their user by key only.
    pub(crate) users: Mutex<HashMap<String, Principal>>,
}

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
