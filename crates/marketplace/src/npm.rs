//! npm as a marketplace source: the registry's search endpoint (two queries, kept to MCP-related packages) and package documents.

use serde_json::Value;

use super::entry::{
    MarketEntry, MarketSource, Package, field, normalize_repository_url, parse_repository,
    str_field,
};
use super::error::MarketError;
use super::http::{Fetched, build_url, get_json};
use super::page::Page;

/// npm's search endpoint returns at most this many objects per query.
const MAX_SEARCH_SIZE: usize = 250;

/// Searches `<q> keywords:mcp` and `<q> mcp` in parallel, merges them (first query first), keeps MCP-related
/// packages, and returns at most `limit`. One failing query is tolerated; both failing is an error.
pub(crate) async fn search(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    limit: usize,
) -> Result<Page, MarketError> {
    // Ask for more than `limit`: the MCP filter drops some.
    let size = (limit.saturating_mul(2))
        .clamp(10, MAX_SEARCH_SIZE)
        .to_string();
    let text_keywords = format!("{query} keywords:mcp").trim().to_owned();
    let text_plain = format!("{query} mcp").trim().to_owned();
    let url_keywords = build_url(
        MarketSource::Npm,
        base,
        &["-", "v1", "search"],
        &[("text", &text_keywords), ("size", &size)],
    )?;
    let url_plain = build_url(
        MarketSource::Npm,
        base,
        &["-", "v1", "search"],
        &[("text", &text_plain), ("size", &size)],
    )?;
    let shown_keywords = url_keywords.to_string();
    let shown_plain = url_plain.to_string();
    let (a, b) = tokio::join!(
        get_json(client, MarketSource::Npm, url_keywords),
        get_json(client, MarketSource::Npm, url_plain)
    );
    let a = a.and_then(|f| search_objects(f, &shown_keywords));
    let b = b.and_then(|f| search_objects(f, &shown_plain));
    let lists = match (a, b) {
        (Err(e), Err(_)) => return Err(e),
        (Ok(x), Err(e)) | (Err(e), Ok(x)) => {
            tracing::debug!(error = %e, "one npm search query failed; using the other");
            vec![x]
        }
        (Ok(x), Ok(y)) => vec![x, y],
    };
    let mut seen = std::collections::HashSet::new();
    let mut servers = Vec::new();
    for obj in lists.into_iter().flatten() {
        let Some(pkg) = field(&obj, &["package"]) else {
            continue;
        };
        let Some(entry) = entry_from_search(pkg) else {
            continue;
        };
        if !seen.insert(entry.name.clone()) || !is_mcp_related(pkg) {
            continue;
        }
        servers.push(entry);
        if servers.len() >= limit {
            break;
        }
    }
    Ok(Page {
        servers,
        next_cursor: None,
    })
}

/// The most downloaded MCP servers: `keywords:mcp` and `mcp server` searched page by page (250 per page, up to four
/// pages each), kept to MCP-related packages that are not SDKs or type packages, ranked by the monthly downloads the
/// search reports (`downloads.monthly`, else `downloads.weekly`); packages without a count follow in search order.
pub(crate) async fn top(
    client: &reqwest::Client,
    base: &str,
    n: usize,
) -> Result<Vec<String>, MarketError> {
    let mut found: Vec<(String, u64, usize)> = Vec::new();
    let mut first_error = None;
    let mut order = 0usize;
    for text in ["keywords:mcp", "mcp server"] {
        for page in 0..4usize {
            let from = (page * MAX_SEARCH_SIZE).to_string();
            let size = MAX_SEARCH_SIZE.to_string();
            let url = build_url(
                MarketSource::Npm,
                base,
                &["-", "v1", "search"],
                &[("text", text), ("size", &size), ("from", &from)],
            )?;
            let shown = url.to_string();
            let objects = match get_json(client, MarketSource::Npm, url)
                .await
                .and_then(|f| search_objects(f, &shown))
            {
                Ok(o) => o,
                Err(e) => {
                    first_error.get_or_insert(e);
                    break;
                }
            };
            let count = objects.len();
            for obj in objects {
                let Some(pkg) = field(&obj, &["package"]) else {
                    continue;
                };
                let Some(name) = str_field(pkg, &["name"]) else {
                    continue;
                };
                let lower = name.to_ascii_lowercase();
                if !is_mcp_related(pkg)
                    || lower.contains("sdk")
                    || lower.ends_with("-types")
                    || lower.ends_with("/types")
                    || found.iter().any(|(n, _, _)| *n == name)
                {
                    continue;
                }
                let downloads = field(&obj, &["downloads"])
                    .and_then(|d| field(d, &["monthly"]).or_else(|| field(d, &["weekly"])))
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                found.push((name, downloads, order));
                order += 1;
            }
            if count < MAX_SEARCH_SIZE || found.len() >= n.saturating_mul(3) {
                break;
            }
        }
    }
    if found.is_empty()
        && let Some(e) = first_error
    {
        return Err(e);
    }
    found.sort_by(|a, b| b.1.cmp(&a.1).then(a.2.cmp(&b.2)));
    Ok(found.into_iter().take(n).map(|(name, _, _)| name).collect())
}

