//! Local embeddings (`agent_discover::embed`): all-MiniLM-L6-v2 in Rust against tests/data/minilm_reference.json
//! (ids from the `tokenizers` library, embeddings from onnxruntime and numpy; made by scripts/minilm_reference.py),
//! a semantic sanity check, and inputs that must not break it. Needs the model: scripts/install-model.sh.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use agent_discover::embed::{self, DIM, MiniLm};
use agent_discover::search::Provider;
use agent_discover::search::provider::LocalModel;
use serde_json::Value;

fn model_dir() -> std::path::PathBuf {
    embed::find_model_dir(None).unwrap_or_else(|| {
        panic!(
            "the all-MiniLM-L6-v2 model files are not installed: run scripts/install-model.sh (it puts them in \
             ~/.cache/agent-discover/models/all-MiniLM-L6-v2) or set AGENT_DISCOVER_MODEL_DIR to a directory \
             holding model.safetensors and vocab.txt"
        )
    })
}

fn model() -> &'static MiniLm {
    static MODEL: OnceLock<MiniLm> = OnceLock::new();
    MODEL.get_or_init(|| {
        let dir = model_dir();
        MiniLm::load(&dir)
            .unwrap_or_else(|e| panic!("loading the model from {}: {e}", dir.display()))
    })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let na: f64 = a.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("an array of numbers")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

#[test]
fn embeddings_match_the_reference() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/minilm_reference.json"
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("reading the reference file"))
            .expect("the reference file is JSON");
    assert_eq!(doc["model_id"], embed::MODEL_ID);
    let items = doc["items"].as_array().expect("items");
    assert!(items.len() >= 10, "the reference has too few items");
    // The default weights (int8) and the f16 ones, each against the float32 reference with its own bound. The int8
    // default quantises both feed-forward products' activations to 8 bits with a zero point per row (BENCHMARKS.md,
    // "find_tool, fourth pass"): its lowest cosine to float32 here is 0.9949 (0.9928 with the symmetric 8 bits of
    // the first product alone, the default before; 0.9965 with 13 bits everywhere).
    let f16 = MiniLm::load_with(&model_dir(), embed::WeightFormat::F16)
        .expect("loading with f16 weights");
    for (m, f32_bound) in [(model(), 0.99), (&f16, 0.9999)] {
        let texts: Vec<&str> = items
            .iter()
            .map(|i| i["text"].as_str().expect("text"))
            .collect();
        let got = m.embed_batch(&texts);
        assert_eq!(got.len(), texts.len());
        let (mut min_int8, mut min_f32) = (f64::MAX, f64::MAX);
        for (item, (text, e)) in items.iter().zip(texts.iter().zip(&got)) {
            let want_ids: Vec<u32> = item["ids"]
                .as_array()
                .expect("ids")
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(m.tokenize(text), want_ids, "token ids of {text:?}");
            assert_eq!(e.len(), DIM);
            let c = cosine(e, &floats(&item["embedding"]));
            assert!(
                c > 0.99,
                "cosine {c} with the onnxruntime embedding of {text:?}"
            );
            min_int8 = min_int8.min(c);
            if let Some(f) = item.get("embedding_f32") {
                let c = cosine(e, &floats(f));
                assert!(
                    c > f32_bound,
                    "cosine {c} with the float32 embedding of {text:?} ({:?} weights)",
                    m.weights()
                );
                min_f32 = min_f32.min(c);
            }
        }
        // One text alone gives what it gives in a batch.
        assert_eq!(m.embed(texts[0]), got[0]);
        eprintln!(
            "{:?} weights, {} texts: min cosine {min_int8:.6} (onnxruntime int8), {min_f32:.8} (float32)",
            m.weights(),
            texts.len()
        );
    }
}

#[test]
fn similar_meanings_are_closer() {
    let m = model();
    let q = m.embed("find code on github");
    let github = m.embed("Search GitHub repositories and issues");
    let file = m.embed("Read a file from the local filesystem");
    let (near, far) = (cosine(&q, &github), cosine(&q, &file));
    assert!(
        near > far + 0.1,
        "cos(query, github tool) {near} should beat cos(query, file tool) {far}"
    );
}

#[test]
fn any_text_gives_a_unit_vector() {
    let m = model();
    let long = "All work and no play makes Jack a dull boy. ".repeat(230); // ~10 kB
    let texts = [
        "",
        " \t\n ",
        "\u{0}\u{1}\u{7f}\u{200b}\u{feff}",
        "🦀🦀🦀 👩‍💻 🇫🇷",
        "Mixed: English, Ελληνικά, Русский, עברית, العربية, हिन्दी, 中文, 日本語, 한국어, ไทย",
        "\u{10ffff}\u{e000}\u{fffd}\u{301}\u{301}",
        long.as_str(),
    ];
    for text in texts {
        let ids = m.tokenize(text);
        assert!(
            (2..=embed::MAX_TOKENS).contains(&ids.len()),
            "{} ids for {text:?}",
            ids.len()
        );
        let e = m.embed(text);
        assert_eq!(e.len(), DIM);
        assert!(
            e.iter().all(|x| x.is_finite()),
            "non-finite value for {text:?}"
        );
        let norm = e.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm} for {text:?}");
    }
    assert_eq!(m.tokenize(&long).len(), embed::MAX_TOKENS);
}

/// The local provider loads the model on first use and gives it back after the idle period (seed 000's idle-unload),
/// counted from the end of the last embedding; the next use loads it again. Tokio's clock is paused and stepped.
#[tokio::test(start_paused = true)]
async fn the_local_model_is_unloaded_when_idle() {
    let idle = Duration::from_secs(60);
    let local = Arc::new(LocalModel::new(model_dir(), idle).with_tokio_timer());
    let provider = Provider::Local(local.clone());
    assert!(!local.is_loaded(), "loaded before any use");
    let first = provider
        .embed(vec!["list open issues".into()])
        .await
        .unwrap();
    assert!(local.is_loaded());

    tokio::time::sleep(idle / 2).await;
    assert!(local.is_loaded(), "unloaded before the idle period ended");
    // A use half-way restarts the idle period.
    provider.embed(vec!["send a message".into()]).await.unwrap();
    tokio::time::sleep(idle - Duration::from_secs(1)).await;
    assert!(
        local.is_loaded(),
        "the second use did not restart the idle period"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!local.is_loaded(), "still loaded after the idle period");

    let again = provider
        .embed(vec!["list open issues".into()])
        .await
        .unwrap();
    assert!(local.is_loaded());
    assert_eq!(first, again, "a reloaded model gives the same vector");
}

/// Outside tests that step tokio's clock, the idle period is timed by the clock thread (`agent_discover::clock`,
/// real time): the model is given back, and not before the idle period has passed since its use began.
#[tokio::test]
async fn the_clock_thread_unloads_the_idle_model() {
    let idle = Duration::from_millis(300);
    let local = Arc::new(LocalModel::new(model_dir(), idle));
    let provider = Provider::Local(local.clone());
    let began = std::time::Instant::now();
    provider
        .embed(vec!["list open issues".into()])
        .await
        .unwrap();
    let deadline = began + Duration::from_secs(30);
    while local.is_loaded() {
        assert!(
            std::time::Instant::now() < deadline,
            "still loaded 30 s after use"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        began.elapsed() >= idle,
        "unloaded {:?} after the use began, before the idle period ({idle:?}) was over",
        began.elapsed()
    );
}
