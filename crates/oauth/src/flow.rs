//! The OAuth requests: dynamic client registration (RFC 7591), the authorization URL with PKCE S256 and RFC 8707
//! `resource`, the callback's parameters, the code exchange, refresh and the client credentials grant, each
//! authenticated at the token endpoint the way the authorization server says.

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use crate::discovery::AuthServer;
use crate::dpop::{self, Dpop};
use crate::error::OAuthError;
use crate::model::{ClientIdentity, Pending, TokenAuth, Tokens, now_secs};

const CLIENT_NAME: &str = "agent-discover";

/// The token endpoint authentication for a client with (or without) a secret, as the server supports it.
pub(crate) fn auth_method(meta: &AuthServer, has_secret: bool) -> TokenAuth {
    if !has_secret {
        return TokenAuth::None;
    }
    match meta.token_endpoint_auth_methods_supported.as_deref() {
        Some(m) if m.iter().any(|x| x == "client_secret_basic") => TokenAuth::ClientSecretBasic,
        Some(m) if m.iter().any(|x| x == "client_secret_post") => TokenAuth::ClientSecretPost,
        // RFC 8414: the default is client_secret_basic.
        _ => TokenAuth::ClientSecretBasic,
    }
}

pub fn preregistered(
    meta: &AuthServer,
    client_id: String,
    secret: Option<String>,
) -> ClientIdentity {
    ClientIdentity {
        issuer: meta.issuer.clone(),
        auth: auth_method(meta, secret.is_some()),
        client_id,
        client_secret: secret,
        redirect_uri: None,
        source: "preregistered".into(),
    }
}

/// Registers agent-discover as a native client (RFC 7591) for `redirect_uri`.
pub async fn register(
    http: &reqwest::Client,
    meta: &AuthServer,
    endpoint: &str,
    redirect_uri: &str,
) -> Result<ClientIdentity, OAuthError> {
    let supported = meta.token_endpoint_auth_methods_supported.as_deref();
    let requested = match supported {
        None => "none",
        Some(m) if m.iter().any(|x| x == "none") => "none",
        Some(m) if m.iter().any(|x| x == "client_secret_basic") => "client_secret_basic",
        Some(m) if m.iter().any(|x| x == "client_secret_post") => "client_secret_post",
        Some(_) => "none",
    };
    let body = json!({
        "client_name": CLIENT_NAME,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": requested,
        "application_type": "native",
    });
    let resp = http
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("client registration at {endpoint}: {e}")))?;
    let status = resp.status();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(OAuthError::Refused(format!(
            "client registration at {endpoint} failed with HTTP {status}: {}",
            oauth_error(&v)
        )));
    }
    let client_id = v
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| OAuthError::Refused("the registration response has no client_id".into()))?;
    let secret = v
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let auth = match v.get("token_endpoint_auth_method").and_then(Value::as_str) {
        Some("client_secret_post") => TokenAuth::ClientSecretPost,
        Some("client_secret_basic") => TokenAuth::ClientSecretBasic,
        Some("none") => TokenAuth::None,
        _ => match requested {
            "client_secret_post" => TokenAuth::ClientSecretPost,
            _ if secret.is_some() => auth_method(meta, true),
            _ => TokenAuth::None,
        },
    };
    Ok(ClientIdentity {
        issuer: meta.issuer.clone(),
        client_id: client_id.to_owned(),
        client_secret: secret,
        auth,
        redirect_uri: Some(redirect_uri.to_owned()),
        source: "dynamic".into(),
    })
}

fn random_string() -> String {
    URL_SAFE_NO_PAD.encode(ad_registry::secrets::random_bytes())
}

/// A new pending authorization: state, PKCE verifier and the authorize URL.
pub fn authorization(
    meta: &AuthServer,
    client: ClientIdentity,
    redirect_uri: &str,
    resource: &str,
    scope: Option<String>,
    authorizations: u32,
) -> Result<Pending, OAuthError> {
    let endpoint = meta.authorization_endpoint.as_deref().ok_or_else(|| {
        OAuthError::Metadata(format!(
            "authorization server {} has no authorization_endpoint",
            meta.issuer
        ))
    })?;
    let mut url = Url::parse(endpoint).map_err(|_| {
        OAuthError::Metadata(format!("invalid authorization_endpoint {endpoint:?}"))
    })?;
    let state = random_string();
    let verifier = random_string();
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", resource);
        if let Some(s) = &scope {
            q.append_pair("scope", s);
        }
    }
    Ok(Pending {
        state,
        verifier,
        auth_url: url.into(),
        redirect_uri: redirect_uri.to_owned(),
        resource: resource.to_owned(),
        scope,
        server: meta.clone(),
        client,
        authorizations,
    })
}

