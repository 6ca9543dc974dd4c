//! Embedding providers, chosen by `AGENT_DISCOVER_EMBEDDING_PROVIDER`: `none` (BM25 only), `local` (all-MiniLM-L6-v2
//! in-process from local files), `openai` (text-embedding-3-small over HTTPS). A provider that cannot work falls back
//! to `none` and says why, so search keeps working on a misconfiguration.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

// Tokio's clock, so tests can pause time and step over the idle period (`LocalModel::with_tokio_timer`).
use tokio::time::Instant;

use serde_json::json;

use ad_core::error::{Error, Result};

pub const ENV_PROVIDER: &str = "AGENT_DISCOVER_EMBEDDING_PROVIDER";
pub const ENV_OPENAI_BASE_URL: &str = "AGENT_DISCOVER_OPENAI_BASE_URL";
pub const ENV_OPENAI_MODEL: &str = "AGENT_DISCOVER_OPENAI_MODEL";
pub const ENV_MODEL_IDLE_SECS: &str = "AGENT_DISCOVER_MODEL_IDLE_SECS";
const DEFAULT_MODEL_IDLE: Duration = Duration::from_secs(300);
const OPENAI_BATCH: usize = 256;

#[derive(Clone)]
pub enum Provider {
    None,
    /// all-MiniLM-L6-v2 computed in this process (see `ad_embed`), loaded on first use.
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
    /// The local model was asked for (or nothing was): its files may be downloaded when absent.
    #[serde(skip)]
    pub local_wanted: bool,
}

/// Where the local model is downloaded to when absent: `AGENT_DISCOVER_MODEL_DIR`, else the default install
/// directory (`~/.cache/agent-discover/models/all-MiniLM-L6-v2`).
pub fn local_model_target() -> Option<std::path::PathBuf> {
    std::env::var_os(ad_embed::ENV_MODEL_DIR)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(ad_embed::default_install_dir)
}

/// The local model's directory, and the model while something uses it. Loading takes ~0.2 s and ~80 MB, so a
/// process that never searches semantically never pays for it, and one that stopped searching gives the memory back
/// after `idle` (`AGENT_DISCOVER_MODEL_IDLE_SECS`, default 300; 0 keeps the model loaded).
pub struct LocalModel {
    dir: std::path::PathBuf,
    idle: Duration,
    state: Mutex<ModelState>,
    /// Signalled when a load finishes.
    loaded: Condvar,
    /// Whether a task is waiting to unload the model.
    reaper: AtomicBool,
    /// The idle period is timed by tokio's timer (tests that pause and step tokio's clock), not the clock thread.
    tokio_timer: bool,
}

enum ModelState {
    Unloaded,
    /// A thread is reading the files; others wait on `LocalModel::loaded`.
    Loading,
    Loaded {
        model: Arc<ad_embed::MiniLm>,
        last_used: Instant,
        /// Embeddings running now; the model is never unloaded under them.
        in_use: usize,
    },
    /// Loading failed; the reason is reported by every use (the files do not fix themselves mid-run).
    Failed(String),
}

/// The loaded model, lent to one embedding run.
struct Lease<'a> {
    owner: &'a LocalModel,
    model: Arc<ad_embed::MiniLm>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let ModelState::Loaded {
            last_used, in_use, ..
        } = &mut *self.owner.lock()
        {
            *last_used = Instant::now();
            *in_use -= 1;
        }
    }
}

impl LocalModel {
    pub fn new(dir: std::path::PathBuf, idle: Duration) -> LocalModel {
        LocalModel {
            dir,
            idle,
            state: Mutex::new(ModelState::Unloaded),
            loaded: Condvar::new(),
            reaper: AtomicBool::new(false),
            tokio_timer: false,
        }
    }

