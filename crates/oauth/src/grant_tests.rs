//! The grants that need no person, against a test token endpoint (axum on 127.0.0.1): token exchange per user and
//! its cache (RFC 8693), the JWT-bearer grant of a workload token read from its file (RFC 7523), and a DPoP token
//! request answered with `use_dpop_nonce` (RFC 9449 section 8).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::*;
use ad_core::events::EventBus;
use ad_core::model::{ServerSpec, Transport};

/// One request the test token endpoint received: its form and its `Authorization` and `DPoP` headers.
#[derive(Debug, Clone)]
struct Seen {
    form: HashMap<String, String>,
    authorization: Option<String>,
    dpop: Option<String>,
}

/// How the test endpoint answers.
#[derive(Clone, Copy)]
enum Mode {
    /// A token `x-<subject>-<n>` valid for the given seconds (the answer delayed by 150 ms, so concurrent callers
    /// overlap).
    Issue(u64),
    /// `400 invalid_grant`.
    Refuse,
    /// `400 use_dpop_nonce` with `DPoP-Nonce: n-1` unless the proof carries it; then a DPoP token.
    DpopNonce,
}

#[derive(Clone)]
struct Endpoint {
    seen: Arc<Mutex<Vec<Seen>>>,
    mode: Arc<Mutex<Mode>>,
    n: Arc<AtomicU64>,
}

fn claims(jwt: &str) -> Value {
    let part = jwt.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
}

async fn token(
    axum::extract::State(ep): axum::extract::State<Endpoint>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let form: HashMap<String, String> = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let header = |k: &str| {
        headers
            .get(k)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let seen = Seen {
        form: form.clone(),
        authorization: header("authorization"),
        dpop: header("dpop"),
    };
    ep.seen.lock().unwrap().push(seen.clone());
    let mode = *ep.mode.lock().unwrap();
    match mode {
        Mode::Issue(lifetime) => {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let n = ep.n.fetch_add(1, Ordering::SeqCst);
            let subject = form
                .get("subject_token")
                .or(form.get("assertion"))
                .cloned()
                .unwrap_or_default();
            axum::Json(json!({
                "access_token": format!("x-{subject}-{n}"),
                "issued_token_type": grants::ACCESS_TOKEN,
                "token_type": "Bearer",
                "expires_in": lifetime,
            }))
            .into_response()
        }
        Mode::Refuse => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant", "error_description": "no"})),
        )
            .into_response(),
        Mode::DpopNonce => {
            let nonce = seen
                .dpop
                .as_deref()
                .map(claims)
                .and_then(|c| c["nonce"].as_str().map(str::to_owned));
            if nonce.as_deref() != Some("n-1") {
                return (
                    StatusCode::BAD_REQUEST,
                    [("DPoP-Nonce", "n-1")],
                    axum::Json(json!({"error": "use_dpop_nonce"})),
                )
                    .into_response();
            }
            axum::Json(json!({"access_token": "bound", "token_type": "DPoP", "expires_in": 3600}))
                .into_response()
        }
    }
}

