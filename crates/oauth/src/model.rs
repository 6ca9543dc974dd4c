//! What is kept per server and shown about it: the client identity, the tokens, a pending authorization, the masked
//! status; and the clock their expiry times are measured by.

use std::time::{SystemTime, UNIX_EPOCH};

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

pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
