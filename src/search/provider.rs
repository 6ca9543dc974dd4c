//! Embedding providers, chosen by `AGENT_DISCOVER_EMBEDDING_PROVIDER`: `none` (BM25 only), `local` (all-MiniLM-L6-v2
//! in-process from local files), `openai` (text-embedding-3-small over HTTPS). A provider that cannot work falls back
//! to `none` and says why, so search keeps working on a misconfiguration.

use std::sync::Arc;

use serde_json::json;

use crate::error::{Error, Result};

pub const ENV_PROVIDER: &str = "AGENT_DISCOVER_EMBEDDING_PROVIDER";
pub const ENV_OPENAI_BASE_URL: &str = "AGENT_DISCOVER_OPENAI_BASE_URL";
pub const ENV_OPENAI_MODEL: &str = "AGENT_DISCOVER_OPENAI_MODEL";
const OPENAI_BATCH: usize = 256;

#[derive(Clone)]
pub enum Provider {
    None,
    /// all-MiniLM-L6-v2 computed in this process (see `crate::embed`), loaded on first use.
    Local(Arc<LocalModel>),
    OpenAi(Arc<OpenAi>),
}

/// What `status` reports about semantic search.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProviderStatus {
    pub provider: &'static str,
    pub model: Option<String>,
    pub hybrid: bool,
    /// Why the configured provider is not in use, if it is not.
    pub fallback_reason: Option<String>,
}

/// The local model's directory, and the model once something needed it (loading takes ~0.2 s and ~90 MB, so a
/// process that never searches semantically never pays for it).
pub struct LocalModel {
    dir: std::path::PathBuf,
    model: std::sync::OnceLock<std::result::Result<Arc<crate::embed::MiniLm>, String>>,
}

impl LocalModel {
    fn get(&self) -> Result<Arc<crate::embed::MiniLm>> {
        self.model
            .get_or_init(|| {
                crate::embed::MiniLm::load(&self.dir)
                    .map(Arc::new)
                    .map_err(|e| {
                        format!(
                            "local model in {} cannot be loaded: {e}",
                            self.dir.display()
                        )
                    })
            })
            .clone()
            .map_err(Error::Unavailable)
    }
}

pub struct OpenAi {
    client: reqwest::Client,
    base_url: String,
    key: String,
    model: String,
}

impl Provider {
    /// Resolves the configured provider. Never fails: problems become a `none` provider with a reason.
    pub fn from_env() -> (Provider, ProviderStatus) {
        Provider::from_env_value(&std::env::var(ENV_PROVIDER).unwrap_or_default())
    }

    /// Resolves a provider by name (`none`, `local`, `openai`, or empty for the default).
    pub fn from_env_value(wanted: &str) -> (Provider, ProviderStatus) {
        let wanted = wanted.to_ascii_lowercase();
        let none = |reason: Option<String>| {
            (
                Provider::None,
                ProviderStatus {
                    provider: "none",
                    model: None,
                    hybrid: false,
                    fallback_reason: reason,
                },
            )
        };
        match wanted.as_str() {
            "none" => none(None),
            // Unset: hybrid search is on by default when the local model files are present.
            "" | "local" => match crate::embed::find_model_dir(None) {
                Some(dir) => (
                    Provider::Local(Arc::new(LocalModel { dir, model: std::sync::OnceLock::new() })),
                    ProviderStatus { provider: "local", model: Some(crate::embed::MODEL_ID.to_owned()), hybrid: true, fallback_reason: None },
                ),
                None => none(Some(format!(
                    "no all-MiniLM-L6-v2 model files found (set {} or run scripts/install-model.sh); using BM25 only",
                    crate::embed::ENV_MODEL_DIR
                ))),
            },
            "openai" => match std::env::var("OPENAI_API_KEY") {
                Ok(key) if !key.trim().is_empty() => {
                    let base_url = std::env::var(ENV_OPENAI_BASE_URL).unwrap_or_else(|_| "https://api.openai.com/v1".into());
                    let model = std::env::var(ENV_OPENAI_MODEL).unwrap_or_else(|_| "text-embedding-3-small".into());
                    let p = OpenAi { client: reqwest::Client::new(), base_url: base_url.trim_end_matches('/').to_owned(), key, model: model.clone() };
                    (Provider::OpenAi(Arc::new(p)), ProviderStatus { provider: "openai", model: Some(model), hybrid: true, fallback_reason: None })
                }
                _ => none(Some("AGENT_DISCOVER_EMBEDDING_PROVIDER=openai but OPENAI_API_KEY is not set; using BM25 only".into())),
            },
            other => none(Some(format!("unknown {ENV_PROVIDER} {other:?} (expected none, local or openai); using BM25 only"))),
        }
    }

    /// The id stored next to each embedding, so a model change triggers re-embedding.
    pub fn model_id(&self) -> Option<String> {
        match self {
            Provider::None => None,
            Provider::Local(_) => Some(crate::embed::MODEL_ID.to_owned()),
            Provider::OpenAi(p) => Some(format!("openai:{}", p.model)),
        }
    }

    /// Embeds texts (unit-normalised vectors). `None` provider: an error.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        match self {
            Provider::None => Err(Error::Unavailable("no embedding provider".into())),
            Provider::Local(lazy) => {
                let lazy = lazy.clone();
                // CPU-bound: keep it off the async workers.
                tokio::task::spawn_blocking(move || {
                    let m = lazy.get()?;
                    Ok(m.embed_batch(&texts.iter().map(String::as_str).collect::<Vec<_>>()))
                })
                .await
                .map_err(|e| Error::Internal(e.to_string()))?
            }
            Provider::OpenAi(p) => p.embed(texts).await,
        }
    }
}

impl OpenAi {
    async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(OPENAI_BATCH) {
            let resp = self
                .client
                .post(format!("{}/embeddings", self.base_url))
                .bearer_auth(&self.key)
                .json(&json!({"model": self.model, "input": batch}))
                .timeout(std::time::Duration::from_secs(30))
                .send()
                .await
                .map_err(|e| Error::Upstream {
                    server: "openai".into(),
                    message: e.to_string(),
                })?;
            if !resp.status().is_success() {
                return Err(Error::Upstream {
                    server: "openai".into(),
                    message: format!("embeddings request failed: HTTP {}", resp.status()),
                });
            }
            let body: serde_json::Value = resp.json().await.map_err(|e| Error::Upstream {
                server: "openai".into(),
                message: e.to_string(),
            })?;
            let mut items: Vec<(usize, Vec<f32>)> = body["data"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|d| {
                            let idx = d["index"].as_u64().unwrap_or(0) as usize;
                            let v = d["embedding"]
                                .as_array()
                                .map(|e| {
                                    e.iter().map(|x| x.as_f64().unwrap_or(0.0) as f32).collect()
                                })
                                .unwrap_or_default();
                            (idx, v)
                        })
                        .collect()
                })
                .unwrap_or_default();
            if items.len() != batch.len() {
                return Err(Error::Upstream {
                    server: "openai".into(),
                    message: format!("expected {} embeddings, got {}", batch.len(), items.len()),
                });
            }
            items.sort_by_key(|(i, _)| *i);
            out.extend(items.into_iter().map(|(_, v)| normalize(v)));
        }
        Ok(out)
    }
}

pub fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}
