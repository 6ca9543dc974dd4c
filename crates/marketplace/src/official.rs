//! The official MCP registry (`/v0.1/servers`): one page of a search, every page of it, and a direct lookup by name.
//!
//! Rows are `ServerResponse` objects `{server, _meta}`; older registries returned the server object itself with the
//! registry metadata inside it, which is read too. Rows whose registry status is not `active` are dropped, and
//! several versions of one server collapse to one row (`isLatest` first, then the highest semver).

use std::collections::HashMap;

use serde_json::Value;

use super::entry::{
    MarketEntry, MarketSource, field, parse_packages, parse_remotes, parse_repository, str_field,
};
use super::error::MarketError;
use super::http::{Fetched, build_url, get_json};
use super::page::Page;
use super::semver;

const OFFICIAL_META: &str = "io.modelcontextprotocol.registry/official";
/// Upper bound on pages followed by [`collect`], against a registry that keeps returning cursors.
const MAX_PAGES: usize = 100;

/// A parsed row with the registry metadata used to choose among versions.
struct Row {
    entry: MarketEntry,
    is_latest: bool,
}

/// One page of `GET {base}/v0.1/servers?search=&limit=&cursor=&version=latest`.
pub(crate) async fn list_page(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page, MarketError> {
    let limit_s = limit.to_string();
    let mut q: Vec<(&str, &str)> = Vec::new();
    if !query.is_empty() {
        q.push(("search", query));
    }
    q.push(("limit", &limit_s));
    if let Some(c) = cursor.filter(|c| !c.is_empty()) {
        q.push(("cursor", c));
    }
    q.push(("version", "latest"));
    let url = build_url(MarketSource::Registry, base, &["v0.1", "servers"], &q)?;
    let shown = url.to_string();
    match get_json(client, MarketSource::Registry, url).await? {
        Fetched::Found(body) => parse_list(&body, &shown),
        Fetched::NotFound => Err(MarketError::Http {
            registry: MarketSource::Registry,
            url: shown,
            status: 404,
            detail: String::new(),
        }),
    }
}

/// `limit` servers from `cursor` on: a page that comes back shorter than asked is followed by the next one (asking
/// for what is still missing) until `limit` is reached or the registry has no further page. The cursor returned is
/// the last page's, so the next call continues exactly there.
pub(crate) async fn fill_page(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    limit: usize,
    cursor: Option<&str>,
) -> Result<Page, MarketError> {
    let mut page = list_page(client, base, query, limit, cursor).await?;
    let mut seen: std::collections::HashSet<String> =
        cursor.map(str::to_owned).into_iter().collect();
    for _ in 0..MAX_PAGES {
        let Some(next) = page.next_cursor.clone() else {
            break;
        };
        if page.servers.len() >= limit || !seen.insert(next.clone()) {
            break;
        }
        let more = list_page(client, base, query, limit - page.servers.len(), Some(&next)).await?;
        for e in more.servers {
            // A server already shown (another version on a later page) is not repeated.
            if !page.servers.iter().any(|s| s.name == e.name) {
                page.servers.push(e);
            }
        }
        page.next_cursor = more.next_cursor;
    }
    Ok(page)
}

/// Every page of a search, following `metadata.nextCursor` until it is empty, up to `max` servers.
pub(crate) async fn collect(
    client: &reqwest::Client,
    base: &str,
    query: &str,
    max: usize,
    timeout: std::time::Duration,
) -> Result<Vec<MarketEntry>, MarketError> {
    let mut rows: Vec<MarketEntry> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen_cursors = std::collections::HashSet::new();
    for _ in 0..MAX_PAGES {
        let page = tokio::time::timeout(
            timeout,
            list_page(client, base, query, 100, cursor.as_deref()),
        )
        .await
        .map_err(|_| MarketError::Timeout {
            registry: MarketSource::Registry,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        })??;
        rows.extend(page.servers);
        match page.next_cursor {
            // A cursor seen before would loop forever.
            Some(c) if rows.len() < max && seen_cursors.insert(c.clone()) => cursor = Some(c),
            _ => break,
        }
    }
    // Pages may repeat a server (one row per version); keep the best row of each.
    let mut out = dedupe(
        rows.into_iter()
            .map(|entry| Row {
                is_latest: false,
                entry,
            })
            .collect(),
    );
    out.truncate(max);
    Ok(out)
}

/// `GET {base}/v0.1/servers/{name}/versions/latest`; `None` on 404 or when the server was deleted.
pub(crate) async fn lookup(
    client: &reqwest::Client,
    base: &str,
    name: &str,
) -> Result<Option<MarketEntry>, MarketError> {
    let url = build_url(
        MarketSource::Registry,
        base,
        &["v0.1", "servers", name, "versions", "latest"],
        &[],
    )?;
    let shown = url.to_string();
    let body = match get_json(client, MarketSource::Registry, url).await? {
        Fetched::Found(b) => b,
        Fetched::NotFound => return Ok(None),
    };
    // Some registries answer with a one-row list.
    let item = match field(&body, &["servers"]).and_then(Value::as_array) {
        Some(list) => match list.first() {
            Some(first) => first,
            None => return Ok(None),
        },
        None => &body,
    };
    let row = parse_row(item).ok_or_else(|| MarketError::Malformed {
        registry: MarketSource::Registry,
        url: shown,
        detail: "no server name in the answer".into(),
    })?;
    Ok((row.entry.status.as_deref() != Some("deleted")).then_some(row.entry))
}

/// Reads a `ServerList` answer: drops rows that are not active, keeps the best version of each server.
pub(crate) fn parse_list(body: &Value, url: &str) -> Result<Page, MarketError> {
    let malformed = |detail: &str| MarketError::Malformed {
        registry: MarketSource::Registry,
        url: url.to_owned(),
        detail: detail.to_owned(),
    };
    let items = match body {
        Value::Object(_) => field(body, &["servers"])
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("no `servers` list"))?,
        // A bare list (some mirrors).
        Value::Array(items) => items,
        _ => return Err(malformed("not a JSON object")),
    };
    let rows: Vec<Row> = items
        .iter()
        .filter_map(parse_row)
        .filter(|r| {
            r.entry
                .status
                .as_deref()
                .is_none_or(|s| s.eq_ignore_ascii_case("active"))
        })
        .collect();
    let next_cursor = field(body, &["metadata"])
        .and_then(|m| str_field(m, &["nextCursor", "next_cursor"]))
        .filter(|c| !c.is_empty());
    Ok(Page {
        servers: dedupe(rows),
        next_cursor,
    })
}

