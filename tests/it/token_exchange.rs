//! Issue 30, part 3: token exchange (RFC 8693) per user towards a remote server. A test token endpoint (axum on
//! 127.0.0.1) exchanges a caller's token `T` for `x-T-<n>`; the remote server is the fixture over Streamable HTTP,
//! whose `trace_context` tool reports the `Authorization` header and the `_meta` keys that reached it. Calls made for
//! two users (each with the `Principal` the front would attach) carry each user's exchanged token, exchanged once per
//! user; a call without a user carries none; the proxy's note of the user never reaches the server.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness;
use agent_discover::proxy::Caller;

/// The forms the test token endpoint received.
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

async fn token_endpoint() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/token",
        axum::routing::post(move |body: String| {
            let s = s.clone();
            async move {
                let form: Vec<(String, String)> = url::form_urlencoded::parse(body.as_bytes())
                    .into_owned()
                    .collect();
                let subject = form
                    .iter()
                    .find(|(k, _)| k == "subject_token")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                let n = {
                    let mut s = s.lock().unwrap();
                    s.push(form);
                    s.len()
                };
                axum::Json(json!({
                    "access_token": format!("x-{subject}-{n}"),
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "token_type": "Bearer",
                    "expires_in": 3600,
                }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn principal(sub: &str, token: Option<&str>) -> Arc<ad_core::identity::Principal> {
    Arc::new(ad_core::identity::Principal {
        sub: sub.into(),
        issuer: "https://idp.test".into(),
        groups: vec![],
        client_id: Some("team-client".into()),
        scopes: vec![],
        token: token.map(str::to_owned),
    })
}

/// What the remote server saw for one call of `trace_context` made for `user`.
async fn call_as(
    app: &agent_discover::app::App,
    user: Option<Arc<ad_core::identity::Principal>>,
) -> Value {
    let caller = Caller {
        principal: user,
        ..Caller::default()
    };
    let r = app
        .proxy
        .call_tool("remote", "trace_context", None, caller)
        .await
        .expect("the call succeeds");
    let text = r.content[0].as_text().expect("a text result").text.clone();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_users_call_carries_the_token_exchanged_for_that_user() {
    let (endpoint, seen) = token_endpoint().await;
    let mut fixture = tokio::process::Command::new(harness::fixture())
        .args(["--trace-tool", "--http", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(fixture.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    let dir = tempfile::tempdir().unwrap();
    let app =
        agent_discover::app::App::open(agent_discover::config::Config::in_dir(dir.path())).unwrap();
    let env = [
        ("OAUTH_GRANT", "token_exchange"),
        ("OAUTH_EXCHANGE_TOKEN_ENDPOINT", endpoint.as_str()),
        ("OAUTH_EXCHANGE_RESOURCE", url.as_str()),
        ("OAUTH_EXCHANGE_AUDIENCE", "remote"),
        ("OAUTH_CLIENT_ID", "agent-discover"),
        ("OAUTH_CLIENT_SECRET", "s3cret"),
    ];
    app.registry
        .register(agent_discover::model::ServerSpec {
            name: "remote".into(),
            transport: agent_discover::model::Transport::StreamableHttp,
            url: Some(url.clone()),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        })
        .unwrap();
    app.proxy.activate("remote").await.unwrap();
    assert!(
        seen.lock().unwrap().is_empty(),
        "the shared connection (initialize, tools/list) exchanges nothing"
    );

    let alice = principal("alice", Some("alice-token"));
    let bob = principal("bob", Some("bob-token"));
    let a1 = call_as(&app, Some(alice.clone())).await;
    let b1 = call_as(&app, Some(bob.clone())).await;
    let a2 = call_as(&app, Some(alice.clone())).await;
    assert_eq!(a1["header_authorization"], "Bearer x-alice-token-1", "{a1}");
    assert_eq!(b1["header_authorization"], "Bearer x-bob-token-2", "{b1}");
    assert_eq!(
        a2["header_authorization"], "Bearer x-alice-token-1",
        "alice's exchange is cached: {a2}"
    );
    for seen_by_server in [&a1, &b1, &a2] {
        let keys = seen_by_server["meta_keys"].as_array().unwrap();
        assert!(
            !keys.iter().any(|k| k == agent_discover::oauth::USER_META),
            "the user's key never reaches the server: {seen_by_server}"
        );
    }
    let forms = seen.lock().unwrap().clone();
    assert_eq!(forms.len(), 2, "one exchange per user: {forms:?}");
    let field = |i: usize, k: &str| {
        forms[i]
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        field(0, "grant_type").as_deref(),
        Some("urn:ietf:params:oauth:grant-type:token-exchange")
    );
    assert_eq!(field(0, "subject_token").as_deref(), Some("alice-token"));
    assert_eq!(field(1, "subject_token").as_deref(), Some("bob-token"));
    assert_eq!(field(0, "audience").as_deref(), Some("remote"));
    assert_eq!(field(0, "resource").as_deref(), Some(url.as_str()));

    // A call without an authenticated user (stdio, the CLI) carries no token of anyone's.
    let anonymous = call_as(&app, None).await;
    assert!(anonymous["header_authorization"].is_null(), "{anonymous}");
    // Nor does a user whose request carried no token.
    let tokenless = call_as(&app, Some(principal("carol", None))).await;
    assert!(tokenless["header_authorization"].is_null(), "{tokenless}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    app.proxy.shutdown().await;
}
