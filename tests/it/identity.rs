//! Issue 30, identity for teams (server side): `serve` as an OAuth-protected resource against a test authorization
//! server (`ident_as.rs`). RFC 9728 metadata and the 401/403 challenges for missing, expired, wrong-audience,
//! wrong-issuer, badly signed, unknown-key and under-scoped tokens; opaque tokens by introspection; two users in
//! different groups on two replicas of one PostgreSQL registry, who see and may call different servers, a hidden
//! tool answered like an unknown one, and a call log that names who made each call and shows a user only their own.

use std::time::Duration;

use rmcp::model::*;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::harness;
use crate::ident_as::{Mint, RS_CLIENT, TestAs, User};
use crate::pg;
use crate::replicas::{self, Replica};

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

pub fn users() -> Vec<User> {
    vec![
        User {
            sub: "alice",
            groups: &["dev"],
        },
        User {
            sub: "bob",
            groups: &["ops"],
        },
        User {
            sub: "root",
            groups: &["admins"],
        },
        User {
            sub: "eve",
            groups: &["visitors"],
        },
    ]
}

/// The identity settings: `dev` sees server `one`, `ops` sees `two` but not its `add` tool, `admins` everything.
pub const RULES: &str = r#"
admin_groups = ["admins"]
[groups.dev]
servers = ["one"]
[groups.ops]
servers = ["two"]
tools = ["two__echo"]
"#;

/// The environment of a protected replica of the test AS `auth`.
pub fn protected_env(auth: &TestAs, dir: &std::path::Path) -> Vec<(&'static str, String)> {
    let file = dir.join("identity-rules.toml");
    std::fs::write(&file, RULES).unwrap();
    vec![
        ("AGENT_DISCOVER_AUTH_ISSUER", auth.issuer.clone()),
        ("AGENT_DISCOVER_AUTH_CONFIG", file.display().to_string()),
        ("AGENT_DISCOVER_AUTH_REQUIRED_SCOPES", "mcp".into()),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_URL",
            format!("{}/introspect", auth.issuer),
        ),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_ID",
            RS_CLIENT.0.into(),
        ),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_SECRET",
            RS_CLIENT.1.into(),
        ),
    ]
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// POSTs an initialize to `url` with `token`; the status and the `WWW-Authenticate` header.
async fn init_with(http: &reqwest::Client, url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INIT);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (resp.status().as_u16(), challenge)
}

