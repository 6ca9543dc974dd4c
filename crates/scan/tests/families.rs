//! The scanner measured on the attack families (`tests/data/scan/attacks/`, a tuning part and a held-out part never
//! tuned on) and on the clean set (every real tool the repository holds: the introspection catalog, the npm top
//! 120's tools, the mcpproxy-go evaluation corpus), deduplicated. Prints per-family recall and the clean tools it
//! withholds; asserts the targets (recall >= 0.95 overall and >= 0.85 per family on both parts; <= 0.5% of the clean
//! set withheld). Twice: with the rules alone, and with the semantic signal of the local embedding model
//! (all-MiniLM-L6-v2 from `AGENT_DISCOVER_MODEL_DIR`) beside them.

use std::collections::{BTreeMap, HashSet};

use ad_scan::{Context, Kind, Model, ToolRef, scan_with, semantic_scores, warns, withholds};
use serde_json::Value;

fn data(file: &str) -> Value {
    let path = format!("{}/../../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Per family: (withheld, cases); the ids missed.
fn recall(
    file: &str,
    show_misses: bool,
    model: Option<&Model>,
) -> (BTreeMap<String, (usize, usize)>, Vec<String>) {
    let v = data(file);
    let mut per: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    for c in v["cases"].as_array().unwrap() {
        let refs: Vec<ToolRef> = c["other_tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| ToolRef {
                server: t["server"].as_str().unwrap(),
                tool: t["name"].as_str().unwrap(),
            })
            .collect();
        let ctx = Context {
            server: c["server"].as_str().unwrap_or("server"),
            tools: &refs,
        };
        let f = scan_with(Kind::Tool, &c["definition"], &ctx, model);
        let hit = withholds(&f);
        if show_misses
            && let Some(m) = model
            && std::env::var_os("SEMANTIC_DEBUG").is_some()
        {
            let best = semantic_scores(Kind::Tool, &c["definition"], m)
                .unwrap()
                .into_iter()
                .max_by(|a, b| a.margin().total_cmp(&b.margin()));
            if let Some(s) = best {
                eprintln!(
                    "attack {} {} a={:.2} b={:.2} p={:.2} m={:.2} rules_hit={}: {}",
                    c["family"],
                    c["id"],
                    s.attack,
                    s.benign,
                    s.purpose,
                    s.margin(),
                    withholds(&ad_scan::scan(Kind::Tool, &c["definition"], &ctx)),
                    s.sentence
                );
            }
        }
        let e = per
            .entry(c["family"].as_str().unwrap().to_owned())
            .or_default();
        e.0 += hit as usize;
        e.1 += 1;
        if !hit {
            misses.push(c["id"].as_str().unwrap().to_owned());
            if show_misses && std::env::var_os("SCAN_DEBUG").is_some() {
                eprintln!(
                    "== missed {}: {:?}",
                    c["id"],
                    f.iter().map(|f| (f.rule, f.severity)).collect::<Vec<_>>()
                );
            }
        }
    }
    (per, misses)
}

/// Every real tool the repository holds, once per (name, description, input schema).
fn clean_set() -> Vec<(String, Value)> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut add = |server: &str, t: &Value| {
        let key = (
            t["name"].to_string(),
            t["description"].to_string(),
            t["inputSchema"].to_string(),
        );
        if seen.insert(key) {
            out.push((server.to_owned(), t.clone()));
        }
    };
    for file in ["tool_catalog.json", "scan/npm_top120_tools.json"] {
        for s in data(file)["servers"].as_array().unwrap() {
            let server = s["name"].as_str().or(s["package"].as_str()).unwrap_or("?");
            for t in s["tools"].as_array().into_iter().flatten() {
                add(server, t);
            }
        }
    }
    for t in data("mcpproxy_golden_v1.json")["tools"].as_array().unwrap() {
        let def = serde_json::json!({"name": t["tool"], "description": t["description"],
            "inputSchema": t.get("inputSchema").cloned().unwrap_or(serde_json::json!({"type": "object"}))});
        add(t["server"].as_str().unwrap_or("?"), &def);
    }
    out
}

/// The local model, from `AGENT_DISCOVER_MODEL_DIR` (set by scripts/test.sh; the test fails without it).
struct Local(ad_embed::MiniLm);

impl ad_scan::Encoder for Local {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(self.0.embed_batch(texts))
    }
}