/// `pending` with `.<h>` appended to its state (in the authorize URL too): the callback names whose it is.
pub fn with_state_suffix(mut pending: Pending, h: &str) -> Pending {
    let state = format!("{}.{h}", pending.state);
    if let Ok(mut url) = Url::parse(&pending.auth_url) {
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if k == "state" {
                    state.clone()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        url.query_pairs_mut().clear().extend_pairs(pairs);
        pending.auth_url = url.into();
    }
    pending.state = state;
    pending
}

/// The parameters of a callback given as a URL, a query string (with or without `?`), or nothing parseable.
pub fn callback_params(callback: &str) -> HashMap<String, String> {
    let s = callback.trim();
    let query = match Url::parse(s) {
        Ok(u) => u.query().unwrap_or_default().to_owned(),
        Err(_) => s.split_once('?').map(|(_, q)| q).unwrap_or(s).to_owned(),
    };
    if !query.contains('=') {
        return HashMap::new();
    }
    url::form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

fn oauth_error(v: &Value) -> String {
    match (
        v.get("error").and_then(Value::as_str),
        v.get("error_description").and_then(Value::as_str),
    ) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_owned(),
        _ => "no OAuth error in the answer".into(),
    }
}

/// POSTs a form to the token endpoint, authenticated as the client says, and reads the token response. With `dpop`,
/// each attempt carries a fresh proof, and a `use_dpop_nonce` answer is retried once with the server's nonce
/// (RFC 9449 section 8).
pub(crate) async fn token_request(
    http: &reqwest::Client,
    endpoint: &str,
    client: &ClientIdentity,
    mut form: Vec<(&str, String)>,
    dpop: Option<&Dpop>,
) -> Result<Value, OAuthError> {
    let mut basic = None;
    match (client.auth, &client.client_secret) {
        (TokenAuth::ClientSecretBasic, Some(secret)) => {
            // RFC 6749 2.3.1: both parts form-encoded before Base64.
            let enc =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            basic = Some(STANDARD.encode(format!("{}:{}", enc(&client.client_id), enc(secret))));
        }
        (TokenAuth::ClientSecretPost, Some(secret)) => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        // A client without an id (a JWT-bearer grant that authenticates no client) sends none.
        _ if client.client_id.is_empty() => {}
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut retried = false;
    loop {
        let mut req = http
            .post(endpoint)
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        if let Some(b) = &basic {
            req = req.header(http::header::AUTHORIZATION, format!("Basic {b}"));
        }
        if let Some(d) = dpop {
            req = req.header(dpop::HEADER, d.proof("POST", endpoint, None)?);
        }
        let resp = req
            .body(body.clone())
            .send()
            .await
            .map_err(|e| OAuthError::Http(format!("token request to {endpoint}: {e}")))?;
        let status = resp.status();
        let nonce = resp
            .headers()
            .get(dpop::NONCE_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let fresh_nonce = dpop.is_some_and(|d| d.remember(endpoint, nonce.as_deref()));
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            if v.get("error").and_then(Value::as_str) == Some("use_dpop_nonce")
                && dpop.is_some()
                && !retried
                && (fresh_nonce || nonce.is_some())
            {
                retried = true;
                continue;
            }
            return Err(OAuthError::Refused(format!(
                "the token endpoint answered HTTP {status}: {}",
                oauth_error(&v)
            )));
        }
        if v.get("access_token").and_then(Value::as_str).is_none() {
            return Err(OAuthError::Refused(
                "the token response has no access_token".into(),
            ));
        }
        return Ok(v);
    }
}

/// `t` with what the token response says: the access token, its lifetime, and a new refresh token or scope when
/// the response carries one (else those of `t` stay).
pub(crate) fn tokens_from(v: &Value, mut t: Tokens) -> Tokens {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    t.access_token = s("access_token").unwrap_or_default();
    // Bound to the key only when the server says so (a server may ignore the proof and issue a bearer token).
    t.dpop = s("token_type").is_some_and(|k| k.eq_ignore_ascii_case("DPoP"));
    t.refresh_token = s("refresh_token").or(t.refresh_token);
    t.expires_at = v
        .get("expires_in")
        .and_then(|e| e.as_u64().or_else(|| e.as_str()?.parse().ok()))
        .map(|secs| now_secs() + secs);
    t.scope = s("scope").or(t.scope);
    t
}

/// Exchanges the code of a finished authorization for tokens.
pub async fn exchange(
    http: &reqwest::Client,
    pending: &Pending,
    code: &str,
    dpop: Option<&Dpop>,
) -> Result<Tokens, OAuthError> {
    let form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", pending.redirect_uri.clone()),
        ("code_verifier", pending.verifier.clone()),
        ("resource", pending.resource.clone()),
    ];
    let v = token_request(
        http,
        &pending.server.token_endpoint,
        &pending.client,
        form,
        dpop,
    )
    .await?;
    Ok(tokens_from(
        &v,
        Tokens {
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope: pending.scope.clone(),
            token_endpoint: pending.server.token_endpoint.clone(),
            resource: pending.resource.clone(),
            client: pending.client.clone(),
            authorizations: pending.authorizations,
            grant: "authorization_code".into(),
            dpop: false,
        },
    ))
}

/// Refreshes `tokens` with their refresh token, for the same resource and scope.
pub async fn refresh(
    http: &reqwest::Client,
    tokens: &Tokens,
    refresh_token: &str,
    dpop: Option<&Dpop>,
) -> Result<Tokens, OAuthError> {
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.to_owned()),
        ("resource", tokens.resource.clone()),
    ];
    if let Some(s) = &tokens.scope {
        form.push(("scope", s.clone()));
    }
    let v = token_request(http, &tokens.token_endpoint, &tokens.client, form, dpop).await?;
    let mut base = tokens.clone();
    base.refresh_token = Some(refresh_token.to_owned());
    Ok(tokens_from(&v, base))
}

