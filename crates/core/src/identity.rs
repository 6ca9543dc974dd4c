//! Who a request is from, when the front is an OAuth-protected resource (issue 30): the authenticated principal that
//! every layer (proxy, approvals, call log, events, per-user upstream credentials, visibility rules) receives.

use std::fmt;

/// The authenticated caller of a request reaching the front with a validated access token. `None` wherever this type
/// is optional means "no per-user identity" (a single user's static token, stdio, the CLI).
#[derive(Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's subject (`sub`), stable per user at one issuer.
    pub sub: String,
    /// The issuer that vouched for `sub` (`iss`); users are keyed by issuer and subject together.
    pub issuer: String,
    /// The groups read from the configured claim (empty when the token has none).
    pub groups: Vec<String>,
    /// The OAuth client the token was issued to (`client_id` or `azp`), when the token says.
    pub client_id: Option<String>,
    /// The granted scopes.
    pub scopes: Vec<String>,
    /// The access token itself, kept only for token exchange (RFC 8693) towards remote servers. Never logged, never
    /// shown: `Debug` masks it.
    pub token: Option<String>,
}

impl Principal {
    /// The key a user's stored data (upstream tokens, approvals) is filed under: `issuer` and `sub` together.
    pub fn user_key(&self) -> String {
        format!("{}#{}", self.issuer, self.sub)
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("sub", &self.sub)
            .field("issuer", &self.issuer)
            .field("groups", &self.groups)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}
