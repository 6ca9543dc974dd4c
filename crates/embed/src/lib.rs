//! In-process sentence embeddings with sentence-transformers/all-MiniLM-L6-v2 (384 dimensions), in plain Rust from
//! local model files (obtained by `fetch` when absent), no ML runtime is linked.
//!
//! The pipeline is the one sentence-transformers runs: BERT uncased WordPiece tokens (at most 256, no padding),
//! the 6-layer MiniLM encoder, mean pooling over the tokens, L2 normalisation. Parts: `safetensors` reads the
//! weights, `tokenizer` (with its Unicode `tables`) turns text into ids, `bert` runs the encoder on top of the
//! matrix kernels in `kernels` (f32 and f16 weights) and `quant` (int8 weights; `AGENT_DISCOVER_EMBED_WEIGHTS`
//! chooses). Model files come from `scripts/install-model.sh` or a Hugging Face cache.
//!
//! Must not know: tools, servers, storage or any other crate of this workspace; it turns text into vectors. `unsafe`
//! is confined to the SIMD kernels, reading the weights and the model download's file handling.

#[macro_use]
mod wide;
mod bert;
pub mod fetch;
mod kernels;
mod quant;
mod safetensors;
#[rustfmt::skip]
mod tables;
mod tokenizer;

use std::path::{Path, PathBuf};

pub use bert::WeightFormat;
pub use quant::{
    Activations, ENV_ACT8_PRODUCTS, ENV_ACTIVATIONS, ENV_KERNEL, Kernel, PRODUCTS, activations_of,
    encoder_suffix, kernel,
};

/// Length of an embedding.
pub const DIM: usize = 384;
/// The model the embeddings come from; stored with each vector so vectors of different models are never mixed.
pub const MODEL_ID: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Token limit per text, `[CLS]` and `[SEP]` included (sentence-transformers' max_seq_length); the rest is cut.
pub const MAX_TOKENS: usize = 256;
/// Environment variable naming the model directory.
pub const ENV_MODEL_DIR: &str = "AGENT_DISCOVER_MODEL_DIR";
/// Environment variable choosing how the dense layers' weights are held: `int8` (default) or `f16`.
pub const ENV_WEIGHTS: &str = "AGENT_DISCOVER_EMBED_WEIGHTS";
/// The weight format when `AGENT_DISCOVER_EMBED_WEIGHTS` is unset.
pub const DEFAULT_WEIGHTS: WeightFormat = WeightFormat::Int8;

/// The weight format `AGENT_DISCOVER_EMBED_WEIGHTS` asks for; the default when unset or not understood (said once
/// on stderr).
pub fn weights_from_env() -> WeightFormat {
    match std::env::var(ENV_WEIGHTS) {
        Ok(v) if !v.trim().is_empty() => WeightFormat::parse(&v).unwrap_or_else(|| {
            tracing::warn!(
                "{ENV_WEIGHTS}={v:?} is not f16 or int8; using {}",
                DEFAULT_WEIGHTS.name()
            );
            DEFAULT_WEIGHTS
        }),
        _ => DEFAULT_WEIGHTS,
    }
}

/// Threads one matrix product of the encoder uses: 1, or 2 with `AGENT_DISCOVER_EMBED_THREADS=2` on a machine with
/// two cores or more.
pub fn product_threads() -> usize {
    kernels::threads()
}

/// Texts are run together until they hold this many tokens, so the weights are read once per pack.
const PACK_TOKENS: usize = 512;
const WEIGHTS_FILE: &str = "model.safetensors";
const VOCAB_FILE: &str = "vocab.txt";
const CONFIG_FILE: &str = "config.json";

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "model file {0} is missing: install the model with scripts/install-model.sh, or set AGENT_DISCOVER_MODEL_DIR \
         to a directory holding model.safetensors and vocab.txt of sentence-transformers/all-MiniLM-L6-v2"
    )]
    MissingFile(PathBuf),
    #[error(
        "the model files are not a usable sentence-transformers/all-MiniLM-L6-v2 ({0}); reinstall them with \
         scripts/install-model.sh"
    )]
    BadFormat(String),
    #[error("cannot read the model files: {0}; check that the model directory is readable")]
    Io(#[from] std::io::Error),
}

