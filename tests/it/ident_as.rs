//! A test authorization server for issue 30, on 127.0.0.1 in the test process: RFC 8414 metadata, a JWKS with an
//! ES256 and an RS256 key, dynamic client registration, an authorize endpoint that approves at once (as the user the
//! test has logged in) and redirects with a code, a token endpoint that checks PKCE (S256) and issues JWT access
//! tokens (RFC 9068) for the RFC 8707 `resource`, and an introspection endpoint (RFC 7662) for opaque tokens. The
//! token endpoint also does token exchange (RFC 8693) for the client [`EXCHANGE_CLIENT`]: a subject token it signed
//! becomes `xchg-<sub>-<n>`, and each exchange is kept for the test to read ([`TestAs::exchanges`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

/// The introspection client's credentials, which the protected front is configured with.
pub const RS_CLIENT: (&str, &str) = ("agent-discover-rs", "rs-secret");

/// The client allowed to exchange tokens (HTTP Basic at the token endpoint).
pub const EXCHANGE_CLIENT: (&str, &str) = ("agent-discover-tx", "tx-secret");

/// One token exchange the AS made: the subject token's `sub`, the subject token, the `audience` and `resource` asked
/// for, and the token issued.
#[derive(Clone, Debug)]
pub struct Exchange {
    pub sub: String,
    pub subject_token: String,
    pub audience: Option<String>,
    pub resource: Option<String>,
    pub issued: String,
}

/// A user of the test AS: their groups claim.
#[derive(Clone)]
pub struct User {
    pub sub: &'static str,
    pub groups: &'static [&'static str],
}

struct Keys {
    es: EcdsaKeyPair,
    rs: RsaKeyPair,
    /// Signs with a kid the JWKS does not publish.
    stray: EcdsaKeyPair,
    jwks: Value,
}

#[derive(Default)]
struct Flows {
    /// code -> (user, challenge, resource, scope)
    codes: HashMap<String, (String, String, Option<String>, Option<String>)>,
    /// opaque token -> claims
    opaque: HashMap<String, Value>,
    logged_in: String,
    next: u64,
    exchanges: Vec<Exchange>,
}

struct Inner {
    issuer: String,
    keys: Keys,
    users: Vec<User>,
    flows: Mutex<Flows>,
    /// Scope granted by the token endpoint when the client asks for none.
    default_scope: String,
}

/// The running authorization server; it stops with the test's runtime.
#[derive(Clone)]
pub struct TestAs {
    inner: Arc<Inner>,
    pub issuer: String,
}

/// What a minted token says; `Default` then the fields a test changes.
#[derive(Clone)]
pub struct Mint {
    pub sub: String,
    pub aud: Value,
    pub iss: Option<String>,
    pub exp_in: i64,
    pub scope: String,
    pub alg: &'static str,
    /// Sign with the key the JWKS does not publish.
    pub stray_kid: bool,
}

pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn der_tlv(b: &[u8]) -> (&[u8], &[u8]) {
    let (len, at) = match b[1] {
        l if l < 0x80 => (l as usize, 2),
        l => {
            let k = (l & 0x7f) as usize;
            (
                b[2..2 + k].iter().fold(0, |a, x| a * 256 + *x as usize),
                2 + k,
            )
        }
    };
    (&b[at..at + len], &b[at + len..])
}

fn ec_jwk(key: &EcdsaKeyPair, kid: &str) -> Value {
    let p = key.public_key().as_ref();
    json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
           "x": URL_SAFE_NO_PAD.encode(&p[1..33]), "y": URL_SAFE_NO_PAD.encode(&p[33..])})
}

fn rsa_jwk(key: &RsaKeyPair, kid: &str) -> Value {
    // The public key is a DER RSAPublicKey: SEQUENCE { INTEGER n, INTEGER e }.
    let (seq, _) = der_tlv(key.public_key().as_ref());
    let (n, rest) = der_tlv(seq);
    let (e, _) = der_tlv(rest);
    let strip = |v: &[u8]| -> Vec<u8> { v.iter().skip_while(|b| **b == 0).copied().collect() };
    json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
           "n": URL_SAFE_NO_PAD.encode(strip(n)), "e": URL_SAFE_NO_PAD.encode(strip(e))})
}

fn ec_key() -> EcdsaKeyPair {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap()
}

impl TestAs {
    /// Starts the server on a free loopback port with `users`; `users[0]` is logged in.
    pub async fn start(users: Vec<User>, default_scope: &str) -> TestAs {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let es = ec_key();
        let rs = RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let jwks = json!({"keys": [ec_jwk(&es, "es1"), rsa_jwk(&rs, "rs1")]});
        let inner = Arc::new(Inner {
            issuer: issuer.clone(),
            keys: Keys {
                es,
                rs,
                stray: ec_key(),
                jwks,
            },
            flows: Mutex::new(Flows {
                logged_in: users[0].sub.to_owned(),
                ..Flows::default()
            }),
            users,
            default_scope: default_scope.to_owned(),
        });
        let app = Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/.well-known/openid-configuration", get(metadata))
            .route("/jwks", get(jwks_doc))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/introspect", post(introspect))
            .with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        TestAs { inner, issuer }
    }

