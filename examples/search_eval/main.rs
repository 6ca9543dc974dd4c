//! Ranking-quality experiments for `find_tool` (issue 13): what is embedded per tool, how BM25 and cosine are fused,
//! and where the no-match threshold lies, on the tuning queries (tests/data/tool_queries.json), the held-out queries
//! (tests/data/tool_queries_heldout.json) and mcpproxy-go's golden set (tests/data/mcpproxy_golden_v1.json).
//!
//! Run: `cargo run --release --example search_eval` (needs the local model: AGENT_DISCOVER_MODEL_DIR). Embeddings
//! are cached in target/search_eval_cache$SEARCH_EVAL_CACHE.bin, so reruns take seconds (give each model directory
//! its own SEARCH_EVAL_CACHE suffix). A first argument keeps only the per-tool texts whose label starts with it.
//!
//! Other candidates, by environment: SEARCH_EVAL_STATIC=uniform|sif:<a> replaces the model by the static table of
//! `static_table` (distilled once into target/static_rows.bin), for tools and queries, or for queries only with
//! SEARCH_EVAL_STATIC_QUERY_ONLY=1; SEARCH_EVAL_STATIC_MAP=<lambda> maps static vectors to the model's by ridge
//! regression fitted on the catalog's texts. SEARCH_EVAL_TIME=1 times one query's embedding instead (wall and CPU,
//! p50/p90, with the load average), with the encoder's f16 and int8 weights interleaved. AGENT_DISCOVER_EMBED_WEIGHTS
//! (f16|int8) picks the encoder's weights for the quality figures (each format has its own cache). For today's text
//! and fusion, the no-match rules of `no_match_rules` are tuned on the tuning set and reported on the held-out set.

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

mod static_table;
use static_table::{StaticTable, Weighting};

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
        let suffix = std::env::var("SEARCH_EVAL_CACHE").unwrap_or_default();
        // Each weight format of the encoder gets its own cache.
        let weights = agent_discover::embed::weights_from_env().name();
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("target/search_eval_cache{suffix}_{weights}.bin"));
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

/// How texts become vectors: the full model, or the static table distilled from it (for tools and queries, or
/// for queries only against the full model's tool vectors).
struct Embedder {
    table: Option<StaticTable>,
    query_only: bool,
    /// A ridge-regression map from static vectors to the full model's (row-major `DIM x DIM`), fitted on catalog texts.
    map: Option<Vec<f64>>,
}

impl Embedder {
    fn from_env(model: &MiniLm) -> Embedder {
        let Ok(spec) = std::env::var("SEARCH_EVAL_STATIC") else {
            return Embedder {
                table: None,
                query_only: false,
                map: None,
            };
        };
        let weighting = match spec.split(':').next().unwrap_or("") {
            "uniform" => Weighting::Uniform,
            _ => Weighting::Sif(
                spec.split(':')
                    .nth(1)
                    .and_then(|a| a.parse().ok())
                    .unwrap_or(1e-3),
            ),
        };
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/static_rows.bin");
        let rows: Vec<f32> = match std::fs::read(&path) {
            Ok(b) => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            Err(_) => {
                let t0 = std::time::Instant::now();
                let rows = static_table::distil_rows(model);
                eprintln!("distillation took {:?}", t0.elapsed());
                let mut b = Vec::with_capacity(rows.len() * 4);
                for x in &rows {
                    b.extend_from_slice(&x.to_le_bytes());
                }
                std::fs::write(&path, b).unwrap();
                rows
            }
        };
        Embedder {
            table: Some(StaticTable::from_rows(DIM, rows, weighting)),
            query_only: std::env::var("SEARCH_EVAL_STATIC_QUERY_ONLY").is_ok(),
            map: None,
        }
    }

