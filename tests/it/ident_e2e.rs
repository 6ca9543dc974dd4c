//! Issue 30, end to end through the real front: two users with tokens from the test authorization server call, through
//! a `serve` replica with identity on, a remote server (the fixture over Streamable HTTP, whose `trace_context` tool
//! reports the `Authorization` header it got) set up with `OAUTH_GRANT=token_exchange` against the test AS's token
//! endpoint. Each user's call reaches the remote server with the token exchanged for that user (whose subject token was
//! that user's access token to the front), exchanged once per user.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness;
use crate::ident_as::{EXCHANGE_CLIENT, TestAs};
use crate::identity::{Client, client_as, protected_env, users};
use crate::replicas;

/// Both teams may see and call `remote`; `admins` everything.
const RULES: &str = r#"
admin_groups = ["admins"]
[groups.dev]
servers = ["remote"]
[groups.ops]
servers = ["remote"]
"#;

/// Starts the fixture over Streamable HTTP with the `trace_context` tool; the child and its URL.
pub async fn traced_remote() -> (tokio::process::Child, String) {
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
    (fixture, url)
}

/// What the remote server saw for one call of `remote__trace_context` by `c`.
async fn traced(c: &Client) -> Value {
    let r =
        c.0.call_tool(CallToolRequestParams::new("remote__trace_context"))
            .await
            .expect("the call succeeds");
    serde_json::from_str(&harness::text(&r)).unwrap()
}

#[tokio::test]
async fn each_users_call_through_the_front_carries_their_exchanged_token() {
    let auth = TestAs::start(users(), "mcp").await;
    let (_fixture, remote) = traced_remote().await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    std::fs::write(dir.path().join("identity-rules.toml"), RULES).unwrap();
    let r = replicas::replica(dir.path(), &env).await;
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let (root, alice_token, bob_token) = (token("root"), token("alice"), token("bob"));

    let http = reqwest::Client::new();
    let endpoint = format!("{}/token", auth.issuer);
    let created = http
        .post(format!("{}/api/servers", r.url))
        .bearer_auth(&root)
        .json(
            &json!({"name": "remote", "transport": "streamable-http", "url": remote,
                      "env": {"OAUTH_GRANT": "token_exchange",
                              "OAUTH_EXCHANGE_TOKEN_ENDPOINT": endpoint,
                              "OAUTH_EXCHANGE_AUDIENCE": "remote-api",
                              "OAUTH_CLIENT_ID": EXCHANGE_CLIENT.0,
                              "OAUTH_CLIENT_SECRET": EXCHANGE_CLIENT.1}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{}/api/servers/remote/activate", r.url))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap();
    assert!(
        activated.status().is_success(),
        "{}",
        activated.text().await.unwrap()
    );
    assert!(
        auth.exchanges().is_empty(),
        "activation (initialize, tools/list) exchanges nothing: {:?}",
        auth.exchanges()
    );

    let alice = client_as(&r.url, &alice_token).await;
    let bob = client_as(&r.url, &bob_token).await;
    let a1 = traced(&alice).await;
    let b1 = traced(&bob).await;
    let a2 = traced(&alice).await;
    let b2 = traced(&bob).await;

    let xs = auth.exchanges();
    assert_eq!(xs.len(), 2, "one exchange per user: {xs:?}");
    let of = |sub: &str| xs.iter().find(|x| x.sub == sub).expect(sub).clone();
    let (xa, xb) = (of("alice"), of("bob"));
    assert_eq!(
        xa.subject_token, alice_token,
        "alice's own token was exchanged"
    );
    assert_eq!(xb.subject_token, bob_token, "bob's own token was exchanged");
    assert_eq!(xa.audience.as_deref(), Some("remote-api"));
    assert_eq!(
        xa.resource.as_deref(),
        Some(remote.as_str()),
        "the resource defaults to the server's URL"
    );
    assert_eq!(a1["header_authorization"], format!("Bearer {}", xa.issued));
    assert_eq!(b1["header_authorization"], format!("Bearer {}", xb.issued));
    assert_eq!(
        a2["header_authorization"], a1["header_authorization"],
        "cached"
    );
    assert_eq!(
        b2["header_authorization"], b1["header_authorization"],
        "cached"
    );
    assert_ne!(a1["header_authorization"], b1["header_authorization"]);
    for seen in [&a1, &b1] {
        let keys = seen["meta_keys"].as_array().cloned().unwrap_or_default();
        assert!(
            !keys.iter().any(|k| k == agent_discover::oauth::USER_META),
            "the proxy's note of the user never reaches the server: {seen}"
        );
    }
}
