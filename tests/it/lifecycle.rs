//! The McpRegistry lifecycle at the library level: `App::add_server` and `App::apply_config` against real fixture
//! children on a real SQLite file. Per-origin replacement, idempotence (no write, no event, no restart), restarts of
//! changed running servers (child PIDs compared), results in input order, and a property test over random config
//! sequences.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::error::Error;
use agent_discover::events::Subscription;
use agent_discover::lifecycle::{AddServerResult, Change, ServerState};
use agent_discover::model::{ServerSpec, ServerStatus};
use futures::FutureExt;
use serde_json::json;

use crate::harness::{BIN, pid_alive};

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

/// The fixture server under `name`, its tool set chosen by `variant` (a different variant is a changed config).
fn fixture(name: &str, variant: u32) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        description: format!("fixture {name}"),
        command: Some(crate::harness::fixture().into()),
        args: vec![
            "--name".into(),
            name.into(),
            "--tool".into(),
            format!("variant_{variant}"),
        ],
        ..Default::default()
    }
}

fn pid_of(app: &App, name: &str) -> Option<u32> {
    app.proxy.child_status(name).and_then(|c| c.pid)
}

/// Events queued for `sub` right now (apply emits synchronously, so nothing is still on its way).
fn drain(sub: &mut Subscription) -> usize {
    let mut n = 0;
    while let Some(Some(_)) = sub.recv().now_or_never() {
        n += 1;
    }
    n
}

fn names(results: &[AddServerResult]) -> Vec<&str> {
    results.iter().map(|r| r.id.as_str()).collect()
}

#[tokio::test]
async fn apply_config_is_per_origin_idempotent_and_in_input_order() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let manual = app.add_server(fixture("hand", 0), "manual").await.unwrap();
    assert_eq!(manual.change, Some(Change::Added));
    assert_eq!(manual.state, ServerState::Stopped { tool_count: 0 });

    let cursor = "/home/u/.cursor/mcp.json";
    let specs = vec![fixture("zeta", 0), fixture("alpha", 0), fixture("mid", 0)];
    let results = app.apply_config(cursor, specs.clone()).await.unwrap();
    assert_eq!(names(&results), ["zeta", "alpha", "mid"]);
    assert!(results.iter().all(|r| r.change == Some(Change::Added)));
    let stored = app.registry.get("alpha").unwrap();
    assert_eq!(stored.origin, cursor);
    assert_eq!(stored.status, ServerStatus::Stopped);

    // The same set again: nothing written, nothing announced.
    let mut events = app.events.subscribe("*");
    let writes = app.registry.store().total_changes();
    let again = app.apply_config(cursor, specs).await.unwrap();
    assert_eq!(app.registry.store().total_changes(), writes);
    assert_eq!(drain(&mut events), 0);
    assert!(again.iter().all(|r| r.change == Some(Change::Unchanged)));

    // Another origin's file with fewer servers removes only its own; a name owned elsewhere is reported, untouched.
    let claude = "/home/u/.claude.json";
    let results = app
        .apply_config(claude, vec![fixture("hand", 7), fixture("other", 0)])
        .await
        .unwrap();
    match &results[0].state {
        ServerState::Error { error } => {
            assert_eq!(error.kind.as_str(), "server_error");
            assert!(error.message.contains("manual"), "{}", error.message);
            assert_eq!(
                error.details,
                Some(json!({"code": "conflict", "origin": "manual"}))
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        app.registry.get("hand").unwrap().args,
        fixture("hand", 0).args
    );
    app.apply_config(cursor, vec![fixture("alpha", 1)])
        .await
        .unwrap();
    let mut all: Vec<String> = app
        .registry
        .list(&Default::default())
        .unwrap()
        .into_iter()
        .map(|s| s.server.name)
        .collect();
    all.sort();
    assert_eq!(all, ["alpha", "hand", "other"]);
    assert_eq!(
        app.registry.get("alpha").unwrap().args,
        fixture("alpha", 1).args
    );

    // Bad input changes nothing: a name given twice, an invalid spec, an empty origin.
    let err = app
        .apply_config(cursor, vec![fixture("alpha", 2), fixture("alpha", 3)])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("given twice"), "{err}");
    let mut bad = fixture("beta", 0);
    bad.command = Some("npx -y evil".into());
    let err = app
        .apply_config(cursor, vec![fixture("gamma", 0), bad])
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Invalid {
                what: "command",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("beta"), "{err}");
    assert!(app.registry.get("gamma").is_err());
    assert!(app.apply_config(" ", vec![]).await.is_err());
    assert_eq!(
        app.registry.get("alpha").unwrap().args,
        fixture("alpha", 1).args
    );

    // An empty set removes every server of that origin and nothing else.
    app.apply_config(cursor, vec![]).await.unwrap();
    assert!(app.registry.get("alpha").is_err());
    assert!(app.registry.get("hand").is_ok() && app.registry.get("other").is_ok());
    app.proxy.shutdown().await;
}