/// Metadata, challenges and every kind of bad token, on one replica (SQLite).
#[tokio::test]
async fn the_front_is_a_protected_resource() {
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let r = replicas::replica(dir.path(), &protected_env(&auth, dir.path())).await;
    let http = reqwest::Client::new();
    let mcp = format!("{}/mcp", r.url);

    // RFC 9728 metadata for /mcp, a per-server endpoint and the base; no token needed.
    let meta: Value = http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            r.url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(meta["resource"], mcp.as_str(), "{meta}");
    assert_eq!(meta["authorization_servers"], json!([auth.issuer]));
    assert_eq!(meta["scopes_supported"], json!(["mcp"]));
    let per_server: Value = http
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp/servers/one",
            r.url
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(per_server["resource"], format!("{}/mcp/servers/one", r.url));

    // No token: 401 naming the metadata, without an error code.
    let (status, challenge) = init_with(&http, &mcp, None).await;
    assert_eq!(status, 401);
    let meta_url = format!("{}/.well-known/oauth-protected-resource/mcp", r.url);
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(&format!("resource_metadata=\"{meta_url}\"")),
        "{challenge}"
    );
    assert!(!challenge.contains("error="), "{challenge}");
    // The REST API and the WebSocket's route are guarded the same way.
    let rest = http
        .get(format!("{}/api/servers", r.url))
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 401);
    let ws = http.get(format!("{}/ws", r.url)).send().await.unwrap();
    assert_eq!(ws.status(), 401);
    // The load balancer's health check needs none.
    let health = http.get(format!("{}/health", r.url)).send().await.unwrap();
    assert_eq!(health.status(), 200);

    // Good tokens, signed ES256 and RS256.
    let good = auth.mint_for("alice", &mcp);
    assert_eq!(init_with(&http, &mcp, Some(&auth.sign(&good))).await.0, 200);
    let rs = Mint {
        alg: "RS256",
        ..good.clone()
    };
    assert_eq!(init_with(&http, &mcp, Some(&auth.sign(&rs))).await.0, 200);
    // `aud` as an array naming this resource among others.
    let arr = Mint {
        aud: json!(["https://elsewhere.example", mcp]),
        ..good.clone()
    };
    assert_eq!(init_with(&http, &mcp, Some(&auth.sign(&arr))).await.0, 200);

    // Bad tokens: 401 invalid_token, each with the metadata URL.
    // One character inside the signature changed (the last one may carry padding bits).
    let mut tampered = auth.sign(&good).into_bytes();
    let at = tampered.len() - 10;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let bad: Vec<(&str, String)> = vec![
        (
            "expired",
            auth.sign(&Mint {
                exp_in: -600,
                ..good.clone()
            }),
        ),
        (
            "wrong audience",
            auth.sign(&Mint {
                aud: json!("http://127.0.0.1:1/mcp"),
                ..good.clone()
            }),
        ),
        (
            "wrong issuer",
            auth.sign(&Mint {
                iss: Some("http://evil.example".into()),
                ..good.clone()
            }),
        ),
        ("bad signature", tampered),
        (
            "unknown kid",
            auth.sign(&Mint {
                stray_kid: true,
                ..good.clone()
            }),
        ),
        ("unknown opaque token", "not-a-jwt-and-not-issued".into()),
    ];
    for (what, token) in &bad {
        let (status, challenge) = init_with(&http, &mcp, Some(token)).await;
        assert_eq!(status, 401, "{what}: {challenge}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(
            challenge.contains(&format!("resource_metadata=\"{meta_url}\"")),
            "{what}: {challenge}"
        );
    }
    // A token for another endpoint of this front is not one for /mcp... but a per-server endpoint's own token is.
    let for_one = auth.mint_for("root", &format!("{}/mcp/servers/one", r.url));
    assert_eq!(
        init_with(&http, &mcp, Some(&auth.sign(&for_one))).await.0,
        401
    );

    // A valid token without the required scope: 403 insufficient_scope naming it.
    let unscoped = auth.sign(&Mint {
        scope: "profile".into(),
        ..good.clone()
    });
    let (status, challenge) = init_with(&http, &mcp, Some(&unscoped)).await;
    assert_eq!(status, 403, "{challenge}");
    assert!(
        challenge.contains("error=\"insufficient_scope\""),
        "{challenge}"
    );
    assert!(challenge.contains("scope=\"mcp\""), "{challenge}");

    // An opaque token, checked by introspection (and its answer cached: a second request works the same).
    let opaque = auth.opaque(&good);
    assert_eq!(init_with(&http, &mcp, Some(&opaque)).await.0, 200);
    assert_eq!(init_with(&http, &mcp, Some(&opaque)).await.0, 200);
    let expired_opaque = auth.opaque(&Mint {
        exp_in: -600,
        ..good.clone()
    });
    assert_eq!(init_with(&http, &mcp, Some(&expired_opaque)).await.0, 401);

    // A user who is not an admin may not change the registry through REST.
    let alice = auth.sign(&auth.mint_for("alice", &mcp));
    let create = http
        .post(format!("{}/api/servers", r.url))
        .bearer_auth(&alice)
        .json(&json!({"name": "x", "command": "true"}))
        .send()
        .await
        .unwrap();
    assert_eq!(create.status(), 403);
    // The dashboard's login: `/?token=` validated, kept as a cookie; a bad one is refused.
    let no_redirect = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = no_redirect
        .get(format!(
            "{}/?token={}",
            r.url,
            auth.sign(&auth.mint_for("root", &mcp))
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);
    assert!(
        login.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("HttpOnly")
    );
    let refused = no_redirect
        .get(format!("{}/?token=forged", r.url))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
}

/// An MCP client of `url`'s aggregated endpoint that sends `token`.
pub type Client = (
    rmcp::service::RunningService<rmcp::RoleClient, harness::TestClient>,
    std::sync::Arc<harness::Seen>,
);

