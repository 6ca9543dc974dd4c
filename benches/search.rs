//! Search benchmark (not a test): `find_tool` ranking latency at 1k, 10k and 100k synthetic tools, BM25 only and
//! hybrid (cosine over 384-dim vectors plus BM25, excluding the query embedding), and the time to embed one query with
//! the local model when its files are installed.
//!
//! Run: `cargo bench --bench search`.

use std::time::{Duration, Instant};

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search};
use agent_discover::store::Store;

const VERBS: &[&str] = &[
    "create", "list", "get", "update", "delete", "search", "send", "archive", "export", "sync",
    "assign", "close",
];
const NOUNS: &[&str] = &[
    "issue",
    "subscription",
    "invoice",
    "customer",
    "message",
    "channel",
    "file",
    "folder",
    "event",
    "ticket",
    "user",
    "team",
    "project",
    "page",
    "database",
    "table",
    "record",
    "pipeline",
    "deployment",
    "alert",
    "dashboard",
    "report",
    "contact",
    "order",
    "payment",
];
const QUERIES: &[&str] = &[
    "create a new invoice for a customer",
    "cancel the subscription",
    "send a message to a channel",
    "list open tickets",
    "export the report",
];
const DIM: usize = 384;
/// Rounds of all queries per mode and catalog size.
const ROUNDS: usize = 100;

/// xorshift: reproducible pseudo-random vectors without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM).map(|_| self.next()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

fn build(n: usize) -> Store {
    let store = Store::open_in_memory().unwrap();
    let registry = Registry::new(store.clone(), EventBus::default());
    let per_server = 50;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for s in 0..n / per_server {
        let server = registry
            .register(ServerSpec {
                name: format!("svc{s}"),
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let tools: Vec<ToolInfo> = (0..per_server)
            .map(|i| {
                let k = s * per_server + i;
                let (v, o) = (VERBS[k % VERBS.len()], NOUNS[(k / VERBS.len()) % NOUNS.len()]);
                ToolInfo {
                    name: format!("{v}_{o}_{k}"),
                    description: format!("{v} a {o} in service {s}; variant {k} with options for filtering and paging"),
                    input_schema: serde_json::json!({"type": "object", "properties": {"id": {"type": "string"}}}),
                }
            })
            .collect();
        registry.save_tools(server.id, &tools).unwrap();
        let ids: Vec<i64> = registry
            .tools(server.id)
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        let vectors: Vec<(i64, Vec<f32>)> = ids.into_iter().map(|id| (id, rng.unit())).collect();
        store.set_embeddings("bench-vectors", &vectors).unwrap();
    }
    store
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    println!("## Tool search (issue 4)\n");
    println!(
        "Synthetic catalogs (50 tools per server), {} queries x {ROUNDS} rounds in each mode, p50 of `Search::rank`; BM25 mode \
         (provider `none`) is measured first, then hybrid with 384-dim unit vectors, excluding embedding the query.\n",
        QUERIES.len()
    );
    println!(
        "| tools | BM25 p50 | hybrid p50 | first hybrid query (index load) |\n|---|---|---|---|"
    );
    for n in [1_000usize, 10_000, 100_000] {
        let store = build(n);
        let search = Search::new(store, Provider::None, Provider::from_env_value("none").1);
        // BM25 mode first, on its own: a BM25-only process has no vector index to scan between queries.
        let mut bm = Vec::new();
        for _ in 0..ROUNDS {
            for query in QUERIES {
                let t = Instant::now();
                let r = search.rank(query, 5).await.unwrap();
                bm.push(t.elapsed());
                assert!(!r.hits.is_empty());
            }
        }
        let mut rng = Rng(42);
        let q = rng.unit();
        let t = Instant::now();
        search
            .rank_with(QUERIES[0], Some((q.clone(), "bench-vectors".into())), 5)
            .await
            .unwrap();
        let load = t.elapsed();
        let mut hy = Vec::new();
        for _ in 0..ROUNDS {
            for query in QUERIES {
                let t = Instant::now();
                let r = search
                    .rank_with(query, Some((q.clone(), "bench-vectors".into())), 5)
                    .await
                    .unwrap();
                hy.push(t.elapsed());
                assert!(r.hybrid);
            }
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.1} ms |",
            ms(p50(bm)),
            ms(p50(hy)),
            ms(load)
        );
    }
    let (provider, status) = Provider::from_env_value("local");
    if status.provider == "local" {
        let t = Instant::now();
        provider.embed(vec!["warm up".into()]).await.unwrap();
        let load = t.elapsed();
        let mut times = Vec::new();
        for q in QUERIES.iter().cycle().take(50) {
            let t = Instant::now();
            provider.embed(vec![(*q).to_owned()]).await.unwrap();
            times.push(t.elapsed());
        }
        println!(
            "\nEmbedding one query with the local all-MiniLM-L6-v2 (first call {:.0} ms incl. model load): p50 {:.2} ms.",
            load.as_secs_f64() * 1000.0,
            p50(times).as_secs_f64() * 1000.0
        );
    } else {
        println!(
            "\nLocal model not available ({:?}): query embedding not measured.",
            status.fallback_reason
        );
    }
}
