//! PyPI as a marketplace source: per-project JSON (`{base}/pypi/<name>/json`) for a curated list of MCP servers, plus a best-effort scrape of the HTML search page.
//!
//! PyPI has no search API. The curated names are filtered by the query and looked up in parallel. The search page
//! (`{base}/search/?q=<query> mcp`) is read for project names with a third of the source's time limit; when it is
//! not served, served as a browser challenge, or changes its markup, it simply contributes nothing.

use std::time::Duration;

use serde_json::Value;

use super::entry::{
    MarketEntry, MarketSource, Package, field, normalize_repository_url, str_field,
};
use super::error::MarketError;
use super::http::{Fetched, build_url, get_json, get_text};
use super::page::Page;

/// The marker in PyPI's search results before each project name.
const SNIPPET_NAME: &str = "package-snippet__name\">";

pub(crate) async fn browse(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    limit: usize,
    curated: &[String],
    search: bool,
    timeout: Duration,
) -> Result<Page, MarketError> {
    let terms: Vec<String> = query
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    let mut names: Vec<String> = curated
        .iter()
        .filter(|n| {
            let n = n.to_ascii_lowercase();
            terms.iter().all(|t| n.contains(t.as_str()))
        })
        .take(limit)
        .cloned()
        .collect();
    let mut from_search: Vec<String> = Vec::new();
    if search && names.len() < limit {
        match tokio::time::timeout(timeout / 3, search_names(client, base, query)).await {
            Ok(Ok(found)) => {
                for n in found {
                    let dup = names
                        .iter()
                        .chain(from_search.iter())
                        .any(|x| same_project(x, &n));
                    if !dup && names.len() + from_search.len() < limit {
                        from_search.push(n);
                    }
                }
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "PyPI search page not usable; curated list only")
            }
            Err(_) => tracing::debug!("PyPI search page too slow; curated list only"),
        }
    }
    let searched = names.len();
    names.extend(from_search);
    if names.is_empty() {
        return Ok(Page::default());
    }

    let mut set = tokio::task::JoinSet::new();
    for (i, name) in names.iter().enumerate() {
        let client = client.clone();
        let base = base.to_owned();
        let name = name.clone();
        set.spawn(async move { (i, lookup(&client, &base, &name).await) });
    }
    let mut found: Vec<(usize, MarketEntry)> = Vec::new();
    let mut first_error: Option<MarketError> = None;
    let mut answered = 0usize;
    while let Some(joined) = set.join_next().await {
        let Ok((i, res)) = joined else { continue };
        match res {
            Ok(Some(e)) => {
                answered += 1;
                // Names from the search page must look like MCP servers; curated ones are known to be.
                if i < searched || is_mcp_related(&e) {
                    found.push((i, e));
                }
            }
            Ok(None) => answered += 1,
            Err(e) => {
                tracing::debug!(error = %e, "PyPI project lookup failed");
                first_error.get_or_insert(e);
            }
        }
    }
    if let (0, Some(e)) = (answered, first_error) {
        return Err(e);
    }
    found.sort_by_key(|(i, _)| *i);
    Ok(Page {
        servers: found.into_iter().map(|(_, e)| e).collect(),
        next_cursor: None,
    })
}

/// The MCP servers of PyPI to introspect first. PyPI reports no download counts, so this is the curated list (chosen
/// by popularity) in its order, then MCP-related names from the search page, up to `n`.
pub(crate) async fn top(
    client: &reqwest::Client,
    base: &str,
    n: usize,
    curated: &[String],
    search: bool,
    timeout: Duration,
) -> Vec<String> {
    let mut names: Vec<String> = curated.iter().take(n).cloned().collect();
    if search && names.len() < n {
        for q in ["mcp server", "mcp"] {
            if let Ok(Ok(found)) =
                tokio::time::timeout(timeout, search_names(client, base, q)).await
            {
                for f in found {
                    let lower = f.to_ascii_lowercase();
                    if names.len() < n
                        && lower.contains("mcp")
                        && !names.iter().any(|x| same_project(x, &f))
                    {
                        names.push(f);
                    }
                }
            }
        }
    }
    names
}

/// PEP 503 name comparison (case, `-`, `_` and `.` do not matter).
fn same_project(a: &str, b: &str) -> bool {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    norm(a) == norm(b)
}