fn local_model() -> Model {
    let dir = std::env::var_os("AGENT_DISCOVER_MODEL_DIR").expect(
        "AGENT_DISCOVER_MODEL_DIR must name the all-MiniLM-L6-v2 model directory (scripts/test.sh sets it)",
    );
    let m = ad_embed::MiniLm::load(std::path::Path::new(&dir))
        .unwrap_or_else(|e| panic!("cannot load the model from {dir:?}: {e}"));
    let model = Model::new(Local(m));
    model.ready().expect("the exemplars embed");
    model
}

#[test]
fn attack_families_and_the_clean_set() {
    measure(None, "rules");
}

#[test]
fn attack_families_and_the_clean_set_with_the_semantic_signal() {
    measure(Some(&local_model()), "rules+model");
}

fn measure(model: Option<&Model>, label: &str) {
    let mut failures = Vec::new();
    for (file, part) in [
        ("scan/attacks/attacks_tuning.json", "tuning"),
        ("scan/attacks/attacks_heldout.json", "held-out"),
    ] {
        // Misses of the held-out part are never printed: whoever tunes the rules does not read them.
        let (per, _) = recall(file, part == "tuning", model);
        let (mut hit, mut n) = (0, 0);
        for (fam, (h, c)) in &per {
            let r = *h as f64 / *c as f64;
            eprintln!("[{label}] {part:8} {fam:24} {h:3}/{c:3} = {r:.2}");
            hit += h;
            n += c;
            if r < 0.85 {
                failures.push(format!("{part} {fam}: recall {r:.2}"));
            }
        }
        let r = hit as f64 / n as f64;
        eprintln!("[{label}] {part:8} {:24} {hit:3}/{n:3} = {r:.3}", "all");
        if r < 0.95 {
            failures.push(format!("{part}: recall {r:.3}"));
        }
    }
    let clean = clean_set();
    let mut withheld = Vec::new();
    let mut warned = 0;
    for (server, t) in &clean {
        let short = server.rsplit('/').next().unwrap_or(server);
        let f = scan_with(
            Kind::Tool,
            t,
            &Context {
                server: short,
                tools: &[],
            },
            model,
        );
        if let Some(m) = model
            && std::env::var_os("SEMANTIC_DEBUG").is_some()
        {
            for s in semantic_scores(Kind::Tool, t, m).unwrap() {
                if s.attack > 0.5 && s.margin() > 0.0 {
                    eprintln!(
                        "clean a={:.2} b={:.2} p={:.2} m={:.2} {server} {}: {}",
                        s.attack,
                        s.benign,
                        s.purpose,
                        s.margin(),
                        t["name"],
                        s.sentence
                    );
                }
            }
        }
        if f.iter().any(|f| f.rule == "resembles_attack") {
            eprintln!(
                "[{label}] clean {server} {}: {}",
                t["name"].as_str().unwrap_or("?"),
                f.iter()
                    .filter(|f| f.rule == "resembles_attack")
                    .map(|f| format!("{} {}", f.severity.as_str(), f.detail))
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        warned += warns(&f) as usize;
        if withholds(&f) {
            withheld.push(format!(
                "{server} {}: {}",
                t["name"].as_str().unwrap_or("?"),
                f.iter()
                    .filter(|f| f.severity > ad_scan::Severity::Low)
                    .map(|f| if std::env::var_os("SCAN_DEBUG").is_some() {
                        format!(
                            "{} ({}) at {}: {}",
                            f.rule,
                            f.severity.as_str(),
                            f.field,
                            f.excerpt
                        )
                    } else {
                        format!("{} ({}) at {}", f.rule, f.severity.as_str(), f.field)
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
    }
    eprintln!(
        "[{label}] clean set: {} of {} withheld ({:.2}%)",
        withheld.len(),
        clean.len(),
        withheld.len() as f64 * 100.0 / clean.len() as f64
    );
    for w in &withheld {
        eprintln!("  withheld: {w}");
    }
    eprintln!(
        "[{label}] clean set: {warned} of {} shown with a warning ({:.2}%)",
        clean.len(),
        warned as f64 * 100.0 / clean.len() as f64
    );
    assert!(clean.len() >= 2900, "clean set has {} tools", clean.len());
    if withheld.len() * 200 > clean.len() {
        failures.push(format!(
            "clean set: {} of {} withheld",
            withheld.len(),
            clean.len()
        ));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
