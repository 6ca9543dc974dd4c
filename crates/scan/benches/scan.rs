//! How long the scanner takes per definition, over real tools (the npm top 120's 2,171 and the 1.2k-tool catalog)
//! and the poisoned corpora (the attack families' tuning and held-out parts too): `cargo bench -p ad-scan` (release profile). Prints the mean, p50, p99 and max.

use std::time::Instant;

use ad_scan::{Context, Kind, scan};
use serde_json::Value;

fn load(file: &str) -> Vec<(Kind, Value)> {
    let path = format!("{}/../../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).unwrap();
    if let Some(cases) = v["cases"].as_array() {
        return cases
            .iter()
            .map(|c| {
                (
                    Kind::parse(c["kind"].as_str().unwrap()).unwrap(),
                    c["definition"].clone(),
                )
            })
            .collect();
    }
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tools"].as_array().cloned().unwrap_or_default())
        .map(|t| (Kind::Tool, t))
        .collect()
}

fn main() {
    for file in [
        "scan/npm_top120_tools.json",
        "tool_catalog.json",
        "scan/corpus.json",
        "scan/heldout.json",
        "scan/attacks/attacks_tuning.json",
        "scan/attacks/attacks_heldout.json",
    ] {
        let defs = load(file);
        // One warm-up pass (the rules' patterns are built on first use).
        for (k, d) in &defs {
            std::hint::black_box(scan(*k, d, &Context::default()));
        }
        let mut times: Vec<f64> = Vec::with_capacity(defs.len() * 5);
        for _ in 0..5 {
            for (k, d) in &defs {
                let t = Instant::now();
                std::hint::black_box(scan(*k, d, &Context::default()));
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| times[((times.len() as f64 - 1.0) * p) as usize];
        let mean = times.iter().sum::<f64>() / times.len() as f64;
        println!(
            "{file}: {} definitions x5: mean {mean:.1} us, p50 {:.1} us, p99 {:.1} us, max {:.1} us",
            defs.len(),
            pct(0.5),
            pct(0.99),
            times[times.len() - 1]
        );
    }
}
