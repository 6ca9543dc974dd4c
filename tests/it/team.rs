//! Issue 16, teams: `serve` replicas on one PostgreSQL registry (a real server from tests/it/pg.rs). Changes made
//! through one replica reach the others' snapshot subscribers and MCP clients; a server activated through one runs on
//! every replica; secrets, the call log and sessions as documented; SIGKILL of a replica under load loses no
//! acknowledged row; replicas starting at once migrate an empty database once; find_tool answers as on SQLite.

use std::time::Duration;

use serde_json::{Value, json};

use crate::pg;
use crate::replicas::{self, Replica};

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

/// The environment of replica `name` of the team registry at `url`.
fn team_env(url: &str, name: &str) -> Vec<(&'static str, String)> {
    vec![
        ("AGENT_DISCOVER_DATABASE_URL", url.to_owned()),
        ("AGENT_DISCOVER_MASTER_KEY", KEY.to_owned()),
        ("AGENT_DISCOVER_REPLICA", name.to_owned()),
    ]
}

/// `n` replicas, each with a data directory of its own (as on separate machines), on the database `url`.
async fn team(url: &str, n: usize) -> (Vec<Replica>, Vec<tempfile::TempDir>) {
    let mut replicas = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..n {
        let dir = tempfile::tempdir().unwrap();
        replicas.push(replicas::replica(dir.path(), &team_env(url, &format!("r{i}"))).await);
        dirs.push(dir);
    }
    (replicas, dirs)
}

/// Reads registry snapshots from `url`'s `/api/registry/events` until one satisfies `pred` (bounded).
async fn wait_snapshot(url: &str, what: &str, pred: impl Fn(&Value) -> bool) {
    use futures::StreamExt;
    let resp = reqwest::get(format!("{url}/api/registry/events"))
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(chunk) = body.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                for line in event.lines() {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(v) = serde_json::from_str::<Value>(data.trim())
                        && pred(&v)
                    {
                        return true;
                    }
                }
            }
        }
        false
    })
    .await;
    assert_eq!(
        found,
        Ok(true),
        "{what}: no such snapshot at {url} within 20 s"
    );
}

fn has_server(snapshot: &Value, name: &str) -> bool {
    snapshot["servers"]
        .as_array()
        .is_some_and(|s| s.iter().any(|e| e["name"] == name))
}