    /// Times the idle period with tokio's timer, which tests can pause and step. Otherwise it is the clock thread's
    /// (`ad_core::clock`): the idle period lasts minutes after a search, and a pending tokio timer would cost every
    /// proxied call meanwhile.
    pub fn with_tokio_timer(mut self) -> LocalModel {
        self.tokio_timer = true;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ModelState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The model, loaded if needed (blocking: call it off the async workers). The state lock is never held while
    /// the files load (a second or more in a debug build), so `status` and the unload task never wait for a load.
    fn lease(&self) -> Result<Lease<'_>> {
        let mut st = self.lock();
        loop {
            match &mut *st {
                ModelState::Loaded { model, in_use, .. } => {
                    *in_use += 1;
                    return Ok(Lease {
                        owner: self,
                        model: model.clone(),
                    });
                }
                ModelState::Failed(e) => return Err(Error::Unavailable(e.clone())),
                ModelState::Loading => {
                    st = self.loaded.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                ModelState::Unloaded => {
                    *st = ModelState::Loading;
                    drop(st);
                    let next = match ad_embed::MiniLm::load(&self.dir) {
                        Ok(m) => ModelState::Loaded {
                            model: Arc::new(m),
                            last_used: Instant::now(),
                            in_use: 0,
                        },
                        Err(e) => ModelState::Failed(format!(
                            "local model in {} cannot be loaded: {e}",
                            self.dir.display()
                        )),
                    };
                    st = self.lock();
                    *st = next;
                    self.loaded.notify_all();
                }
            }
        }
    }

    /// Embeds `texts` on the calling thread, loading the model if needed (blocking: a thread that may block). For
    /// callers outside search (the scanner's semantic signal); the idle unload counts from this use when a tokio
    /// runtime is there to time it.
    pub fn embed_now(self: &Arc<Self>, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let v = {
            let lease = self.lease()?;
            lease.model.embed_batch(texts)
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            self.schedule_unload();
        }
        Ok(v)
    }

    pub fn is_loaded(&self) -> bool {
        matches!(&*self.lock(), ModelState::Loaded { .. })
    }

    /// Unloads the model once it has been idle for `idle`, in a task that ends with the unload.
    fn schedule_unload(self: &Arc<Self>) {
        if self.idle.is_zero() || self.reaper.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                let wait = match &*me.lock() {
                    ModelState::Loaded {
                        last_used, in_use, ..
                    } if *in_use == 0 => me.idle.saturating_sub(last_used.elapsed()),
                    ModelState::Loaded { .. } => me.idle,
                    _ => Duration::ZERO,
                };
                if !wait.is_zero() {
                    if me.tokio_timer {
                        tokio::time::sleep(wait).await;
                    } else {
                        ad_core::clock::sleep(wait).await;
                    }
                    continue;
                }
                let unloaded = {
                    let mut st = me.lock();
                    matches!(&*st, ModelState::Loaded { in_use: 0, .. })
                        .then(|| std::mem::replace(&mut *st, ModelState::Unloaded))
                };
                if let Some(state) = unloaded {
                    drop(state);
                    release_freed_memory();
                    tracing::debug!("local embedding model unloaded after being idle");
                }
                me.reaper.store(false, Ordering::SeqCst);
                // A use that came in meanwhile found the reaper still running; take over its schedule.
                if !me.is_loaded() || me.reaper.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }
}

/// Hands memory freed by the model back to the operating system (glibc keeps freed heap pages otherwise).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
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
                    local_wanted: false,
                },
            )
        };
        match wanted.as_str() {
            "none" => none(None),
            // Unset: hybrid search is on by default when the local model files are present.
            "" | "local" => match ad_embed::find_model_dir(None) {
                Some(dir) => Provider::local(dir),
                None => {
                    let (p, mut st) = none(Some(format!(
                        "no all-MiniLM-L6-v2 model files found (set {} or run scripts/install-model.sh); using BM25 only",
                        ad_embed::ENV_MODEL_DIR
                    )));
                    st.local_wanted = true;
                    (p, st)
                }
            },
            "openai" => match std::env::var("OPENAI_API_KEY") {
                Ok(key) if !key.trim().is_empty() => {
                    let base_url = std::env::var(ENV_OPENAI_BASE_URL).unwrap_or_else(|_| "https://api.openai.com/v1".into());
                    let model = std::env::var(ENV_OPENAI_MODEL).unwrap_or_else(|_| "text-embedding-3-small".into());
                    Provider::openai(&base_url, &key, &model)
                }
                _ => none(Some("AGENT_DISCOVER_EMBEDDING_PROVIDER=openai but OPENAI_API_KEY is not set; using BM25 only".into())),
            },
            other => none(Some(format!("unknown {ENV_PROVIDER} {other:?} (expected none, local or openai); using BM25 only"))),
        }
    }

    /// all-MiniLM-L6-v2 from the files in `dir`, loaded on first use.
    pub fn local(dir: std::path::PathBuf) -> (Provider, ProviderStatus) {
        (
            Provider::Local(Arc::new(LocalModel::new(dir, model_idle()))),
            ProviderStatus {
                provider: "local",
                model: Some(ad_embed::MODEL_ID.to_owned()),
                hybrid: true,
                fallback_reason: None,
                local_wanted: true,
            },
        )
    }

    /// The OpenAI embeddings API (or one with its shape) at `base_url` (e.g. `https://api.openai.com/v1`).
    pub fn openai(base_url: &str, key: &str, model: &str) -> (Provider, ProviderStatus) {
        let p = OpenAi {
            client: reqwest::Client::new(),
            base_url: base_url.trim_end_matches('/').to_owned(),
            key: key.to_owned(),
            model: model.to_owned(),
        };
        (
            Provider::OpenAi(Arc::new(p)),
            ProviderStatus {
                provider: "openai",
                model: Some(model.to_owned()),
                hybrid: true,
                fallback_reason: None,
                local_wanted: false,
            },
        )
    }

    /// The id stored next to each embedding, so a model change triggers re-embedding.
    pub fn model_id(&self) -> Option<String> {
        match self {
            Provider::None => None,
            Provider::Local(_) => Some(local_model_id()),
            Provider::OpenAi(p) => Some(format!("openai:{}", p.model)),
        }
    }

    /// Starts embedding one query at once on the blocking pool (the local model only; `None` for other providers),
    /// `keep` given its vector there; the future waits for the vector. Dropped, the embedding still finishes (and is
    /// kept): the caller did not need it after all.
    pub fn embed_started(
        &self,
        text: String,
        keep: impl FnOnce(&[f32]) + Send + 'static,
    ) -> Option<impl Future<Output = Result<Vec<f32>>> + Send + 'static> {
        let Provider::Local(local) = self else {
            return None;
        };
        let model = local.clone();
        let handle = tokio::task::spawn_blocking(move || {
            let v = {
                let lease = model.lease()?;
                lease.model.embed(&text)
            };
            keep(&v);
            // After the lease: the idle unload counts from this use (the blocking pool runs in the runtime).
            model.schedule_unload();
            Ok(v)
        });
        Some(async move { handle.await.map_err(|e| Error::Internal(e.to_string()))? })
    }

    /// Embeds texts (unit-normalised vectors). `None` provider: an error.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>> {
        match self {
            Provider::None => Err(Error::Unavailable("no embedding provider".into())),
            Provider::Local(local) => {
                let model = local.clone();
                // CPU-bound: keep it off the async workers.
                let res = tokio::task::spawn_blocking(move || {
                    let lease = model.lease()?;
                    Ok(lease
                        .model
                        .embed_batch(&texts.iter().map(String::as_str).collect::<Vec<_>>()))
                })
                .await
                .map_err(|e| Error::Internal(e.to_string()))?;
                local.schedule_unload();
                res
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

/// `AGENT_DISCOVER_MODEL_IDLE_SECS`, or the default when unset or not a number.
/// The id the local model's vectors are stored with: the model's name and which products of the encoder quantise
/// activations to 8 bits (`ad_embed::encoder_suffix`: `+z8:ffn1,ffn2` by default), so a change of that setting embeds the
/// stored tools again once rather than mixing vectors of two encoders.
pub fn local_model_id() -> String {
    format!("{}{}", ad_embed::MODEL_ID, ad_embed::encoder_suffix())
}

fn model_idle() -> Duration {
    std::env::var(ENV_MODEL_IDLE_SECS)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_MODEL_IDLE)
}

pub fn normalize(mut v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
    v
}
