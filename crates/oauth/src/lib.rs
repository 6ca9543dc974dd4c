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
//! RS256, `OAUTH_SIGNING_ALG` to force one), `OAUTH_SCOPES` (scopes to request instead of the discovered ones),
//! `OAUTH_DPOP` (`on`/`off`; DPoP is used by default when the authorization server supports it),
//! `OAUTH_GRANT=jwt_bearer` (workload identity federation, `machine.rs`), `OAUTH_GRANT=id_jag` (enterprise-managed
//! authorization, `machine.rs`), `OAUTH_GRANT=token_exchange` (a token per user, `exchange.rs`) and
//! `OAUTH_PER_USER=on` (each user authorizes for themselves, `peruser.rs`).
//!
//! Layers, each file using only those above it: `error.rs` (the authorization server's errors), `discovery.rs`,
//! `model.rs` (the records kept per server), `dpop.rs` (DPoP keys and proofs), `flow.rs` and `grants.rs` (the
//! protocol requests), `service.rs` (the [`OAuth`] service: redirect URIs and the sealed records), then `refresh.rs`,
//! `machine.rs`, `exchange.rs`, `authorize.rs` and `peruser.rs` (obtaining tokens) and `client.rs`.
//!
//! What this crate must not know: the composition root (`App` builds one [`OAuth`] and hands it out), the HTTP front
//! (it serves `/oauth/callback/{server}` and calls [`OAuth::finish`]; the dashboard's default port comes from
//! `ad_registry::config`), and the proxy (it wraps its transports in [`AuthedClient`] and asks for tokens).

mod authorize;
mod client;
pub mod discovery;
pub mod dpop;
mod error;
mod exchange;
mod flow;
pub mod grants;
mod machine;
mod model;
mod peruser;
mod refresh;
mod service;

pub use authorize::MAX_AUTHORIZATIONS;
pub use client::{AuthedClient, Session};
pub use discovery::Challenge;
pub use error::OAuthError;
pub use exchange::{ExchangeSettings, USER_META};
pub use model::{
    AuthStatus, ClientIdentity, Credential, Exchanged, Pending, TokenAuth, Tokens, now_secs,
};
pub use peruser::user_suffix;
pub use service::{ENV_PUBLIC_URL, OAuth, aad};