    /// Whom the authorize endpoint approves from now on.
    pub fn log_in(&self, sub: &str) {
        self.inner.flows.lock().unwrap().logged_in = sub.to_owned();
    }

    /// A token for `sub` with `resource` as audience, valid for an hour, the default scope, ES256.
    pub fn mint_for(&self, sub: &str, resource: &str) -> Mint {
        Mint {
            sub: sub.to_owned(),
            aud: json!(resource),
            iss: None,
            exp_in: 3600,
            scope: self.inner.default_scope.clone(),
            alg: "ES256",
            stray_kid: false,
        }
    }

    pub fn sign(&self, m: &Mint) -> String {
        self.inner.sign(m)
    }

    /// The token exchanges made so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.inner.flows.lock().unwrap().exchanges.clone()
    }

    /// An opaque token that introspects as `m`'s claims.
    pub fn opaque(&self, m: &Mint) -> String {
        let claims = self.inner.claims(m);
        let mut flows = self.inner.flows.lock().unwrap();
        flows.next += 1;
        let token = format!("opaque-{}-{}", flows.next, m.sub);
        flows.opaque.insert(token.clone(), claims);
        token
    }
}

impl Inner {
    fn claims(&self, m: &Mint) -> Value {
        let groups = self
            .users
            .iter()
            .find(|u| u.sub == m.sub)
            .map(|u| u.groups.to_vec())
            .unwrap_or_default();
        let now = now();
        json!({"iss": m.iss.clone().unwrap_or_else(|| self.issuer.clone()), "sub": m.sub, "aud": m.aud,
               "exp": now + m.exp_in, "iat": now, "nbf": now - 5, "scope": m.scope, "groups": groups,
               "client_id": "test-client", "jti": format!("j{now}-{}", m.sub)})
    }

    /// The claims of a JWT this AS signed with its published ES256 key, else `None`.
    fn verify(&self, token: &str) -> Option<Value> {
        let (input, sig) = token.rsplit_once('.')?;
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        let key = aws_lc_rs::signature::UnparsedPublicKey::new(
            &aws_lc_rs::signature::ECDSA_P256_SHA256_FIXED,
            self.keys.es.public_key().as_ref(),
        );
        key.verify(input.as_bytes(), &sig).ok()?;
        let payload = input.split('.').nth(1)?;
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()
    }

