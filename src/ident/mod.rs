//! The front as an OAuth-protected resource (issue 30): who a request comes from. Access tokens are JWTs checked
//! here against the issuer's keys (`jwt`, `keys`) or opaque tokens introspected at the issuer (`introspect`); a
//! valid token becomes an [`ad_core::identity::Principal`], which visibility rules per group (`rules`) and the call
//! log's audit read. Configured from `identity.toml` and `AGENT_DISCOVER_AUTH_*` variables (`config`); without an
//! issuer nothing here runs and the static token mode of `http::security` is unchanged.

pub mod config;
pub mod introspect;
pub mod jwt;
pub mod keys;
pub mod reload;
pub mod rules;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use ad_core::identity::Principal;
use serde_json::{Map, Value};

pub use config::IdentityConfig;
pub use rules::Rules;

/// Why a request was not let in; the HTTP layer turns it into a 401 or 403 with its `WWW-Authenticate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// No token at all: a 401 naming the resource metadata, without `error`.
    Missing,
    /// A token that is not valid here: 401 `invalid_token`.
    Invalid(String),
    /// A valid token without every required scope: 403 `insufficient_scope` naming them.
    Scope(Vec<String>),
}

/// The validator of one protected front: configuration, the issuer's keys, the introspection cache.
pub struct Identity {
    pub config: IdentityConfig,
    keys: keys::Keys,
    introspector: introspect::Introspector,
    http: reqwest::Client,
    /// The visibility rules in force: `config.rules` at start, replaced when the settings file changes (`reload`).
    rules: std::sync::RwLock<Rules>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("issuer", &self.config.issuer)
            .finish_non_exhaustive()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Identity {
    pub fn new(config: IdentityConfig) -> Arc<Identity> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Arc::new(Identity {
            keys: keys::Keys::new(config.issuer.clone(), config.jwks_uri.clone(), http.clone()),
            introspector: introspect::Introspector::default(),
            http,
            rules: std::sync::RwLock::new(config.rules.clone()),
            config,
        })
    }

    /// The visibility rules in force (shared with the proxy, which enforces them on every call).
    pub fn rules(&self) -> std::sync::RwLockReadGuard<'_, Rules> {
        self.rules.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the visibility rules (the settings file changed).
    pub fn set_rules(&self, rules: Rules) {
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = rules;
    }

    /// The audiences a token may name for a request to `resource` (this endpoint's canonical URI): the configured
    /// ones, or else `resource` and the front's `/mcp` resource at `base`.
    pub fn audiences(&self, base: &str, resource: &str) -> Vec<String> {
        if !self.config.audience.is_empty() {
            return self.config.audience.clone();
        }
        let mut a = vec![resource.to_owned(), format!("{base}/mcp")];
        a.dedup();
        a
    }

    /// Validates `token` for a request whose accepted audiences are `audiences`.
    pub async fn validate(&self, token: &str, audiences: &[String]) -> Result<Principal, Denied> {
        let claims = match jwt::Jws::parse(token) {
            Ok(jws) => {
                let key = match self.keys.key(jws.kid.as_deref()).await {
                    Ok(Some(k)) => k,
                    Ok(None) => {
                        return Err(Denied::Invalid(
                            jwt::Refusal::UnknownKey(jws.kid.clone().unwrap_or_default())
                                .to_string(),
                        ));
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot fetch the issuer's keys");
                        return Err(Denied::Invalid(format!("cannot check the token now: {e}")));
                    }
                };
                jws.verify(&key)
                    .map_err(|r| Denied::Invalid(r.to_string()))?;
                jws.claims
            }
            Err(jwt::Refusal::NotJwt) => {
                let mut claims = self.introspect(token).await?;
                // RFC 7662 makes `aud` optional: the issuer that answered this resource server's own authenticated
                // question vouches for the token here.
                if let Some(first) = audiences.first() {
                    claims
                        .entry("aud")
                        .or_insert_with(|| Value::String(first.clone()));
                }
                claims
            }
            Err(r) => return Err(Denied::Invalid(r.to_string())),
        };
        jwt::check_claims(
            &claims,
            &jwt::Expect {
                issuer: &self.config.issuer,
                audiences,
                now: now(),
            },
        )
        .map_err(|r| Denied::Invalid(r.to_string()))?;
        let principal = self.principal(&claims, token)?;
        let missing: Vec<String> = self
            .config
            .required_scopes
            .iter()
            .filter(|s| !principal.scopes.contains(s))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(Denied::Scope(self.config.required_scopes.clone()));
        }
        Ok(principal)
    }

    /// An opaque token's claims from the introspection endpoint (configured, else the issuer's metadata's).
    async fn introspect(&self, token: &str) -> Result<Map<String, Value>, Denied> {
        let endpoint = match &self.config.introspection {
            Some(e) => e.clone(),
            None => {
                let url = self
                    .keys
                    .meta()
                    .await
                    .ok()
                    .and_then(|m| m.introspection_endpoint)
                    .ok_or_else(|| {
                        Denied::Invalid(
                            "the token is not a JWT and no introspection endpoint is configured"
                                .into(),
                        )
                    })?;
                introspect::Endpoint {
                    url,
                    client_id: None,
                    client_secret: None,
                }
            }
        };
        let mut claims = match self
            .introspector
            .introspect(&self.http, &endpoint, token)
            .await
        {
            Ok(Some(c)) => c,
            Ok(None) => return Err(Denied::Invalid("the token is not active".into())),
            Err(e) => {
                tracing::warn!(error = %e, "token introspection failed");
                return Err(Denied::Invalid(format!("cannot check the token now: {e}")));
            }
        };
        // RFC 7662 makes `iss` optional: the issuer that answered vouches for itself.
        claims
            .entry("iss")
            .or_insert_with(|| Value::String(self.config.issuer.clone()));
        Ok(claims)
    }

    fn principal(&self, claims: &Map<String, Value>, token: &str) -> Result<Principal, Denied> {
        let s = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
        let sub = s("sub").ok_or_else(|| Denied::Invalid("the token names no subject".into()))?;
        Ok(Principal {
            sub,
            issuer: s("iss").unwrap_or_else(|| self.config.issuer.clone()),
            groups: jwt::groups(claims, &self.config.groups_claim),
            client_id: s("client_id").or_else(|| s("azp")),
            scopes: jwt::scopes(claims),
            token: Some(token.to_owned()),
        })
    }
}

impl crate::proxy::visibility::Rule for Identity {
    fn allows(&self, p: &Principal, server: &str, tool: Option<&str>) -> bool {
        self.rules().allows(p, server, tool)
    }
    fn is_admin(&self, p: &Principal) -> bool {
        self.rules().is_admin(p)
    }
}

/// How a user is named in the call log and events: `sub` for the configured issuer's users, `issuer#sub` else.
pub fn user_label(p: &Principal, issuer: Option<&str>) -> String {
    match issuer {
        Some(i) if jwt::same_issuer(i, &p.issuer) => p.sub.clone(),
        _ => p.user_key(),
    }
}