/// A private-key JWT client assertion (RFC 7523 section 2.2; SEP-1046) signed with a PKCS#8 PEM key: ES256 for a
/// P-256 key, RS256 for an RSA key (`alg` forces one). `iss` and `sub` are the client id, `aud` the authorization
/// server's issuer; valid for five minutes, with a random `jti`.
pub fn client_assertion(
    pem: &str,
    alg: Option<&str>,
    client_id: &str,
    audience: &str,
) -> Result<String, OAuthError> {
    use aws_lc_rs::signature::{
        ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
    };
    let bad = |why: &str| OAuthError::Refused(format!("OAUTH_PRIVATE_KEY: {why}"));
    // The body between `-----BEGIN ...-----` and `-----END`, line breaks optional (a secret is often one line).
    let body = match pem.find("-----BEGIN") {
        Some(at) => {
            let rest = &pem[at + 10..];
            let start = rest.find("-----").map_or(rest.len(), |i| i + 5);
            let rest = &rest[start..];
            &rest[..rest.find("-----END").unwrap_or(rest.len())]
        }
        None => pem,
    };
    let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    let der = STANDARD
        .decode(b64.as_bytes())
        .map_err(|_| bad("not a PEM-encoded PKCS#8 private key"))?;
    let ec = || EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).ok();
    let rsa = || RsaKeyPair::from_pkcs8(&der).ok();
    enum Key {
        Ec(EcdsaKeyPair),
        Rsa(RsaKeyPair),
    }
    let key = match alg.map(str::trim) {
        Some("ES256") => ec().map(Key::Ec),
        Some("RS256") => rsa().map(Key::Rsa),
        Some(other) => {
            return Err(bad(&format!(
                "signing algorithm {other} is not supported (ES256 or RS256)"
            )));
        }
        None => ec().map(Key::Ec).or_else(|| rsa().map(Key::Rsa)),
    }
    .ok_or_else(|| bad("not a P-256 (ES256) or RSA (RS256) PKCS#8 private key"))?;
    let name = match key {
        Key::Ec(_) => "ES256",
        Key::Rsa(_) => "RS256",
    };
    let now = now_secs();
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": name, "typ": "JWT"}).to_string());
    let claims = URL_SAFE_NO_PAD.encode(
        json!({"iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 300,
               "jti": random_string()})
        .to_string(),
    );
    let input = format!("{header}.{claims}");
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let signature = match key {
        Key::Ec(k) => k
            .sign(&rng, input.as_bytes())
            .map_err(|_| bad("signing failed"))?
            .as_ref()
            .to_vec(),
        Key::Rsa(k) => {
            let mut sig = vec![0; k.public_modulus_len()];
            k.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                .map_err(|_| bad("signing failed"))?;
            sig
        }
    };
    Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
}

