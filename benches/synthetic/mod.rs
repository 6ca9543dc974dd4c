//! The synthetic catalog the search and profiles benchmarks rank in (not a bench target): tools named from a verb and
//! a noun on servers `svc0`, `svc1`, ... of `PER_SERVER` tools each, with reproducible random unit vectors, and the
//! realistic queries of tests/data.

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::store::Store;

/// Tools per synthetic server.
pub const PER_SERVER: usize = 50;

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
/// Realistic queries: what agents write, 10-30 words (the paraphrases of tests/data/tool_queries*.json).
pub fn queries() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut out = Vec::new();
    for f in ["tool_queries_heldout.json", "tool_queries.json"] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap();
        for q in v["queries"].as_array().unwrap() {
            let q = q["query"].as_str().unwrap();
            let words = q.split_whitespace().count();
            if (10..=30).contains(&words) {
                out.push(q.to_owned());
            }
        }
    }
    out
}
const DIM: usize = 384;

/// xorshift: reproducible pseudo-random vectors without a dependency.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
    pub fn unit(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM).map(|_| self.next()).collect();
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }
}

/// `n` synthetic tools in `store`, with random unit vectors stored under `model`.
pub fn build_in(store: Store, n: usize, model: &str) -> Store {
    let registry = Registry::new(store.clone(), EventBus::default());
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for s in 0..n / PER_SERVER {
        let server = registry
            .register(ServerSpec {
                name: format!("svc{s}"),
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let tools: Vec<ToolInfo> = (0..PER_SERVER)
            .map(|i| {
                let k = s * PER_SERVER + i;
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
        store.set_embeddings(model, &vectors).unwrap();
    }
    store
}