#[tokio::test]
async fn a_changed_running_server_restarts_once_an_unchanged_one_keeps_its_child() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let origin = "/work/.vscode/mcp.json";
    app.apply_config(
        origin,
        vec![fixture("a", 0), fixture("b", 0), fixture("c", 0)],
    )
    .await
    .unwrap();
    for n in ["a", "b", "c"] {
        app.proxy.activate(n).await.unwrap();
        assert_eq!(app.registry.get(n).unwrap().status, ServerStatus::Ready);
    }
    let (pa, pb, pc) = (
        pid_of(&app, "a").unwrap(),
        pid_of(&app, "b").unwrap(),
        pid_of(&app, "c").unwrap(),
    );
    // `a` unchanged, `b` changed, `c` removed, `d` new.
    let mut description_only = fixture("a", 0);
    description_only.description = "same launch, new words".into();
    let results = app
        .apply_config(
            origin,
            vec![fixture("b", 1), description_only, fixture("d", 0)],
        )
        .await
        .unwrap();
    assert_eq!(names(&results), ["b", "a", "d"]);
    // `b` came back with its new tool list; `a` only had its description rewritten, child untouched.
    assert_eq!(results[0].change, Some(Change::Updated));
    assert!(matches!(results[0].state, ServerState::Ready { tool_count } if tool_count > 0));
    let pb2 = pid_of(&app, "b").unwrap();
    assert_ne!(pb2, pb);
    assert!(!pid_alive(pb));
    let tools: Vec<String> = app
        .registry
        .tools(app.registry.get("b").unwrap().id)
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(tools.contains(&"variant_1".to_owned()), "{tools:?}");
    assert_eq!(results[1].change, Some(Change::Updated));
    assert_eq!(pid_of(&app, "a"), Some(pa));
    assert_eq!(
        app.registry.get("a").unwrap().description,
        "same launch, new words"
    );
    // `c` was stopped before its row went; `d` is registered, not started.
    assert!(!pid_alive(pc));
    assert!(app.registry.get("c").is_err());
    assert!(!app.proxy.is_active("c"));
    assert_eq!(results[2].state, ServerState::Stopped { tool_count: 0 });

    // Re-applying: no restart, no event, no write.
    let mut events = app.events.subscribe("*");
    let writes = app.registry.store().total_changes();
    let mut description_only = fixture("a", 0);
    description_only.description = "same launch, new words".into();
    let results = app
        .apply_config(
            origin,
            vec![fixture("b", 1), description_only, fixture("d", 0)],
        )
        .await
        .unwrap();
    assert_eq!(app.registry.store().total_changes(), writes);
    assert_eq!(drain(&mut events), 0);
    assert_eq!(
        (pid_of(&app, "a"), pid_of(&app, "b")),
        (Some(pa), Some(pb2))
    );
    assert!(matches!(results[0].state, ServerState::Ready { .. }));

    // add_server: the same rules for one server.
    let same = app.add_server(fixture("b", 1), origin).await.unwrap();
    assert_eq!(same.change, Some(Change::Unchanged));
    assert_eq!(pid_of(&app, "b"), Some(pb2));
    let changed = app.add_server(fixture("b", 2), origin).await.unwrap();
    assert_eq!(changed.change, Some(Change::Updated));
    assert_ne!(pid_of(&app, "b"), Some(pb2));
    // A server that cannot start reports an `error` with its kind; the entry stays, with that status.
    let mut broken = fixture("b", 2);
    broken.args.push("--exit-before-init".into());
    let failed = app.add_server(broken, origin).await.unwrap();
    match &failed.state {
        ServerState::Error { error } => assert_eq!(error.kind.as_str(), "transport_error"),
        other => panic!("{other:?}"),
    }
    let row = app.registry.get("b").unwrap();
    assert_eq!(row.status, ServerStatus::Error);
    assert!(row.last_error.is_some());
    app.proxy.shutdown().await;
    assert!(!pid_alive(pa));
}

