//! Times loading the model and embedding 600 tool-like texts in batches of 32, as indexing a catalog does.
//! `AGENT_DISCOVER_MODEL_DIR=... cargo run --release -p ad-embed --example batch_time`

fn main() {
    let dir = std::env::var("AGENT_DISCOVER_MODEL_DIR").expect("AGENT_DISCOVER_MODEL_DIR");
    let t = std::time::Instant::now();
    let m = ad_embed::MiniLm::load(std::path::Path::new(&dir)).expect("model");
    let load = t.elapsed();
    let texts: Vec<String> = (0..600)
        .map(|i| {
            format!(
                "tool {i}: reads files from the repository, lists branches and opens pull requests for user {i} \
                 with a title and a body"
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = std::time::Instant::now();
    for batch in refs.chunks(32) {
        std::hint::black_box(m.embed_batch(batch));
    }
    println!(
        "load {:.0} ms, 600 texts in batches of 32: {:.0} ms",
        load.as_secs_f64() * 1e3,
        t.elapsed().as_secs_f64() * 1e3
    );
}
