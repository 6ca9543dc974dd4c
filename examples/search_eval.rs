//! Ranking-quality experiments for `find_tool` (issue 13): what is embedded per tool, how BM25 and cosine are fused,
//! and where the no-match threshold lies, on the tuning queries (tests/data/tool_queries.json), the held-out queries
//! (tests/data/tool_queries_heldout.json) and mcpproxy-go's golden set (tests/data/mcpproxy_golden_v1.json).
//!
//! Run: `cargo run --release --example search_eval` (needs the local model: AGENT_DISCOVER_MODEL_DIR). Embeddings
//! are cached in target/search_eval_cache.bin, so reruns take seconds.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::path::Path;

use agent_discover::embed::{DIM, MiniLm};
use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search};
use agent_discover::store::Store;
use serde_json::Value;

fn data(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

struct Tool {
    server: String,
    name: String,
    description: String,
    schema: Value,
}

/// `(server, tools)` of a catalog file.
fn catalog() -> Vec<Tool> {
    let mut out = Vec::new();
    for s in data("tool_catalog.json")["servers"].as_array().unwrap() {
        for t in s["tools"].as_array().unwrap() {
            out.push(Tool {
                server: s["name"].as_str().unwrap().into(),
                name: t["name"].as_str().unwrap().into(),
                description: t["description"].as_str().unwrap_or("").into(),
                schema: t["inputSchema"].clone(),
            });
        }
    }
    out
}

fn golden_tools() -> Vec<Tool> {
    data("mcpproxy_golden_v1.json")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Tool {
            server: t["server"].as_str().unwrap().into(),
            name: t["tool"].as_str().unwrap().into(),
            description: t["description"].as_str().unwrap().into(),
            schema: Value::Null,
        })
        .collect()
}

fn store_of(tools: &[Tool]) -> Store {
    let store = Store::open_in_memory().unwrap();
    let registry = Registry::new(store.clone(), EventBus::default());
    let mut by_server: Vec<(String, Vec<ToolInfo>)> = Vec::new();
    for t in tools {
        if by_server.last().is_none_or(|(s, _)| *s != t.server) {
            by_server.push((t.server.clone(), Vec::new()));
        }
        by_server.last_mut().unwrap().1.push(ToolInfo {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.schema.clone(),
        });
    }
    for (name, tools) in by_server {
        let server = registry
            .register(ServerSpec {
                name,
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        registry.save_tools(server.id, &tools).unwrap();
    }
    store
}

/// Embeddings keyed by a hash of the text, persisted between runs.
struct Cache {
    map: HashMap<u64, Vec<f32>>,
    path: std::path::PathBuf,
    dirty: bool,
}

fn key(s: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

impl Cache {
    fn open() -> Cache {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/search_eval_cache.bin");
        let mut map = HashMap::new();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            for rec in b.chunks_exact(8 + DIM * 4) {
                let k = u64::from_le_bytes(rec[..8].try_into().unwrap());
                let v = rec[8..]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                map.insert(k, v);
            }
        }
        Cache {
            map,
            path,
            dirty: false,
        }
    }
    fn embed(&mut self, model: &MiniLm, texts: &[String]) -> Vec<Vec<f32>> {
        let missing: Vec<&str> = texts
            .iter()
            .filter(|t| !self.map.contains_key(&key(t)))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            eprintln!("embedding {} texts", missing.len());
            for chunk in missing.chunks(64) {
                for (t, v) in chunk.iter().zip(model.embed_batch(chunk)) {
                    self.map.insert(key(t), v);
                }
            }
            self.dirty = true;
        }
        texts.iter().map(|t| self.map[&key(t)].clone()).collect()
    }
    fn save(&self) {
        if !self.dirty {
            return;
        }
        let mut f = std::fs::File::create(&self.path).unwrap();
        for (k, v) in &self.map {
            f.write_all(&k.to_le_bytes()).unwrap();
            for x in v {
                f.write_all(&x.to_le_bytes()).unwrap();
            }
        }
    }
}

fn words(name: &str) -> String {
    // snake, kebab and camel case to words.
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' {
            out.push(' ');
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        out.extend(c.to_lowercase());
    }
    out
}

fn params(schema: &Value, with_desc: bool) -> String {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return String::new();
    };
    let parts: Vec<String> = props
        .iter()
        .map(|(k, v)| {
            let d = v.get("description").and_then(Value::as_str).unwrap_or("");
            if with_desc && !d.is_empty() {
                format!("{} ({})", words(k), d.chars().take(80).collect::<String>())
            } else {
                words(k)
            }
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" Parameters: {}.", parts.join(", "))
    }
}

fn first_sentences(d: &str, max: usize) -> String {
    let d: String = d.chars().take(max).collect();
    d
}