fn search_objects(f: Fetched, url: &str) -> Result<Vec<Value>, MarketError> {
    let malformed = |d: &str| MarketError::Malformed {
        registry: MarketSource::Npm,
        url: url.to_owned(),
        detail: d.to_owned(),
    };
    match f {
        Fetched::NotFound => Err(MarketError::Http {
            registry: MarketSource::Npm,
            url: url.to_owned(),
            status: 404,
            detail: ": this registry has no search endpoint".into(),
        }),
        Fetched::Found(v) => field(&v, &["objects"])
            .and_then(Value::as_array)
            .cloned()
            .ok_or_else(|| malformed("no `objects` list")),
    }
}

/// Name, description or keywords mention MCP.
fn is_mcp_related(pkg: &Value) -> bool {
    let mut text = String::new();
    for k in ["name", "description"] {
        if let Some(s) = str_field(pkg, &[k]) {
            text.push_str(&s);
            text.push(' ');
        }
    }
    if let Some(kws) = field(pkg, &["keywords"]).and_then(Value::as_array) {
        for k in kws.iter().filter_map(Value::as_str) {
            text.push_str(k);
            text.push(' ');
        }
    }
    let t = text.to_ascii_lowercase();
    t.contains("mcp")
        || t.contains("model context protocol")
        || t.contains("modelcontextprotocol")
        || t.contains("model-context-protocol")
}

fn entry(
    name: String,
    version: Option<String>,
    description: String,
    repository: Option<String>,
    homepage: Option<String>,
) -> MarketEntry {
    let mut e = MarketEntry {
        key: format!("{}:{name}", MarketSource::Npm),
        title: None,
        description,
        version: version.clone(),
        source: MarketSource::Npm,
        runtime: None,
        install_method: None,
        repository,
        website_url: homepage,
        status: None,
        published_at: None,
        packages: vec![Package {
            registry_type: "npm".into(),
            identifier: name.clone(),
            version,
            ..Package::default()
        }],
        remotes: Vec::new(),
        name,
    };
    e.derive_install();
    e
}

fn entry_from_search(pkg: &Value) -> Option<MarketEntry> {
    let name = str_field(pkg, &["name"])?;
    let links = field(pkg, &["links"]);
    let repository = links
        .and_then(|l| str_field(l, &["repository"]))
        .and_then(|r| normalize_repository_url(&r))
        .or_else(|| parse_repository(field(pkg, &["repository"])));
    let homepage = links.and_then(|l| str_field(l, &["homepage"]));
    Some(entry(
        name,
        str_field(pkg, &["version"]),
        str_field(pkg, &["description"]).unwrap_or_default(),
        repository,
        homepage,
    ))
}

/// The package document `{base}/{name}`: latest version from `dist-tags`, details from that version.
/// `None` when the package does not exist or was unpublished.
pub(crate) async fn lookup(
    client: &reqwest::Client,
    base: &str,
    name: &str,
) -> Result<Option<MarketEntry>, MarketError> {
    let url = build_url(MarketSource::Npm, base, &[name], &[])?;
    let shown = url.to_string();
    match get_json(client, MarketSource::Npm, url).await? {
        Fetched::NotFound => Ok(None),
        Fetched::Found(doc) => parse_document(&doc).map(Some).or_else(|reason| {
            if reason == UNPUBLISHED {
                Ok(None)
            } else {
                Err(MarketError::Malformed {
                    registry: MarketSource::Npm,
                    url: shown,
                    detail: reason.into(),
                })
            }
        }),
    }
}

const UNPUBLISHED: &str = "unpublished";

pub(crate) fn parse_document(doc: &Value) -> Result<MarketEntry, &'static str> {
    if !doc.is_object() {
        return Err("not a JSON object");
    }
    let name = str_field(doc, &["name"]).ok_or("no `name` field")?;
    let latest = field(doc, &["dist-tags"]).and_then(|t| str_field(t, &["latest"]));
    let versions = field(doc, &["versions"]).and_then(Value::as_object);
    if latest.is_none() && versions.is_none_or(|v| v.is_empty()) {
        return Err(UNPUBLISHED);
    }
    let manifest = latest
        .as_deref()
        .and_then(|v| versions.and_then(|vs| vs.get(v)))
        .filter(|m| m.is_object());
    let pick = |k: &str| {
        manifest
            .and_then(|m| str_field(m, &[k]))
            .or_else(|| str_field(doc, &[k]))
    };
    let repository = manifest
        .and_then(|m| parse_repository(field(m, &["repository"])))
        .or_else(|| parse_repository(field(doc, &["repository"])));
    Ok(entry(
        name,
        latest,
        pick("description").unwrap_or_default(),
        repository,
        pick("homepage"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn document() {
        let doc = json!({
            "name": "@s/p", "dist-tags": {"latest": "1.2.3"},
            "versions": {"1.2.3": {"description": "d", "repository": {"type": "git", "url": "git+https://github.com/s/p.git"}}}
        });
        let e = parse_document(&doc).expect("parses");
        assert_eq!(e.key, "npm:@s/p");
        assert_eq!(e.version.as_deref(), Some("1.2.3"));
        assert_eq!(e.repository.as_deref(), Some("https://github.com/s/p"));
        assert_eq!(
            parse_document(&json!({"name": "x", "time": {"unpublished": {}}})),
            Err(UNPUBLISHED)
        );
    }
}
