//! Issue 30: a remote server each user authorizes for themselves (`OAUTH_PER_USER=on`), through the proxy: the
//! shared connection uses the server's own authorization, a user's call without a token of their own asks that user
//! (and only that user) to authorize, and after the user's callback the user's calls carry the user's own token.

use std::sync::Arc;

use agent_discover::error::Error;
use agent_discover::proxy::Caller;

fn principal(sub: &str) -> Arc<ad_core::identity::Principal> {
    Arc::new(ad_core::identity::Principal {
        sub: sub.into(),
        issuer: "https://idp.test".into(),
        groups: vec![],
        client_id: None,
        scopes: vec![],
        token: Some(format!("{sub}-front-token")),
    })
}

fn state_of(url: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .unwrap()
        .1
        .into_owned()
}

async fn ping_as(
    app: &agent_discover::app::App,
    user: &Arc<ad_core::identity::Principal>,
) -> agent_discover::error::Result<String> {
    let caller = Caller {
        principal: Some(user.clone()),
        ..Caller::default()
    };
    let r = app.proxy.call_tool("tiny", "ping", None, caller).await?;
    Ok(r.content[0].as_text().unwrap().text.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_authorizes_for_themselves_and_calls_with_their_own_token() {
    use agent_discover::model::{ServerSpec, Transport};
    let (_stub, mcp_base, valid) = crate::oauth::protected_server().await;
    let dir = tempfile::tempdir().unwrap();
    let app =
        agent_discover::app::App::open(agent_discover::config::Config::in_dir(dir.path())).unwrap();
    app.registry
        .register(ServerSpec {
            name: "tiny".into(),
            transport: Transport::StreamableHttp,
            url: Some(format!("{mcp_base}/mcp")),
            env: [("OAUTH_PER_USER".to_string(), "on".to_string())].into(),
            ..Default::default()
        })
        .unwrap();
    let server = app.registry.get("tiny").unwrap();

    // The shared connection: the server's own authorization (whoever runs the team). The stub's first token (at-1)
    // expires within the margin, so at-2 is what the connection uses.
    let Err(Error::AuthRequired { auth_url, .. }) = app.proxy.activate("tiny").await else {
        panic!("activation without a token must ask for authorization")
    };
    *valid.lock().unwrap() = "at-2".into();
    app.oauth
        .finish(&server, &format!("?code=c&state={}", state_of(&auth_url)))
        .await
        .unwrap();
    app.proxy.activate("tiny").await.unwrap();

    // Alice has no token of her own: her call asks her to authorize, with a URL that is hers.
    let alice = principal("alice");
    let bob = principal("bob");
    let Err(Error::AuthRequired {
        auth_url: url_a, ..
    }) = ping_as(&app, &alice).await
    else {
        panic!("alice's call without her own token must ask her to authorize")
    };
    let suffix_a = agent_discover::oauth::user_suffix(&alice.user_key());
    assert!(state_of(&url_a).ends_with(&suffix_a[1..]), "{url_a}");
    assert_eq!(
        app.oauth.user_status(&server, &alice).unwrap().state,
        "authenticating"
    );
    assert_eq!(app.oauth.user_status(&server, &bob).unwrap().state, "none");
    assert_eq!(
        app.auth_status("tiny").unwrap().state,
        "authorized",
        "the server's own authorization is untouched"
    );

    // Her callback: her token is at-3; the server now accepts only it, so her call succeeds with her token alone.
    app.oauth
        .finish(&server, &format!("?code=a&state={}", state_of(&url_a)))
        .await
        .unwrap();
    *valid.lock().unwrap() = "at-3".into();
    assert_eq!(ping_as(&app, &alice).await.unwrap(), "pong");
    assert_eq!(
        app.oauth
            .user_tokens(server.id, &alice)
            .unwrap()
            .unwrap()
            .access_token,
        "at-3"
    );

    // Bob still has none: his call asks him, with another URL, and does not use alice's token.
    let Err(Error::AuthRequired {
        auth_url: url_b, ..
    }) = ping_as(&app, &bob).await
    else {
        panic!("bob's call must not go through with alice's token")
    };
    assert_ne!(state_of(&url_b), state_of(&url_a));
    assert_eq!(
        app.oauth.user_status(&server, &alice).unwrap().state,
        "authorized"
    );
    app.proxy.shutdown().await;
}