pub async fn client_as(url: &str, token: &str) -> Client {
    use rmcp::ServiceExt;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(token),
    );
    let seen = std::sync::Arc::new(harness::Seen::default());
    let client = harness::TestClient {
        seen: seen.clone(),
        sampling_reply: None,
    }
    .serve(transport)
    .await
    .expect("initialize");
    (client, seen)
}

pub(crate) async fn tool_names(
    c: &rmcp::service::RunningService<rmcp::RoleClient, harness::TestClient>,
) -> Vec<String> {
    c.list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// Registers the fixture as `name` through `r` as the admin and activates it.
pub(crate) async fn register(http: &reqwest::Client, r: &Replica, admin: &str, name: &str) {
    let created = http
        .post(format!("{}/api/servers", r.url))
        .bearer_auth(admin)
        .json(&json!({"name": name, "command": harness::fixture(),
                      "args": ["--name", name, "--resources", "2", "--prompts", "1"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{}/api/servers/{name}/activate", r.url))
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

/// `c`'s tool list once `pred` holds (bounded, woken by `tools/list_changed`): the other replica follows the
/// shared active flags.
async fn wait_listed(c: &Client, what: &str, pred: impl Fn(&[String]) -> bool) -> Vec<String> {
    replicas::wait_tools(&c.0, &c.1, what, &pred).await;
    tool_names(&c.0).await
}

async fn logs(http: &reqwest::Client, url: &str, token: &str) -> Vec<Value> {
    let v: Value = http
        .get(format!("{url}/api/logs?limit=100"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["entries"].as_array().cloned().unwrap_or_default()
}

/// Two users on two replicas of one PostgreSQL registry: different tool lists, a hidden tool refused like an unknown
/// one, and a call log that names each user and shows a user only their own calls.
#[tokio::test]
async fn two_users_on_two_postgres_replicas() {
    let auth = TestAs::start(users(), "mcp").await;
    let server = pg::server();
    let db = server.new_database();
    let mut rs = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let mut env = protected_env(&auth, dir.path());
        env.push(("AGENT_DISCOVER_DATABASE_URL", db.clone()));
        env.push(("AGENT_DISCOVER_MASTER_KEY", KEY.into()));
        env.push(("AGENT_DISCOVER_REPLICA", format!("r{i}")));
        rs.push(replicas::replica(dir.path(), &env).await);
        dirs.push(dir);
    }
    let http = reqwest::Client::new();
    let token = |sub: &str, r: &Replica| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    register(&http, &rs[0], &token("root", &rs[0]), "one").await;
    register(&http, &rs[0], &token("root", &rs[0]), "two").await;

    // Alice (dev) on the first replica, Bob (ops) on the second.
    let alice = client_as(&rs[0].url, &token("alice", &rs[0])).await;
    let bob = client_as(&rs[1].url, &token("bob", &rs[1])).await;
    let admin = client_as(&rs[1].url, &token("root", &rs[1])).await;
    let all = wait_listed(&admin, "the admin sees both servers on r1", |t| {
        t.iter().any(|n| n == "one__echo") && t.iter().any(|n| n == "two__add")
    })
    .await;
    assert!(all.iter().any(|n| n == "two__echo"), "{all:?}");
    let a = wait_listed(&alice, "alice's tools", |t| {
        t.iter().any(|n| n == "one__echo")
    })
    .await;
    assert!(
        a.iter().all(|n| !n.starts_with("two__")),
        "alice sees two: {a:?}"
    );
    let b = wait_listed(&bob, "bob's tools", |t| t.iter().any(|n| n == "two__echo")).await;
    assert!(
        b.iter().all(|n| !n.starts_with("one__")),
        "bob sees one: {b:?}"
    );
    assert!(
        !b.iter().any(|n| n == "two__add"),
        "two__add is not among ops' tools: {b:?}"
    );

    // Calls each may make.
    let call = |name: &str, text: &str| {
        CallToolRequestParams::new(name.to_owned())
            .with_arguments(serde_json::from_value(json!({"text": text})).unwrap())
    };
    let (alice, bob, eve_token) = (&alice.0, &bob.0, token("eve", &rs[0]));
    // Alice's dashboard stream on r0: only the servers she may see, no approvals, only her own calls' entries.
    let ws_url = format!("{}/ws", rs[0].url.replace("http://", "ws://"));
    let bearer = format!("Bearer {}", token("alice", &rs[0]));
    let mut ws = crate::http::ws_connect(&ws_url, &[("authorization", bearer.as_str())])
        .await
        .expect("alice opens /ws");
    let state =
        crate::http::next_message(&mut ws, Duration::from_secs(20), |m| m["type"] == "state").await;
    let names: Vec<&str> = state["servers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["one"], "{state}");
    assert_eq!(state["approvals"], json!([]));
    let bob_r0 = client_as(&rs[0].url, &token("bob", &rs[0])).await;
    let r = bob_r0
        .0
        .call_tool(call("two__echo", "bob on r0"))
        .await
        .unwrap();
    assert_eq!(harness::text(&r), "bob on r0");
    let r = alice
        .call_tool(call("one__echo", "from alice"))
        .await
        .unwrap();
    assert_eq!(harness::text(&r), "from alice");
    let alice_key = format!("{}#alice", auth.issuer);
    let mine = crate::http::next_message(&mut ws, Duration::from_secs(20), |m| {
        assert!(
            m["type"] != "log_entry" || m["entry"]["user"] == alice_key.as_str(),
            "alice's stream carries another's call: {m}"
        );
        m["type"] == "log_entry"
    })
    .await;
    assert_eq!(mine["entry"]["tool"], "echo");
    let r = bob.call_tool(call("two__echo", "from bob")).await.unwrap();
    assert_eq!(harness::text(&r), "from bob");

    // A hidden tool called by name gets exactly what a tool that does not exist gets (its name aside).
    let hidden = alice.call_tool(call("two__echo", "x")).await.unwrap();
    let missing = alice.call_tool(call("nosuch__echo", "x")).await.unwrap();
    let (hidden, missing) = (harness::parse(&hidden), harness::parse(&missing));
    assert_eq!(hidden["kind"], "tool_not_found", "{hidden}");
    assert_eq!(hidden["code"], missing["code"]);
    assert_eq!(hidden["hint"], missing["hint"]);
    assert!(
        !hidden.to_string().contains("two__add"),
        "suggestions leak: {hidden}"
    );
    // Also through the registry tool's proxy_call and get_schema, and the per-server endpoint.
    let via_registry = alice
        .call_tool(
            CallToolRequestParams::new("registry").with_arguments(
                serde_json::from_value(json!({"action": "proxy_call", "call_as": "two__echo", "arguments": {"text": "x"}})).unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(harness::parse(&via_registry)["kind"], "tool_not_found");
    let (status, _) = init_with(
        &http,
        &format!("{}/mcp/servers/two", rs[0].url),
        Some(&token("alice", &rs[0])),
    )
    .await;
    assert_eq!(
        status, 404,
        "a hidden server's endpoint is as unknown as a missing one"
    );
    let (status, _) = init_with(
        &http,
        &format!("{}/mcp/servers/one", rs[0].url),
        Some(&token("alice", &rs[0])),
    )
    .await;
    assert_eq!(status, 200);
    // Resources, prompts and code mode's declarations: only the visible server's, and a hidden one's resource is
    // as unknown as a missing one.
    let uris: Vec<String> = alice
        .list_all_resources()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.uri.clone())
        .filter(|u| u.contains("://one/") || u.contains("://two/"))
        .collect();
    assert!(uris.iter().any(|u| u.contains("://one/")), "{uris:?}");
    assert!(!uris.iter().any(|u| u.contains("://two/")), "{uris:?}");
    let prompts: Vec<String> = alice
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(
        prompts.iter().any(|p| p.starts_with("one__"))
            && !prompts.iter().any(|p| p.starts_with("two__")),
        "{prompts:?}"
    );
    let hidden_read = alice
        .read_resource(ReadResourceRequestParams::new(
            uris[0].replace("://one/", "://two/"),
        ))
        .await
        .unwrap_err()
        .to_string();
    let missing_read = alice
        .read_resource(ReadResourceRequestParams::new(
            uris[0].replace("://one/", "://nosuch/"),
        ))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        hidden_read.replace("://two/", "://X/"),
        missing_read.replace("://nosuch/", "://X/")
    );
    // Completions of a hidden server's prompt, and subscriptions to its resources, answer as for missing ones.
    #[allow(deprecated)] // resources/subscribe: a handshake-era client, as this one is
    let subscribe = |uri: String| alice.subscribe(SubscribeRequestParams::new(uri));
    let complete = |name: &str| {
        CompleteRequestParams::new(Reference::for_prompt(name), ArgumentInfo::new("topic", "a"))
    };
    let hidden = alice
        .complete(complete("two__prompt_1"))
        .await
        .unwrap_err()
        .to_string();
    let missing = alice
        .complete(complete("nosuch__prompt_1"))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        hidden.replace("two__", "X__"),
        missing.replace("nosuch__", "X__")
    );
    let hidden = subscribe(uris[0].replace("://one/", "://two/"))
        .await
        .unwrap_err()
        .to_string();
    let missing = subscribe(uris[0].replace("://one/", "://nosuch/"))
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        hidden.replace("://two/", "://X/"),
        missing.replace("://nosuch/", "://X/")
    );
    let api = alice
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(serde_json::from_value(json!({"action": "script_api"})).unwrap()),
        )
        .await
        .unwrap();
    let api = harness::text(&api);
    assert!(api.contains("one__echo") || api.contains("echo"), "{api}");
    assert!(
        !api.contains("two__"),
        "code mode declares a hidden server's tools: {api}"
    );
    // Changing the registry needs an administrator.
    let refused = alice
        .call_tool(CallToolRequestParams::new("registry").with_arguments(
            serde_json::from_value(json!({"action": "deactivate", "name": "one"})).unwrap(),
        ))
        .await
        .unwrap();
    assert!(
        harness::text(&refused).contains("administrator"),
        "{}",
        harness::text(&refused)
    );
    // REST lists only the servers a user may see.
    let listed: Vec<Value> = http
        .get(format!("{}/api/servers", rs[1].url))
        .bearer_auth(token("bob", &rs[1]))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["two"]);
    // A user in no listed group (no default group configured) sees no server.
    let eve = client_as(&rs[0].url, &eve_token).await;
    assert!(tool_names(&eve.0).await.iter().all(|n| !n.contains("__")));

    // The shared call log names who made each call and where; a user reads only their own.
    let bob_key = format!("{}#bob", auth.issuer);
    // A replica appends its calls to the shared log in batches, and at once when its log is read: reading r1's first
    // makes bob's call there visible to r0.
    logs(&http, &rs[1].url, &token("root", &rs[1])).await;
    let rows = logs(&http, &rs[0].url, &token("root", &rs[0])).await;
    let row = |user: &str, tool: &str| {
        rows.iter()
            .find(|e| e["user"] == user && e["tool"] == tool)
            .cloned()
            .unwrap_or_else(|| panic!("no {tool} call by {user}: {rows:?}"))
    };
    let a = row(&alice_key, "echo");
    assert_eq!(
        (a["server"].as_str(), a["replica"].as_str()),
        (Some("one"), Some("r0"))
    );
    assert_eq!(a["client"], "test-client");
    row(&bob_key, "echo");
    // Bob called through both replicas (their order in the log is not asserted: the two calls can share a timestamp).
    let mut bobs: Vec<_> = rows
        .iter()
        .filter(|e| e["user"] == bob_key.as_str() && e["tool"] == "echo")
        .map(|e| (e["server"].as_str(), e["replica"].as_str()))
        .collect();
    bobs.sort();
    assert_eq!(
        bobs,
        [(Some("two"), Some("r0")), (Some("two"), Some("r1"))],
        "{rows:?}"
    );
    for (who, key, other) in [
        ("alice", &alice_key, &bob_key),
        ("bob", &bob_key, &alice_key),
    ] {
        let mine = logs(&http, &rs[1].url, &token(who, &rs[1])).await;
        assert!(!mine.is_empty(), "{who} sees their calls");
        assert!(
            mine.iter().all(|e| &e["user"] == key),
            "{who} sees another's call: {mine:?}"
        );
        assert!(
            !serde_json::to_string(&mine)
                .unwrap()
                .contains(other.as_str())
        );
    }
    // And cannot read the admin views.
    let status = http
        .get(format!("{}/api/status", rs[0].url))
        .bearer_auth(token("alice", &rs[0]))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 403);
    // `agent-discover status` on the team's database lists the recent calls with user, client and replica.
    let cli = tempfile::tempdir().unwrap();
    let mut cmd = harness::command(cli.path(), &["status"]);
    cmd.env("AGENT_DISCOVER_DATABASE_URL", &db)
        .env("AGENT_DISCOVER_MASTER_KEY", KEY);
    let out = cmd.output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    for (key, call) in [(&alice_key, "one__echo"), (&bob_key, "two__echo")] {
        let (replica, by) = (
            if call == "one__echo" { "r0" } else { "r1" },
            format!("by {key} "),
        );
        let tail = format!("(client test-client) via {replica}");
        let found = text
            .lines()
            .any(|l| l.contains(call) && l.contains(&by) && l.ends_with(&tail));
        assert!(found, "no {call} {by}{tail} in {text}");
    }
    drop(dirs);
}

/// Where scripts/test.sh installs the test dependencies (the SDKs); a missing one fails the test with the fix.
fn cached(rel: &str) -> String {
    let base = std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/cache"));
    let path = base.join(rel);
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh, which installs the test dependencies",
        path.display()
    );
    path.display().to_string()
}

/// Runs an SDK client script; its one JSON line.
async fn sdk_check(program: &str, args: &[&str]) -> Value {
    let out = tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .expect("run the SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?} failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// The official SDKs' OAuth clients (Python and TypeScript) find the authorization server from the front's 401 and
/// metadata, register, authorize with PKCE against the test AS and reach the tools their user's groups may see.
#[tokio::test]
async fn the_official_sdk_clients_authorize_and_see_their_users_tools() {
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let r = replicas::replica(dir.path(), &protected_env(&auth, dir.path())).await;
    let http = reqwest::Client::new();
    let mcp = format!("{}/mcp", r.url);
    let root = auth.sign(&auth.mint_for("root", &mcp));
    register(&http, &r, &root, "one").await;
    register(&http, &r, &root, "two").await;
    let script = |name: &str| format!("{}/tests/interop/{name}", env!("CARGO_MANIFEST_DIR"));

    // Alice (dev) through the Python SDK.
    auth.log_in("alice");
    let py = sdk_check(
        &cached("venv/bin/python"),
        &[
            &script("python_identity_check.py"),
            &mcp,
            "one__echo",
            "py as alice",
        ],
    )
    .await;
    assert_eq!(py["result"], "py as alice", "{py}");
    let tools: Vec<&str> = py["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"one__echo") && !tools.iter().any(|t| t.starts_with("two__")),
        "{py}"
    );

    // Bob (ops) through the TypeScript SDK.
    auth.log_in("bob");
    let ts = sdk_check(
        &cached("node/node_modules/.bin/node"),
        &[
            &script("ts_identity_check.mjs"),
            &cached("node/node_modules/@modelcontextprotocol/sdk"),
            &mcp,
            "two__echo",
            "ts as bob",
        ],
    )
    .await;
    assert_eq!(ts["result"], "ts as bob", "{ts}");
    let tools: Vec<&str> = ts["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"two__echo") && !tools.iter().any(|t| t.starts_with("one__")),
        "{ts}"
    );

    // Each call is logged under the user the authorization server vouched for.
    let rows = logs(&http, &r.url, &root).await;
    for (user, server) in [("alice", "one"), ("bob", "two")] {
        let key = format!("{}#{user}", auth.issuer);
        assert!(
            rows.iter()
                .any(|e| e["user"] == key.as_str() && e["server"] == server),
            "no call of {server} by {user}: {rows:?}"
        );
    }
}