/// all-MiniLM-L6-v2 loaded in memory (about 60 MB with int8 weights, the default, 70 MB with f16: the word embeddings, 47 MB,
/// stay f32).
/// Immutable: share it between threads behind an `Arc`.
pub struct MiniLm {
    tokenizer: tokenizer::Tokenizer,
    bert: bert::Bert,
    max_tokens: usize,
    weights: WeightFormat,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm")
            .field("model", &MODEL_ID)
            .field("config", self.bert.config())
            .field("weights", &self.weights)
            .finish()
    }
}

impl MiniLm {
    /// Loads the model from `dir` (or `dir/model`), which holds model.safetensors and vocab.txt, and config.json
    /// (optional: all-MiniLM-L6-v2's dimensions are the default), in the weight format of `AGENT_DISCOVER_EMBED_WEIGHTS`.
    pub fn load(dir: &Path) -> Result<MiniLm, EmbedError> {
        MiniLm::load_with(dir, weights_from_env())
    }

    /// As `load`, with the dense layers' weights held in `weights`.
    pub fn load_with(dir: &Path, weights: WeightFormat) -> Result<MiniLm, EmbedError> {
        let dir = model_files_dir(dir).unwrap_or_else(|| dir.to_path_buf());
        let read = |name: &str| -> Result<Vec<u8>, EmbedError> {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => EmbedError::MissingFile(path),
                _ => EmbedError::Io(e),
            })
        };
        let cfg: bert::Config = match std::fs::read(dir.join(CONFIG_FILE)) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| EmbedError::BadFormat(format!("{CONFIG_FILE}: {e}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bert::Config::default(),
            Err(e) => return Err(e.into()),
        };
        if cfg.hidden_size != DIM {
            return Err(EmbedError::BadFormat(format!(
                "hidden_size is {}, expected {DIM}",
                cfg.hidden_size
            )));
        }
        let vocab = read(VOCAB_FILE)?;
        let vocab = String::from_utf8(vocab)
            .map_err(|_| EmbedError::BadFormat("vocab.txt is not UTF-8".into()))?;
        let tokenizer = tokenizer::Tokenizer::from_vocab(&vocab)?;
        if tokenizer.vocab_len() > cfg.vocab_size {
            return Err(EmbedError::BadFormat(format!(
                "vocab.txt has {} tokens but the model only {}",
                tokenizer.vocab_len(),
                cfg.vocab_size
            )));
        }
        let tensors = safetensors::SafeTensors::parse(read(WEIGHTS_FILE)?)?;
        let max_tokens = MAX_TOKENS.min(cfg.max_position_embeddings);
        if max_tokens < 2 {
            return Err(EmbedError::BadFormat(
                "max_position_embeddings is below 2".into(),
            ));
        }
        let bert = bert::Bert::load(&tensors, cfg, weights)?;
        Ok(MiniLm {
            tokenizer,
            bert,
            max_tokens,
            weights,
        })
    }

    /// How the dense layers' weights are held.
    pub fn weights(&self) -> WeightFormat {
        self.weights
    }

    /// Token ids of `text`: `[CLS]`, the word pieces, `[SEP]`; at most 256 in all.
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, self.max_tokens)
    }

    /// The largest token id plus one.
    pub fn vocab_len(&self) -> usize {
        self.tokenizer.vocab_len()
    }

    /// The ids of `[CLS]` and `[SEP]`.
    pub fn cls_sep(&self) -> (u32, u32) {
        self.tokenizer.cls_sep()
    }

    /// Mean-pooled, unit-length embeddings of token-id sequences (each with its own `[CLS]`/`[SEP]`); ids past the
    /// vocabulary and sequences longer than the model's limit are cut.
    pub fn pooled(&self, seqs: &[&[u32]]) -> Vec<Vec<f32>> {
        let limit = self.tokenizer.vocab_len() as u32;
        let clean: Vec<Vec<u32>> = seqs
            .iter()
            .map(|s| {
                s.iter()
                    .take(self.max_tokens)
                    .map(|&id| if id < limit { id } else { 0 })
                    .collect()
            })
            .collect();
        let refs: Vec<&[u32]> = clean.iter().map(Vec::as_slice).collect();
        let mut out = self.bert.forward(&refs);
        out.iter_mut().for_each(|v| normalize(v));
        out
    }

    /// The embedding of `text`: 384 floats of unit length (text past 256 tokens is ignored).
    pub fn embed(&self, text: &str) -> Vec<f32> {
        self.embed_batch(&[text])
            .pop()
            .unwrap_or_else(|| vec![0.0; DIM])
    }

    /// Embeddings of several texts, in order; each is exactly what `embed` gives for that text alone.
    pub fn embed_batch(&self, texts: &[&str]) -> Vec<Vec<f32>> {
        let ids: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenize(t)).collect();
        let mut out = Vec::with_capacity(texts.len());
        let mut pack: Vec<&[u32]> = Vec::new();
        let mut tokens = 0;
        for seq in &ids {
            if tokens + seq.len() > PACK_TOKENS && !pack.is_empty() {
                out.extend(self.bert.forward(&pack));
                pack.clear();
                tokens = 0;
            }
            pack.push(seq);
            tokens += seq.len();
        }
        if !pack.is_empty() {
            out.extend(self.bert.forward(&pack));
        }
        out.iter_mut().for_each(|v| normalize(v));
        out
    }
}