/// A fixed xorshift sequence, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random sequences of configs: after each apply the origin's servers are exactly the config's (with its args), the
/// other origin's server is untouched, results follow the input order, running servers whose config changed were
/// restarted and the others kept their child; re-applying the same config restarts nothing and writes nothing.
#[tokio::test]
async fn random_config_sequences_converge_to_the_last_and_reapplying_restarts_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    app.add_server(fixture("keeper", 0), "manual")
        .await
        .unwrap();
    let origin = "/p/.mcp.json";
    let pool = ["s1", "s2", "s3", "s4"];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut previous: BTreeMap<String, ServerSpec> = BTreeMap::new();
    // (kept, restarted, removed) running servers over the whole sequence: each case must have happened.
    let mut seen = (0, 0, 0);
    for round in 0..8 {
        let mut specs: Vec<ServerSpec> = Vec::new();
        for n in pool {
            if rng.below(4) != 0 {
                specs.push(fixture(n, rng.below(2) as u32));
            }
        }
        // Input order is part of the contract: shuffle.
        for i in (1..specs.len()).rev() {
            specs.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let pids_before: BTreeMap<String, u32> = pool
            .iter()
            .filter_map(|n| pid_of(&app, n).map(|p| (n.to_string(), p)))
            .collect();
        let results = app.apply_config(origin, specs.clone()).await.unwrap();
        let expected_order: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names(&results), expected_order, "round {round}");

        // Converged: exactly this config's servers, with its launch configuration.
        let mut registered: Vec<String> = app
            .registry
            .list(&Default::default())
            .unwrap()
            .into_iter()
            .filter(|s| s.server.origin == origin)
            .map(|s| s.server.name)
            .collect();
        registered.sort();
        let mut wanted: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
        wanted.sort();
        assert_eq!(registered, wanted, "round {round}");
        for spec in &specs {
            let row = app.registry.get(&spec.name).unwrap();
            assert_eq!(row.to_spec().launch_identity(), spec.launch_identity());
        }
        assert_eq!(app.registry.get("keeper").unwrap().origin, "manual");

        // Children: unchanged ones kept theirs, changed ones got a new one, removed ones are gone.
        for (name, pid) in &pids_before {
            match (specs.iter().find(|s| &s.name == name), previous.get(name)) {
                (None, _) => {
                    assert!(!app.proxy.is_active(name), "round {round}: {name} removed");
                    assert!(!pid_alive(*pid), "round {round}: {name}'s child is gone");
                    seen.2 += 1;
                }
                (Some(now), Some(before)) if now.launch_identity() == before.launch_identity() => {
                    assert_eq!(pid_of(&app, name), Some(*pid), "round {round}: {name} kept");
                    seen.0 += 1;
                }
                (Some(_), _) => {
                    let new = pid_of(&app, name).expect("restarted");
                    assert_ne!(new, *pid, "round {round}: {name} restarted");
                    assert!(!pid_alive(*pid));
                    seen.1 += 1;
                }
            }
        }

        // Re-applying the same config: no restart, no write, no event.
        let pids: Vec<Option<u32>> = pool.iter().map(|n| pid_of(&app, n)).collect();
        let writes = app.registry.store().total_changes();
        let mut events = app.events.subscribe("*");
        let again = app.apply_config(origin, specs.clone()).await.unwrap();
        assert!(again.iter().all(|r| r.change == Some(Change::Unchanged)));
        assert_eq!(
            app.registry.store().total_changes(),
            writes,
            "round {round}"
        );
        assert_eq!(drain(&mut events), 0, "round {round}");
        assert_eq!(
            pool.iter().map(|n| pid_of(&app, n)).collect::<Vec<_>>(),
            pids
        );

        // Start some of them so the next round has running servers to keep or restart.
        for spec in &specs {
            if rng.below(2) == 0 {
                app.proxy.activate(&spec.name).await.unwrap();
            }
        }
        previous = specs.into_iter().map(|s| (s.name.clone(), s)).collect();
    }
    assert!(seen.0 > 0 && seen.1 > 0 && seen.2 > 0, "{seen:?}");
    app.proxy.shutdown().await;
}

