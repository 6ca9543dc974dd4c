//! Issue 16, item 5: `agent-discover migrate --from sqlite:PATH --to postgres://…` copies a personal registry (a
//! server with its tools and a secret) into a team's on a real PostgreSQL; a team replica then serves the server, its
//! secret opens with the team key (the fixture echoes it from its environment), so does a user's own value of it
//! (and the rule for users without one), and a second run copies nothing.

use serde_json::{Value, json};

use crate::{harness, pg, replicas};

const TEAM_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SECRET: &str = "sk-personal-5678";
const ALICE: &str = "https://idp.example.test#alice";
const ALICE_OWN: &str = "ak-alice-own-9012";

async fn run(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let mut cmd = harness::command(dir, args);
    cmd.env_remove("AGENT_DISCOVER_MASTER_KEY")
        .env_remove("AGENT_DISCOVER_DATABASE_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn migrate(
    personal: &std::path::Path,
    url: &str,
    env: &[(&str, &str)],
) -> (bool, Value, String) {
    let from = format!("sqlite:{}", personal.join("agent-discover.db").display());
    let scratch = tempfile::tempdir().unwrap();
    let (ok, out, err) = run(
        scratch.path(),
        &["migrate", "--from", &from, "--to", url, "--json"],
        env,
    )
    .await;
    (ok, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

#[tokio::test]
async fn personal_registry_copies_into_a_team_registry_once() {
    let personal = tempfile::tempdir().unwrap();
    let p = personal.path();
    // The personal registry: the fixture registered, activated once (its tools stored), a secret set.
    let (ok, _, err) = run(
        p,
        &["add", "fx", "--", harness::fixture(), "--name", "fx"],
        &[],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, _, err) = run(p, &["activate", "fx"], &[]).await;
    assert!(ok, "{err}");
    let (ok, _, err) = run(p, &["secrets", "set", "fx", "PERSONAL_TOKEN", SECRET], &[]).await;
    assert!(ok, "{err}");
    assert!(p.join("secrets.key").is_file());
    // A user's own value of that secret (sealed with a key derived for them), and users without one refused.
    let (ok, _, err) = run(
        p,
        &[
            "secrets",
            "set",
            "fx",
            "PERSONAL_TOKEN",
            ALICE_OWN,
            "--mine",
            "--user",
            ALICE,
        ],
        &[],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, _, err) = run(p, &["secrets", "shared", "fx", "off"], &[]).await;
    assert!(ok, "{err}");

    let server = pg::server();
    let url = server.new_database();
    let team_key = [("AGENT_DISCOVER_MASTER_KEY", TEAM_KEY)];
    // The team registry has a server already, so fx's id there differs from its personal one: sealed values bound
    // to the old id would not open.
    let scratch = tempfile::tempdir().unwrap();
    let (ok, _, err) = run(
        scratch.path(),
        &["add", "pre", "--", harness::fixture(), "--name", "pre"],
        &[
            ("AGENT_DISCOVER_DATABASE_URL", url.as_str()),
            ("AGENT_DISCOVER_MASTER_KEY", TEAM_KEY),
        ],
    )
    .await;
    assert!(ok, "{err}");

    // Typed refusals: bad syntax, a missing source, an unreachable target, no team key for the secret.
    let (ok, _, err) = run(p, &["migrate", "--from", "/x.db", "--to", &url], &team_key).await;
    assert!(!ok && err.contains("--from"), "{err}");
    let (ok, _, err) = run(
        p,
        &[
            "migrate",
            "--from",
            "sqlite:/nonexistent/x.db",
            "--to",
            &url,
        ],
        &team_key,
    )
    .await;
    assert!(!ok && err.contains("source registry"), "{err}");
    let (ok, _, err) = migrate(p, "postgres://nobody@127.0.0.1:1/none", &team_key).await;
    assert!(
        !ok && err.contains("cannot reach the team registry"),
        "{err}"
    );
    let (ok, _, err) = migrate(p, &url, &[]).await;
    assert!(!ok && err.contains("AGENT_DISCOVER_MASTER_KEY"), "{err}");

    let (ok, report, err) = migrate(p, &url, &team_key).await;
    assert!(ok, "{err}");
    assert_eq!(report["copied"], json!(["fx"]), "{report}");
    assert_eq!(report["rows"]["server_secrets"], 1, "{report}");
    assert_eq!(report["rows"]["personal_secrets"], 1, "{report}");
    assert_eq!(report["rows"]["personal_settings"], 1, "{report}");
    let tools = report["rows"]["server_tools"].as_u64().unwrap_or(0);
    assert!(tools >= 2, "{report}");

    // A team replica on the target serves the server, its tools and its secret (masked, so it was decrypted).
    let team_dir = tempfile::tempdir().unwrap();
    let env = vec![
        ("AGENT_DISCOVER_DATABASE_URL", url.clone()),
        ("AGENT_DISCOVER_MASTER_KEY", TEAM_KEY.to_owned()),
        ("AGENT_DISCOVER_REPLICA", "t0".to_owned()),
    ];
    let replica = replicas::replica(team_dir.path(), &env).await;
    let http = reqwest::Client::new();
    let detail: Value = http
        .get(format!("{}/api/servers/fx", replica.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = detail.to_string();
    assert!(text.contains("\"echo\""), "{detail}");
    let secrets = http
        .get(format!("{}/api/servers/fx/secrets", replica.url))
        .send()
        .await
        .unwrap();
    assert!(
        secrets.status().is_success(),
        "{}",
        secrets.text().await.unwrap()
    );
    let secrets: Value = secrets.json().await.unwrap();
    assert!(secrets.to_string().contains("sk-p****"), "{secrets}");
    assert!(!secrets.to_string().contains(SECRET), "{secrets}");

    // The secret reaches the child's environment on the team registry: the fixture echoes it.
    let team_env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, out, err) = run(
        team_dir.path(),
        &["call", "fx__env", "--args", r#"{"key":"PERSONAL_TOKEN"}"#],
        &team_env,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains(SECRET), "{out}");

    // Alice's own value opens on the team registry as hers (listing opens each value: masked, so it was decrypted
    // with the key derived for her from the team's master key and bound to the server's new id), and the rule for
    // users without their own came along.
    let (ok, out, err) = run(
        team_dir.path(),
        &["secrets", "ls", "fx", "--mine", "--user", ALICE, "--json"],
        &team_env,
    )
    .await;
    assert!(ok, "{err}");
    let mine: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!(mine[0]["key"], "PERSONAL_TOKEN", "{out}");
    assert_eq!(mine[0]["masked_value"], "ak-a****", "{out}");
    assert!(!out.contains(ALICE_OWN), "{out}");
    let (ok, out, err) = run(
        team_dir.path(),
        &["secrets", "users", "fx", "--json"],
        &team_env,
    )
    .await;
    assert!(ok, "{err}");
    let users: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!(users["allow_shared"], false, "{out}");
    assert_eq!(users["users"][0]["user"], ALICE, "{out}");

    // Running it again copies nothing new.
    let (ok, again, err) = migrate(p, &url, &team_key).await;
    assert!(ok, "{err}");
    assert_eq!(again["copied"], json!([]), "{again}");
    assert_eq!(again["skipped"], json!(["fx"]), "{again}");
    assert_eq!(again["rows"], json!({}), "{again}");

    // A personal key that does not open the secrets is refused before anything is written.
    let wrong = tempfile::tempdir().unwrap();
    let key_file = wrong.path().join("k");
    std::fs::write(&key_file, [7u8; 32]).unwrap();
    #[cfg(unix)]
    std::fs::set_permissions(
        &key_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let from = format!("sqlite:{}", p.join("agent-discover.db").display());
    let other = server.new_database();
    let (ok, _, err) = run(
        p,
        &[
            "migrate",
            "--from",
            &from,
            "--to",
            &other,
            "--from-key-file",
            key_file.to_str().unwrap(),
        ],
        &team_key,
    )
    .await;
    assert!(!ok && err.contains("wrong key"), "{err}");
    drop(replica);
}

/// What `migrate` copies besides servers: profiles (with their own tool overrides), saved scripts, a server's paging
/// limit and its tool overrides; from SQLite into another SQLite file (`Store::copy_into`, what `migrate` runs) and
/// into PostgreSQL (the command); a second copy skips what the target has by name, `replace` copies it again.
#[tokio::test]
async fn profiles_scripts_paging_and_overrides_are_copied() {
    use agent_discover::store::Store;
    let personal = tempfile::tempdir().unwrap();
    let p = personal.path();
    let script = p.join("sum.js");
    std::fs::write(&script, "return args.a + args.b;").unwrap();
    let steps: [&[&str]; 7] = [
        &["add", "fx", "--", harness::fixture(), "--name", "fx"],
        &["activate", "fx"],
        &["profiles", "create", "dev", "--server", "fx"],
        &[
            "tools",
            "override",
            "fx",
            "echo",
            "--profile",
            "dev",
            "--name",
            "say",
        ],
        &[
            "tools",
            "override",
            "fx",
            "echo",
            "--description",
            "Echoes, overridden",
        ],
        &["scripts", "save", "sum", "--file", script.to_str().unwrap()],
        &["paging", "fx", "5000"],
    ];
    for args in steps {
        let (ok, _, err) = run(p, args, &[]).await;
        assert!(ok, "{args:?}: {err}");
    }
    let db = p.join("agent-discover.db");
    let check = |target: &Store| {
        let profiles = target.profiles().unwrap();
        assert_eq!(profiles.len(), 1, "{profiles:?}");
        assert_eq!(profiles[0].overrides["fx"]["echo"]["name"], "say");
        let scripts = target.saved_scripts().unwrap();
        assert_eq!(scripts.len(), 1, "{scripts:?}");
        assert_eq!(scripts[0].code, "return args.a + args.b;");
        let fx = target.server_by_name("fx").unwrap().unwrap().id;
        assert_eq!(target.page_bytes(fx).unwrap(), Some(5000));
        let overrides = target.tool_overrides(fx).unwrap();
        assert_eq!(overrides[0].body["description"], "Echoes, overridden");
    };

    // SQLite into a fresh SQLite file.
    let other = tempfile::tempdir().unwrap();
    let source = Store::open(&db).unwrap();
    let target = Store::open(&other.path().join("target.db")).unwrap();
    let same = |_: agent_discover::store::copy::Sealed<'_>, blob: &[u8]| Ok(blob.to_vec());
    let report = source.copy_into(&target, false, &same).unwrap();
    assert_eq!(report.profiles_copied, ["dev"], "{report:?}");
    assert_eq!(report.scripts_copied, ["sum"], "{report:?}");
    assert_eq!(report.rows.get("server_paging"), Some(&1), "{report:?}");
    check(&target);
    let again = source.copy_into(&target, false, &same).unwrap();
    assert_eq!(again.profiles_skipped, ["dev"], "{again:?}");
    assert_eq!(again.scripts_skipped, ["sum"], "{again:?}");
    assert!(again.profiles_copied.is_empty() && again.scripts_copied.is_empty());
    let replaced = source.copy_into(&target, true, &same).unwrap();
    assert_eq!(replaced.profiles_copied, ["dev"], "{replaced:?}");
    check(&target);
    drop((source, target));

    // SQLite into PostgreSQL, through the command.
    let server = pg::server();
    let url = server.new_database();
    let (ok, report, err) = migrate(p, &url, &[("AGENT_DISCOVER_MASTER_KEY", TEAM_KEY)]).await;
    assert!(ok, "{err}");
    assert_eq!(report["profiles_copied"], json!(["dev"]), "{report}");
    assert_eq!(report["scripts_copied"], json!(["sum"]), "{report}");
    check(&Store::open_url(&url).unwrap());
}
