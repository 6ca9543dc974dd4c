//! Times the forward pass of the search bench's realistic queries (10-30 words, one at a time, as `find_tool` embeds them): prints CPU p50/p90 and
//! wall p50 over `FORWARD_TIME_ROUNDS` rounds (default 5) of the tuning and held-out queries.
//! `AGENT_DISCOVER_MODEL_DIR=... cargo run --release -p ad-embed --example forward_time`

use std::path::PathBuf;
use std::time::Instant;

fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn queries() -> Vec<String> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
    let mut out = Vec::new();
    for f in ["tool_queries.json", "tool_queries_heldout.json"] {
        let text = std::fs::read_to_string(root.join(f)).expect("query set");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let items = v
            .as_array()
            .cloned()
            .or_else(|| v.get("queries").and_then(|q| q.as_array().cloned()))
            .unwrap_or_default();
        for q in items {
            // The search bench's realistic queries: 10-30 words.
            if let Some(s) = q.get("query").and_then(|s| s.as_str())
                && (10..=30).contains(&s.split_whitespace().count())
            {
                out.push(s.to_string());
            }
        }
    }
    out
}

fn main() {
    let dir = std::env::var("AGENT_DISCOVER_MODEL_DIR").expect("AGENT_DISCOVER_MODEL_DIR");
    let m = ad_embed::MiniLm::load(std::path::Path::new(&dir)).expect("model");
    let qs = queries();
    assert!(!qs.is_empty(), "no queries found");
    let rounds: usize = std::env::var("FORWARD_TIME_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let toks: Vec<usize> = qs.iter().map(|q| m.tokenize(q).len()).collect();
    let mut sorted = toks.clone();
    sorted.sort_unstable();
    for q in &qs {
        std::hint::black_box(m.embed(q));
    }
    // `FORWARD_TIME_EVICT_MB=N`: write N MB between queries, as other processes' work does between an agent's
    // queries, so the weights come from memory rather than the last-level cache.
    let evict_mb: usize = std::env::var("FORWARD_TIME_EVICT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut scratch = vec![0u8; evict_mb << 20];
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for q in &qs {
            for (i, b) in scratch.iter_mut().enumerate().step_by(64) {
                *b = b.wrapping_add(i as u8);
            }
            std::hint::black_box(&scratch);
            let (c0, w0) = (cpu_ns(), Instant::now());
            std::hint::black_box(m.embed(q));
            cpu.push(cpu_ns() - c0);
            wall.push(w0.elapsed().as_nanos() as u64);
        }
    }
    cpu.sort_unstable();
    wall.sort_unstable();
    let ms = |v: &[u64], p: usize| v[v.len() * p / 100] as f64 / 1e6;
    println!(
        "{} queries x {rounds} (tokens p50 {}), weights {}: CPU p50 {:.3} ms p90 {:.3} ms, wall p50 {:.3} ms",
        qs.len(),
        sorted[sorted.len() / 2],
        m.weights().name(),
        ms(&cpu, 50),
        ms(&cpu, 90),
        ms(&wall, 50)
    );
}