    /// Fits `map` on pairs (static, full) of the catalog's texts: each tool's text, its name in words, its description.
    fn fit_map(&mut self, cache: &mut Cache, model: &MiniLm, tools: &[Tool], lambda: f64) {
        let Some(t) = &self.table else { return };
        let mut texts: Vec<String> = Vec::new();
        for tool in tools {
            texts.push(agent_discover::search::tool_text(
                &tool.name,
                &tool.description,
            ));
            texts.push(words(&tool.name));
            if !tool.description.is_empty() {
                texts.push(tool.description.clone());
            }
        }
        let full = cache.embed(model, &texts);
        cache.save();
        let stat: Vec<Vec<f32>> = texts.iter().map(|x| t.embed(model, x)).collect();
        // W = (XᵀX + λI)⁻¹ XᵀY, X the static rows, Y the full ones.
        let d = DIM;
        let mut a = vec![0f64; d * d];
        let mut b = vec![0f64; d * d];
        for (x, y) in stat.iter().zip(&full) {
            for i in 0..d {
                let xi = f64::from(x[i]);
                if xi == 0.0 {
                    continue;
                }
                for j in 0..d {
                    a[i * d + j] += xi * f64::from(x[j]);
                    b[i * d + j] += xi * f64::from(y[j]);
                }
            }
        }
        for i in 0..d {
            a[i * d + i] += lambda;
        }
        // Cholesky: a = L Lᵀ, then solve for each column of b.
        let mut l = vec![0f64; d * d];
        for i in 0..d {
            for j in 0..=i {
                let mut sum = a[i * d + j];
                for k in 0..j {
                    sum -= l[i * d + k] * l[j * d + k];
                }
                l[i * d + j] = if i == j {
                    sum.max(1e-12).sqrt()
                } else {
                    sum / l[j * d + j]
                };
            }
        }
        let mut w = vec![0f64; d * d];
        for col in 0..d {
            let mut z = vec![0f64; d];
            for i in 0..d {
                let mut sum = b[i * d + col];
                for k in 0..i {
                    sum -= l[i * d + k] * z[k];
                }
                z[i] = sum / l[i * d + i];
            }
            for i in (0..d).rev() {
                let mut sum = z[i];
                for k in i + 1..d {
                    sum -= l[k * d + i] * w[k * d + col];
                }
                w[i * d + col] = sum / l[i * d + i];
            }
        }
        eprintln!(
            "fitted the static-to-full map on {} texts (lambda {lambda})",
            texts.len()
        );
        self.map = Some(w);
    }

    fn static_embed(&self, model: &MiniLm, text: &str) -> Vec<f32> {
        let t = self.table.as_ref().unwrap();
        let s = t.embed(model, text);
        match &self.map {
            None => s,
            Some(w) => {
                let d = DIM;
                let mut y = vec![0f64; d];
                for i in 0..d {
                    let si = f64::from(s[i]);
                    for j in 0..d {
                        y[j] += si * w[i * d + j];
                    }
                }
                agent_discover::search::provider::normalize(y.iter().map(|v| *v as f32).collect())
            }
        }
    }

    fn tools(&self, cache: &mut Cache, model: &MiniLm, texts: &[String]) -> Vec<Vec<f32>> {
        match &self.table {
            Some(_) if !self.query_only => {
                texts.iter().map(|x| self.static_embed(model, x)).collect()
            }
            _ => cache.embed(model, texts),
        }
    }

    fn queries(&self, cache: &mut Cache, model: &MiniLm, texts: &[String]) -> Vec<Vec<f32>> {
        match &self.table {
            Some(_) => texts.iter().map(|x| self.static_embed(model, x)).collect(),
            None => cache.embed(model, texts),
        }
    }
}

/// Process CPU time in microseconds (both threads when the encoder splits a product).
fn cpu_us() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 * 1e6 + t.tv_nsec as f64 / 1e3
}