fn is_mcp_related(e: &MarketEntry) -> bool {
    let t = format!("{} {}", e.name, e.description).to_ascii_lowercase();
    t.contains("mcp") || t.contains("model context protocol")
}

async fn search_names(
    client: &reqwest::Client,
    base: &str,
    query: &str,
) -> Result<Vec<String>, MarketError> {
    let q = format!("{query} mcp").trim().to_owned();
    let url = build_url(MarketSource::Pypi, base, &["search", ""], &[("q", &q)])?;
    let html = get_text(client, MarketSource::Pypi, url, "text/html")
        .await?
        .unwrap_or_default();
    Ok(scrape_search(&html))
}

/// Project names from PyPI's search result markup.
pub(crate) fn scrape_search(html: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(pos) = rest.find(SNIPPET_NAME) {
        rest = &rest[pos + SNIPPET_NAME.len()..];
        let Some(end) = rest.find('<') else { break };
        let name = rest[..end].trim();
        if valid_project_name(name) && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
        rest = &rest[end..];
    }
    out
}

/// PEP 508 project names: letters, digits, `.`, `_`, `-`, starting and ending with a letter or digit.
pub(crate) fn valid_project_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= 200
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(c))
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// `{base}/pypi/<name>/json`; `None` when PyPI has no such project.
pub(crate) async fn lookup(
    client: &reqwest::Client,
    base: &str,
    name: &str,
) -> Result<Option<MarketEntry>, MarketError> {
    let url = build_url(MarketSource::Pypi, base, &["pypi", name, "json"], &[])?;
    let shown = url.to_string();
    match get_json(client, MarketSource::Pypi, url).await? {
        Fetched::NotFound => Ok(None),
        Fetched::Found(body) => {
            parse_project(&body)
                .map(Some)
                .ok_or_else(|| MarketError::Malformed {
                    registry: MarketSource::Pypi,
                    url: shown,
                    detail: "no `info.name`".into(),
                })
        }
    }
}

pub(crate) fn parse_project(body: &Value) -> Option<MarketEntry> {
    let info = field(body, &["info"])?;
    let name = str_field(info, &["name"])?;
    let version = str_field(info, &["version"]);
    let urls: Vec<(String, String)> = field(info, &["project_urls"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.to_ascii_lowercase(), v.as_str()?.trim().to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let is_forge = |u: &str| {
        [
            "github.com/",
            "gitlab.com/",
            "bitbucket.org/",
            "codeberg.org/",
        ]
        .iter()
        .any(|h| u.contains(h))
    };
    let repository = urls
        .iter()
        .find(|(k, _)| {
            ["repository", "source", "source code", "code", "github"].contains(&k.as_str())
        })
        .map(|(_, u)| u.clone())
        .or_else(|| {
            urls.iter()
                .find(|(_, u)| is_forge(u))
                .map(|(_, u)| u.clone())
        })
        .or_else(|| str_field(info, &["home_page"]).filter(|u| is_forge(u)))
        .and_then(|u| normalize_repository_url(&u));
    let website = urls
        .iter()
        .find(|(k, _)| ["homepage", "home", "documentation"].contains(&k.as_str()))
        .map(|(_, u)| u.clone())
        .or_else(|| str_field(info, &["home_page"]));
    let mut e = MarketEntry {
        key: format!("{}:{name}", MarketSource::Pypi),
        title: None,
        description: str_field(info, &["summary"]).unwrap_or_default(),
        version: version.clone(),
        source: MarketSource::Pypi,
        runtime: None,
        install_method: None,
        repository,
        website_url: website,
        status: None,
        published_at: None,
        packages: vec![Package {
            registry_type: "pypi".into(),
            identifier: name.clone(),
            version,
            ..Package::default()
        }],
        remotes: Vec::new(),
        name,
    };
    e.derive_install();
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrape() {
        let html = r#"<a class="package-snippet" href="/project/mcp-server-time/"><span class="package-snippet__name">mcp-server-time</span>
            <span class="package-snippet__name">bad name;</span><span class="package-snippet__name">x-mcp</span>"#;
        assert_eq!(scrape_search(html), vec!["mcp-server-time", "x-mcp"]);
        assert!(scrape_search("<html>challenge</html>").is_empty());
    }
}