fn variant(v: &str, t: &Tool) -> String {
    match v {
        "A name+desc (today)" => agent_discover::search::tool_text(&t.name, &t.description),
        "B server+name+desc" => {
            format!("{} {}: {}", words(&t.server), words(&t.name), t.description)
        }
        "C B+params" => format!(
            "{} {}: {}{}",
            words(&t.server),
            words(&t.name),
            t.description,
            params(&t.schema, false)
        ),
        "D B+param descs" => format!(
            "{} {}: {}{}",
            words(&t.server),
            words(&t.name),
            t.description,
            params(&t.schema, true)
        ),
        "E server+name+short desc" => {
            format!(
                "{} {}: {}",
                words(&t.server),
                words(&t.name),
                first_sentences(&t.description, 300)
            )
        }
        _ => unreachable!(),
    }
}

const VARIANTS: &[&str] = &[
    "A name+desc (today)",
    "B server+name+desc",
    "C B+params",
    "D B+param descs",
    "E server+name+short desc",
];

/// One query's candidates: (call_as, normalised BM25, cosine).
type Cands = Vec<(String, f64, f64)>;

async fn candidates(
    search: &Search,
    names: &[String],
    vecs: &[Vec<f32>],
    q: &str,
    qv: &[f32],
) -> Cands {
    let r = search.rank_with(q, None, 50).await.unwrap();
    let mut out: HashMap<String, (f64, f64)> = HashMap::new();
    for h in r.hits {
        out.insert(format!("{}__{}", h.tool.server, h.tool.name), (h.bm25, 0.0));
    }
    let mut cos: Vec<(usize, f64)> = vecs
        .iter()
        .enumerate()
        .map(|(i, v)| (i, agent_discover::search::dot(v, qv) as f64))
        .collect();
    cos.sort_by(|a, b| b.1.total_cmp(&a.1));
    let all: HashMap<&str, f64> = cos.iter().map(|(i, c)| (names[*i].as_str(), *c)).collect();
    for (i, _) in cos.iter().take(50) {
        out.entry(names[*i].clone()).or_insert((0.0, 0.0));
    }
    out.into_iter()
        .map(|(k, (b, _))| {
            let c = all.get(k.as_str()).copied().unwrap_or(0.0);
            (k, b, c)
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Fusion {
    Weighted(f64),
    Rrf(f64),
}

/// Ranked names and the score used for the no-match rule.
fn fuse(c: &Cands, f: Fusion) -> (Vec<String>, f64) {
    let mut scored: Vec<(String, f64, f64)> = match f {
        Fusion::Weighted(w) => c
            .iter()
            .map(|(n, b, cos)| (n.clone(), w * cos.max(0.0) + (1.0 - w) * b, 0.0))
            .collect(),
        Fusion::Rrf(k) => {
            let mut by_b: Vec<&(String, f64, f64)> = c.iter().collect();
            by_b.sort_by(|a, b| b.1.total_cmp(&a.1));
            let rb: HashMap<&str, usize> = by_b
                .iter()
                .enumerate()
                .filter(|(_, x)| x.1 > 0.0)
                .map(|(i, x)| (x.0.as_str(), i + 1))
                .collect();
            let mut by_c: Vec<&(String, f64, f64)> = c.iter().collect();
            by_c.sort_by(|a, b| b.2.total_cmp(&a.2));
            let rc: HashMap<&str, usize> = by_c
                .iter()
                .enumerate()
                .map(|(i, x)| (x.0.as_str(), i + 1))
                .collect();
            c.iter()
                .map(|(n, _, _)| {
                    let s = rb
                        .get(n.as_str())
                        .map(|r| 1.0 / (k + *r as f64))
                        .unwrap_or(0.0)
                        + rc.get(n.as_str())
                            .map(|r| 1.0 / (k + *r as f64))
                            .unwrap_or(0.0);
                    (n.clone(), s, 0.0)
                })
                .collect()
        }
    };
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.len().cmp(&b.0.len())));
    let top_cos = scored
        .first()
        .and_then(|t| c.iter().find(|x| x.0 == t.0))
        .map(|x| x.2)
        .unwrap_or(0.0);
    let gate = match f {
        Fusion::Weighted(_) => scored.first().map(|x| x.1).unwrap_or(0.0),
        Fusion::Rrf(_) => top_cos,
    };
    (scored.into_iter().map(|x| x.0).collect(), gate)
}

struct Set {
    name: &'static str,
    /// (query, expected names, golden labels)
    queries: Vec<(String, Vec<String>)>,
    no_match: Vec<String>,
}

fn set(name: &'static str, file: &str) -> Set {
    let d = data(file);
    Set {
        name,
        queries: d["queries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| {
                (
                    q["query"].as_str().unwrap().to_owned(),
                    q["expect"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|e| e.as_str().unwrap().to_owned())
                        .collect(),
                )
            })
            .collect(),
        no_match: d["no_match"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q.as_str().unwrap().to_owned())
            .collect(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = agent_discover::embed::find_model_dir(None).expect("set AGENT_DISCOVER_MODEL_DIR");
    let model = MiniLm::load(&dir).unwrap();
    let mut cache = Cache::open();
    let tools = catalog();
    let names: Vec<String> = tools
        .iter()
        .map(|t| format!("{}__{}", t.server, t.name))
        .collect();
    let search = Search::new(
        store_of(&tools),
        Provider::None,
        Provider::from_env_value("none").1,
    );
    let sets = [
        set("tuning", "tool_queries.json"),
        set("held-out", "tool_queries_heldout.json"),
    ];
    let fusions = [
        Fusion::Weighted(0.0),
        Fusion::Weighted(0.5),
        Fusion::Weighted(0.6),
        Fusion::Weighted(0.7),
        Fusion::Weighted(0.8),
        Fusion::Weighted(0.9),
        Fusion::Weighted(1.0),
        Fusion::Rrf(10.0),
        Fusion::Rrf(60.0),
    ];
    let golden = data("mcpproxy_golden_v1.json");
    let gtools = golden_tools();
    let gnames: Vec<String> = gtools
        .iter()
        .map(|t| format!("{}__{}", t.server, t.name))
        .collect();
    let gsearch = Search::new(
        store_of(&gtools),
        Provider::None,
        Provider::from_env_value("none").1,
    );
    let gqueries: Vec<(String, Vec<String>)> = golden["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["query"].as_str().unwrap().to_owned(),
                q["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|l| l["relevance"].as_u64().unwrap_or(0) >= 1)
                    .map(|l| l["tool_id"].as_str().unwrap().replacen(':', "__", 1))
                    .collect(),
            )
        })
        .collect();
    let only: Option<String> = std::env::args().nth(1);
    for v in VARIANTS {
        if only.as_deref().is_some_and(|o| !v.starts_with(o)) {
            continue;
        }
        let texts: Vec<String> = tools.iter().map(|t| variant(v, t)).collect();
        let vecs = cache.embed(&model, &texts);
        let gtexts: Vec<String> = gtools.iter().map(|t| variant(v, t)).collect();
        let gvecs = cache.embed(&model, &gtexts);
        // Candidates per set and query, computed once per variant.
        let mut per_set = Vec::new();
        for s in &sets {
            let qs: Vec<String> = s
                .queries
                .iter()
                .map(|q| q.0.clone())
                .chain(s.no_match.iter().cloned())
                .collect();
            let qv = cache.embed(&model, &qs);
            let mut c = Vec::new();
            for (q, v) in qs.iter().zip(&qv) {
                c.push(candidates(&search, &names, &vecs, q, v).await);
            }
            per_set.push(c);
        }
        let gq: Vec<String> = gqueries.iter().map(|q| q.0.clone()).collect();
        let gqv = cache.embed(&model, &gq);
        let mut gc = Vec::new();
        for (q, v) in gq.iter().zip(&gqv) {
            gc.push(candidates(&gsearch, &gnames, &gvecs, q, v).await);
        }
        cache.save();
        for f in fusions {
            // The no-match threshold: the best split of the tuning set (in-catalog found + no-answer refused).
            let tune = &sets[0];
            let tc = &per_set[0];
            let n_in = tune.queries.len();
            let gates: Vec<f64> = tc.iter().map(|c| fuse(c, f).1).collect();
            let mut best = (0usize, 0.0f64);
            let mut cands: Vec<f64> = gates.clone();
            cands.sort_by(f64::total_cmp);
            for t in cands.iter().map(|g| g + 1e-9) {
                let ok = gates[..n_in].iter().filter(|g| **g >= t).count()
                    + gates[n_in..].iter().filter(|g| **g < t).count();
                if ok > best.0 {
                    best = (ok, t);
                }
            }
            let thr = best.1;
            let mut line = format!("{v:<26} {f:<14?} thr {thr:.3}");
            for (s, c) in sets.iter().zip(&per_set) {
                let n = s.queries.len();
                let (mut t1, mut t5, mut found) = (0, 0, 0);
                for ((_, exp), c) in s.queries.iter().zip(&c[..n]) {
                    let (r, g) = fuse(c, f);
                    if g >= thr {
                        found += 1;
                    }
                    if r.first().is_some_and(|x| exp.contains(x)) {
                        t1 += 1;
                    }
                    if r.iter().take(5).any(|x| exp.contains(x)) {
                        t5 += 1;
                    }
                }
                let refused = c[n..].iter().filter(|c| fuse(c, f).1 < thr).count();
                line.push_str(&format!(
                    " | {} top1 {:.2} top5 {:.2} found {:.2} refused {:.2}",
                    s.name,
                    t1 as f64 / n as f64,
                    t5 as f64 / n as f64,
                    found as f64 / n as f64,
                    refused as f64 / s.no_match.len().max(1) as f64
                ));
            }
            let (mut r1, mut r5) = (0.0, 0.0);
            for ((_, labels), c) in gqueries.iter().zip(&gc) {
                let (r, _) = fuse(c, f);
                let hit = |k: usize| {
                    r.iter().take(k).filter(|x| labels.contains(x)).count() as f64
                        / labels.len() as f64
                };
                r1 += hit(1);
                r5 += hit(5);
            }
            let gn = gqueries.len() as f64;
            line.push_str(&format!(" | golden R@1 {:.3} R@5 {:.3}", r1 / gn, r5 / gn));
            println!("{line}");
        }
    }
}
