//! Each user's own keys (team mode with identity): users store their own values of a server's secrets, and their
//! calls run a child of the server started for them alone with those values (stdio: in its environment; Streamable
//! HTTP: in its headers); a user without values of their own uses the shared ones when the server allows it, else
//! gets `personal_key_required`. The children are bounded (the least recently used idle one makes room, else
//! `personal_children_limit`), stopped when idle, on deactivation, and through the real front with the official
//! Python SDK, REST, and the CLI.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::error::Error;
use agent_discover::model::{ServerSpec, Transport};
use agent_discover::proxy::{Caller, PersonalBounds};

use crate::harness::{self, BIN, pid_alive, wait_for};
use crate::ident_as::TestAs;
use crate::identity::{client_as, protected_env, users};
use crate::replicas;

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

fn user(sub: &str) -> Arc<ad_core::identity::Principal> {
    Arc::new(ad_core::identity::Principal {
        sub: sub.into(),
        issuer: "https://idp.test".into(),
        groups: vec![],
        client_id: None,
        scopes: vec![],
        token: None,
    })
}

fn as_user(p: Option<&Arc<ad_core::identity::Principal>>) -> Caller {
    Caller {
        principal: p.cloned(),
        ..Caller::default()
    }
}

fn args(v: Value) -> Option<Map<String, Value>> {
    v.as_object().cloned()
}

/// The fixture's `env` tool: the value of `API_KEY` in the environment of the child that answered.
async fn key_seen(
    app: &App,
    p: Option<&Arc<ad_core::identity::Principal>>,
) -> agent_discover::error::Result<String> {
    let r = app
        .proxy
        .call_tool("one", "env", args(json!({"key": "API_KEY"})), as_user(p))
        .await?;
    Ok(harness::text(&r))
}

async fn stdio_fixture(app: &App) {
    app.registry
        .register(ServerSpec {
            name: "one".into(),
            command: Some(harness::fixture().into()),
            args: vec!["--name".into(), "one".into()],
            ..Default::default()
        })
        .unwrap();
    app.secrets.set("one", "API_KEY", "shared-value").unwrap();
    app.proxy.activate("one").await.unwrap();
}

