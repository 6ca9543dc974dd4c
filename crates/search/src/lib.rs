//! Tool search: `find_tool` across every server whose tools are known, by BM25 (FTS5) and, when an embedding
//! provider is available, hybrid ranking `0.7 x cosine + 0.3 x normalised BM25`.
//!
//! Embeddings are stored with their model id in `server_tools`; an in-memory vector index is rebuilt when the
//! stored tools change (here or in another process). Knows nothing about MCP; `mcp` shapes the answer.
//!
//! Must not know: MCP, HTTP, child processes or the composition root; it reads tools from the store and ranks them.

pub mod provider;
pub mod query;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::Value;

use ad_core::error::{Error, Result};
use ad_core::model::ToolRecord;
use ad_store::Store;

mod index;
mod recent;
mod scan;
use index::VectorIndex;
pub use provider::{Provider, ProviderStatus, local_model_id};
use recent::RecentQueries;
pub use scan::dot;

/// Below this top score, `find_tool` answers "not found" rather than a bad match.
pub const NO_MATCH: f64 = 0.25;
const CANDIDATES: usize = 50;

/// One ranked tool.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    pub tool: ToolRecord,
    pub score: f64,
    /// BM25 relevance normalised to [0, 1] within this query (0 when BM25 did not match).
    pub bm25: f64,
    pub cosine: Option<f64>,
}

/// A search scope: the tool ids a ranking may return (a profile's tools), made once per change of the tools.
#[derive(Debug, Clone, Default)]
pub struct Within {
    ids: std::collections::HashSet<i64>,
    /// The ids as a JSON array, for the store's FTS5 query.
    json: String,
}

impl Within {
    pub fn new(ids: impl IntoIterator<Item = i64>) -> Within {
        let ids: std::collections::HashSet<i64> = ids.into_iter().collect();
        let json =
            serde_json::to_string(&ids.iter().collect::<Vec<_>>()).unwrap_or_else(|_| "[]".into());
        Within { ids, json }
    }

    pub fn contains(&self, id: i64) -> bool {
        self.ids.contains(&id)
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The answer to one query: ranked hits and a confidence label.
#[derive(Debug, Clone, Serialize)]
pub struct Ranking {
    pub hits: Vec<Hit>,
    pub confidence: &'static str,
    /// Hybrid search is on (an embedding provider is configured).
    pub hybrid: bool,
    /// The query was embedded and ranked by the hybrid score (false when BM25 was sure: `bm25_sure`).
    #[serde(skip)]
    pub embedded: bool,
}

#[derive(Clone)]
pub struct Search {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// The provider and its status; replaced when the local model arrives after start-up.
    current: RwLock<(Provider, ProviderStatus)>,
    /// Obtains the local model in the background when it is wanted but absent.
    fetcher: std::sync::OnceLock<Arc<ad_embed::fetch::Fetcher>>,
    index: RwLock<Option<VectorIndex>>,
    /// Bumped whenever tools or embeddings change in this process; with `PRAGMA data_version` it tells whether the
    /// index is stale.
    generation: AtomicU64,
    embedding: tokio::sync::Mutex<()>,
    /// `(model, generation, data_version)` at which `embed_pending` last found every tool embedded: while both
    /// counters are unchanged a query skips that scan (it reads every row's embedding, milliseconds at 10k tools).
    settled: Mutex<Option<(String, u64, i64)>>,
    last_error: Mutex<Option<String>>,
    /// Embeddings of recent queries (agents repeat and retry them); keyed by model id and query text.
    recent: Mutex<RecentQueries>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl std::fmt::Debug for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Search")
            .field("provider", &self.current().1.provider)
            .finish_non_exhaustive()
    }
}

impl Search {
    pub fn new(store: Store, provider: Provider, status: ProviderStatus) -> Search {
        Search {
            inner: Arc::new(Inner {
                store,
                current: RwLock::new((provider, status)),
                fetcher: std::sync::OnceLock::new(),
                index: RwLock::new(None),
                generation: AtomicU64::new(0),
                embedding: tokio::sync::Mutex::new(()),
                settled: Mutex::new(None),
                last_error: Mutex::new(None),
                recent: Mutex::new(RecentQueries::default()),
            }),
        }
    }

