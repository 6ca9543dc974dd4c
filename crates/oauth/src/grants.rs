//! The token requests of the grants that need no person, beside the client credentials grant (`flow.rs`): the
//! JWT-bearer grant (RFC 7523 section 2.1) of a workload's identity token (MCP SEP-1933) or of an identity assertion
//! authorization grant (ID-JAG), and token exchange (RFC 8693), which both enterprise-managed authorization (an ID
//! token for an ID-JAG at the enterprise identity provider) and per-user delegation (a caller's token for one whose
//! audience is a remote server) use.

use serde_json::Value;

use crate::dpop::Dpop;
use crate::error::OAuthError;
use crate::flow::{token_request, tokens_from};
use crate::model::{ClientIdentity, TokenAuth, Tokens};

pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
pub const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
pub const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
pub const JWT: &str = "urn:ietf:params:oauth:token-type:jwt";
pub const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";

/// A client that authenticates with nothing and names no id (RFC 7523 allows a JWT-bearer grant without client
/// authentication), or with the id and secret given.
pub fn client(
    issuer: &str,
    id: Option<String>,
    secret: Option<String>,
    auth: TokenAuth,
) -> ClientIdentity {
    ClientIdentity {
        issuer: issuer.to_owned(),
        client_id: id.unwrap_or_default(),
        auth: if secret.is_some() {
            auth
        } else {
            TokenAuth::None
        },
        client_secret: secret,
        redirect_uri: None,
        source: "preregistered".into(),
    }
}

/// The JWT-bearer grant: `assertion` (a workload's token, or an ID-JAG) for an access token to `resource`.
#[allow(clippy::too_many_arguments)]
pub async fn jwt_bearer(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: ClientIdentity,
    assertion: &str,
    resource: &str,
    scope: Option<&str>,
    grant: &str,
    dpop: Option<&Dpop>,
) -> Result<Tokens, OAuthError> {
    let mut form = vec![
        ("grant_type", JWT_BEARER.to_owned()),
        ("assertion", assertion.to_owned()),
        ("resource", resource.to_owned()),
    ];
    if let Some(s) = scope {
        form.push(("scope", s.to_owned()));
    }
    let v = token_request(http, token_endpoint, &client, form, dpop).await?;
    Ok(tokens_from(
        &v,
        Tokens {
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope: scope.map(str::to_owned),
            token_endpoint: token_endpoint.to_owned(),
            resource: resource.to_owned(),
            client,
            authorizations: 1,
            grant: grant.to_owned(),
            dpop: false,
        },
    ))
}

/// What one token exchange asks for (RFC 8693 section 2.1).
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    pub subject_token: String,
    pub subject_token_type: String,
    pub requested_token_type: Option<String>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub scope: Option<String>,
    pub actor_token: Option<String>,
    pub actor_token_type: Option<String>,
}

/// What a token exchange answered: the issued token, its type and lifetime.
#[derive(Debug, Clone)]
pub struct Issued {
    pub token: String,
    pub issued_token_type: Option<String>,
    pub expires_in: Option<u64>,
    pub scope: Option<String>,
}

/// A token exchange at `token_endpoint`.
pub async fn token_exchange(
    http: &reqwest::Client,
    token_endpoint: &str,
    client: &ClientIdentity,
    x: &Exchange,
) -> Result<Issued, OAuthError> {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE.to_owned()),
        ("subject_token", x.subject_token.clone()),
        ("subject_token_type", x.subject_token_type.clone()),
    ];
    let optional = [
        ("requested_token_type", &x.requested_token_type),
        ("audience", &x.audience),
        ("resource", &x.resource),
        ("scope", &x.scope),
        ("actor_token", &x.actor_token),
    ];
    for (k, v) in optional {
        if let Some(v) = v {
            form.push((k, v.clone()));
        }
    }
    if x.actor_token.is_some() {
        form.push((
            "actor_token_type",
            x.actor_token_type.clone().unwrap_or_else(|| JWT.to_owned()),
        ));
    }
    let v = token_request(http, token_endpoint, client, form, None).await?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(Issued {
        token: s("access_token").unwrap_or_default(),
        issued_token_type: s("issued_token_type"),
        expires_in: v
            .get("expires_in")
            .and_then(|e| e.as_u64().or_else(|| e.as_str()?.parse().ok())),
        scope: s("scope"),
    })
}
