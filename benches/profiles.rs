//! Profiles benchmark (not a test): a profile's `find_tool` against the aggregated one on the same number of tools.
//! The aggregated side is a registry of N synthetic tools; the profile side a registry of 2N tools and a profile of
//! half its servers (N tools), so both rank among N tools, the profile's inside an index twice as large.
//!
//! Two measures: `App::find_tool_in` end to end in process (BM25, what `find_tool` runs: the scope's cached ids, the
//! FTS5 query restricted to them, the answer built), and `Search::rank_with_in` hybrid (BM25 plus the cosine top-k over
//! 384-dim unit vectors, excluding embedding the query). Every profile answer is checked to hold only profile tools.
//!
//! Run: `cargo bench --bench profiles`. `PROFILES_BENCH_N` (comma-separated sizes, default `2000,10000`) and
//! `PROFILES_BENCH_ROUNDS` (default 10) make a shorter run.

use std::time::{Duration, Instant};

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::profiles::Profile;
use agent_discover::search::{Provider, Search, Within};
use agent_discover::store::Store;

mod synthetic;
use synthetic::{PER_SERVER, Rng, queries};

const ROUNDS: usize = 10;
const MODEL: &str = "bench-vectors";

fn rounds() -> usize {
    std::env::var("PROFILES_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS)
}

fn p50(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

/// The profile of the first `n` tools' servers of a 2n-tool registry.
fn half(n: usize) -> Profile {
    Profile {
        name: "half".into(),
        servers: (0..n / PER_SERVER).map(|s| format!("svc{s}")).collect(),
        ..Profile::default()
    }
}

fn in_profile(n: usize, server: &str) -> bool {
    server
        .strip_prefix("svc")
        .and_then(|s| s.parse::<usize>().ok())
        .is_some_and(|s| s < n / PER_SERVER)
}

#[tokio::main]
async fn main() {
    // BM25 for the end-to-end part (the query's embedding is not what differs between the two).
    // SAFETY: set before any thread reads the environment.
    unsafe { std::env::set_var("AGENT_DISCOVER_EMBEDDING_PROVIDER", "none") };
    let queries = queries();
    println!("## Profiles: find_tool in a profile against the aggregated one\n");
    println!(
        "{} realistic queries x {} rounds, p50. Aggregated: a registry of N tools (and, last columns, the registry of 2N \
         the profile is cut from); profile: N tools (half the servers) of a registry of 2N.\n",
        queries.len(),
        rounds()
    );
    println!(
        "| N tools | find_tool BM25, aggregated | find_tool BM25, profile | rank hybrid, aggregated | rank hybrid, profile | \
         find_tool BM25, aggregated 2N | rank hybrid, aggregated 2N |"
    );
    println!("|---|---|---|---|---|---|---|");
    let sizes: Vec<usize> = std::env::var("PROFILES_BENCH_N")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2_000, 10_000]);
    for n in sizes {
        let whole = tempfile::tempdir().unwrap();
        let double = tempfile::tempdir().unwrap();
        drop(synthetic::build_in(
            Store::open(&Config::in_dir(whole.path()).db_path).unwrap(),
            n,
            MODEL,
        ));
        drop(synthetic::build_in(
            Store::open(&Config::in_dir(double.path()).db_path).unwrap(),
            2 * n,
            MODEL,
        ));
        let all = App::open(Config::in_dir(whole.path())).unwrap();
        let two = App::open(Config::in_dir(double.path())).unwrap();
        let profile = two.create_profile(half(n)).unwrap();
        let (mut agg, mut prof, mut agg2) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds() {
            for q in &queries {
                let t = Instant::now();
                let a = all.find_tool(q, 5, false).await.unwrap();
                agg.push(t.elapsed());
                let t = Instant::now();
                let _ = two.find_tool(q, 5, false).await.unwrap();
                agg2.push(t.elapsed());
                let t = Instant::now();
                let p = two
                    .find_tool_in(q, 5, false, None, Some(&profile))
                    .await
                    .unwrap();
                prof.push(t.elapsed());
                let _ = a;
                let v = serde_json::to_value(&p).unwrap();
                if let Some(s) = v["server"].as_str() {
                    assert!(in_profile(n, s), "a tool outside the profile: {v}");
                }
                for m in v["other_matches"].as_array().into_iter().flatten() {
                    assert!(
                        in_profile(
                            n,
                            m["call_as"].as_str().unwrap().split("__").next().unwrap()
                        ),
                        "{v}"
                    );
                }
            }
        }
        // Hybrid ranking, at the search layer (synthetic vectors; the query's embedding excluded).
        let s_all = Search::new(
            Store::open(&Config::in_dir(whole.path()).db_path).unwrap(),
            Provider::None,
            Provider::from_env_value("none").1,
        );
        let store2 = Store::open(&Config::in_dir(double.path()).db_path).unwrap();
        let within = Within::new(
            store2
                .indexed_tool_names()
                .unwrap()
                .into_iter()
                .filter(|(_, s, t)| profile.allows(s, Some(t)))
                .map(|(id, _, _)| id),
        );
        assert_eq!(within.len(), n);
        let s_two = Search::new(store2, Provider::None, Provider::from_env_value("none").1);
        let q = Rng(42).unit();
        let vector = || Some((q.clone(), MODEL.to_owned()));
        // The first query loads each vector index.
        s_all.rank_with(&queries[0], vector(), 5).await.unwrap();
        s_two
            .rank_with_in(&queries[0], vector(), 5, Some(&within))
            .await
            .unwrap();
        let (mut hagg, mut hprof, mut hagg2) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds() {
            for query in &queries {
                let t = Instant::now();
                s_all.rank_with(query, vector(), 5).await.unwrap();
                hagg.push(t.elapsed());
                let t = Instant::now();
                s_two.rank_with(query, vector(), 5).await.unwrap();
                hagg2.push(t.elapsed());
                let t = Instant::now();
                let r = s_two
                    .rank_with_in(query, vector(), 5, Some(&within))
                    .await
                    .unwrap();
                hprof.push(t.elapsed());
                assert!(r.hits.iter().all(|h| within.contains(h.tool.id)));
            }
        }
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            p50(agg),
            p50(prof),
            p50(hagg),
            p50(hprof),
            p50(agg2),
            p50(hagg2)
        );
    }
}