    pub fn status(&self) -> Value {
        let (provider, status) = self.current();
        let mut v = serde_json::to_value(&status).unwrap_or_default();
        if let Provider::Local(local) = &provider {
            v["model_loaded"] = Value::Bool(local.is_loaded());
        }
        if let Some(f) = self.inner.fetcher.get() {
            let state = f.state();
            if !matches!(provider, Provider::Local(_)) {
                v["fallback_reason"] = Value::String(download_reason(&state));
            }
            v["model_download"] = serde_json::to_value(&state).unwrap_or_default();
        }
        if let Some(e) = self
            .inner
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            v["last_error"] = Value::String(e);
        }
        v
    }

    pub fn hybrid(&self) -> bool {
        self.provider().model_id().is_some()
    }

    fn current(&self) -> (Provider, ProviderStatus) {
        self.inner
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn provider(&self) -> Provider {
        self.current().0
    }

    /// Bytes held by the in-memory vector index (vectors, scales, ids), 0 before the first hybrid query.
    pub fn index_bytes(&self) -> usize {
        self.inner
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map_or(0, VectorIndex::bytes)
    }

    /// The background download of the local model, if one was started.
    pub fn model_fetcher(&self) -> Option<Arc<ad_embed::fetch::Fetcher>> {
        self.inner.fetcher.get().cloned()
    }

    /// When the local model is wanted (the default) but its files are absent: downloads it in the background from
    /// the configured sources (`AGENT_DISCOVER_MODEL_SOURCE`), BM25 answering meanwhile, then switches to hybrid
    /// search and embeds the catalog. Call it in long-running modes (MCP, dashboard); at most once.
    pub fn start_model_download(&self) {
        let (provider, status) = self.current();
        if !matches!(provider, Provider::None) || !status.local_wanted {
            return;
        }
        let Some(dir) = provider::local_model_target() else {
            return;
        };
        let fetcher = match ad_embed::fetch::sources_from_env() {
            Ok(sources) => ad_embed::fetch::Fetcher::new(dir, sources),
            Err(e) => {
                let mut st = status.clone();
                st.fallback_reason = Some(format!("{e}; using BM25 only"));
                self.inner
                    .current
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .1 = st;
                return;
            }
        };
        let fetcher = Arc::new(fetcher);
        if self.inner.fetcher.set(fetcher.clone()).is_err() || fetcher.sources().is_empty() {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            match fetcher.install().await {
                Ok(dir) => {
                    tracing::info!(dir = %dir.display(), "local embedding model installed; hybrid search on");
                    me.use_local_model(dir);
                    if let Err(e) = me.embed_pending().await {
                        tracing::warn!(error = %e, "embedding the catalog failed");
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the local embedding model could not be downloaded; BM25 only")
                }
            }
        });
    }

    /// Switches to the local model in `dir`.
    pub fn use_local_model(&self, dir: std::path::PathBuf) {
        let (provider, status) = Provider::local(dir);
        *self
            .inner
            .current
            .write()
            .unwrap_or_else(|p| p.into_inner()) = (provider, status);
        self.tools_changed();
    }

    /// Tells the index that stored tools changed in this process.
    pub fn tools_changed(&self) {
        self.inner.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// Where the indexed tools stand: changes when tools change here (`tools_changed`) or another process commits.
    /// What a [`Within`] built from the tools is valid for.
    pub fn tools_version(&self) -> Result<(u64, i64)> {
        Ok((
            self.inner.generation.load(Ordering::SeqCst),
            self.inner.store.data_version()?,
        ))
    }

    /// Embeds every stored tool that lacks an embedding from the current model. Safe to call often.
    pub async fn embed_pending(&self) -> Result<usize> {
        let provider = self.provider();
        let Some(model) = provider.model_id() else {
            return Ok(0);
        };
        let _one_at_a_time = self.inner.embedding.lock().await;
        let mut done = 0;
        loop {
            // Read before the scan: a change made during it bumps one of them, so the next query scans again.
            let seen = (
                self.inner.generation.load(Ordering::SeqCst),
                self.inner.store.data_version()?,
            );
            let store = self.inner.store.clone();
            let m = model.clone();
            let batch = tokio::task::spawn_blocking(move || store.tools_needing_embedding(&m, 256))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            if batch.is_empty() {
                *self.inner.settled.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some((model.clone(), seen.0, seen.1));
                break;
            }
            let texts: Vec<String> = batch
                .iter()
                .map(|(_, name, desc)| tool_text(name, desc))
                .collect();
            tracing::debug!(tools = texts.len(), model = %model, "embedding tools");
            let vectors = match provider.embed(texts).await {
                Ok(v) => v,
                Err(e) => {
                    *self
                        .inner
                        .last_error
                        .lock()
                        .unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    return Err(e);
                }
            };
            let items: Vec<(i64, Vec<f32>)> =
                batch.iter().map(|(id, _, _)| *id).zip(vectors).collect();
            let store = self.inner.store.clone();
            let m = model.clone();
            let n = items.len();
            tokio::task::spawn_blocking(move || store.set_embeddings(&m, &items))
                .await
                .map_err(|e| Error::Internal(e.to_string()))??;
            done += n;
            self.tools_changed();
        }
        Ok(done)
    }

    /// Ranks the catalog for `query`. With embeddings: union of BM25 and cosine candidates, 0.7 cos + 0.3 BM25; a
    /// query BM25 is sure of (`bm25_sure`) is answered by BM25 alone, without embedding it.
    pub async fn rank(&self, query: &str, limit: usize) -> Result<Ranking> {
        Ok(self.rank_while(query, limit, || ()).await?.0)
    }

    /// [`Search::rank`], running `side` (other work of the same request) after BM25, while the query's embedding
    /// is computed on the other core, instead of after the ranking.
    pub async fn rank_while<T>(
        &self,
        query: &str,
        limit: usize,
        side: impl FnOnce() -> T,
    ) -> Result<(Ranking, T)> {
        self.rank_within(query, limit, None, side).await
    }

    /// [`Search::rank_while`] among the tools of `within` only (a profile's search scope): BM25 and the cosine
    /// top-k are taken among them, so a scope is ranked as a registry of only its tools would be.
    pub async fn rank_within<T>(
        &self,
        query: &str,
        limit: usize,
        within: Option<&Within>,
        side: impl FnOnce() -> T,
    ) -> Result<(Ranking, T)> {
        check_query(query)?;
        let provider = self.provider();
        let model = provider.model_id();
        // The local model's forward pass starts on the blocking pool (another core) while BM25 runs here, so a query
        // BM25 is not sure of waits for the longer of the two instead of both (issue 31). A query BM25 is sure of
        // does not wait for it; its vector is kept for a repeat. Only a settled index and a new query, and never a
        // remote provider (a request per query costs).
        let early = match (&provider, &model) {
            (Provider::Local(_), Some(m)) if self.settled(m) && !self.recent_has(m, query) => {
                provider.embed_started(query.to_owned(), {
                    let inner = Arc::downgrade(&self.inner);
                    let (m, q) = (m.clone(), query.to_owned());
                    move |v: &[f32]| {
                        if let Some(inner) = inner.upgrade() {
                            lock(&inner.recent).put(&m, &q, v.to_vec());
                        }
                    }
                })
            }
            _ => None,
        };
        let hits = self.bm25_hits(query, within)?;
        let side = side();
        let sure = model.is_some() && bm25_sure(&hits);
        let vector = match (model, early) {
            (Some(model), Some(early)) if !sure => match early.await {
                Ok(v) => Some((v, model)),
                Err(e) => {
                    tracing::warn!(error = %e, "embedding the query failed; searching with BM25 only");
                    None
                }
            },
            (Some(model), None) if !sure => self.query_vector(query).await.map(|v| (v, model)),
            _ => None,
        };
        let mut ranking = self.finish(hits, vector, limit, within).await?;
        // Still hybrid mode when BM25 answered alone by choice (not when the embedding failed).
        ranking.hybrid |= sure;
        Ok((ranking, side))
    }

    /// Ranks with a query vector computed elsewhere (`(vector, model id)`), or BM25 only when `None`.
    pub async fn rank_with(
        &self,
        query: &str,
        vector: Option<(Vec<f32>, String)>,
        limit: usize,
    ) -> Result<Ranking> {
        self.rank_with_in(query, vector, limit, None).await
    }

    /// [`Search::rank_with`] among the tools of `within` only.
    pub async fn rank_with_in(
        &self,
        query: &str,
        vector: Option<(Vec<f32>, String)>,
        limit: usize,
        within: Option<&Within>,
    ) -> Result<Ranking> {
        check_query(query)?;
        let hits = self.bm25_hits(query, within)?;
        self.finish(hits, vector, limit, within).await
    }

    /// BM25 candidates, scored by BM25 normalised by the best match and scaled by how much of the query the tool
    /// covers (so a single weak word match does not look like a confident answer).
    fn bm25_hits(&self, query: &str, within: Option<&Within>) -> Result<Vec<Hit>> {
        // These queries take well under a millisecond; a blocking-pool hop would cost more than it saves.
        let terms = query::terms(query);
        let bm25 = match query::fts(&terms) {
            Some(f) => self.inner.store.search_tools_bm25_within(
                &f,
                CANDIDATES,
                within.map(|w| w.json.as_str()),
            )?,
            None => Vec::new(),
        };
        let max_bm25 = bm25.iter().map(|h| h.score).fold(0.0_f64, f64::max);
        let coverage = query::Coverage::new(&terms);
        Ok(bm25
            .into_iter()
            .map(|h| {
                let cov = coverage.of(&[&h.tool.name, &h.tool.description]);
                let norm = if max_bm25 > 0.0 {
                    h.score / max_bm25
                } else {
                    0.0
                } * cov;
                Hit {
                    tool: h.tool,
                    score: norm,
                    bm25: norm,
                    cosine: None,
                }
            })
            .collect())
    }

    /// Fuses BM25 `hits` with the cosines of `vector` (when given), sorts, cuts to `limit` and loads the records of the
    /// few returned: a cosine candidate BM25 did not find is ranked by its id and scores alone and read from the store
    /// only if it makes the cut (with the returned BM25 hits' schemas, in one read), not all fifty of them.
    async fn finish(
        &self,
        hits: Vec<Hit>,
        vector: Option<(Vec<f32>, String)>,
        limit: usize,
        within: Option<&Within>,
    ) -> Result<Ranking> {
        // `(hit, read)`: `read` is false for a cosine candidate whose record is not read yet (only its id is known).
        let mut cands: Vec<(Hit, bool)> = hits.into_iter().map(|h| (h, true)).collect();
        let hybrid = match vector {
            Some((qv, model)) => {
                let cos = self.cosine_top(&model, &qv, CANDIDATES, within).await?;
                let mut missing: Vec<(i64, f64)> = Vec::new();
                for &(id, c) in &cos {
                    match cands.iter_mut().find(|(h, _)| h.tool.id == id) {
                        Some((h, _)) => h.cosine = Some(c),
                        None => missing.push((id, c)),
                    }
                }
                // BM25 candidates outside the cosine top-k still get their own cosine.
                if let Some(index) = self
                    .inner
                    .index
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    for (h, _) in cands.iter_mut().filter(|(h, _)| h.cosine.is_none()) {
                        h.cosine = index.cosine_of(h.tool.id, &qv);
                    }
                }
                // In id order, the order the store returns a list of ids in (equal scores and names keep their old order).
                missing.sort_unstable_by_key(|(id, _)| *id);
                cands.extend(missing.into_iter().map(|(id, c)| {
                    let tool = ToolRecord {
                        id,
                        server_id: 0,
                        server: String::new(),
                        name: String::new(),
                        description: String::new(),
                        input_schema: Value::Null,
                    };
                    let hit = Hit {
                        tool,
                        score: 0.0,
                        bm25: 0.0,
                        cosine: Some(c),
                    };
                    (hit, false)
                }));
                for (h, _) in &mut cands {
                    h.score = 0.7 * h.cosine.unwrap_or(0.0).max(0.0) + 0.3 * h.bm25;
                }
                true
            }
            None => false,
        };
        let hits = self.cut(cands, limit.max(1))?;
        let confidence = confidence(&hits);
        Ok(Ranking {
            hits,
            confidence,
            hybrid,
            embedded: hybrid,
        })
    }

    /// The best `limit` of `cands` by score, ties to the shorter tool name, with their full records. The records
    /// are read for the candidates that can make the cut (every one scoring at least the `limit`-th score, so a tie
    /// there is broken by names as before); a candidate whose tool is gone meanwhile drops out and the next one in.
    fn cut(&self, mut cands: Vec<(Hit, bool)>, limit: usize) -> Result<Vec<Hit>> {
        let by_score = |a: &(Hit, bool), b: &(Hit, bool)| b.0.score.total_cmp(&a.0.score);
        loop {
            let mut order: Vec<usize> = (0..cands.len()).collect();
            order.sort_by(|&a, &b| by_score(&cands[a], &cands[b]));
            let bar = order.get(limit - 1).map(|&i| cands[i].0.score);
            let contenders: Vec<usize> = order
                .into_iter()
                .filter(|&i| bar.is_none_or(|bar| cands[i].0.score >= bar))
                .collect();
            let ids: Vec<i64> = contenders
                .iter()
                .map(|&i| &cands[i].0)
                .filter(|h| h.tool.input_schema.is_null())
                .map(|h| h.tool.id)
                .collect();
            let full = if ids.is_empty() {
                Vec::new()
            } else {
                self.inner.store.tools_by_ids(&ids)?
            };
            let mut gone = false;
            for &i in &contenders {
                let (h, read) = &mut cands[i];
                if !h.tool.input_schema.is_null() {
                    continue;
                }
                match full.iter().find(|t| t.id == h.tool.id) {
                    Some(t) if *read => h.tool.input_schema = t.input_schema.clone(),
                    Some(t) => {
                        h.tool = t.clone();
                        *read = true;
                    }
                    None if !*read => gone = true,
                    None => {}
                }
            }
            if gone {
                cands.retain(|(_, read)| *read);
                continue;
            }
            let mut keep = vec![false; cands.len()];
            for &i in &contenders {
                keep[i] = true;
            }
            let mut hits: Vec<Hit> = cands
                .into_iter()
                .zip(keep)
                .filter_map(|((h, _), k)| k.then_some(h))
                .collect();
            hits.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then_with(|| a.tool.name.len().cmp(&b.tool.name.len()))
            });
            hits.truncate(limit);
            return Ok(hits);
        }
    }

    async fn query_vector(&self, query: &str) -> Option<Vec<f32>> {
        let provider = self.provider();
        let model = provider.model_id()?;
        // Embed lazily-missing tools first so the index covers the catalog (unless nothing changed since the last
        // time every tool was found embedded).
        if !self.settled(&model)
            && let Err(e) = self.embed_pending().await
        {
            tracing::warn!(error = %e, "embedding tools failed; searching with BM25 only");
            return None;
        }
        let recent = || self.inner.recent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = recent().get(&model, query) {
            return Some(v);
        }
        match provider.embed(vec![query.to_owned()]).await {
            Ok(mut v) => {
                let v = v.pop()?;
                recent().put(&model, query, v.clone());
                Some(v)
            }
            Err(e) => {
                tracing::warn!(error = %e, "embedding the query failed; searching with BM25 only");
                None
            }
        }
    }

    /// Whether the embedding of `query` by `model` is remembered.
    fn recent_has(&self, model: &str, query: &str) -> bool {
        lock(&self.inner.recent)
            .map
            .contains_key(&(model.to_owned(), query.to_owned()))
    }

    /// Whether every tool was embedded by `model` as of the current generation and data version.
    fn settled(&self, model: &str) -> bool {
        let Ok(data_version) = self.inner.store.data_version() else {
            return false;
        };
        let generation = self.inner.generation.load(Ordering::SeqCst);
        self.inner
            .settled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|(m, g, d)| m == model && *g == generation && *d == data_version)
    }

    /// The `k` most similar tools by cosine, rebuilding the in-memory index first if it is stale.
    async fn cosine_top(
        &self,
        model: &str,
        q: &[f32],
        k: usize,
        within: Option<&Within>,
    ) -> Result<Vec<(i64, f64)>> {
        let generation = self.inner.generation.load(Ordering::SeqCst);
        let data_version = self.inner.store.data_version()?;
        let fresh = self
            .inner
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|i| {
                i.model == model && i.generation == generation && i.data_version == data_version
            });
        if !fresh {
            // Reading every vector takes tens of milliseconds at 10k tools: off the async thread, which in `mcp`
            // is the one that relays calls.
            let store = self.inner.store.clone();
            let m = model.to_owned();
            let index = tokio::task::spawn_blocking(move || {
                VectorIndex::load(&store, &m, generation, data_version)
            })
            .await
            .map_err(|e| Error::Internal(e.to_string()))??;
            *self.inner.index.write().unwrap_or_else(|p| p.into_inner()) = Some(index);
        }
        let guard = self.inner.index.read().unwrap_or_else(|p| p.into_inner());
        let Some(index) = guard.as_ref() else {
            return Ok(vec![]);
        };
        Ok(match within {
            Some(w) => index.top_where(q, k, |id| w.ids.contains(&id)),
            None => index.top(q, k),
        })
    }
}

