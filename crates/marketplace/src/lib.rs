//! The marketplace: one browse over the official MCP registry, npm and PyPI (cached, each source on its own time limit), lookups by name, and the installer.
//!
//! For finding MCP servers that are not installed yet and planning how to install one: what to run or where to
//! connect, with the values it still needs ([`plan_install`]). It must not know the registry of installed servers
//! (registering the plan, storing its secrets: the caller's job), running or supervising server processes (it only
//! runs package managers for a moment: warming a download cache, asking npm and pip for their addresses, probing tool
//! versions), or SQL beyond the `ad_store::market_cache` API its answer cache goes through.
//!
//! # Browse
//! [`Marketplace::browse`] asks the three sources in parallel and merges their rows: registry rows first (in the
//! registry's order), then npm, then PyPI. Each row has a cross-source key `<source>:<name>`; a row appears once per
//! key, and an npm or PyPI row whose package is already a package of a registry row on the page is left out (the
//! registry row carries the richer install metadata). Every source returns at most `limit` rows (1-100).
//!
//! **Cursor.** Only the official registry pages. `next_cursor` is the registry's own opaque `metadata.nextCursor`,
//! passed through unchanged; `None` means the registry has no more rows. A registry page shorter than `limit` is
//! followed by the next ones until `limit` rows are there (the cursor handed back is the last page's). npm and PyPI answer on the first page only
//! (no cursor): a call with a cursor asks the registry alone and lists only it in `sources`.
//!
//! **Failures and cache.** Each source runs under `MarketplaceConfig::timeout`. A failing source never blocks the
//! others: its [`SourceStatus`] says `ok: false` and why. Answers are cached in SQLite under
//! `browse:<source>:<query>:<limit>:<cursor>`; an answer younger than `cache_ttl` is served without asking the
//! source, and when a source fails its last cached answer (any age) is served with `stale: true`.
//!
//! # Addresses
//! See [`config`]: environment, then `config.json`, then npm's and pip's own configuration (asked once, kept in
//! memory and in the cache table for a day). A source whose address cannot be found fails with "not configured".

mod config;
mod entry;
mod error;
mod http;
mod installer;
mod npm;
mod official;
mod page;
mod pypi;
mod semver;
use ad_store::market_cache as store_cache;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::OnceCell;

pub use config::{
    CONFIG_FILE, CURATED_PYPI, DEFAULT_CACHE_TTL, DEFAULT_MCP_REGISTRY_URL, DEFAULT_TIMEOUT,
    ENV_MCP_REGISTRY_URL, ENV_NPM_REGISTRY_URL, ENV_PYPI_URL, KEY_MCP_REGISTRY_URL,
    KEY_NPM_REGISTRY_URL, KEY_PYPI_URL, MarketplaceConfig, ask_npm_registry, ask_pypi_base,
    default_config_dir, index_url_from_pip_config_list, pypi_base_from_index,
};
pub use entry::{
    Argument, ArgumentKind, Input, InstallMethod, KeyValueInput, MarketEntry, MarketSource,
    Package, PackageTransport, Remote, Runtime,
};
pub use error::{InstallError, MarketError};
pub use installer::{
    InputKind, InstallPlan, LaunchConfig, MissingInput, PROBE_TIMEOUT, Prereqs, Transport,
    WARM_TIMEOUT, plan_install, plan_install_with, probe_prereqs, suggest_name, warm_cache,
    warm_cache_with_timeout,
};
pub use official::parse_server_json;
use page::Page;
pub use semver::compare as compare_versions;

/// Whether `name` is a valid PyPI project name (PEP 508).
pub fn valid_pypi_name(name: &str) -> bool {
    pypi::valid_project_name(name)
}

/// Largest `limit` a browse accepts (the official registry's own maximum).
pub const MAX_LIMIT: usize = 100;

/// How one source did in a browse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceStatus {
    pub source: MarketSource,
    /// The source answered now (or a fresh cached answer was used).
    pub ok: bool,
    /// The rows are an older cached answer, served because the source failed.
    pub stale: bool,
    /// Why the source failed, with what to do.
    pub error: Option<String>,
    /// Rows this source contributed before cross-source de-duplication.
    pub count: usize,
}

/// The merged answer of a browse.
#[derive(Debug, Clone, Serialize)]
pub struct BrowseResult {
    pub servers: Vec<MarketEntry>,
    /// The official registry's cursor for the next page; `None` when there is none.
    pub next_cursor: Option<String>,
    pub sources: Vec<SourceStatus>,
}