/// A test token endpoint in `mode`: (its URL, what it saw, its mode to change).
async fn endpoint(mode: Mode) -> (String, Endpoint) {
    let ep = Endpoint {
        seen: Arc::default(),
        mode: Arc::new(Mutex::new(mode)),
        n: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/token", axum::routing::post(token))
        .with_state(ep.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/token"), ep)
}

/// An OAuth service on an in-memory registry with one server `remote` set up with `env`.
fn service(env: &[(&str, String)]) -> (OAuth, Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let events = EventBus::default();
    let store = ad_store::Store::open_in_memory().unwrap();
    let registry = ad_registry::registry::Registry::new(store, events.clone());
    let secrets =
        ad_registry::secrets::Secrets::open(dir.path(), registry.clone(), events.clone()).unwrap();
    let server = registry
        .register(ServerSpec {
            name: "remote".into(),
            transport: Transport::StreamableHttp,
            url: Some("http://127.0.0.1:9/mcp".into()),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        })
        .unwrap();
    (OAuth::new(registry, secrets, events), server, dir)
}

fn user(sub: &str, token: Option<&str>) -> Principal {
    Principal {
        sub: sub.into(),
        issuer: "https://idp.example".into(),
        groups: vec![],
        client_id: None,
        scopes: vec![],
        token: token.map(str::to_owned),
    }
}

fn exchange_env(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OAUTH_GRANT", "token_exchange".into()),
        ("OAUTH_EXCHANGE_TOKEN_ENDPOINT", endpoint.into()),
        ("OAUTH_EXCHANGE_AUDIENCE", "remote-api".into()),
        ("OAUTH_EXCHANGE_RESOURCE", "http://127.0.0.1:9/mcp".into()),
        ("OAUTH_CLIENT_ID", "agent-discover".into()),
        ("OAUTH_CLIENT_SECRET", "s3cret".into()),
        ("OAUTH_SCOPES", "read".into()),
    ]
}

#[tokio::test]
async fn the_callers_token_is_exchanged_once_per_user_and_cached() {
    let (url, ep) = endpoint(Mode::Issue(3600)).await;
    let (oauth, server, _dir) = service(&exchange_env(&url));
    let alice = user("alice", Some("alice-token"));
    let bob = user("bob", Some("bob-token"));
    let a1 = oauth.exchanged_token(&server, &alice).await.unwrap();
    let a2 = oauth.exchanged_token(&server, &alice).await.unwrap();
    let b1 = oauth.exchanged_token(&server, &bob).await.unwrap();
    assert_eq!(a1, a2, "alice's exchange is reused until it expires");
    assert!(a1.token.starts_with("x-alice-token-"), "{a1:?}");
    assert!(
        b1.token.starts_with("x-bob-token-"),
        "bob gets his own: {b1:?}"
    );
    assert!(a1.expires_at >= now_secs() + 3500);
    let seen = ep.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one exchange per user");
    let f = &seen[0].form;
    assert_eq!(f["grant_type"], grants::TOKEN_EXCHANGE);
    assert_eq!(f["subject_token"], "alice-token");
    assert_eq!(f["subject_token_type"], grants::ACCESS_TOKEN);
    assert_eq!(f["requested_token_type"], grants::ACCESS_TOKEN);
    assert_eq!(f["audience"], "remote-api");
    assert_eq!(f["resource"], "http://127.0.0.1:9/mcp");
    assert_eq!(f["scope"], "read");
    assert!(!f.contains_key("actor_token"));
    assert!(
        !f.contains_key("client_secret"),
        "the secret goes in the Basic header"
    );
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(format!("Basic {}", STANDARD.encode("agent-discover:s3cret")).as_str())
    );
    // Forgetting alice's exchange (the server refused it) exchanges again for her only.
    oauth.forget_exchanged(server.id, Some(&alice.user_key()));
    let a3 = oauth.exchanged_token(&server, &alice).await.unwrap();
    assert_ne!(a3.token, a1.token);
    oauth.exchanged_token(&server, &bob).await.unwrap();
    assert_eq!(ep.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn an_exchange_near_its_expiry_is_not_reused_and_concurrent_callers_share_one() {
    // 30 s left is inside the 60 s margin: every use exchanges again.
    let (url, ep) = endpoint(Mode::Issue(30)).await;
    let (oauth, server, _dir) = service(&exchange_env(&url));
    let alice = user("alice", Some("t"));
    let first = oauth.exchanged_token(&server, &alice).await.unwrap();
    let second = oauth.exchanged_token(&server, &alice).await.unwrap();
    assert_ne!(first.token, second.token);
    assert_eq!(ep.seen.lock().unwrap().len(), 2);

    *ep.mode.lock().unwrap() = Mode::Issue(3600);
    let bob = user("bob", Some("b"));
    let calls = (0..5).map(|_| oauth.exchanged_token(&server, &bob));
    let got = futures::future::join_all(calls).await;
    let tokens: Vec<String> = got.into_iter().map(|r| r.unwrap().token).collect();
    assert!(tokens.iter().all(|t| t == &tokens[0]), "{tokens:?}");
    assert_eq!(
        ep.seen.lock().unwrap().len(),
        3,
        "five concurrent callers, one exchange"
    );
}

#[tokio::test]
async fn no_token_or_a_refusal_is_an_error_and_nothing_is_cached() {
    let (url, ep) = endpoint(Mode::Refuse).await;
    let (oauth, server, _dir) = service(&exchange_env(&url));
    let anonymous = user("carol", None);
    let e = oauth
        .exchanged_token(&server, &anonymous)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("carries none"), "{e}");
    assert!(
        ep.seen.lock().unwrap().is_empty(),
        "no request without a subject token"
    );
    let alice = user("alice", Some("t"));
    let e = oauth.exchanged_token(&server, &alice).await.unwrap_err();
    assert!(e.to_string().contains("invalid_grant"), "{e}");
    *ep.mode.lock().unwrap() = Mode::Issue(3600);
    assert!(oauth.exchanged_token(&server, &alice).await.is_ok());
    assert_eq!(
        ep.seen.lock().unwrap().len(),
        2,
        "the refusal was not cached"
    );
    // A server not set up for token exchange refuses to exchange.
    let (other, plain, _d) = service(&[]);
    assert!(other.exchanged_token(&plain, &alice).await.is_err());
    assert!(!other.uses_token_exchange(&plain));
}

#[tokio::test]
async fn an_actor_token_is_read_from_its_file_at_each_exchange() {
    let (url, ep) = endpoint(Mode::Issue(3600)).await;
    let dir = tempfile::tempdir().unwrap();
    let actor = dir.path().join("actor.jwt");
    std::fs::write(&actor, "actor-1\n").unwrap();
    let mut env = exchange_env(&url);
    env.push((
        "OAUTH_ACTOR_TOKEN_FILE",
        actor.to_string_lossy().into_owned(),
    ));
    let (oauth, server, _d) = service(&env);
    oauth
        .exchanged_token(&server, &user("alice", Some("a")))
        .await
        .unwrap();
    std::fs::write(&actor, "actor-2").unwrap();
    oauth
        .exchanged_token(&server, &user("bob", Some("b")))
        .await
        .unwrap();
    let seen = ep.seen.lock().unwrap().clone();
    assert_eq!(seen[0].form["actor_token"], "actor-1");
    assert_eq!(
        seen[1].form["actor_token"], "actor-2",
        "the rotated token is read again"
    );
    assert_eq!(seen[0].form["actor_token_type"], grants::JWT);
}

#[tokio::test]
async fn the_jwt_bearer_grant_sends_the_workload_token_from_its_file() {
    let (url, ep) = endpoint(Mode::Issue(3600)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("workload.jwt");
    std::fs::write(&file, "wl-1").unwrap();
    let (oauth, server, _d) = service(&[
        ("OAUTH_GRANT", "jwt_bearer".into()),
        ("OAUTH_ASSERTION_FILE", file.to_string_lossy().into_owned()),
    ]);
    assert_eq!(oauth.machine_grant(&server).as_deref(), Some("jwt_bearer"));
    let assertion = oauth.token_setting(&server, "OAUTH_ASSERTION").unwrap();
    let client = grants::client("iss", None, None, TokenAuth::ClientSecretBasic);
    let t = grants::jwt_bearer(
        oauth.http(),
        &url,
        client,
        &assertion,
        "http://127.0.0.1:9/mcp",
        Some("s"),
        "jwt_bearer",
        None,
    )
    .await
    .unwrap();
    assert!(t.access_token.starts_with("x-wl-1-"));
    assert_eq!(t.grant, "jwt_bearer");
    let seen = ep.seen.lock().unwrap().clone();
    let f = &seen[0].form;
    assert_eq!(f["grant_type"], grants::JWT_BEARER);
    assert_eq!(f["assertion"], "wl-1");
    assert_eq!(f["resource"], "http://127.0.0.1:9/mcp");
    assert!(
        !f.contains_key("client_id"),
        "no client named when none is set"
    );
    assert!(seen[0].authorization.is_none());
    // A missing file is an error naming the setting.
    std::fs::remove_file(&file).unwrap();
    let e = oauth.token_setting(&server, "OAUTH_ASSERTION").unwrap_err();
    assert!(e.to_string().contains("OAUTH_ASSERTION_FILE"), "{e}");
}

#[tokio::test]
async fn a_dpop_token_request_is_retried_once_with_the_servers_nonce() {
    let (url, ep) = endpoint(Mode::DpopNonce).await;
    let (oauth, server, _d) = service(&[]);
    let dpop = oauth.dpop(server.id).unwrap();
    // The key is stored (sealed) and the same on the next use.
    assert_eq!(
        oauth.dpop(server.id).unwrap().key.thumbprint(),
        dpop.key.thumbprint()
    );
    let client = grants::client("iss", Some("c".into()), None, TokenAuth::None);
    let t = grants::jwt_bearer(
        oauth.http(),
        &url,
        client,
        "a",
        "http://127.0.0.1:9/mcp",
        None,
        "jwt_bearer",
        Some(&dpop),
    )
    .await
    .unwrap();
    assert!(t.dpop, "token_type DPoP: a bound token");
    let seen = ep.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one retry");
    let (p1, p2) = (
        claims(seen[0].dpop.as_deref().unwrap()),
        claims(seen[1].dpop.as_deref().unwrap()),
    );
    assert!(p1.get("nonce").is_none());
    assert_eq!(p2["nonce"], "n-1");
    assert_ne!(p1["jti"], p2["jti"], "a fresh proof for the retry");
    assert_eq!(p2["htm"], "POST");
    assert_eq!(p2["htu"], url);
    // The nonce is remembered: the next request sends it at once.
    drop(seen);
    let client = grants::client("iss", Some("c".into()), None, TokenAuth::None);
    grants::jwt_bearer(
        oauth.http(),
        &url,
        client,
        "a",
        "r",
        None,
        "jwt_bearer",
        Some(&dpop),
    )
    .await
    .unwrap();
    assert_eq!(ep.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn a_dpop_key_is_created_once_whoever_stores_it_first() {
    let (oauth, server, _d) = service(&[]);
    let store = oauth.inner.registry.store();
    // Two processes racing to create a record: both keep the first one stored.
    assert_eq!(
        store.put_oauth_once(server.id, "race", b"first").unwrap(),
        b"first"
    );
    assert_eq!(
        store.put_oauth_once(server.id, "race", b"second").unwrap(),
        b"first"
    );
    // The key itself: created sealed on first use, found again by a later lookup.
    let key = oauth.dpop(server.id).unwrap();
    let sealed = store.oauth(server.id, "dpop_key").unwrap().unwrap();
    assert!(
        !String::from_utf8_lossy(&sealed).contains("pkcs8"),
        "the key is stored sealed"
    );
    assert_eq!(
        oauth.dpop(server.id).unwrap().key.thumbprint(),
        key.key.thumbprint()
    );
}