/// `status`'s `fallback_reason` while the local model is not there yet.
fn download_reason(state: &ad_embed::fetch::State) -> String {
    use ad_embed::fetch::State;
    match state {
        State::Ready { .. } => "the local model was just installed; switching to hybrid search".into(),
        State::Absent { reason, .. } => format!("no all-MiniLM-L6-v2 model files found: {reason}; using BM25 only"),
        State::Waiting { .. } => {
            "another agent-discover process is downloading the all-MiniLM-L6-v2 model; BM25 only until it is done".into()
        }
        State::Downloading { source, bytes, total, .. } => format!(
            "downloading the all-MiniLM-L6-v2 model ({source}: {} of {} MB); BM25 only until it is done",
            bytes / 1_000_000,
            total.map(|t| (t / 1_000_000).to_string()).unwrap_or_else(|| "?".into())
        ),
        State::Verifying { .. } => {
            "verifying the downloaded all-MiniLM-L6-v2 model; BM25 only until it is done".into()
        }
        State::Failed { error, .. } => {
            format!("the all-MiniLM-L6-v2 model could not be downloaded ({error}); using BM25 only")
        }
    }
}

fn check_query(query: &str) -> Result<()> {
    if query.trim().is_empty() {
        return Err(Error::invalid(
            "query",
            "empty; describe what the tool should do",
        ));
    }
    if query.len() > ad_core::model::limits::QUERY {
        return Err(Error::invalid(
            "query",
            format!(
                "{} bytes is over the limit of {}",
                query.len(),
                ad_core::model::limits::QUERY
            ),
        ));
    }
    Ok(())
}