/// p50 / p90 wall and CPU time of embedding each realistic query (tuning + held-out) with the full model in each
/// weight format (f16 and int8, interleaved query by query, the order alternating, so both see the same load), and
/// with the static table when one is loaded. Three rounds; the first warms caches. Also the cosine between the two
/// formats' embeddings of each query.
fn time_queries(dir: &Path, embedder: &Embedder, model: &MiniLm) {
    use agent_discover::embed::WeightFormat;
    let mut qs: Vec<String> = Vec::new();
    for f in ["tool_queries.json", "tool_queries_heldout.json"] {
        let d = data(f);
        for q in d["queries"].as_array().unwrap() {
            qs.push(q["query"].as_str().unwrap().to_owned());
        }
    }
    let words: Vec<usize> = qs.iter().map(|q| q.split_whitespace().count()).collect();
    let mut sorted = words.clone();
    sorted.sort();
    println!(
        "{} queries, words p50 {}, {} thread(s) per product",
        qs.len(),
        sorted[sorted.len() / 2],
        agent_discover::embed::product_threads()
    );
    // SEARCH_EVAL_TIME=f16|int8 times that format alone, SEARCH_EVAL_TIME_QUERIES=n the first n queries only (for
    // callgrind: `valgrind --tool=callgrind --toggle-collect='*Bert*forward*' ...`).
    let only = std::env::var("SEARCH_EVAL_TIME")
        .ok()
        .and_then(|v| WeightFormat::parse(&v));
    if let Some(n) = std::env::var("SEARCH_EVAL_TIME_QUERIES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        qs.truncate(n);
    }
    let models: Vec<(String, MiniLm)> = [WeightFormat::F16, WeightFormat::Int8]
        .into_iter()
        .filter(|f| only.is_none_or(|o| o == *f))
        .map(|f| {
            (
                format!("MiniLM {}", f.name()),
                MiniLm::load_with(dir, f).unwrap(),
            )
        })
        .collect();
    let (mut wall, mut cpu) = (
        vec![Vec::new(); models.len()],
        vec![Vec::new(); models.len()],
    );
    for round in 0..3 {
        for (n, q) in qs.iter().enumerate() {
            for j in 0..models.len() {
                let m = if n % 2 == 0 { j } else { models.len() - 1 - j };
                let (t0, c0) = (std::time::Instant::now(), cpu_us());
                std::hint::black_box(models[m].1.embed(q));
                if round > 0 {
                    wall[m].push(t0.elapsed().as_secs_f64() * 1e3);
                    cpu[m].push((cpu_us() - c0) / 1e3);
                }
            }
        }
    }
    let p = |v: &mut Vec<f64>, q: f64| {
        v.sort_by(f64::total_cmp);
        v[((v.len() - 1) as f64 * q) as usize]
    };
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    };
    for (m, (name, _)) in models.iter().enumerate() {
        println!(
            "{name}: wall p50 {:.3} ms p90 {:.3} ms | cpu p50 {:.3} ms p90 {:.3} ms | loadavg {}",
            p(&mut wall[m], 0.5),
            p(&mut wall[m], 0.9),
            p(&mut cpu[m], 0.5),
            p(&mut cpu[m], 0.9),
            load()
        );
    }
    if models.len() < 2 {
        return;
    }
    let mut cos: Vec<f64> = qs
        .iter()
        .map(|q| {
            let (a, b) = (models[0].1.embed(q), models[1].1.embed(q));
            f64::from(agent_discover::search::dot(&a, &b))
        })
        .collect();
    let mean = cos.iter().sum::<f64>() / cos.len() as f64;
    println!(
        "cosine f16 vs int8 per query: mean {mean:.6}, min {:.6}",
        p(&mut cos, 0.0)
    );
    if embedder.table.is_some() {
        let mut w = Vec::new();
        for round in 0..3 {
            for q in &qs {
                let t0 = std::time::Instant::now();
                std::hint::black_box(embedder.static_embed(model, q));
                if round > 0 {
                    w.push(t0.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        println!("static table: wall p50 {:.3} ms", p(&mut w, 0.5));
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
/// (call_as, normalised BM25, cosine, cosine of the tool's server: the mean of its tools' vectors).
type Cands = Vec<(String, f64, f64, f64)>;

/// Each server's unit mean tool vector.
fn centroids(names: &[String], vecs: &[Vec<f32>]) -> HashMap<String, Vec<f32>> {
    let mut sums: HashMap<String, Vec<f32>> = HashMap::new();
    for (n, v) in names.iter().zip(vecs) {
        let server = n.split("__").next().unwrap().to_owned();
        let e = sums.entry(server).or_insert_with(|| vec![0.0; v.len()]);
        for (a, b) in e.iter_mut().zip(v) {
            *a += b;
        }
    }
    sums.into_iter()
        .map(|(k, v)| (k, agent_discover::search::provider::normalize(v)))
        .collect()
}

/// Evidence of a query as a whole, for the no-match rules: the best, second and mean of the 2nd-10th cosines, and
/// the best normalised BM25.
#[derive(Clone, Copy, Debug)]
struct Evidence {
    c1: f64,
    c2: f64,
    next9: f64,
    b1: f64,
}

async fn candidates(
    search: &Search,
    names: &[String],
    vecs: &[Vec<f32>],
    cents: &HashMap<String, Vec<f32>>,
    q: &str,
    qv: &[f32],
) -> (Cands, Evidence) {
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
    let b1 = out.values().map(|v| v.0).fold(0.0, f64::max);
    let ev = Evidence {
        c1: cos.first().map_or(0.0, |c| c.1),
        c2: cos.get(1).map_or(0.0, |c| c.1),
        next9: cos.iter().skip(1).take(9).map(|c| c.1).sum::<f64>()
            / cos.len().saturating_sub(1).clamp(1, 9) as f64,
        b1,
    };
    let all: HashMap<&str, f64> = cos.iter().map(|(i, c)| (names[*i].as_str(), *c)).collect();
    for (i, _) in cos.iter().take(50) {
        out.entry(names[*i].clone()).or_insert((0.0, 0.0));
    }
    let c = out
        .into_iter()
        .map(|(k, (b, _))| {
            let c = all.get(k.as_str()).copied().unwrap_or(0.0);
            let sc = cents
                .get(k.split("__").next().unwrap())
                .map(|v| agent_discover::search::dot(v, qv) as f64)
                .unwrap_or(0.0);
            (k, b, c, sc)
        })
        .collect();
    (c, ev)
}

/// One no-match rule: a name and the gate value of a query (matched when at or above a threshold), from the fused
/// top score and the query's evidence.
type Rule = (String, Box<dyn Fn(f64, &Evidence) -> f64>);

fn no_match_rules() -> Vec<Rule> {
    let mut rules: Vec<Rule> = vec![
        ("top fused score (today's rule)".into(), Box::new(|s, _| s)),
        ("top cosine".into(), Box::new(|_, e| e.c1)),
        ("cosine margin c1-c2".into(), Box::new(|_, e| e.c1 - e.c2)),
        (
            "cosine margin c1-mean(c2..c10)".into(),
            Box::new(|_, e| e.c1 - e.next9),
        ),
    ];
    for a in [0.5, 1.0, 2.0, 4.0] {
        rules.push((
            format!("top score + {a}·margin"),
            Box::new(move |s, e| s + a * (e.c1 - e.next9)),
        ));
        rules.push((
            format!("top cosine + {a}·margin"),
            Box::new(move |_, e| e.c1 + a * (e.c1 - e.next9)),
        ));
    }
    // Weak semantic and weak lexical evidence: refused only when both are weak (a BM25 match covering at least
    // `tb` of the query is enough on its own).
    for a in [0.0, 1.0, 2.0] {
        for tb in [0.6, 0.8, 0.9] {
            rules.push((
                format!("cosine + {a}·margin, or BM25 >= {tb}"),
                Box::new(move |_, e| {
                    if e.b1 >= tb {
                        9.0
                    } else {
                        e.c1 + a * (e.c1 - e.next9)
                    }
                }),
            ));
        }
    }
    rules
}

/// The threshold for `gates` (in-catalog first, then `n_no` no-answer) that refuses the most no-answer queries while
/// at least 97% (SEARCH_EVAL_FOUND) of the in-catalog ones stay found; between the two gate values it falls between.
fn tune_threshold(gates: &[f64], n_no: usize) -> f64 {
    let n_in = gates.len() - n_no;
    let share: f64 = std::env::var("SEARCH_EVAL_FOUND")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.97);
    let need = (n_in as f64 * share - 1e-9).ceil() as usize;
    let mut vals: Vec<f64> = gates.to_vec();
    vals.sort_by(f64::total_cmp);
    vals.dedup();
    let mut best: Option<(usize, usize, f64)> = None;
    for (i, v) in vals.iter().enumerate() {
        // Thresholds just above each value, and below all.
        let t = if i == 0 {
            f64::NEG_INFINITY
        } else {
            (vals[i - 1] + v) / 2.0
        };
        let found = gates[..n_in].iter().filter(|g| **g >= t).count();
        let refused = gates[n_in..].iter().filter(|g| **g < t).count();
        if found >= need && best.is_none_or(|b| (refused, found) > (b.0, b.1)) {
            best = Some((refused, found, t));
        }
    }
    best.map_or(f64::NEG_INFINITY, |b| b.2)
}

#[derive(Clone, Copy, Debug)]
enum Fusion {
    Weighted(f64),
    Rrf(f64),
    /// Weighted, plus a share of the server's cosine (two-stage server-then-tool ranking, softened).
    Server(f64, f64),
}

/// Ranked names and the score used for the no-match rule.
fn fuse(c: &Cands, f: Fusion) -> (Vec<String>, f64) {
    let mut scored: Vec<(String, f64, f64)> = match f {
        Fusion::Weighted(w) => c
            .iter()
            .map(|(n, b, cos, _)| (n.clone(), w * cos.max(0.0) + (1.0 - w) * b, 0.0))
            .collect(),
        Fusion::Server(w, g) => c
            .iter()
            .map(|(n, b, cos, sc)| {
                (
                    n.clone(),
                    (w * cos.max(0.0) + (1.0 - w) * b) * (1.0 - g) + g * sc.max(0.0),
                    0.0,
                )
            })
            .collect(),
        Fusion::Rrf(k) => {
            let mut by_b: Vec<&(String, f64, f64, f64)> = c.iter().collect();
            by_b.sort_by(|a, b| b.1.total_cmp(&a.1));
            let rb: HashMap<&str, usize> = by_b
                .iter()
                .enumerate()
                .filter(|(_, x)| x.1 > 0.0)
                .map(|(i, x)| (x.0.as_str(), i + 1))
                .collect();
            let mut by_c: Vec<&(String, f64, f64, f64)> = c.iter().collect();
            by_c.sort_by(|a, b| b.2.total_cmp(&a.2));
            let rc: HashMap<&str, usize> = by_c
                .iter()
                .enumerate()
                .map(|(i, x)| (x.0.as_str(), i + 1))
                .collect();
            c.iter()
                .map(|(n, _, _, _)| {
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
        Fusion::Weighted(_) | Fusion::Server(..) => scored.first().map(|x| x.1).unwrap_or(0.0),
        Fusion::Rrf(_) => top_cos,
    };
    (scored.into_iter().map(|x| x.0).collect(), gate)
}

/// The BM25-first rule (issue 31): a query whose best BM25 hit covers at least `t` (normalised, coverage-scaled)
/// and leads the second by at least `m` is answered by BM25 alone, without a query embedding; the others by `f`.
/// Returns the ranking, the no-match gate value and whether the embedding was skipped.
fn gated(c: &Cands, f: Fusion, t: f64, m: f64) -> (Vec<String>, f64, bool) {
    let mut b: Vec<f64> = c.iter().map(|x| x.1).collect();
    b.sort_by(|x, y| y.total_cmp(x));
    let (b1, b2) = (
        b.first().copied().unwrap_or(0.0),
        b.get(1).copied().unwrap_or(0.0),
    );
    if b1 >= t && b1 - b2 >= m {
        let (r, g) = fuse(c, Fusion::Weighted(0.0));
        (r, g, true)
    } else {
        let (r, g) = fuse(c, f);
        (r, g, false)
    }
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
    let mut embedder = Embedder::from_env(&model);
    if let Some(lambda) = std::env::var("SEARCH_EVAL_STATIC_MAP")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        embedder.fit_map(&mut cache, &model, &catalog(), lambda);
    }
    if std::env::var("SEARCH_EVAL_TIME").is_ok() {
        time_queries(&dir, &embedder, &model);
        return;
    }
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
        Fusion::Server(0.7, 0.1),
        Fusion::Server(0.7, 0.2),
        Fusion::Server(0.7, 0.3),
        Fusion::Server(0.8, 0.2),
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
        let vecs = embedder.tools(&mut cache, &model, &texts);
        let gtexts: Vec<String> = gtools.iter().map(|t| variant(v, t)).collect();
        let gvecs = embedder.tools(&mut cache, &model, &gtexts);
        let cents = centroids(&names, &vecs);
        let gcents = centroids(&gnames, &gvecs);
        // Candidates per set and query, computed once per variant.
        let mut per_set = Vec::new();
        let mut evidence: Vec<Vec<Evidence>> = Vec::new();
        for s in &sets {
            let qs: Vec<String> = s
                .queries
                .iter()
                .map(|q| q.0.clone())
                .chain(s.no_match.iter().cloned())
                .collect();
            let qv = embedder.queries(&mut cache, &model, &qs);
            let (mut c, mut e) = (Vec::new(), Vec::new());
            for (q, v) in qs.iter().zip(&qv) {
                let (cands, ev) = candidates(&search, &names, &vecs, &cents, q, v).await;
                c.push(cands);
                e.push(ev);
            }
            per_set.push(c);
            evidence.push(e);
        }
        let gq: Vec<String> = gqueries.iter().map(|q| q.0.clone()).collect();
        let gqv = embedder.queries(&mut cache, &model, &gq);
        let mut gc = Vec::new();
        for (q, v) in gq.iter().zip(&gqv) {
            gc.push(candidates(&gsearch, &gnames, &gvecs, &gcents, q, v).await.0);
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
        if v.starts_with('A') {
            // BM25-first (issue 31): share of queries answered without an embedding, and the quality of the mix.
            let f = Fusion::Weighted(0.7);
            let thr = agent_discover::search::NO_MATCH;
            let mut grid = vec![(f64::INFINITY, 0.0)];
            for t in [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0] {
                for m in [0.0, 0.1, 0.2, 0.3, 0.5, 0.7] {
                    grid.push((t, m));
                }
            }
            for (t, m) in grid {
                let mut line = format!("bm25-first t {t:>4.2} m {m:.1}");
                for (s, c) in sets.iter().zip(&per_set) {
                    let n = s.queries.len();
                    let (mut t1, mut t5, mut found, mut skip) = (0, 0, 0, 0);
                    for ((_, exp), c) in s.queries.iter().zip(&c[..n]) {
                        let (r, g, sk) = gated(c, f, t, m);
                        found += usize::from(g >= thr);
                        skip += usize::from(sk);
                        t1 += usize::from(r.first().is_some_and(|x| exp.contains(x)));
                        t5 += usize::from(r.iter().take(5).any(|x| exp.contains(x)));
                    }
                    let (mut refused, mut nskip) = (0, 0);
                    for c in &c[n..] {
                        let (_, g, sk) = gated(c, f, t, m);
                        refused += usize::from(g < thr);
                        nskip += usize::from(sk);
                    }
                    line.push_str(&format!(
                        " | {} skip {:.2} top1 {:.3} top5 {:.3} found {:.2} refused {:.2} (no-answer skip {:.2})",
                        s.name,
                        (skip + nskip) as f64 / (n + s.no_match.len()) as f64,
                        t1 as f64 / n as f64,
                        t5 as f64 / n as f64,
                        found as f64 / n as f64,
                        refused as f64 / s.no_match.len().max(1) as f64,
                        nskip as f64 / s.no_match.len().max(1) as f64,
                    ));
                }
                let (mut r1, mut r5, mut skip) = (0.0, 0.0, 0);
                for ((_, labels), c) in gqueries.iter().zip(&gc) {
                    let (r, _, sk) = gated(c, f, t, m);
                    skip += usize::from(sk);
                    let hit = |k: usize| {
                        r.iter().take(k).filter(|x| labels.contains(x)).count() as f64
                            / labels.len() as f64
                    };
                    r1 += hit(1);
                    r5 += hit(5);
                }
                let gn = gqueries.len() as f64;
                line.push_str(&format!(
                    " | golden skip {:.2} R@1 {:.3} R@5 {:.3}",
                    skip as f64 / gn,
                    r1 / gn,
                    r5 / gn
                ));
                println!("{line}");
            }
        }
        if v.starts_with('A') {
            // No-match rules on today's fusion (w 0.7): thresholds tuned on the tuning set only.
            let f = Fusion::Weighted(0.7);
            let gates_of = |rule: &Rule, si: usize| -> Vec<f64> {
                per_set[si]
                    .iter()
                    .zip(&evidence[si])
                    .map(|(c, e)| rule.1(fuse(c, f).1, e))
                    .collect()
            };
            let fixed: Rule = (
                "top fused score >= 0.25 (shipped)".into(),
                Box::new(|s, _| s),
            );
            for (i, rule) in std::iter::once(fixed).chain(no_match_rules()).enumerate() {
                let tune = gates_of(&rule, 0);
                let thr = if i == 0 {
                    agent_discover::search::NO_MATCH
                } else {
                    tune_threshold(&tune, sets[0].no_match.len())
                };
                let mut line = format!("no-match {:<40} thr {thr:>7.3}", rule.0);
                for (si, s) in sets.iter().enumerate() {
                    let g = if si == 0 {
                        tune.clone()
                    } else {
                        gates_of(&rule, si)
                    };
                    let n = s.queries.len();
                    let found = g[..n].iter().filter(|x| **x >= thr).count();
                    let refused = g[n..].iter().filter(|x| **x < thr).count();
                    line.push_str(&format!(
                        " | {} found {:.2} refused {:.2}",
                        s.name,
                        found as f64 / n as f64,
                        refused as f64 / s.no_match.len().max(1) as f64
                    ));
                }
                println!("{line}");
            }
        }
    }
}
