//! Issue 16, item 5: `agent-discover migrate --from sqlite:PATH --to postgres://…` copies a personal registry (a
//! server with its tools and a secret) into a team's on a real PostgreSQL; a team replica then serves the server, its
//! secret opens with the team key (the fixture echoes it from its environment), and a second run copies nothing.

use serde_json::{Value, json};

use crate::{harness, pg, replicas};

const TEAM_KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const SECRET: &str = "sk-personal-5678";

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

    let server = pg::server();
    let url = server.new_database();
    let team_key = [("AGENT_DISCOVER_MASTER_KEY", TEAM_KEY)];

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