/// The federated marketplace. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Marketplace {
    config: MarketplaceConfig,
    client: reqwest::Client,
    cache: Option<store_cache::MarketCache>,
    cache_path: String,
    npm_base: OnceCell<Result<String, MarketError>>,
    pypi_base: OnceCell<Result<String, MarketError>>,
}

impl std::fmt::Debug for Marketplace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Marketplace")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Marketplace {
    /// Builds the HTTP client and opens the cache file (WAL, 5 s busy timeout) when one is configured.
    pub fn new(config: MarketplaceConfig) -> Result<Self, MarketError> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("agent-discover/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| MarketError::Config {
                what: "HTTP client".into(),
                message: e.to_string(),
            })?;
        let (cache, cache_path) = match &config.cache_db {
            Some(p) => (Some(open_cache(p)?), p.display().to_string()),
            None => (None, String::new()),
        };
        Ok(Marketplace {
            config,
            client,
            cache,
            cache_path,
            npm_base: OnceCell::new(),
            pypi_base: OnceCell::new(),
        })
    }

    pub fn config(&self) -> &MarketplaceConfig {
        &self.config
    }

    /// Searches every source (see the module documentation for merging, the cursor and failures). Never fails:
    /// problems are reported per source in `sources`.
    pub async fn browse(&self, query: &str, limit: usize, cursor: Option<&str>) -> BrowseResult {
        let query = query.trim();
        let limit = limit.clamp(1, MAX_LIMIT);
        let cursor = cursor.map(str::trim).filter(|c| !c.is_empty());
        let official = self.run_source(MarketSource::Registry, query, limit, cursor, async {
            official::fill_page(
                &self.client,
                &self.config.mcp_registry_url,
                query,
                limit,
                cursor,
            )
            .await
        });
        let mut pages: Vec<(Page, SourceStatus)> = Vec::new();
        if cursor.is_some() {
            pages.push(official.await);
        } else {
            let npm = self.run_source(MarketSource::Npm, query, limit, None, async {
                let base = self.address(MarketSource::Npm).await?;
                npm::search(&self.client, &base, query, limit).await
            });
            let pypi = self.run_source(MarketSource::Pypi, query, limit, None, async {
                let base = self.address(MarketSource::Pypi).await?;
                pypi::browse(
                    &self.client,
                    &base,
                    query,
                    limit,
                    &self.config.pypi_curated,
                    self.config.pypi_search,
                    self.config.timeout,
                )
                .await
            });
            let (o, n, p) = tokio::join!(official, npm, pypi);
            pages.extend([o, n, p]);
        }
        merge(pages)
    }

    /// Finds one server by name: the official registry (reverse-DNS names), then an npm package document, then
    /// PyPI's JSON. A `registry:`, `npm:` or `pypi:` prefix (a browse row's `key`) asks that source only.
    /// `Ok(None)`: no source has it. `Err`: nobody has it and at least one source could not be asked.
    pub async fn lookup(&self, name: &str) -> Result<Option<MarketEntry>, MarketError> {
        let name = name.trim();
        let (only, bare) = match name.split_once(':') {
            Some(("registry", rest)) => (Some(MarketSource::Registry), rest),
            Some(("npm", rest)) => (Some(MarketSource::Npm), rest),
            Some(("pypi", rest)) => (Some(MarketSource::Pypi), rest),
            _ => (None, name),
        };
        let mut first_error: Option<MarketError> = None;
        let mut asked = false;
        for source in [
            MarketSource::Registry,
            MarketSource::Npm,
            MarketSource::Pypi,
        ] {
            if only.is_some_and(|o| o != source) || !name_fits(source, bare) {
                continue;
            }
            asked = true;
            let attempt = async {
                match source {
                    MarketSource::Registry => {
                        official::lookup(&self.client, &self.config.mcp_registry_url, bare).await
                    }
                    MarketSource::Npm => {
                        let base = self.address(source).await?;
                        npm::lookup(&self.client, &base, bare).await
                    }
                    MarketSource::Pypi => {
                        let base = self.address(source).await?;
                        pypi::lookup(&self.client, &base, bare).await
                    }
                }
            };
            let res = tokio::time::timeout(self.config.timeout, attempt)
                .await
                .unwrap_or_else(|_| Err(self.timeout_error(source)));
            match res {
                Ok(Some(e)) => return Ok(Some(e)),
                Ok(None) => {}
                // A source without an address is not one the user asked for.
                Err(MarketError::NotConfigured { .. }) if only.is_none() => {}
                Err(e) => {
                    tracing::debug!(error = %e, "marketplace lookup failed in one source");
                    first_error.get_or_insert(e);
                }
            }
        }
        if !asked {
            return Err(MarketError::InvalidName {
                what: match only {
                    Some(MarketSource::Registry) => "registry server name (namespace/name)",
                    Some(MarketSource::Npm) => "npm package name",
                    Some(MarketSource::Pypi) => "PyPI project name",
                    None => "server or package name",
                },
                name: name.to_owned(),
                reason: "use a registry name like io.github.owner/server, an npm name like @scope/pkg, or a PyPI name"
                    .into(),
            });
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// Every matching server of the official registry, following `metadata.nextCursor` until it is empty (at most
    /// `max` rows; each page under the source time limit). Not cached.
    pub async fn collect_registry(
        &self,
        query: &str,
        max: usize,
    ) -> Result<Vec<MarketEntry>, MarketError> {
        official::collect(
            &self.client,
            &self.config.mcp_registry_url,
            query.trim(),
            max,
            self.config.timeout,
        )
        .await
    }

    /// The `n` most downloaded MCP server packages of npm, by the downloads its search reports (see `npm::top`).
    pub async fn top_npm(&self, n: usize) -> Result<Vec<String>, MarketError> {
        let base = self.address(MarketSource::Npm).await?;
        tokio::time::timeout(self.config.timeout * 4, npm::top(&self.client, &base, n))
            .await
            .unwrap_or_else(|_| Err(self.timeout_error(MarketSource::Npm)))
    }

    /// Up to `n` MCP server projects of PyPI: the curated list, then its search page (PyPI reports no downloads).
    pub async fn top_pypi(&self, n: usize) -> Result<Vec<String>, MarketError> {
        let base = self.address(MarketSource::Pypi).await?;
        Ok(pypi::top(
            &self.client,
            &base,
            n,
            &self.config.pypi_curated,
            self.config.pypi_search,
            self.config.timeout,
        )
        .await)
    }

    /// The address in use for a source: configured, or learned from npm/pip (asked once per process).
    pub async fn address(&self, source: MarketSource) -> Result<String, MarketError> {
        let (configured, cell) = match source {
            MarketSource::Registry => return Ok(self.config.mcp_registry_url.clone()),
            MarketSource::Npm => (&self.config.npm_registry_url, &self.npm_base),
            MarketSource::Pypi => (&self.config.pypi_url, &self.pypi_base),
        };
        if let Some(u) = configured {
            return Ok(u.clone());
        }
        cell.get_or_init(|| self.discover_address(source))
            .await
            .clone()
    }

    async fn discover_address(&self, source: MarketSource) -> Result<String, MarketError> {
        let (env, key) = match source {
            MarketSource::Npm => (ENV_NPM_REGISTRY_URL, KEY_NPM_REGISTRY_URL),
            _ => (ENV_PYPI_URL, KEY_PYPI_URL),
        };
        if !self.config.ask_package_managers {
            return Err(MarketError::NotConfigured {
                registry: source,
                hint: "no address is configured and asking npm/pip is switched off".into(),
                env,
                key,
            });
        }
        let cache_key = format!("resolved:{source}");
        if let Some((json, at)) = self.cache_get(&cache_key) {
            let fresh =
                store_cache::now_unix().saturating_sub(at) < secs(config::RESOLVED_ADDRESS_TTL);
            if let (true, Ok(u)) = (fresh, serde_json::from_str::<String>(&json)) {
                return Ok(u);
            }
        }
        let found = match source {
            MarketSource::Npm => ask_npm_registry().await,
            _ => ask_pypi_base().await,
        };
        if let Some(json) = found
            .as_ref()
            .ok()
            .and_then(|u| serde_json::to_string(u).ok())
        {
            self.cache_put(&cache_key, &json);
        }
        found
    }

    /// Runs one source under the time limit with the cache in front of it and the stale fallback behind it.
    async fn run_source<F>(
        &self,
        source: MarketSource,
        query: &str,
        limit: usize,
        cursor: Option<&str>,
        fetch: F,
    ) -> (Page, SourceStatus)
    where
        F: Future<Output = Result<Page, MarketError>>,
    {
        let key = format!("browse:{source}:{query}:{limit}:{}", cursor.unwrap_or(""));
        let cached: Option<(Page, i64)> = self
            .cache_get(&key)
            .and_then(|(json, at)| serde_json::from_str::<Page>(&json).ok().map(|p| (p, at)));
        let status = |ok: bool, stale: bool, error: Option<String>, count: usize| SourceStatus {
            source,
            ok,
            stale,
            error,
            count,
        };
        let ttl = secs(self.config.cache_ttl);
        if let Some((page, _)) = cached
            .as_ref()
            .filter(|(_, at)| store_cache::now_unix().saturating_sub(*at) < ttl)
        {
            let n = page.servers.len();
            return (page.clone(), status(true, false, None, n));
        }
        let result = tokio::time::timeout(self.config.timeout, fetch)
            .await
            .unwrap_or_else(|_| Err(self.timeout_error(source)));
        match result {
            Ok(page) => {
                if let Ok(json) = serde_json::to_string(&page) {
                    self.cache_put(&key, &json);
                }
                let n = page.servers.len();
                (page, status(true, false, None, n))
            }
            Err(e) => {
                tracing::debug!(error = %e, %source, "marketplace source failed");
                match cached {
                    Some((page, _)) => {
                        let n = page.servers.len();
                        (page, status(false, true, Some(e.to_string()), n))
                    }
                    None => (
                        Page::default(),
                        status(false, false, Some(e.to_string()), 0),
                    ),
                }
            }
        }
    }

    fn timeout_error(&self, source: MarketSource) -> MarketError {
        MarketError::Timeout {
            registry: source,
            timeout_ms: u64::try_from(self.config.timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    fn cache_get(&self, key: &str) -> Option<(String, i64)> {
        match self.cache.as_ref()?.get(key) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, path = %self.cache_path, "marketplace cache read failed");
                None
            }
        }
    }

    fn cache_put(&self, key: &str, json: &str) {
        let Some(cache) = self.cache.as_ref() else {
            return;
        };
        if let Err(e) = cache.put(key, json) {
            tracing::warn!(error = %e, path = %self.cache_path, "marketplace cache write failed");
        }
    }
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

fn open_cache(path: &Path) -> Result<store_cache::MarketCache, MarketError> {
    store_cache::MarketCache::open(path).map_err(|e| MarketError::Cache {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

/// Whether `name` can be a name in `source` (so a lookup never sends path tricks to a registry).
fn name_fits(source: MarketSource, name: &str) -> bool {
    let simple = |s: &str, extra: &[u8]| {
        !s.is_empty()
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
    };
    match source {
        MarketSource::Registry => match name.split_once('/') {
            Some((ns, n)) => {
                name.len() <= 200 && simple(ns, b".-") && simple(n, b"._-") && !name.contains("..")
            }
            None => false,
        },
        MarketSource::Npm => {
            let body = name.strip_prefix('@');
            let parts: Vec<&str> = name.trim_start_matches('@').split('/').collect();
            let shape_ok = matches!((body.is_some(), parts.len()), (true, 2) | (false, 1));
            shape_ok
                && name.len() <= 214
                && parts
                    .iter()
                    .all(|p| simple(p, b"._~-") && !p.starts_with('.') && !p.starts_with('_'))
        }
        MarketSource::Pypi => pypi::valid_project_name(name),
    }
}

/// Merges source pages in order, one row per key, leaving out npm/PyPI rows already offered by a registry row.
fn merge(pages: Vec<(Page, SourceStatus)>) -> BrowseResult {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    let mut covered: HashSet<(String, String)> = HashSet::new();
    for (page, status) in &pages {
        if status.source == MarketSource::Registry {
            for e in &page.servers {
                for p in &e.packages {
                    covered.insert((p.registry_type.clone(), norm(&p.identifier)));
                }
            }
        }
    }
    let mut keys: HashSet<String> = HashSet::new();
    let mut servers = Vec::new();
    let mut next_cursor = None;
    let mut sources = Vec::new();
    for (page, status) in pages {
        if status.source == MarketSource::Registry {
            next_cursor = page.next_cursor.clone();
        }
        for e in page.servers {
            let offered_by_registry = match e.source {
                MarketSource::Registry => false,
                MarketSource::Npm => covered.contains(&("npm".to_owned(), norm(&e.name))),
                MarketSource::Pypi => covered.contains(&("pypi".to_owned(), norm(&e.name))),
            };
            if !offered_by_registry && keys.insert(e.key.clone()) {
                servers.push(e);
            }
        }
        sources.push(status);
    }
    BrowseResult {
        servers,
        next_cursor,
        sources,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(name_fits(MarketSource::Registry, "io.github.foo/bar"));
        assert!(!name_fits(MarketSource::Registry, "../etc/passwd"));
        assert!(!name_fits(MarketSource::Registry, "@scope/pkg"));
        assert!(name_fits(MarketSource::Npm, "@scope/pkg"));
        assert!(name_fits(MarketSource::Npm, "pkg"));
        assert!(!name_fits(MarketSource::Npm, "a/b"));
        assert!(!name_fits(MarketSource::Npm, "@a/b/c"));
        assert!(!name_fits(MarketSource::Npm, "x; rm"));
        assert!(name_fits(MarketSource::Pypi, "mcp-server-time"));
        assert!(!name_fits(MarketSource::Pypi, "-x"));
    }
}