/// The text embedded for a tool: its name in words, then its description.
pub fn tool_text(name: &str, description: &str) -> String {
    format!("{}: {}", name.replace(['_', '-'], " "), description)
}

/// BM25-first (issue 31): a query whose best BM25 candidate scores at least this (normalised BM25 times the share
/// of the query's words the tool covers)...
pub const SURE_BM25: f64 = 0.6;
/// ...and leads the second candidate by at least this is answered by BM25 alone, without a query embedding.
pub const SURE_LEAD: f64 = 0.1;

/// Whether BM25 is sure enough of `hits` (its candidates for a query) to skip the query embedding.
pub fn bm25_sure(hits: &[Hit]) -> bool {
    let (mut b1, mut b2) = (0.0_f64, 0.0_f64);
    for h in hits {
        if h.bm25 > b1 {
            b2 = b1;
            b1 = h.bm25;
        } else if h.bm25 > b2 {
            b2 = h.bm25;
        }
    }
    b1 >= SURE_BM25 && b1 - b2 >= SURE_LEAD
}

/// high / medium / low from the BM25 gap between the top two results (a clear lexical winner is trustworthy).
fn confidence(hits: &[Hit]) -> &'static str {
    match hits {
        [] => "low",
        [only] => {
            if only.score >= 0.5 {
                "high"
            } else {
                "medium"
            }
        }
        [a, b, ..] => {
            let gap = a.bm25 - b.bm25;
            if gap >= 0.5 {
                "high"
            } else if gap >= 0.15 || a.score - b.score >= 0.15 {
                "medium"
            } else {
                "low"
            }
        }
    }
}

/// Required arguments (name, type, description) and the number of optional ones, from a JSON Schema.
pub fn compact_schema(schema: &Value) -> (Vec<Value>, usize) {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let args = required
        .iter()
        .map(|name| {
            let p = props.and_then(|p| p.get(*name));
            serde_json::json!({
                "name": name,
                "type": p.and_then(|p| p.get("type")).cloned().unwrap_or(Value::String("unknown".into())),
                "description": p.and_then(|p| p.get("description")).cloned().unwrap_or(Value::Null),
            })
        })
        .collect();
    let optional = props
        .map(|p| p.len())
        .unwrap_or(0)
        .saturating_sub(required.len());
    (args, optional)
}
