//! One GET helper for every source: builds URLs from a configured base, maps transport, status and JSON failures to `MarketError`.

use reqwest::Url;
use serde_json::Value;

use super::entry::MarketSource;
use super::error::MarketError;

/// Largest response body read from a registry (a full npm package document can be several MB).
const MAX_BODY: usize = 32 * 1024 * 1024;

/// What a GET produced: JSON, or "not found" (HTTP 404/410), which lookups turn into `None`.
pub(crate) enum Fetched {
    Found(Value),
    NotFound,
}

/// `base` + path segments (each percent-encoded, so `@scope/name` becomes `@scope%2Fname`) + query pairs.
pub(crate) fn build_url(
    registry: MarketSource,
    base: &str,
    segments: &[&str],
    query: &[(&str, &str)],
) -> Result<Url, MarketError> {
    let mut url = Url::parse(base).map_err(|e| MarketError::Config {
        what: format!("{registry} address"),
        message: format!("{base:?} is not a URL ({e})"),
    })?;
    {
        let mut path = url.path_segments_mut().map_err(|()| MarketError::Config {
            what: format!("{registry} address"),
            message: format!("{base:?} cannot take a path"),
        })?;
        path.pop_if_empty();
        for s in segments {
            path.push(s);
        }
    }
    if !query.is_empty() {
        let mut q = url.query_pairs_mut();
        for (k, v) in query {
            q.append_pair(k, v);
        }
    }
    Ok(url)
}

/// GETs `url` and reads the body as text (for HTML pages).
pub(crate) async fn get_text(
    client: &reqwest::Client,
    registry: MarketSource,
    url: Url,
    accept: &str,
) -> Result<Option<String>, MarketError> {
    let shown = url.to_string();
    let resp = client
        .get(url)
        .header(reqwest::header::ACCEPT, accept)
        .send()
        .await
        .map_err(|e| MarketError::Unreachable {
            registry,
            url: shown.clone(),
            message: describe(&e),
        })?;
    let status = resp.status();
    if status == reqwest::StatusCode::NOT_FOUND || status == reqwest::StatusCode::GONE {
        return Ok(None);
    }
    let body = read_body(resp, registry, &shown).await?;
    if !status.is_success() {
        return Err(MarketError::Http {
            registry,
            url: shown,
            status: status.as_u16(),
            detail: excerpt(&body),
        });
    }
    Ok(Some(body))
}

/// GETs `url` expecting JSON.
pub(crate) async fn get_json(
    client: &reqwest::Client,
    registry: MarketSource,
    url: Url,
) -> Result<Fetched, MarketError> {
    let shown = url.to_string();
    let Some(body) = get_text(client, registry, url, "application/json").await? else {
        return Ok(Fetched::NotFound);
    };
    serde_json::from_str(&body)
        .map(Fetched::Found)
        .map_err(|e| MarketError::Malformed {
            registry,
            url: shown,
            detail: e.to_string(),
        })
}

async fn read_body(
    mut resp: reqwest::Response,
    registry: MarketSource,
    shown: &str,
) -> Result<String, MarketError> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if buf.len() + chunk.len() > MAX_BODY {
                    return Err(MarketError::Malformed {
                        registry,
                        url: shown.to_owned(),
                        detail: format!("response larger than {} MiB", MAX_BODY / (1024 * 1024)),
                    });
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(MarketError::Unreachable {
                    registry,
                    url: shown.to_owned(),
                    message: describe(&e),
                });
            }
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// `": <first 200 chars>"` of an error body, or empty.
fn excerpt(body: &str) -> String {
    let t: String = body.trim().chars().take(200).collect();
    if t.is_empty() {
        String::new()
    } else {
        format!(": {t}")
    }
}

/// reqwest's error with its causes (the top-level message alone rarely says what went wrong).
fn describe(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    msg
}
