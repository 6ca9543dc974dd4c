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
    traced_remote_with(&[]).await
}

/// [`traced_remote`] with more of the fixture's arguments.
async fn traced_remote_with(extra: &[&str]) -> (tokio::process::Child, String) {
    let mut fixture = tokio::process::Command::new(harness::fixture())
        .args([
            "--trace-tool",
            "--http",
            "0",
            "--resources",
            "1",
            "--prompts",
            "1",
        ])
        .args(extra)
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
#[allow(deprecated)] // resources/subscribe: legacy-only in rmcp, which is the era these clients and the child speak.
async fn each_users_call_through_the_front_carries_their_exchanged_token() {
    let auth = TestAs::start(users(), "mcp").await;
    let (_fixture, remote) = traced_remote().await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = protected_env(&auth, dir.path());
    std::fs::write(dir.path().join("identity-rules.toml"), RULES).unwrap();
    // A team's replica (PostgreSQL), so that the call log names the replica too.
    let pg = crate::pg::server();
    env.push(("AGENT_DISCOVER_DATABASE_URL", pg.new_database()));
    env.push(("AGENT_DISCOVER_MASTER_KEY", "42".repeat(32)));
    env.push(("AGENT_DISCOVER_REPLICA", "r0".into()));
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

    // Each user's dashboard stream, open before the calls.
    let ws_url = format!("{}/ws", r.url.replace("http://", "ws://"));
    let mut streams = Vec::new();
    for t in [&alice_token, &bob_token] {
        let bearer = format!("Bearer {t}");
        let mut ws = crate::http::ws_connect(&ws_url, &[("authorization", bearer.as_str())])
            .await
            .expect("a user opens /ws");
        crate::http::next_message(&mut ws, Duration::from_secs(20), |m| m["type"] == "state").await;
        streams.push(ws);
    }

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
    // Each user's stream carries the call-log entries of their own calls, which name user, client and replica.
    for (ws, sub) in streams.iter_mut().zip(["alice", "bob"]) {
        let me = format!("{}#{sub}", auth.issuer);
        for _ in 0..2 {
            let m = crate::http::next_message(ws, Duration::from_secs(20), |m| {
                assert!(
                    m["type"] != "log_entry" || m["entry"]["user"] == me.as_str(),
                    "{sub}'s stream carries another's call: {m}"
                );
                m["type"] == "log_entry"
            })
            .await;
            assert_eq!(m["entry"]["client"], "test-client", "{m}");
            assert_eq!(m["entry"]["replica"], "r0", "{m}");
            assert_eq!(m["entry"]["tool"], "trace_context", "{m}");
        }
    }

    // A completion carries the caller's exchanged token too (the fixture answers with the header it got).
    let completed = alice
        .0
        .complete(rmcp::model::CompleteRequestParams::new(
            rmcp::model::Reference::for_prompt("remote__prompt_1"),
            rmcp::model::ArgumentInfo::new("topic", ""),
        ))
        .await
        .expect("alice's completion");
    assert_eq!(
        completed.completion.values,
        [format!("Bearer {}", xa.issued)],
        "alice's completion carries alice's token"
    );
    // Subscriptions: each user's first subscription reaches the server with that user's exchanged token (the server
    // authorizes every subscriber); the child is unsubscribed when the last subscriber leaves, with that one's token.
    let watched = "agent-discover://remote/fixture://resource/1";
    for c in [&alice, &bob] {
        c.0.subscribe(rmcp::model::SubscribeRequestParams::new(watched))
            .await
            .expect("a user subscribes");
    }
    for c in [&alice, &bob] {
        c.0.unsubscribe(rmcp::model::UnsubscribeRequestParams::new(watched))
            .await
            .expect("a user unsubscribes");
    }
    let seen = traced(&alice).await;
    assert_eq!(
        seen["subscribed_with"],
        json!([
            format!("subscribe Bearer {}", xa.issued),
            format!("subscribe Bearer {}", xb.issued),
            format!("unsubscribe Bearer {}", xb.issued),
        ]),
        "each subscriber's own token, the child unsubscribed once, by the last: {seen}"
    );
    // A read and a prompt get by the admin, who made no call: one exchange of the admin's own token, reused.
    let root_c = client_as(&r.url, &root).await;
    root_c
        .0
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agent-discover://remote/fixture://resource/1",
        ))
        .await
        .expect("the admin's read");
    root_c
        .0
        .get_prompt(rmcp::model::GetPromptRequestParams::new("remote__prompt_1"))
        .await
        .expect("the admin's prompt get");
    let xs = auth.exchanges();
    assert_eq!(xs.len(), 3, "one more exchange, the admin's: {xs:?}");
    assert_eq!(xs[2].sub, "root");
    assert_eq!(xs[2].subject_token, root);
    for seen in [&a1, &b1] {
        let keys = seen["meta_keys"].as_array().cloned().unwrap_or_default();
        assert!(
            !keys.iter().any(|k| k == agent_discover::oauth::USER_META),
            "the proxy's note of the user never reaches the server: {seen}"
        );
    }
}

