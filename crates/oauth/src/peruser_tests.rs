//! Per-user authorization against a stub authorization server (axum on 127.0.0.1): protected resource metadata,
//! authorization server metadata, and a token endpoint that issues `tok-<code>` for a code and `new-<refresh token>`
//! for a refresh.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::*;
use ad_core::events::EventBus;
use ad_core::model::{ServerSpec, Transport};

/// The forms the token endpoint received, and the lifetime it gives tokens.
#[derive(Clone, Default)]
struct Stub {
    forms: Arc<Mutex<Vec<HashMap<String, String>>>>,
    lifetime: Arc<Mutex<u64>>,
}

async fn stub_as() -> (String, Stub) {
    use axum::routing::{get, post};
    let stub = Stub::default();
    *stub.lifetime.lock().unwrap() = 3600;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (b1, b2) = (base.clone(), base.clone());
    let s = stub.clone();
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || async move {
                axum::Json(json!({"resource": format!("{b1}/mcp"), "authorization_servers": [b1]}))
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move {
                axum::Json(json!({
                    "issuer": b2, "authorization_endpoint": format!("{b2}/authorize"),
                    "token_endpoint": format!("{b2}/token"), "code_challenge_methods_supported": ["S256"],
                }))
            }),
        )
        .route(
            "/token",
            post(move |body: String| {
                let s = s.clone();
                async move {
                    let form: HashMap<String, String> =
                        url::form_urlencoded::parse(body.as_bytes())
                            .into_owned()
                            .collect();
                    s.forms.lock().unwrap().push(form.clone());
                    let lifetime = *s.lifetime.lock().unwrap();
                    let (access, refresh) = match form["grant_type"].as_str() {
                        "refresh_token" => (format!("new-{}", form["refresh_token"]), None),
                        _ => (format!("tok-{}", form["code"]), Some(format!("rt-{}", form["code"]))),
                    };
                    axum::Json(json!({"access_token": access, "refresh_token": refresh,
                        "token_type": "Bearer", "expires_in": lifetime}))
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, stub)
}

fn service(base: &str) -> (OAuth, Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let events = EventBus::default();
    let store = ad_store::Store::open_in_memory().unwrap();
    let registry = ad_registry::registry::Registry::new(store, events.clone());
    let secrets =
        ad_registry::secrets::Secrets::open(dir.path(), registry.clone(), events.clone()).unwrap();
    let env = [("OAUTH_PER_USER", "on"), ("OAUTH_CLIENT_ID", "team-client")];
    let server = registry
        .register(ServerSpec {
            name: "remote".into(),
            transport: Transport::StreamableHttp,
            url: Some(format!("{base}/mcp")),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        })
        .unwrap();
    (OAuth::new(registry, secrets, events), server, dir)
}

fn user(sub: &str) -> Principal {
    Principal {
        sub: sub.into(),
        issuer: "https://idp.example".into(),
        groups: vec![],
        client_id: None,
        scopes: vec![],
        token: None,
    }
}

/// The `state` of an authorize URL.
fn state(url: &str) -> String {
    crate::flow::callback_params(url)["state"].clone()
}

#[tokio::test]
async fn each_user_authorizes_for_themselves_and_gets_their_own_token() {
    let (base, stub) = stub_as().await;
    let (oauth, server, _d) = service(&base);
    assert!(oauth.per_user(&server));
    let (alice, bob) = (user("alice"), user("bob"));
    assert_ne!(user_suffix(&alice.user_key()), user_suffix(&bob.user_key()));

    // Alice asks: her own URL, which neither bob nor the server's own status shows.
    let url_a = oauth
        .begin_for_user(&server, &alice, None, false)
        .await
        .unwrap();
    let st = state(&url_a);
    assert!(st.ends_with(&user_suffix(&alice.user_key())[1..]), "{st}");
    let status_a = oauth.user_status(&server, &alice).unwrap();
    assert_eq!(status_a.state, "authenticating");
    assert_eq!(status_a.auth_url.as_deref(), Some(url_a.as_str()));
    assert_eq!(oauth.user_status(&server, &bob).unwrap().state, "none");
    assert_eq!(oauth.status(&server).unwrap().state, "none");
    assert!(
        oauth.auth_urls().is_empty(),
        "a user's URL is not listed for everyone"
    );

    // Bob asks too; his callback comes first and finishes his authorization only.
    let url_b = oauth
        .begin_for_user(&server, &bob, None, false)
        .await
        .unwrap();
    assert_ne!(url_a, url_b);
    oauth
        .finish(
            &server,
            &format!("http://cb/?code=cb&state={}", state(&url_b)),
        )
        .await
        .unwrap();
    oauth
        .finish(&server, &format!("http://cb/?code=ca&state={st}"))
        .await
        .unwrap();
    let cred = |p: Principal| {
        let (oauth, server) = (oauth.clone(), server.clone());
        async move { oauth.user_credential(&server, &p).await.unwrap() }
    };
    assert_eq!(cred(alice.clone()).await.unwrap().token, "tok-ca");
    assert_eq!(cred(bob.clone()).await.unwrap().token, "tok-cb");
    assert_eq!(
        oauth.user_status(&server, &alice).unwrap().state,
        "authorized"
    );
    assert!(
        oauth.tokens(server.id).unwrap().is_none(),
        "no server-wide token"
    );
    assert!(
        cred(user("carol")).await.is_none(),
        "carol has not authorized"
    );
    let forms = stub.forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 2);
    assert_eq!(forms[0]["resource"], format!("{base}/mcp"));

    // A state naming nobody waiting is refused; a refused token is refreshed with the user's own refresh token.
    let e = oauth
        .finish(&server, "http://cb/?code=x&state=abc.0123456789abcdef")
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no authorization"), "{e}");
    let fresh = oauth.user_refresh(&server, &alice, "tok-ca").await.unwrap();
    assert_eq!(fresh.as_deref(), Some("new-rt-ca"));
    assert_eq!(cred(alice.clone()).await.unwrap().token, "new-rt-ca");
    assert_eq!(
        cred(bob.clone()).await.unwrap().token,
        "tok-cb",
        "bob's untouched"
    );
    assert!(oauth.user_logout(&server, &alice).unwrap());
    assert!(cred(alice).await.is_none());
}

#[tokio::test]
async fn a_users_token_near_expiry_is_refreshed_before_use() {
    let (base, stub) = stub_as().await;
    let (oauth, server, _d) = service(&base);
    *stub.lifetime.lock().unwrap() = 30;
    let alice = user("alice");
    let url = oauth
        .begin_for_user(&server, &alice, None, false)
        .await
        .unwrap();
    oauth
        .finish(
            &server,
            &format!("http://cb/?code=c1&state={}", state(&url)),
        )
        .await
        .unwrap();
    *stub.lifetime.lock().unwrap() = 3600;
    let c = oauth
        .user_credential(&server, &alice)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.token, "new-rt-c1");
    let forms = stub.forms.lock().unwrap().clone();
    assert_eq!(forms.last().unwrap()["grant_type"], "refresh_token");
}