/// disable stops the child and keeps the entry (status `disabled`); nothing starts it (activate, restore at start,
/// health checks) until enable, which starts it again with its last config and returns an `AddServerResult`.
#[tokio::test]
async fn disable_keeps_the_entry_and_blocks_every_start_until_enable() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    app.add_server(fixture("paused", 0), "manual")
        .await
        .unwrap();
    app.proxy.activate("paused").await.unwrap();
    let pid = pid_of(&app, "paused").unwrap();
    app.secrets.set("paused", "TOKEN", "s3cret").unwrap();

    assert!(app.disable("paused").await.unwrap());
    assert!(!pid_alive(pid));
    assert!(!app.proxy.is_active("paused"));
    let row = app.registry.get("paused").unwrap();
    assert_eq!(row.status, ServerStatus::Disabled);
    assert!(!row.active);
    assert_eq!(
        app.secrets
            .env_for(row.id)
            .unwrap()
            .get("TOKEN")
            .map(String::as_str),
        Some("s3cret")
    );
    // Disabling twice writes nothing.
    let writes = app.registry.store().total_changes();
    assert!(!app.disable("paused").await.unwrap());
    assert_eq!(app.registry.store().total_changes(), writes);

    // Nothing starts it: activate, a health check, a restart of the app (restore of active servers).
    let err = app.proxy.activate("paused").await.unwrap_err();
    assert!(err.to_string().contains("disabled"), "{err}");
    let health = app.check_health("paused").await.unwrap();
    assert!(health.error.unwrap().contains("disabled"));
    assert!(!app.proxy.is_active("paused"));
    assert!(
        app.registry
            .store()
            .servers_to_restore()
            .unwrap()
            .is_empty()
    );

    // enable: started again with its last config.
    let r = app.enable("paused").await.unwrap();
    assert_eq!(r.id, "paused");
    assert!(
        matches!(r.state, ServerState::Ready { tool_count } if tool_count > 0),
        "{r:?}"
    );
    assert_eq!(
        app.registry.get("paused").unwrap().status,
        ServerStatus::Ready
    );
    let again = pid_of(&app, "paused").unwrap();
    assert_ne!(again, pid);
    assert!(matches!(
        app.disable("nope").await,
        Err(Error::NotFound { .. })
    ));
    app.proxy.shutdown().await;
    assert!(!pid_alive(again));
}

/// enable/disable over the `registry` tool (rmcp client, stdio) and the CLI (another process on the same database).
#[tokio::test]
async fn enable_and_disable_over_mcp_and_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let agent = crate::harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("fx", &[], json!({})).await;
    let v = agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    assert_eq!(v["state"], "ready", "{v}");
    let v = agent
        .registry(json!({"action": "disable", "name": "fx"}))
        .await;
    assert_eq!(v["status"], "disabled", "{v}");
    let (is_error, v) = agent
        .try_registry(json!({"action": "activate", "name": "fx"}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert_eq!(v["state"], "error", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("disabled"),
        "{v}"
    );
    let (is_error, v) = agent
        .try_registry(json!({"action": "enable"}))
        .await
        .unwrap();
    assert!(is_error && v["field"] == "name", "{v}");
    let v = agent
        .registry(json!({"action": "enable", "name": "fx"}))
        .await;
    assert_eq!(
        (&v["state"], &v["id"]),
        (&json!("ready"), &json!("fx")),
        "{v}"
    );
    assert!(v["toolCount"].as_u64().unwrap() > 0);

    // The CLI, in its own process: disable, then the listing shows it.
    let cli = |args: &[&str]| {
        let o = std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env_remove("AGENT_DISCOVER_DB")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    assert_eq!(cli(&["disable", "fx", "--json"])["status"], "disabled");
    let list = cli(&["list", "--json"]);
    assert_eq!(list[0]["status"], "disabled", "{list}");
    let v = cli(&["enable", "fx", "--json"]);
    assert_eq!(v["state"], "ready", "{v}");
    agent.stop().await;
}