/// The client credentials grant (a machine client): authenticated with its secret, or with a signed JWT assertion
/// when `assertion` is given.
pub async fn client_credentials(
    http: &reqwest::Client,
    meta: &AuthServer,
    client: ClientIdentity,
    resource: &str,
    scope: Option<&str>,
    assertion: Option<String>,
    dpop: Option<&Dpop>,
) -> Result<Tokens, OAuthError> {
    let mut form = vec![
        ("grant_type", "client_credentials".to_owned()),
        ("resource", resource.to_owned()),
    ];
    if let Some(a) = assertion {
        form.push((
            "client_assertion_type",
            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
        ));
        form.push(("client_assertion", a));
    }
    if let Some(s) = scope {
        form.push(("scope", s.to_owned()));
    }
    let v = token_request(http, &meta.token_endpoint, &client, form, dpop).await?;
    Ok(tokens_from(
        &v,
        Tokens {
            access_token: String::new(),
            refresh_token: None,
            expires_at: None,
            scope: scope.map(str::to_owned),
            token_endpoint: meta.token_endpoint.clone(),
            resource: resource.to_owned(),
            client,
            authorizations: 1,
            grant: "client_credentials".into(),
            dpop: false,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_assertion_is_an_es256_jwt_that_verifies_with_the_public_key() {
        use aws_lc_rs::signature::{
            ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
            UnparsedPublicKey,
        };
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let public = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .unwrap()
            .public_key()
            .as_ref()
            .to_vec();
        let body = STANDARD.encode(pkcs8.as_ref());
        // As a PEM file, and as the one-line form a secret holds.
        let pem = format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n");
        let one_line = pem.replace('\n', "");
        for key in [pem.as_str(), one_line.as_str()] {
            let jwt = client_assertion(key, None, "cid", "https://as.example").unwrap();
            let parts: Vec<&str> = jwt.split('.').collect();
            assert_eq!(parts.len(), 3);
            let header: Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
            assert_eq!(header["alg"], "ES256");
            let claims: Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
            assert_eq!(claims["iss"], "cid");
            assert_eq!(claims["sub"], "cid");
            assert_eq!(claims["aud"], "https://as.example");
            assert!(claims["exp"].as_u64().unwrap() > claims["iat"].as_u64().unwrap());
            let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public)
                .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &sig)
                .expect("the signature verifies");
        }
        // Not a key, and an algorithm we do not sign with: refused with the reason.
        let e = client_assertion(
            "-----BEGIN PRIVATE KEY-----AAAA-----END PRIVATE KEY-----",
            None,
            "c",
            "a",
        );
        assert!(e.unwrap_err().to_string().contains("OAUTH_PRIVATE_KEY"));
        let e = client_assertion(&pem, Some("PS512"), "c", "a");
        assert!(e.unwrap_err().to_string().contains("PS512"));
    }

    #[test]
    fn the_authorization_url_carries_pkce_s256_state_and_resource() {
        let meta = AuthServer {
            issuer: "https://as.example".into(),
            authorization_endpoint: Some("https://as.example/authorize".into()),
            token_endpoint: "https://as.example/token".into(),
            ..Default::default()
        };
        let client = preregistered(&meta, "cid".into(), None);
        let p = authorization(
            &meta,
            client,
            "http://127.0.0.1:1/oauth/callback/s",
            "https://mcp.example/mcp",
            Some("a b".into()),
            1,
        )
        .unwrap();
        let q = callback_params(&p.auth_url);
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(
            q["code_challenge"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(p.verifier.as_bytes()))
        );
        assert_eq!(q["state"], p.state);
        assert_eq!(q["resource"], "https://mcp.example/mcp");
        assert_eq!(q["scope"], "a b");
        assert_eq!(q["client_id"], "cid");
        assert!(p.verifier.len() >= 43);
    }

    #[test]
    fn callbacks_are_read_as_url_or_query() {
        assert_eq!(
            callback_params("http://127.0.0.1:1/cb?code=x&state=y")["code"],
            "x"
        );
        assert_eq!(callback_params("?code=x&state=y")["state"], "y");
        assert!(callback_params("justacode").is_empty());
    }
}
