//! How long the scanner takes per definition, over real tools (the npm top 120's 2,171 and the 1.2k-tool catalog)
//! and the poisoned corpora (the attack families' tuning and held-out parts too): `cargo bench -p ad-scan --bench
//! scan` (release profile). Prints, per set, the mean, p50, p99 and max of each definition's scan in CPU time of the
//! scanning thread (the machine is shared: CPU time is what a scan costs, wall clock what it waited too) and the
//! wall-clock p50. With `AGENT_DISCOVER_MODEL_DIR` set, the real-tool sets again with the semantic signal of the
//! local model (`scan_with`), its exemplars embedded before timing.

use std::time::Instant;

use ad_scan::{Context, Kind, Model, scan_with};
use serde_json::Value;

fn load(file: &str) -> Vec<(Kind, Value)> {
    let path = format!("{}/../../tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect(&path)).unwrap();
    if let Some(cases) = v["cases"].as_array() {
        return cases
            .iter()
            .map(|c| {
                (
                    Kind::parse(c["kind"].as_str().unwrap_or("tool")).unwrap(),
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

/// CPU time of the calling thread, in microseconds.
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

struct Local(ad_embed::MiniLm);

impl ad_scan::Encoder for Local {
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(self.0.embed_batch(texts))
    }
}

fn run(label: &str, defs: &[(Kind, Value)], model: Option<&Model>, rounds: usize) {
    // One warm-up pass (the rules' patterns are built on first use).
    for (k, d) in defs {
        std::hint::black_box(scan_with(*k, d, &Context::default(), model));
    }
    let mut cpu: Vec<f64> = Vec::with_capacity(defs.len() * rounds);
    let mut wall: Vec<f64> = Vec::with_capacity(defs.len() * rounds);
    for _ in 0..rounds {
        for (k, d) in defs {
            let (t, c) = (Instant::now(), thread_cpu_us());
            std::hint::black_box(scan_with(*k, d, &Context::default(), model));
            cpu.push(thread_cpu_us() - c);
            wall.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    cpu.sort_by(f64::total_cmp);
    wall.sort_by(f64::total_cmp);
    let pct = |v: &[f64], p: f64| v[((v.len() as f64 - 1.0) * p) as usize];
    let mean = cpu.iter().sum::<f64>() / cpu.len() as f64;
    println!(
        "{label}: {} definitions x{rounds}: CPU mean {mean:.1} us, p50 {:.1} us, p99 {:.1} us, max {:.1} us; wall p50 {:.1} us",
        defs.len(),
        pct(&cpu, 0.5),
        pct(&cpu, 0.99),
        cpu[cpu.len() - 1],
        pct(&wall, 0.5),
    );
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
        run(file, &load(file), None, 5);
    }
    let Some(dir) = std::env::var_os("AGENT_DISCOVER_MODEL_DIR") else {
        println!("AGENT_DISCOVER_MODEL_DIR is not set: the semantic signal is not measured");
        return;
    };
    let model = Model::new(Local(
        ad_embed::MiniLm::load(std::path::Path::new(&dir)).expect("the model loads"),
    ));
    model.ready().expect("the exemplars embed");
    for file in ["scan/npm_top120_tools.json", "tool_catalog.json"] {
        run(
            &format!("{file} with the semantic signal"),
            &load(file),
            Some(&model),
            2,
        );
    }
}