fn pids(app: &App) -> Vec<u32> {
    app.proxy
        .personal_children(Some("one"))
        .iter()
        .filter_map(|c| c.pid)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_users_call_runs_with_their_own_value_and_others_get_the_shared_one_or_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    stdio_fixture(&app).await;
    let (alice, bob, carol) = (user("alice"), user("bob"), user("carol"));
    app.secrets
        .set_mine("one", &alice.user_key(), "API_KEY", "alice-value")
        .unwrap();
    app.secrets
        .set_mine("one", &bob.user_key(), "API_KEY", "bob-value")
        .unwrap();

    assert_eq!(key_seen(&app, Some(&alice)).await.unwrap(), "alice-value");
    assert_eq!(key_seen(&app, Some(&bob)).await.unwrap(), "bob-value");
    // Carol has none: the shared value (allowed by default); so does a caller without a user.
    assert_eq!(key_seen(&app, Some(&carol)).await.unwrap(), "shared-value");
    assert_eq!(key_seen(&app, None).await.unwrap(), "shared-value");
    assert_eq!(key_seen(&app, Some(&alice)).await.unwrap(), "alice-value");

    // Each user's child is sandboxed with a state directory (HOME) of its own, beside the shared child's.
    let home = |p: Option<Arc<ad_core::identity::Principal>>| {
        let app = app.clone();
        async move {
            let r = app
                .proxy
                .call_tool(
                    "one",
                    "env",
                    args(json!({"key": "HOME"})),
                    as_user(p.as_ref()),
                )
                .await
                .unwrap();
            harness::text(&r)
        }
    };
    let (ha, hb, hs) = (
        home(Some(alice.clone())).await,
        home(Some(bob.clone())).await,
        home(None).await,
    );
    assert!(
        ha.contains("one@user-") && hb.contains("one@user-") && ha != hb,
        "{ha} {hb}"
    );
    assert!(!hs.contains("@user-") && hs.contains("one"), "{hs}");

    // One child per user with values, each its own process, none the shared child.
    let children = app.proxy.personal_children(Some("one"));
    let whose: Vec<&str> = children.iter().map(|c| c.user.as_str()).collect();
    assert_eq!(whose, [alice.user_key(), bob.user_key()], "{children:?}");
    let shared = app.proxy.child_status("one").unwrap().pid.unwrap();
    let own = pids(&app);
    assert_eq!(own.len(), 2);
    assert!(own.iter().all(|p| *p != shared && pid_alive(*p)), "{own:?}");

    // The admin view names who has which keys, never a value.
    let view = serde_json::to_string(&app.secrets.personal_keys("one").unwrap()).unwrap();
    assert!(
        view.contains(&alice.user_key()) && view.contains("API_KEY"),
        "{view}"
    );
    assert!(
        !view.contains("alice-value") && !view.contains("bob-value"),
        "{view}"
    );

    // Shared values refused: carol is told how to add hers; alice and bob go on.
    app.secrets.set_allows_shared("one", false).unwrap();
    let err = key_seen(&app, Some(&carol)).await.unwrap_err();
    assert!(
        matches!(&err, Error::PersonalKeyRequired { server, .. } if server == "one"),
        "{err:?}"
    );
    assert_eq!(err.call_kind(), "personal_key_required");
    let text = err.to_string();
    assert!(
        text.contains("`API_KEY`") && text.contains("secrets set one KEY --mine"),
        "{text}"
    );
    assert_eq!(key_seen(&app, Some(&bob)).await.unwrap(), "bob-value");

    // A changed value starts the user's child again with it.
    let before = app.proxy.personal_children(Some("one"))[0].pid.unwrap();
    app.secrets
        .set_mine("one", &alice.user_key(), "API_KEY", "alice-value-2")
        .unwrap();
    assert_eq!(key_seen(&app, Some(&alice)).await.unwrap(), "alice-value-2");
    let after = app.proxy.personal_children(Some("one"))[0].pid.unwrap();
    assert_ne!(before, after);
    assert!(
        !pid_alive(before),
        "the child with the old value was stopped"
    );

    // Deleting her value: back to the rule for users without one (refused here).
    assert!(
        app.secrets
            .delete_mine("one", &alice.user_key(), "API_KEY")
            .unwrap()
    );
    assert!(matches!(
        key_seen(&app, Some(&alice)).await,
        Err(Error::PersonalKeyRequired { .. })
    ));

    // Deactivating the server stops every user's child with it.
    let own = pids(&app);
    app.proxy.deactivate("one").await.unwrap();
    assert!(app.proxy.personal_children(None).is_empty());
    assert!(own.iter().all(|p| !pid_alive(*p)), "{own:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bound_stops_the_idlest_refuses_when_none_is_idle_and_idle_children_stop() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    stdio_fixture(&app).await;
    app.proxy.set_personal_bounds(PersonalBounds {
        total: 8,
        per_server: 2,
        idle: Duration::from_secs(3600),
    });
    let people: Vec<_> = ["u1", "u2", "u3"].iter().map(|s| user(s)).collect();
    for (i, p) in people.iter().enumerate() {
        app.secrets
            .set_mine("one", &p.user_key(), "API_KEY", &format!("value-{i}"))
            .unwrap();
    }
    assert_eq!(key_seen(&app, Some(&people[0])).await.unwrap(), "value-0");
    assert_eq!(key_seen(&app, Some(&people[1])).await.unwrap(), "value-1");
    let first = app.proxy.personal_children(Some("one"))[0].clone();
    assert_eq!(first.user, people[0].user_key());
    // A third user at the per-server bound of 2: the least recently used idle child (u1's) makes room.
    assert_eq!(key_seen(&app, Some(&people[2])).await.unwrap(), "value-2");
    let users: Vec<String> = app
        .proxy
        .personal_children(Some("one"))
        .into_iter()
        .map(|c| c.user)
        .collect();
    assert_eq!(users, [people[1].user_key(), people[2].user_key()]);
    assert!(!pid_alive(first.pid.unwrap()), "u1's child was stopped");

    // With both children busy (a call in flight each), a third user is refused, typed.
    let slow = |p: Arc<ad_core::identity::Principal>| {
        let app = app.clone();
        tokio::spawn(async move {
            app.proxy
                .call_tool("one", "sleep", args(json!({"ms": 1500})), as_user(Some(&p)))
                .await
        })
    };
    let (a, b) = (slow(people[1].clone()), slow(people[2].clone()));
    // Both calls are in flight (no event says so: polled).
    wait_for(Duration::from_secs(10), || {
        let c = app.proxy.personal_children(Some("one"));
        c.len() == 2 && c.iter().all(|c| c.busy)
    })
    .await;
    let err = key_seen(&app, Some(&people[0])).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::PersonalChildrenLimit {
                scope: "server",
                limit: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.call_kind(), "personal_children_limit");
    a.await.unwrap().unwrap();
    b.await.unwrap().unwrap();

    // Idle children stop on their own.
    let own = pids(&app);
    assert_eq!(own.len(), 2);
    app.proxy.set_personal_bounds(PersonalBounds {
        total: 8,
        per_server: 2,
        idle: Duration::from_millis(300),
    });
    wait_for(Duration::from_secs(10), || {
        app.proxy.personal_children(Some("one")).is_empty()
    })
    .await;
    wait_for(Duration::from_secs(5), || {
        own.iter().all(|p| !pid_alive(*p))
    })
    .await;
    // And start again on the user's next call.
    assert_eq!(key_seen(&app, Some(&people[1])).await.unwrap(), "value-1");
    app.proxy.shutdown().await;
    let own = pids(&app);
    assert!(own.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_gets_each_users_own_header() {
    let (_remote, url) = crate::ident_e2e::traced_remote().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    app.registry
        .register(ServerSpec {
            name: "remote".into(),
            transport: Transport::StreamableHttp,
            url: Some(url),
            headers: [(
                "Authorization".to_string(),
                "Bearer ${API_TOKEN}".to_string(),
            )]
            .into(),
            ..Default::default()
        })
        .unwrap();
    app.secrets
        .set("remote", "API_TOKEN", "shared-token")
        .unwrap();
    app.proxy.activate("remote").await.unwrap();
    let (alice, bob) = (user("alice"), user("bob"));
    app.secrets
        .set_mine("remote", &alice.user_key(), "API_TOKEN", "alice-token")
        .unwrap();
    let header = |p: Arc<ad_core::identity::Principal>| {
        let app = app.clone();
        async move {
            let r = app
                .proxy
                .call_tool("remote", "trace_context", None, as_user(Some(&p)))
                .await
                .unwrap();
            let v: Value = serde_json::from_str(&harness::text(&r)).unwrap();
            v["header_authorization"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    assert_eq!(header(alice.clone()).await, "Bearer alice-token");
    assert_eq!(header(bob.clone()).await, "Bearer shared-token");
    assert_eq!(header(alice.clone()).await, "Bearer alice-token");
    let children = app.proxy.personal_children(Some("remote"));
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].user, alice.user_key());
    app.proxy.shutdown().await;
    assert!(app.proxy.personal_children(None).is_empty());
}

/// Who may see `one` (both teams) and administer (admins).
const RULES: &str = r#"
admin_groups = ["admins"]
[groups.dev]
servers = ["one"]
[groups.ops]
servers = ["one"]
"#;

async fn python_call(mcp: &str, token: &str, tool: &str, args: Value) -> Value {
    let python = harness::cache_path("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/test.sh, which installs the test dependencies",
        python.display()
    );
    let script = format!(
        "{}/tests/interop/python_personal_check.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = tokio::process::Command::new(python)
        .args([script.as_str(), mcp, token, tool, &args.to_string()])
        .output()
        .await
        .expect("run the Python SDK client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "failed:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

async fn rest(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    token: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = http.request(method, url).bearer_auth(token);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn through_the_front_each_user_sets_their_own_key_and_calls_with_it() {
    use reqwest::Method;
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let env = protected_env(&auth, dir.path());
    std::fs::write(dir.path().join("identity-rules.toml"), RULES).unwrap();
    let r = replicas::replica(dir.path(), &env).await;
    let mcp = format!("{}/mcp", r.url);
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &mcp));
    let (root, alice, bob) = (token("root"), token("alice"), token("bob"));
    let http = reqwest::Client::new();
    let api = |path: &str| format!("{}/api/servers/one{path}", r.url);

    let (s, v) = rest(
        &http,
        Method::POST,
        format!("{}/api/servers", r.url),
        &root,
        Some(json!({"name": "one", "command": harness::fixture(), "args": ["--name", "one"]})),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = rest(
        &http,
        Method::PUT,
        api("/secrets/API_KEY"),
        &root,
        Some(json!({"value": "shared-value"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = rest(&http, Method::POST, api("/activate"), &root, None).await;
    assert_eq!(s, 200, "{v}");

    // Alice sets her own value; she reads it back masked; bob sees none of hers; neither may read the admin view.
    let (s, v) = rest(
        &http,
        Method::PUT,
        api("/my-secrets/API_KEY"),
        &alice,
        Some(json!({"value": "alice-value"})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["masked_value"], "alic****");
    let (_, v) = rest(&http, Method::GET, api("/my-secrets"), &alice, None).await;
    assert_eq!(v["secrets"][0]["key"], "API_KEY", "{v}");
    assert!(!v.to_string().contains("alice-value"), "{v}");
    let (_, v) = rest(&http, Method::GET, api("/my-secrets"), &bob, None).await;
    assert_eq!(v["secrets"], json!([]), "{v}");
    let (s, _) = rest(&http, Method::GET, api("/personal-keys"), &bob, None).await;
    assert_eq!(s, 403);
    let (s, _) = rest(&http, Method::GET, api("/secrets"), &alice, None).await;
    assert_eq!(s, 403, "the shared values stay the admin's");
    let (s, v) = rest(&http, Method::GET, api("/personal-keys"), &root, None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["users"][0]["user"],
        format!("{}#alice", auth.issuer),
        "{v}"
    );
    assert!(!v.to_string().contains("alice-value"), "{v}");

    // Alice through the official Python SDK runs with her value; bob (rmcp) with the shared one.
    let py = python_call(&mcp, &alice, "one__env", json!({"key": "API_KEY"})).await;
    assert_eq!(py, json!({"text": "alice-value", "is_error": false}));
    let b = client_as(&r.url, &bob).await;
    let call = |c: &crate::identity::Client| {
        let p = c.0.peer().clone();
        async move {
            let mut req = rmcp::model::CallToolRequestParams::new("one__env");
            req.arguments = args(json!({"key": "API_KEY"}));
            p.call_tool(req).await.unwrap()
        }
    };
    assert_eq!(harness::text(&call(&b).await), "shared-value");
    let (_, v) = rest(&http, Method::GET, api("/personal-keys"), &root, None).await;
    assert_eq!(v["children"].as_array().map(Vec::len), Some(1), "{v}");

    // The admin refuses shared values: bob's call says how to add his; he adds it with the CLI and runs with it.
    let (s, v) = rest(
        &http,
        Method::PUT,
        api("/personal-keys"),
        &root,
        Some(json!({"allow_shared": false})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["allow_shared"], false);
    let refused = call(&b).await;
    assert_eq!(refused.is_error, Some(true));
    let body: Value = serde_json::from_str(&harness::text(&refused)).unwrap();
    assert_eq!(body["kind"], "personal_key_required", "{body}");
    assert!(body["error"].as_str().unwrap().contains("--mine"), "{body}");

    let no_user = harness::command(
        dir.path(),
        &["secrets", "set", "one", "API_KEY", "x", "--mine"],
    )
    .env_remove("AGENT_DISCOVER_USER")
    .output()
    .await
    .unwrap();
    assert!(!no_user.status.success());
    assert!(String::from_utf8_lossy(&no_user.stderr).contains("--user"));
    let bob_key = format!("{}#bob", auth.issuer);
    let set = harness::command(
        dir.path(),
        &[
            "secrets",
            "set",
            "one",
            "API_KEY",
            "bob-cli-value",
            "--mine",
            "--user",
            &bob_key,
        ],
    )
    .output()
    .await
    .unwrap();
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    assert_eq!(harness::text(&call(&b).await), "bob-cli-value");
    let listed = harness::command(dir.path(), &["secrets", "users", "one", "--json"])
        .output()
        .await
        .unwrap();
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(
        listed["users"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    assert!(!listed.to_string().contains("bob-cli-value"));
}

/// The same store on a team's PostgreSQL registry: each user's sealed rows, the admin's view and the rule.
#[test]
fn users_values_are_kept_per_user_on_postgresql() {
    let pg = crate::pg::server();
    let store = agent_discover::store::Store::open_url(&pg.new_database()).unwrap();
    let events = agent_discover::events::EventBus::default();
    let registry = agent_discover::registry::Registry::new(store, events.clone());
    registry
        .register(ServerSpec {
            name: "one".into(),
            command: Some("x".into()),
            ..Default::default()
        })
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let secrets =
        agent_discover::secrets::Secrets::open(dir.path(), registry.clone(), events).unwrap();
    let id = registry.get("one").unwrap().id;
    secrets
        .set_mine("one", "i#alice", "API_KEY", "alice-value")
        .unwrap();
    secrets
        .set_mine("one", "i#alice", "API_KEY", "alice-value-2")
        .unwrap();
    secrets
        .set_mine("one", "i#bob", "API_KEY", "bob-value")
        .unwrap();
    assert_eq!(
        secrets.personal_env(id, "i#alice").unwrap()["API_KEY"],
        "alice-value-2"
    );
    assert_eq!(
        secrets.personal_env(id, "i#bob").unwrap()["API_KEY"],
        "bob-value"
    );
    assert!(secrets.personal_env(id, "i#carol").unwrap().is_empty());
    let view = secrets.personal_keys("one").unwrap();
    assert!(view.allow_shared);
    assert_eq!(view.users.len(), 2);
    secrets.set_allows_shared("one", false).unwrap();
    assert!(!secrets.allows_shared(id).unwrap());
    assert!(secrets.delete_mine("one", "i#bob", "API_KEY").unwrap());
    assert_eq!(secrets.personal_keys("one").unwrap().users.len(), 1);
    registry.remove("one").unwrap();
    assert!(
        secrets.personal_env(id, "i#alice").unwrap().is_empty(),
        "removed with their server"
    );
}
