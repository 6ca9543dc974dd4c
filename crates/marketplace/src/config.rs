//! Where the marketplace's registries are: environment, then `config.json`, then what npm and pip themselves are configured with.
//!
//! No package registry address is written here. The official MCP registry has a default (it is this project's own
//! upstream); npm's address comes from `npm config get registry`, PyPI's from `PIP_INDEX_URL`, pip's configuration
//! files (`python3 -m pip config list`) or pip's built-in default, asked from pip at run time.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use super::entry::MarketSource;
use super::error::MarketError;

/// The official MCP registry.
pub const DEFAULT_MCP_REGISTRY_URL: &str = "https://registry.modelcontextprotocol.io";
pub const ENV_MCP_REGISTRY_URL: &str = "AGENT_DISCOVER_MCP_REGISTRY_URL";
pub const ENV_NPM_REGISTRY_URL: &str = "AGENT_DISCOVER_NPM_REGISTRY_URL";
pub const ENV_PYPI_URL: &str = "AGENT_DISCOVER_PYPI_URL";
pub const KEY_MCP_REGISTRY_URL: &str = "mcp_registry_url";
pub const KEY_NPM_REGISTRY_URL: &str = "npm_registry_url";
pub const KEY_PYPI_URL: &str = "pypi_url";
/// The file in the config directory (`~/.config/agent-discover/config.json`).
pub const CONFIG_FILE: &str = "config.json";
/// Per-source time limit.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long browse results are served from the cache without asking the source again.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(10 * 60);
/// How long an address learned from npm or pip is kept in the cache table.
pub const RESOLVED_ADDRESS_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Time limit for one `npm config get` / `pip config list` / `python3 -c` question.
pub const PACKAGE_MANAGER_TIMEOUT: Duration = Duration::from_secs(10);

/// Well-known MCP servers published on PyPI (PyPI has no search API; these are looked up one by one).
pub const CURATED_PYPI: &[&str] = &[
    "mcp-server-fetch",
    "mcp-server-git",
    "mcp-server-time",
    "mcp-server-sqlite",
    "mcp-server-postgres",
    "mcp-proxy",
    "mcp-server-qdrant",
    "mcp-server-duckdb",
    "mcp-server-motherduck",
    "mcp-server-docker",
    "mcp-server-calculator",
    "mcp-server-sentry",
    "mcp-atlassian",
    "mcp-clickhouse",
    "mcp-grafana",
    "mcp-neo4j-cypher",
    "markitdown-mcp",
    "arxiv-mcp-server",
    "chroma-mcp",
    "duckduckgo-mcp-server",
    "excel-mcp-server",
    "office-word-mcp-server",
    "workspace-mcp",
    "dbt-mcp",
    "awslabs-aws-documentation-mcp-server",
    "awslabs-aws-api-mcp-server",
];

/// Everything a [`super::Marketplace`] needs. `Default` is the production setting without a cache file.
#[derive(Debug, Clone)]
pub struct MarketplaceConfig {
    /// Base of the official MCP registry API (without `/v0.1`).
    pub mcp_registry_url: String,
    /// npm registry base; `None`: ask npm (when `ask_package_managers`), else the npm source is "not configured".
    pub npm_registry_url: Option<String>,
    /// Base of PyPI's JSON API (`{pypi_url}/pypi/<name>/json`); an index URL ending in `/simple` is accepted.
    /// `None`: ask pip (when `ask_package_managers`), else the PyPI source is "not configured".
    pub pypi_url: Option<String>,
    /// Time limit per source (all of its requests together).
    pub timeout: Duration,
    /// SQLite file for the cache; `None` disables caching (and stale answers).
    pub cache_db: Option<PathBuf>,
    /// Age under which a cached browse answer is served without asking the source.
    pub cache_ttl: Duration,
    /// Whether to run `npm config get registry` / pip to learn addresses that are not configured.
    pub ask_package_managers: bool,
    /// Whether to scrape PyPI's HTML search page in addition to the curated list (best effort).
    pub pypi_search: bool,
    /// The PyPI packages looked up directly (filtered by the query).
    pub pypi_curated: Vec<String>,
}