/// The `state` of an authorize URL.
fn state_of(url: &str) -> String {
    url::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "state")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// `GET path` on the replica as `token`, as JSON.
async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> Value {
    let resp = http.get(url).bearer_auth(token).send().await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.json().await.unwrap()
}

/// The registry tool's answer to `args`, for `c`.
async fn registry(c: &Client, args: Value) -> Value {
    let r =
        c.0.call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(serde_json::from_value(args).unwrap()),
        )
        .await
        .unwrap();
    serde_json::from_str(&harness::text(&r)).unwrap()
}

/// `OAUTH_PER_USER=on` through the real front: a user without a token of their own sees the server `authenticating`
/// with their own `authUrl` (REST list and item, the registry tool's `list` and `status`), never another's; once
/// the user has authorized, the server is shown in its own state with no URL.
#[tokio::test]
async fn each_user_sees_their_own_authorization_of_a_per_user_server() {
    let auth = TestAs::start(users(), "mcp").await;
    let (_stub, mcp_base, valid) = crate::oauth::protected_server().await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    std::fs::write(
        dir.path().join("identity-rules.toml"),
        RULES.replace("remote", "tiny"),
    )
    .unwrap();
    let r = replicas::replica(dir.path(), &env).await;
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let (root, alice_token, bob_token) = (token("root"), token("alice"), token("bob"));
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{}/api/servers", r.url))
        .bearer_auth(&root)
        .json(&json!({"name": "tiny", "transport": "streamable-http", "url": format!("{mcp_base}/mcp"),
                      "env": {"OAUTH_PER_USER": "on"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    // The shared connection: the server's own authorization, by the admin (at-1 expires at once, at-2 is used).
    let started: Value = http
        .post(format!("{}/api/servers/tiny/auth", r.url))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let own_url = started["authUrl"].as_str().expect("authUrl").to_owned();
    *valid.lock().unwrap() = "at-2".into();
    let finished = http
        .post(format!("{}/api/servers/tiny/auth/finish", r.url))
        .bearer_auth(&root)
        .json(&json!({"callback": format!("?code=c&state={}", state_of(&own_url))}))
        .send()
        .await
        .unwrap();
    assert!(
        finished.status().is_success(),
        "{}",
        finished.text().await.unwrap()
    );

    // Alice and Bob have no token of their own: each sees `authenticating` with a URL of their own.
    let servers_url = format!("{}/api/servers", r.url);
    let list = |t: String| {
        let (http, url) = (http.clone(), servers_url.clone());
        async move { get_json(&http, &url, &t).await }
    };
    let row = |v: Value| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "tiny")
            .cloned()
            .expect("tiny is listed")
    };
    let a = row(list(alice_token.clone()).await);
    assert_eq!(a["status"], "authenticating", "{a}");
    assert_eq!(a["auth_url"], a["authUrl"], "{a}");
    let url_a = a["authUrl"].as_str().expect("alice's authUrl").to_owned();
    assert_ne!(state_of(&url_a), state_of(&own_url), "not the server's own");
    let b = row(list(bob_token.clone()).await);
    let url_b = b["authUrl"].as_str().expect("bob's authUrl").to_owned();
    assert_ne!(
        state_of(&url_a),
        state_of(&url_b),
        "each user has their own"
    );
    // The dashboard's stream shows each user their own authorization too, admins included (issue 30): the `state`
    // and `registry` snapshots name the viewer's own URL and no one else's.
    let ws_url = format!("{}/ws", r.url.replace("http://", "ws://"));
    let views = [
        (&alice_token, Some(&url_a), [&url_b, &own_url]),
        (&bob_token, Some(&url_b), [&url_a, &own_url]),
        (&root, None, [&url_a, &url_b]),
    ];
    for (t, mine, others) in views {
        let (messages, rows) = ws_rows(&ws_url, t).await;
        for row in &rows {
            assert_eq!(row["status"], "authenticating", "{row}");
            let url = row["authUrl"].as_str().expect("an authUrl of their own");
            if let Some(mine) = mine {
                assert_eq!(url, mine.as_str(), "{row}");
            }
        }
        for other in others {
            assert!(
                !messages.contains(&state_of(other)),
                "a stream shows no one else's URL: {messages}"
            );
        }
    }
    let item = get_json(&http, &format!("{}/api/servers/tiny", r.url), &alice_token).await;
    assert_eq!(
        item["authUrl"],
        url_a.as_str(),
        "the same pending URL: {item}"
    );
    let alice = client_as(&r.url, &alice_token).await;
    let bob = client_as(&r.url, &bob_token).await;
    let listed = registry(&alice, json!({"action": "list"})).await;
    let mine = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tiny")
        .cloned()
        .unwrap();
    assert_eq!(mine["authUrl"], url_a.as_str(), "{mine}");
    assert_eq!(mine["status"], "authenticating");
    let status = registry(&alice, json!({"action": "status"})).await;
    assert_eq!(
        status["authenticating"],
        json!([{"name": "tiny", "state": "authenticating", "authUrl": url_a}]),
        "{status}"
    );
    let bob_status = registry(&bob, json!({"action": "status"}))
        .await
        .to_string();
    assert!(
        !bob_status.contains(&state_of(&url_a)) && !bob_status.contains(&state_of(&own_url)),
        "bob is shown no one else's URL: {bob_status}"
    );

    // Alice authorizes (the browser's redirect to the callback); her token (at-3) is hers alone.
    let cb = http
        .get(format!(
            "{}/oauth/callback/tiny?code=a&state={}",
            r.url,
            state_of(&url_a)
        ))
        .send()
        .await
        .unwrap();
    assert!(cb.status().is_success(), "{}", cb.text().await.unwrap());
    *valid.lock().unwrap() = "at-2,at-3".into();
    let a = row(list(alice_token.clone()).await);
    assert_eq!(a["status"], "ready", "the server's own state: {a}");
    assert!(a.get("authUrl").is_none(), "{a}");
    assert!(a["auth_url"].is_null(), "{a}");
    let r2 = alice
        .0
        .call_tool(CallToolRequestParams::new("tiny__ping"))
        .await
        .unwrap();
    assert_eq!(harness::text(&r2), "pong");
    let (messages, rows) = ws_rows(&ws_url, &alice_token).await;
    for row in &rows {
        assert_eq!(row["status"], "ready", "alice's stream: {row}");
        assert!(row.get("authUrl").is_none(), "{row}");
    }
    assert!(!messages.contains(&state_of(&url_b)), "{messages}");
    let b = row(list(bob_token.clone()).await);
    assert_eq!(b["status"], "authenticating", "bob still has to: {b}");
    assert_eq!(b["authUrl"], url_b.as_str());

    // A read by Bob, who has no token of his own, is answered with his own authorization URL, as a call is.
    let read = bob
        .0
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agent-discover://tiny/notes",
        ))
        .await
        .expect_err("bob may not read without his own token");
    let text = format!("{read:?}");
    let bob_suffix = agent_discover::oauth::user_suffix(&format!("{}#bob", auth.issuer));
    assert!(text.contains("/authorize?"), "{text}");
    assert!(text.contains(&bob_suffix[1..]), "bob's own URL: {text}");
    assert!(!text.contains(&state_of(&url_a)), "{text}");
}