/// Scales `v` to unit length (a zero vector stays zero).
fn normalize(v: &mut [f32]) {
    let norm = v
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm > 0.0 {
        let inv = (1.0 / norm) as f32;
        v.iter_mut().for_each(|x| *x *= inv);
    }
}

/// The directory holding the model files: `dir` itself or `dir/model`.
fn model_files_dir(dir: &Path) -> Option<PathBuf> {
    [dir.to_path_buf(), dir.join("model")]
        .into_iter()
        .find(|d| d.join(WEIGHTS_FILE).is_file() && d.join(VOCAB_FILE).is_file())
}

/// Where `scripts/install-model.sh` puts the model by default: `$HOME/.cache/agent-discover/models/all-MiniLM-L6-v2`.
pub fn default_install_dir() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache/agent-discover/models/all-MiniLM-L6-v2"))
}

/// Where the model files are: explicit dir, else $AGENT_DISCOVER_MODEL_DIR, else the Hugging Face cache layout
/// ($HF_HOME/hub or ~/.cache/huggingface/hub)/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/<any>/ .
/// Returns the first candidate that contains model.safetensors and vocab.txt (directly or under model/).
///
/// Between the environment variable and the Hugging Face cache, `default_install_dir()` is tried too, and the
/// cache is also looked for under $HF_HUB_CACHE and $XDG_CACHE_HOME/huggingface/hub. The directory returned is
/// the one that directly holds the files.
pub fn find_model_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut candidates: Vec<PathBuf> = Vec::new();
    candidates.extend(explicit.map(Path::to_path_buf));
    candidates.extend(env(ENV_MODEL_DIR));
    candidates.extend(default_install_dir());
    let mut hubs = Vec::new();
    hubs.extend(env("HF_HUB_CACHE"));
    hubs.extend(env("HF_HOME").map(|h| h.join("hub")));
    hubs.extend(env("XDG_CACHE_HOME").map(|c| c.join("huggingface/hub")));
    hubs.extend(env("HOME").map(|h| h.join(".cache/huggingface/hub")));
    for hub in hubs {
        let snapshots = hub.join("models--sentence-transformers--all-MiniLM-L6-v2/snapshots");
        if let Ok(entries) = std::fs::read_dir(&snapshots) {
            let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
            dirs.sort();
            candidates.extend(dirs);
        }
    }
    candidates.iter().find_map(|c| model_files_dir(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shareable_between_threads() {
        fn check<T: Send + Sync>() {}
        check::<MiniLm>();
    }

    #[test]
    fn missing_files_say_what_to_do() {
        let dir = std::env::temp_dir().join(format!("embed-missing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let err = MiniLm::load(&dir).unwrap_err();
        assert!(matches!(err, EmbedError::MissingFile(_)), "{err:?}");
        assert!(err.to_string().contains("install-model.sh"), "{err}");
        std::fs::write(dir.join("vocab.txt"), "[PAD]\n[UNK]\n[CLS]\n[SEP]\n").unwrap();
        std::fs::write(dir.join("model.safetensors"), b"not a model").unwrap();
        let err = MiniLm::load(&dir).unwrap_err();
        assert!(matches!(err, EmbedError::BadFormat(_)), "{err:?}");
        assert_eq!(find_model_dir(Some(&dir)), Some(dir.clone()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