impl Default for MarketplaceConfig {
    fn default() -> Self {
        MarketplaceConfig {
            mcp_registry_url: DEFAULT_MCP_REGISTRY_URL.to_owned(),
            npm_registry_url: None,
            pypi_url: None,
            timeout: DEFAULT_TIMEOUT,
            cache_db: None,
            cache_ttl: DEFAULT_CACHE_TTL,
            ask_package_managers: true,
            pypi_search: true,
            pypi_curated: CURATED_PYPI.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

impl MarketplaceConfig {
    /// Defaults overridden by `<config_dir>/config.json`, then by the `AGENT_DISCOVER_*_URL` environment variables.
    /// `config_dir` `None` means [`default_config_dir`]. A missing file is fine; a broken one is an error.
    pub fn load(config_dir: Option<&Path>) -> Result<Self, MarketError> {
        Self::load_with(config_dir, |k| std::env::var(k).ok())
    }

    /// [`Self::load`] with the environment given as a function (tests, or a caller that resolved it already).
    pub fn load_with(
        config_dir: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, MarketError> {
        let mut cfg = MarketplaceConfig::default();
        let dir = config_dir
            .map(Path::to_path_buf)
            .or_else(default_config_dir);
        let file = match dir {
            Some(d) => read_config_file(&d.join(CONFIG_FILE))?,
            None => Value::Null,
        };
        let pick = |env_key: &str, file_key: &str| -> Result<Option<String>, MarketError> {
            let from_env = env(env_key)
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty());
            let from_file = match file.get(file_key) {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
                Some(_) => {
                    return Err(MarketError::Config {
                        what: format!("{CONFIG_FILE} key {file_key}"),
                        message: "must be a string (a URL)".into(),
                    });
                }
            };
            match from_env
                .map(|v| (env_key, v))
                .or(from_file.map(|v| (file_key, v)))
            {
                Some((what, v)) => Ok(Some(normalize_base_url(what, &v)?)),
                None => Ok(None),
            }
        };
        if let Some(u) = pick(ENV_MCP_REGISTRY_URL, KEY_MCP_REGISTRY_URL)? {
            cfg.mcp_registry_url = u;
        }
        cfg.npm_registry_url = pick(ENV_NPM_REGISTRY_URL, KEY_NPM_REGISTRY_URL)?;
        cfg.pypi_url = pick(ENV_PYPI_URL, KEY_PYPI_URL)?.map(|u| pypi_base_from_index(&u));
        Ok(cfg)
    }
}

/// `$XDG_CONFIG_HOME/agent-discover`, else `$HOME/.config/agent-discover`.
pub fn default_config_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty());
    let base = match xdg {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(std::env::var_os("HOME").filter(|v| !v.is_empty())?).join(".config"),
    };
    Some(base.join("agent-discover"))
}

fn read_config_file(path: &Path) -> Result<Value, MarketError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Value::Null),
        Err(e) => {
            return Err(MarketError::Config {
                what: path.display().to_string(),
                message: format!("cannot be read: {e}"),
            });
        }
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| MarketError::Config {
        what: path.display().to_string(),
        message: format!("is not valid JSON ({e}); fix or delete it"),
    })?;
    if v.is_object() {
        Ok(v)
    } else {
        Err(MarketError::Config {
            what: path.display().to_string(),
            message: "must be a JSON object like {\"npm_registry_url\": \"...\"}".into(),
        })
    }
}

/// Checks that `raw` is an http(s) URL and drops trailing slashes.
pub fn normalize_base_url(what: &str, raw: &str) -> Result<String, MarketError> {
    let bad = |m: &str| MarketError::Config {
        what: what.to_owned(),
        message: format!("{raw:?} {m}"),
    };
    let url = reqwest::Url::parse(raw.trim()).map_err(|e| bad(&format!("is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("must start with http:// or https://"));
    }
    if url.host_str().is_none() {
        return Err(bad("has no host"));
    }
    Ok(raw.trim().trim_end_matches('/').to_owned())
}

/// A pip index URL (`…/simple` or `…/simple/`) -> the base of the JSON API (`…`). Other URLs are kept.
pub fn pypi_base_from_index(index: &str) -> String {
    let t = index.trim().trim_end_matches('/');
    t.strip_suffix("/simple")
        .unwrap_or(t)
        .trim_end_matches('/')
        .to_owned()
}

/// Runs a program without a shell and returns its trimmed stdout, or why not.
async fn ask(program: &str, args: &[&str]) -> Result<String, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let run = async {
        let out = cmd
            .output()
            .await
            .map_err(|e| format!("`{program}` could not run: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "`{program} {}` failed ({})",
                args.join(" "),
                out.status
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    match tokio::time::timeout(PACKAGE_MANAGER_TIMEOUT, run).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "`{program} {}` did not answer within {} s",
            args.join(" "),
            PACKAGE_MANAGER_TIMEOUT.as_secs()
        )),
    }
}

/// npm's registry, from `npm config get registry`.
pub async fn ask_npm_registry() -> Result<String, MarketError> {
    let not_configured = |hint: String| MarketError::NotConfigured {
        registry: MarketSource::Npm,
        hint,
        env: ENV_NPM_REGISTRY_URL,
        key: KEY_NPM_REGISTRY_URL,
    };
    let out = ask("npm", &["config", "get", "registry"])
        .await
        .map_err(not_configured)?;
    let line = out
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("http"))
        .unwrap_or_default();
    if line.is_empty() {
        return Err(not_configured(
            "`npm config get registry` gave no URL".into(),
        ));
    }
    normalize_base_url("npm config registry", line).map_err(|e| not_configured(e.to_string()))
}