    fn sign(&self, m: &Mint) -> String {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let kid = match (m.stray_kid, m.alg) {
            (true, _) => "stray",
            (false, "RS256") => "rs1",
            _ => "es1",
        };
        let h =
            URL_SAFE_NO_PAD.encode(json!({"alg": m.alg, "kid": kid, "typ": "at+jwt"}).to_string());
        let c = URL_SAFE_NO_PAD.encode(self.claims(m).to_string());
        let input = format!("{h}.{c}");
        let sig = match m.alg {
            "RS256" => {
                let mut sig = vec![0; self.keys.rs.public_modulus_len()];
                self.keys
                    .rs
                    .sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
            _ => {
                let key = if m.stray_kid {
                    &self.keys.stray
                } else {
                    &self.keys.es
                };
                key.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec()
            }
        };
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

fn form(body: &str) -> HashMap<String, String> {
    url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect()
}

async fn metadata(State(s): State<Arc<Inner>>) -> Json<Value> {
    let i = &s.issuer;
    Json(json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/authorize"),
        "token_endpoint": format!("{i}/token"),
        "jwks_uri": format!("{i}/jwks"),
        "registration_endpoint": format!("{i}/register"),
        "introspection_endpoint": format!("{i}/introspect"),
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "scopes_supported": [s.default_scope],
    }))
}

async fn jwks_doc(State(s): State<Arc<Inner>>) -> Json<Value> {
    Json(s.keys.jwks.clone())
}

async fn register(State(s): State<Arc<Inner>>, Json(mut body): Json<Value>) -> Response {
    let id = {
        let mut f = s.flows.lock().unwrap();
        f.next += 1;
        format!("client-{}", f.next)
    };
    body["client_id"] = json!(id);
    body["client_id_issued_at"] = json!(now());
    body["token_endpoint_auth_method"] = json!("none");
    (StatusCode::CREATED, Json(body)).into_response()
}

async fn authorize(
    State(s): State<Arc<Inner>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let (Some(redirect), Some(challenge)) = (q.get("redirect_uri"), q.get("code_challenge")) else {
        return (
            StatusCode::BAD_REQUEST,
            "redirect_uri and code_challenge required",
        )
            .into_response();
    };
    if q.get("code_challenge_method").map(String::as_str) != Some("S256") {
        return (StatusCode::BAD_REQUEST, "S256 only").into_response();
    }
    let code = {
        let mut f = s.flows.lock().unwrap();
        f.next += 1;
        let code = format!("code-{}", f.next);
        let user = f.logged_in.clone();
        f.codes.insert(
            code.clone(),
            (
                user,
                challenge.clone(),
                q.get("resource").cloned(),
                q.get("scope").cloned(),
            ),
        );
        code
    };
    let mut to = url::Url::parse(redirect).unwrap();
    to.query_pairs_mut().append_pair("code", &code);
    if let Some(st) = q.get("state") {
        to.query_pairs_mut().append_pair("state", st);
    }
    Redirect::to(to.as_str()).into_response()
}

async fn token(State(s): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    let f = form(&body);
    if f.get("grant_type").map(String::as_str)
        == Some("urn:ietf:params:oauth:grant-type:token-exchange")
    {
        return exchange(&s, &headers, &f);
    }
    let bad = |why: &str| {
        (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant", "error_description": why})),
        )
            .into_response()
    };
    if f.get("grant_type").map(String::as_str) != Some("authorization_code") {
        return bad("authorization_code only");
    }
    let Some((user, challenge, resource, scope)) = f
        .get("code")
        .and_then(|c| s.flows.lock().unwrap().codes.remove(c))
    else {
        return bad("unknown code");
    };
    let verifier = f.get("code_verifier").cloned().unwrap_or_default();
    let digest = <sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes());
    if URL_SAFE_NO_PAD.encode(digest) != challenge {
        return bad("PKCE verification failed");
    }
    let resource = f.get("resource").cloned().or(resource);
    let Some(resource) = resource else {
        return bad("a resource indicator (RFC 8707) is required");
    };
    let m = Mint {
        sub: user,
        aud: json!(resource),
        iss: None,
        exp_in: 3600,
        scope: scope.unwrap_or_else(|| s.default_scope.clone()),
        alg: "ES256",
        stray_kid: false,
    };
    Json(json!({"access_token": s.sign(&m), "token_type": "Bearer", "expires_in": 3600, "scope": m.scope}))
        .into_response()
}

/// RFC 8693 for [`EXCHANGE_CLIENT`]: the subject token must be an unexpired ES256 access token this AS signed.
fn exchange(s: &Inner, headers: &HeaderMap, f: &HashMap<String, String>) -> Response {
    let err = |status: StatusCode, error: &str, why: &str| {
        (
            status,
            Json(json!({"error": error, "error_description": why})),
        )
            .into_response()
    };
    if basic(headers) != Some(EXCHANGE_CLIENT) {
        return err(StatusCode::UNAUTHORIZED, "invalid_client", "unknown client");
    }
    if f.get("subject_token_type").map(String::as_str)
        != Some("urn:ietf:params:oauth:token-type:access_token")
    {
        return err(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "subject_token_type",
        );
    }
    let subject = f.get("subject_token").cloned().unwrap_or_default();
    let Some(claims) = s.verify(&subject) else {
        return err(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "subject token not ours",
        );
    };
    if claims["exp"].as_i64().unwrap_or(0) <= now() {
        return err(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "subject token expired",
        );
    }
    let sub = claims["sub"].as_str().unwrap_or_default().to_owned();
    let mut flows = s.flows.lock().unwrap();
    flows.next += 1;
    let issued = format!("xchg-{sub}-{}", flows.next);
    flows.exchanges.push(Exchange {
        sub,
        subject_token: subject,
        audience: f.get("audience").cloned(),
        resource: f.get("resource").cloned(),
        issued: issued.clone(),
    });
    Json(
        json!({"access_token": issued, "token_type": "Bearer", "expires_in": 3600,
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
    )
    .into_response()
}

/// The (id, secret) of an HTTP Basic `Authorization` header.
fn basic(headers: &HeaderMap) -> Option<(&'static str, &'static str)> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let raw = STANDARD.decode(v.strip_prefix("Basic ")?).ok()?;
    let want = format!("{}:{}", EXCHANGE_CLIENT.0, EXCHANGE_CLIENT.1);
    (raw == want.as_bytes()).then_some(EXCHANGE_CLIENT)
}

async fn introspect(State(s): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    let f = form(&body);
    let want = format!(
        "Basic {}",
        STANDARD.encode(format!("{}:{}", RS_CLIENT.0, RS_CLIENT.1))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(want.as_str())
    {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let claims = f
        .get("token")
        .and_then(|t| s.flows.lock().unwrap().opaque.get(t).cloned());
    match claims {
        Some(mut c) => {
            c["active"] = json!(true);
            Json(c).into_response()
        }
        None => Json(json!({"active": false})).into_response(),
    }
}