/// Reads one server.json document, or one registry answer row (`{server, _meta}`), into an entry of source
/// `registry`. Lenient (legacy spellings accepted, unknown fields ignored); `None` only without a server name.
pub fn parse_server_json(value: &Value) -> Option<MarketEntry> {
    parse_row(value).map(|r| r.entry)
}

/// One row: `{server, _meta}` or a legacy flat server object.
fn parse_row(item: &Value) -> Option<Row> {
    let server = field(item, &["server"])
        .filter(|s| s.is_object())
        .unwrap_or(item);
    let name = str_field(server, &["name"])?;
    let meta = field(item, &["_meta"])
        .and_then(|m| field(m, &[OFFICIAL_META]))
        .or_else(|| field(server, &["_meta"]).and_then(|m| field(m, &[OFFICIAL_META])));
    let status = meta
        .and_then(|m| str_field(m, &["status"]))
        .or_else(|| str_field(server, &["status"]))
        .map(|s| s.to_ascii_lowercase());
    let is_latest = meta
        .map(|m| super::entry::bool_field(m, &["isLatest", "is_latest"]))
        .unwrap_or(false);
    let version = str_field(server, &["version"]).or_else(|| {
        field(server, &["version_detail", "versionDetail"]).and_then(|d| str_field(d, &["version"]))
    });
    let mut entry = MarketEntry {
        key: format!("{}:{name}", MarketSource::Registry),
        title: str_field(server, &["title"]),
        description: str_field(server, &["description"]).unwrap_or_default(),
        version,
        source: MarketSource::Registry,
        runtime: None,
        install_method: None,
        repository: parse_repository(field(server, &["repository"])),
        website_url: str_field(server, &["websiteUrl", "website_url"]),
        status,
        published_at: meta.and_then(|m| str_field(m, &["publishedAt", "published_at"])),
        packages: parse_packages(server),
        remotes: parse_remotes(server),
        name,
    };
    entry.derive_install();
    Some(Row { entry, is_latest })
}

/// Keeps one row per server name (first-seen order): the one marked latest, else the highest version.
fn dedupe(rows: Vec<Row>) -> Vec<MarketEntry> {
    let mut order: Vec<String> = Vec::new();
    let mut best: HashMap<String, Row> = HashMap::new();
    for row in rows {
        match best.get(&row.entry.name) {
            None => {
                order.push(row.entry.name.clone());
                best.insert(row.entry.name.clone(), row);
            }
            Some(cur) if better(&row, cur) => {
                best.insert(row.entry.name.clone(), row);
            }
            Some(_) => {}
        }
    }
    order
        .into_iter()
        .filter_map(|n| best.remove(&n).map(|r| r.entry))
        .collect()
}

fn better(a: &Row, b: &Row) -> bool {
    if a.is_latest != b.is_latest {
        return a.is_latest;
    }
    let va = a.entry.version.as_deref().unwrap_or("");
    let vb = b.entry.version.as_deref().unwrap_or("");
    semver::compare(va, vb) == std::cmp::Ordering::Greater
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_and_status() -> Result<(), MarketError> {
        let body = json!({
            "servers": [
                {"server": {"name": "a/x", "description": "old", "version": "1.2.0"},
                 "_meta": {OFFICIAL_META: {"status": "active", "isLatest": false}}},
                {"server": {"name": "a/x", "description": "new", "version": "1.10.0"},
                 "_meta": {OFFICIAL_META: {"status": "active", "isLatest": false}}},
                {"server": {"name": "a/y", "description": "latest", "version": "1.0.0"},
                 "_meta": {OFFICIAL_META: {"status": "active", "isLatest": true}}},
                {"server": {"name": "a/y", "description": "higher", "version": "2.0.0"},
                 "_meta": {OFFICIAL_META: {"status": "active", "isLatest": false}}},
                {"server": {"name": "a/gone", "description": "", "version": "1.0.0"},
                 "_meta": {OFFICIAL_META: {"status": "deleted"}}},
                {"server": {"description": "no name"}}
            ],
            "metadata": {"nextCursor": "", "count": 6}
        });
        let page = parse_list(&body, "u")?;
        let names: Vec<_> = page
            .servers
            .iter()
            .map(|e| (e.name.as_str(), e.description.as_str()))
            .collect();
        assert_eq!(names, vec![("a/x", "new"), ("a/y", "latest")]);
        assert_eq!(page.next_cursor, None);
        Ok(())
    }
}