/// Registration, secrets, activation and deactivation through one replica reach the others; the call log and
/// Prometheus series name the replica.
#[tokio::test]
async fn replicas_on_one_postgres_registry_stay_in_step() {
    let server = pg::server();
    let url = server.new_database();
    let (replicas, _dirs) = team(&url, 3).await;
    let http = reqwest::Client::new();

    // A registration through the first replica reaches the others' snapshot subscribers.
    let created = http
        .post(format!("{}/api/servers", replicas[0].url))
        .json(&json!({"name": "plain", "command": "true"}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    for r in &replicas[1..] {
        wait_snapshot(&r.url, "plain registered elsewhere", |s| {
            has_server(s, "plain")
        })
        .await;
    }
    // A secret set through one replica is there (masked) through another: one key, one table.
    let set = http
        .put(format!(
            "{}/api/servers/plain/secrets/API_KEY",
            replicas[1].url
        ))
        .json(&json!({"value": "sk-team-secret-1234"}))
        .send()
        .await
        .unwrap();
    assert!(set.status().is_success(), "{}", set.text().await.unwrap());
    let listed: Value = http
        .get(format!("{}/api/servers/plain/secrets", replicas[2].url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed.to_string().contains("API_KEY"), "{listed}");
    assert!(
        !listed.to_string().contains("sk-team-secret-1234"),
        "{listed}"
    );

    // Activation through one replica runs the server on all; deactivation through another stops it everywhere.
    replicas::follow_active_flags(&replicas).await;

    // Every replica's dashboard shows the whole team's calls (follow_active_flags called fx__echo on each).
    let logs: Value = http
        .get(format!("{}/api/logs?limit=50", replicas[0].url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = logs.to_string();
    for r in ["r0", "r1", "r2"] {
        assert!(
            text.contains(&format!("\"replica\":\"{r}\"")),
            "no call of {r}: {logs}"
        );
    }
    let metrics = http
        .get(format!("{}/metrics", replicas[1].url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "agent_discover_tool_calls_total{server=\"fx\",tool=\"echo\",replica=\"r1\"} 1"
        ),
        "{metrics}"
    );
}

/// Handshake-era sessions stay on their replica; 2026-07-28 requests go to any.
#[tokio::test]
async fn postgres_replicas_sessions() {
    let server = pg::server();
    let url = server.new_database();
    let (replicas, _dirs) = team(&url, 2).await;
    let http = reqwest::Client::new();
    replicas::register_fixture(&http, &replicas[0], "fx").await;
    let (client, seen) = replicas::client_legacy(&replicas[1].url).await;
    replicas::wait_tools(&client, &seen, "fx on the second replica", |t| {
        t.iter().any(|n| n == "fx__echo")
    })
    .await;
    let _ = client.cancel().await;
    replicas::sessions_across(&replicas[0], &replicas[1]).await;
}

/// Eight clients over three replicas, one replica killed with SIGKILL mid-load.
#[tokio::test]
async fn postgres_replicas_keep_answering_when_one_is_killed() {
    let server = pg::server();
    let url = server.new_database();
    let (replicas, _dirs) = team(&url, 3).await;
    let http = reqwest::Client::new();
    replicas::register_fixture(&http, &replicas[0], "fx").await;
    for r in &replicas[1..] {
        let (client, seen) = replicas::client_legacy(&r.url).await;
        replicas::wait_tools(&client, &seen, "fx followed", |t| {
            t.iter().any(|n| n == "fx__echo")
        })
        .await;
        let _ = client.cancel().await;
    }
    replicas::load_then_kill_one(replicas).await;
}

/// Two replicas started at once on an empty database: both come up, and the schema was applied once.
#[tokio::test]
async fn replicas_starting_at_once_migrate_an_empty_database_once() {
    let server = pg::server();
    let url = server.new_database();
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a_env, b_env) = (team_env(&url, "a"), team_env(&url, "b"));
    let (a, b) = tokio::join!(
        replicas::replica(a_dir.path(), &a_env),
        replicas::replica(b_dir.path(), &b_env)
    );
    for r in [&a, &b] {
        let listed = reqwest::get(format!("{}/api/servers", r.url))
            .await
            .unwrap();
        assert_eq!(listed.status(), 200);
    }
    let pool = agent_discover::store::pg::PgPool::connect(&url).unwrap();
    let versions: Vec<i64> = pool
        .with(|c| {
            c.query(
                "SELECT version FROM schema_migrations ORDER BY version",
                &[],
            )?
            .iter()
            .map(|r| r.get::<i64>(0))
            .collect()
        })
        .unwrap();
    assert_eq!(
        versions,
        (1..=agent_discover::store::pg::PG_SCHEMA_VERSION).collect::<Vec<_>>()
    );
}

/// The test catalog on both backends: every query of the search set gets the same ranking (tools and order).
#[tokio::test]
async fn find_tool_answers_the_same_on_both_backends() {
    use agent_discover::search::{Provider, Search};
    let server = pg::server();
    let url = server.new_database();
    let sqlite = crate::search::catalog_store();
    let postgres = agent_discover::store::Store::open_url(&url).unwrap();
    crate::search::fill_catalog(&postgres);
    let (provider, status) = Provider::from_env_value("local");
    assert_eq!(status.provider, "local", "{:?}", status.fallback_reason);
    let model = provider.model_id().expect("the local model's id");
    let on_sqlite = Search::new(sqlite.clone(), provider.clone(), status.clone());
    assert!(on_sqlite.embed_pending().await.unwrap() >= 1000);
    // The same vectors, stored once in PostgreSQL (embedding the catalog twice would only time the model): the ids
    // match because both registries were filled in the same order, which the next line proves.
    postgres
        .set_embeddings(&model, &sqlite.embeddings(&model).unwrap())
        .unwrap();
    let on_postgres = Search::new(postgres, provider, status);
    assert_eq!(
        on_postgres.embed_pending().await.unwrap(),
        0,
        "every PostgreSQL tool has its vector"
    );
    let queries = crate::search::data("tool_queries.json");
    let mut compared = 0;
    for q in queries["queries"].as_array().unwrap() {
        let q = q["query"].as_str().unwrap();
        let a = on_sqlite.rank(q, 5).await.unwrap();
        let b = on_postgres.rank(q, 5).await.unwrap();
        let names = |r: &agent_discover::search::Ranking| -> Vec<String> {
            r.hits
                .iter()
                .map(|h| format!("{}__{}", h.tool.server, h.tool.name))
                .collect()
        };
        assert_eq!(names(&a), names(&b), "{q}");
        compared += 1;
    }
    assert!(compared >= 30, "{compared}");
}