/// Registers `remote` (the fixture at `url`) through the replica at `base` as the admin, exchanging each caller's
/// token at the test AS for one whose audience is `remote-api`, and activates it.
async fn register_exchanging(auth: &TestAs, base: &str, admin: &str, url: &str) {
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{base}/api/servers"))
        .bearer_auth(admin)
        .json(
            &json!({"name": "remote", "transport": "streamable-http", "url": url,
                      "env": {"OAUTH_GRANT": "token_exchange",
                              "OAUTH_EXCHANGE_TOKEN_ENDPOINT": format!("{}/token", auth.issuer),
                              "OAUTH_EXCHANGE_AUDIENCE": "remote-api",
                              "OAUTH_CLIENT_ID": EXCHANGE_CLIENT.0,
                              "OAUTH_CLIENT_SECRET": EXCHANGE_CLIENT.1}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{base}/api/servers/remote/activate"))
        .bearer_auth(admin)
        .send()
        .await
        .unwrap();
    assert!(
        activated.status().is_success(),
        "{}",
        activated.text().await.unwrap()
    );
}

/// Asks the remote server (as `c`) what it noted until `done` holds of it (bounded); the last answer.
async fn noted_until(c: &Client, done: impl Fn(&[String]) -> bool) -> Value {
    let start = std::time::Instant::now();
    loop {
        let seen = traced(c).await;
        let noted: Vec<String> = serde_json::from_value(seen["subscribed_with"].clone()).unwrap();
        if done(&noted) {
            return seen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the remote server never noted what was expected: {noted:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `remote__touch` of the fixture's resource as `c`: how many listen streams the server told.
async fn touch(c: &Client) -> String {
    let r =
        c.0.call_tool(
            CallToolRequestParams::new("remote__touch")
                .with_arguments(serde_json::from_value(json!({"uri": RESOURCE})).unwrap()),
        )
        .await
        .expect("remote__touch");
    harness::text(&r)
}

/// The fixture's resource, under its own URI.
const RESOURCE: &str = "fixture://resource/1";

/// How many `notifications/resources/updated` `c` received.
fn updates(c: &Client) -> usize {
    c.1.resources_updated.lock().unwrap().len()
}

/// A handshake-era client that declares the tasks extension, over Streamable HTTP with a bearer token.
#[derive(Clone)]
struct TaskUser;

impl rmcp::ClientHandler for TaskUser {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        use rmcp::model::*;
        ClientConfig::new(
            ClientCapabilities::builder().enable_tasks().build(),
            Implementation::new("tasks-user", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

async fn task_user(
    url: &str,
    token: &str,
) -> rmcp::service::RunningService<rmcp::RoleClient, TaskUser> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(token),
    );
    TaskUser.serve(transport).await.expect("initialize")
}

/// Issue 30 with a 2026-07-28 remote server (`--era modern`: no `initialize`, so no `resources/subscribe`; a resource
/// is followed on a `subscriptions/listen` stream) that exchanges each caller's token: two users subscribing to the
/// same resource get a listen stream each, opened with that user's exchanged token; an update reaches each user's
/// subscriber once; one user leaving ends their stream only, the last leaving ends the other. A task made by a user's
/// call is that user's: their `tasks/get` carries their token, another user's is refused and never reaches the server.
#[tokio::test]
#[allow(deprecated)] // resources/subscribe: legacy-only in rmcp; these clients are legacy, the child 2026-07-28.
async fn a_2026_childs_listen_streams_and_tasks_are_each_users_own() {
    let auth = TestAs::start(users(), "mcp").await;
    let (_fixture, remote) = traced_remote_with(&["--era", "modern"]).await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    std::fs::write(dir.path().join("identity-rules.toml"), RULES).unwrap();
    let r = replicas::replica(dir.path(), &env).await;
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let (root, alice_token, bob_token) = (token("root"), token("alice"), token("bob"));
    register_exchanging(&auth, &r.url, &root, &remote).await;

    let alice = client_as(&r.url, &alice_token).await;
    let bob = client_as(&r.url, &bob_token).await;
    let watched = format!("agent-discover://remote/{RESOURCE}");
    for c in [&alice, &bob] {
        c.0.subscribe(rmcp::model::SubscribeRequestParams::new(&watched))
            .await
            .expect("a user subscribes");
    }
    let xs = auth.exchanges();
    assert_eq!(xs.len(), 2, "one exchange per user: {xs:?}");
    let of = |sub: &str| xs.iter().find(|x| x.sub == sub).expect(sub).issued.clone();
    let (xa, xb) = (of("alice"), of("bob"));
    let (listen_a, listen_b) = (format!("listen Bearer {xa}"), format!("listen Bearer {xb}"));
    let seen = noted_until(&alice, |n| n.contains(&listen_a) && n.contains(&listen_b)).await;
    let noted: Vec<String> = serde_json::from_value(seen["subscribed_with"].clone()).unwrap();
    assert_eq!(
        noted.iter().filter(|n| n.starts_with("listen ")).count(),
        2,
        "one stream per user, each opened with that user's own token: {noted:?}"
    );

    // An update reaches each user's subscriber, once.
    assert_eq!(touch(&alice).await, "2", "two streams follow the resource");
    harness::wait_for(Duration::from_secs(20), || {
        updates(&alice) >= 1 && updates(&bob) >= 1
    })
    .await;
    assert_eq!(
        alice.1.resources_updated.lock().unwrap()[0],
        watched,
        "under the exposed URI"
    );

    // Bob leaves: his stream ends, Alice's goes on.
    bob.0
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(&watched))
        .await
        .expect("bob unsubscribes");
    let end_b = format!("listen-end Bearer {xb}");
    let seen = noted_until(&alice, |n| n.contains(&end_b)).await;
    assert!(
        !seen["subscribed_with"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .is_some_and(|n| n.starts_with("listen-end Bearer ") && n != end_b)),
        "only bob's stream ended: {seen}"
    );
    assert_eq!(touch(&alice).await, "1", "alice's stream still follows it");
    harness::wait_for(Duration::from_secs(20), || updates(&alice) >= 2).await;
    // A round trip through the front after the update: anything else on its way has arrived.
    traced(&bob).await;
    assert_eq!(updates(&alice), 2, "each update once for alice");
    assert_eq!(updates(&bob), 1, "bob had the first update only, once");

    // The last subscriber leaves: the last stream ends.
    alice
        .0
        .unsubscribe(rmcp::model::UnsubscribeRequestParams::new(&watched))
        .await
        .expect("alice unsubscribes");
    let end_a = format!("listen-end Bearer {xa}");
    noted_until(&alice, |n| n.contains(&end_a)).await;
    assert_eq!(touch(&alice).await, "0", "no stream follows the resource");

    // Tasks: alice's task is hers.
    let alice_t = task_user(&r.url, &alice_token).await;
    let bob_t = task_user(&r.url, &bob_token).await;
    let params = CallToolRequestParams::new("remote__slow_compute")
        .with_arguments(serde_json::from_value(json!({"seconds": 0, "label": "a"})).unwrap());
    let id = match alice_t
        .peer()
        .call_tool_once(params)
        .await
        .expect("tools/call")
    {
        rmcp::model::CallToolResponse::Task(created) => created.task.task_id,
        other => panic!("no task: {other:?}"),
    };
    let start = std::time::Instant::now();
    let done = loop {
        let got = alice_t
            .peer()
            .get_task(rmcp::model::GetTaskParams::new(&id))
            .await
            .expect("alice's tasks/get");
        if got.task.status().is_terminal() {
            break got;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the task never ended"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let detailed = serde_json::to_value(&done.task).unwrap();
    assert!(
        detailed.to_string().contains("computed a"),
        "the result comes with tasks/get: {detailed}"
    );
    let refused = bob_t
        .peer()
        .get_task(rmcp::model::GetTaskParams::new(&id))
        .await
        .expect_err("bob may not read alice's task");
    assert!(refused.to_string().contains("unknown task"), "{refused}");
    bob_t
        .peer()
        .cancel_task(rmcp::model::CancelTaskParams::new(&id))
        .await
        .expect_err("nor cancel it");
    let seen = traced(&alice).await;
    let tasks: Vec<String> = serde_json::from_value::<Vec<String>>(seen["subscribed_with"].clone())
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("tasks/"))
        .collect();
    assert!(!tasks.is_empty(), "{seen}");
    assert!(
        tasks.iter().all(|n| n == &format!("tasks/get Bearer {xa}")),
        "every tasks request that reached the server was alice's, with her token: {tasks:?}"
    );
}

/// The first `state` and `registry` messages of a `/ws` stream opened with `token` (both as text), and the row of
/// `tiny` in each.
async fn ws_rows(ws_url: &str, token: &str) -> (String, Vec<Value>) {
    let bearer = format!("Bearer {token}");
    let mut ws = crate::http::ws_connect(ws_url, &[("authorization", bearer.as_str())])
        .await
        .expect("a user opens /ws");
    let limit = Duration::from_secs(20);
    let state = crate::http::next_message(&mut ws, limit, |m| m["type"] == "state").await;
    let registry = crate::http::next_message(&mut ws, limit, |m| m["type"] == "registry").await;
    let tiny = |m: &Value| {
        m["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "tiny")
            .cloned()
            .unwrap_or_else(|| panic!("tiny is listed: {m}"))
    };
    (
        format!("{state}\n{registry}"),
        vec![tiny(&state), tiny(&registry)],
    )
}

/// The rules file is read again when it changes (issue 30): a user's tools follow it on the running front, and a file
/// that does not read keeps the rules in force and says so on stderr.
#[tokio::test]
async fn the_rules_file_is_read_again_when_it_changes() {
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    let rules = dir.path().join("identity-rules.toml");
    let mut cmd = harness::command(dir.path(), &["serve", "--port", "0"]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let stderr = child.stderr.take().unwrap();
    let url = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("serve printed no URL")
        .unwrap()
        .expect("serve exited");
    let r = replicas::Replica {
        child,
        url: url.trim_end_matches('/').to_owned(),
    };
    // stderr, line by line, for the reload's own messages.
    let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let mut err = tokio::io::BufReader::new(stderr).lines();
    tokio::spawn(async move {
        while let Ok(Some(l)) = err.next_line().await {
            let _ = tx.send(l);
        }
    });
    let http = reqwest::Client::new();
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let root = token("root");
    crate::identity::register(&http, &r, &root, "one").await;
    crate::identity::register(&http, &r, &root, "two").await;
    let alice = client_as(&r.url, &token("alice")).await;
    let servers_of = |tools: Vec<String>| {
        let mut s: Vec<String> = tools
            .iter()
            .filter_map(|t| t.split("__").next().map(str::to_owned))
            .filter(|s| s == "one" || s == "two")
            .collect();
        s.dedup();
        s
    };
    let before = servers_of(crate::identity::tool_names(&alice.0).await);
    assert_eq!(before, ["one"], "dev sees one at start");

    // The file now gives dev the server `two` instead (written whole, then renamed over the old one).
    let write = |text: &str| {
        let tmp = dir.path().join("rules.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &rules).unwrap();
    };
    write(&crate::identity::RULES.replace(
        "[groups.dev]\nservers = [\"one\"]",
        "[groups.dev]\nservers = [\"two\"]",
    ));
    // Woken by the tools/list_changed the reload sends.
    replicas::wait_tools(&alice.0, &alice.1, "alice's tools follow the file", |t| {
        servers_of(t.to_vec()) == ["two"]
    })
    .await;
    wait_line(&mut lines, "identity rules reloaded").await;
    let hidden = alice
        .0
        .call_tool(
            CallToolRequestParams::new("one__echo")
                .with_arguments(serde_json::from_value(json!({"text": "x"})).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(harness::parse(&hidden)["kind"], "tool_not_found");

    // A file that does not read keeps the rules in force.
    write("admin_groups = [\"admins\"\n[groups.dev");
    wait_line(&mut lines, "the previous rules stay").await;
    let kept = servers_of(crate::identity::tool_names(&alice.0).await);
    assert_eq!(kept, ["two"], "the last good rules stay");
}

/// Waits (bounded) for a line of `lines` that contains `needle`.
async fn wait_line(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>, needle: &str) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = lines.recv().await {
            if l.contains(needle) {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "no stderr line with `{needle}` within 30 s"
    );
}

/// `agent-discover status` with identity on and no shared call log reads the serving front's call log with the token
/// it is given (`--token` or `AGENT_DISCOVER_TOKEN`), and shows who made each call; without one it says how to.
#[tokio::test]
async fn status_reads_the_fronts_call_log_with_a_token() {
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    let r = replicas::replica(dir.path(), &env).await;
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let http = reqwest::Client::new();
    crate::identity::register(&http, &r, &token("root"), "one").await;
    let alice = client_as(&r.url, &token("alice")).await;
    let said = alice
        .0
        .call_tool(
            CallToolRequestParams::new("one__echo")
                .with_arguments(serde_json::from_value(json!({"text": "hi"})).unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(harness::text(&said), "hi");
    let port = r.url.rsplit(':').next().unwrap().to_owned();
    let status = |with: Option<String>| {
        let mut cmd = harness::command(dir.path(), &["status", "--json", "--port", &port]);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        if let Some(t) = with {
            cmd.env("AGENT_DISCOVER_TOKEN", t);
        }
        async move {
            let out = cmd.output().await.unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice::<Value>(&out.stdout).unwrap()["calls"].clone()
        }
    };
    let calls = status(Some(token("root"))).await;
    let entry = calls["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["tool"] == "echo"))
        .unwrap_or_else(|| panic!("the echo call is listed: {calls}"))
        .clone();
    assert_eq!(entry["user"], format!("{}#alice", auth.issuer), "{entry}");
    assert_eq!(entry["client"], "test-client", "{entry}");
    let refused = status(None).await;
    assert!(
        refused["unavailable"]
            .as_str()
            .is_some_and(|u| u.contains("--token")),
        "{refused}"
    );
}