/// The PyPI JSON API base: `PIP_INDEX_URL`, then pip's configuration files, then pip's built-in default.
pub async fn ask_pypi_base() -> Result<String, MarketError> {
    let index = pip_index_url(|k| std::env::var(k).ok()).await?;
    let base = pypi_base_from_index(&index);
    normalize_base_url("pip index URL", &base).map_err(|e| MarketError::NotConfigured {
        registry: MarketSource::Pypi,
        hint: e.to_string(),
        env: ENV_PYPI_URL,
        key: KEY_PYPI_URL,
    })
}

async fn pip_index_url(env: impl Fn(&str) -> Option<String>) -> Result<String, MarketError> {
    if let Some(u) = env("PIP_INDEX_URL")
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
    {
        return Ok(u);
    }
    let mut reasons = Vec::new();
    for python in ["python3", "python"] {
        match ask(python, &["-m", "pip", "config", "list"]).await {
            Ok(listing) => {
                if let Some(u) = index_url_from_pip_config_list(&listing) {
                    return Ok(u);
                }
            }
            Err(e) => {
                reasons.push(e);
                continue;
            }
        }
        // pip's own default, asked from the installed pip rather than written here.
        match ask(
            python,
            &[
                "-c",
                "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
            ],
        )
        .await
        {
            Ok(u) if u.starts_with("http") => return Ok(u),
            Ok(_) => reasons.push(format!("`{python}` printed no pip default index")),
            Err(e) => reasons.push(e),
        }
    }
    Err(MarketError::NotConfigured {
        registry: MarketSource::Pypi,
        hint: format!("pip gave no index URL ({})", reasons.join("; ")),
        env: ENV_PYPI_URL,
        key: KEY_PYPI_URL,
    })
}

/// Picks `index-url` from `pip config list` output (`section.key='value'` lines), by pip's precedence.
pub fn index_url_from_pip_config_list(listing: &str) -> Option<String> {
    let mut found: Vec<(usize, String)> = Vec::new();
    for line in listing.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_matches('\'').trim_matches('"').trim();
        let rank = match key.trim() {
            ":env:.index-url" => 0,
            "install.index-url" => 1,
            "global.index-url" => 2,
            _ => continue,
        };
        if value.starts_with("http") {
            found.push((rank, value.to_owned()));
        }
    }
    found.sort_by_key(|(r, _)| *r);
    found.into_iter().next().map(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_urls() {
        assert_eq!(
            pypi_base_from_index("https://mirror.test/pypi/simple/"),
            "https://mirror.test/pypi"
        );
        assert_eq!(
            pypi_base_from_index("https://mirror.test/simple"),
            "https://mirror.test"
        );
        assert_eq!(
            pypi_base_from_index("https://mirror.test/"),
            "https://mirror.test"
        );
        let listing = "global.cert='/x'\nglobal.index-url='https://a.test/simple'\n:env:.index-url='https://b.test/simple'\n";
        assert_eq!(
            index_url_from_pip_config_list(listing).as_deref(),
            Some("https://b.test/simple")
        );
        assert_eq!(index_url_from_pip_config_list("global.cert='/x'"), None);
    }

    #[test]
    fn env_wins_over_file() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            r#"{"npm_registry_url": "http://file.test/npm/", "pypi_url": "http://file.test/simple", "other": 1}"#,
        )?;
        let cfg = MarketplaceConfig::load_with(Some(dir.path()), |k| {
            (k == ENV_NPM_REGISTRY_URL).then(|| "http://env.test/npm".to_owned())
        })?;
        assert_eq!(cfg.npm_registry_url.as_deref(), Some("http://env.test/npm"));
        assert_eq!(cfg.pypi_url.as_deref(), Some("http://file.test"));
        assert_eq!(cfg.mcp_registry_url, DEFAULT_MCP_REGISTRY_URL);
        std::fs::write(dir.path().join(CONFIG_FILE), "{not json")?;
        assert!(matches!(
            MarketplaceConfig::load_with(Some(dir.path()), |_| None),
            Err(MarketError::Config { .. })
        ));
        std::fs::write(
            dir.path().join(CONFIG_FILE),
            r#"{"npm_registry_url": "ftp://x"}"#,
        )?;
        assert!(MarketplaceConfig::load_with(Some(dir.path()), |_| None).is_err());
        Ok(())
    }
}
