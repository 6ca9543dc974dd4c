//! The issuer's metadata and signing keys: found by RFC 8414 / OpenID discovery on first use, the JWKS cached and
//! fetched again once when a token names a key it does not hold (key rotation), at most every [`REFETCH_EVERY`].

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;

use super::jwt::{Jwk, parse_jwks, same_issuer};

/// A JWKS is fetched again for an unknown `kid` at most this often (a flood of made-up kids costs one fetch).
pub const REFETCH_EVERY: Duration = Duration::from_secs(30);
/// A cached JWKS is refreshed after this long even when every kid is known.
pub const JWKS_TTL: Duration = Duration::from_secs(3600);

/// What discovery found about the issuer.
#[derive(Debug, Clone, Default)]
pub struct IssuerMeta {
    pub jwks_uri: Option<String>,
    pub introspection_endpoint: Option<String>,
}

#[derive(Default)]
struct Cache {
    meta: Option<IssuerMeta>,
    keys: Vec<Jwk>,
    fetched: Option<Instant>,
}

/// The keys of one issuer.
pub struct Keys {
    issuer: String,
    /// Configured instead of discovered.
    jwks_uri: Option<String>,
    http: reqwest::Client,
    cache: Mutex<Cache>,
}

impl Keys {
    pub fn new(issuer: String, jwks_uri: Option<String>, http: reqwest::Client) -> Keys {
        Keys {
            issuer,
            jwks_uri,
            http,
            cache: Mutex::default(),
        }
    }

    /// The issuer's metadata (discovered once; a failure is tried again on the next request).
    pub async fn meta(&self) -> Result<IssuerMeta, String> {
        let mut cache = self.cache.lock().await;
        self.meta_locked(&mut cache).await
    }

    async fn meta_locked(&self, cache: &mut Cache) -> Result<IssuerMeta, String> {
        if let Some(m) = &cache.meta {
            return Ok(m.clone());
        }
        let m = discover(&self.http, &self.issuer).await?;
        cache.meta = Some(m.clone());
        Ok(m)
    }

    /// The key for a token's `kid` (any key when the token names none and the JWKS holds one).
    pub async fn key(&self, kid: Option<&str>) -> Result<Option<Jwk>, String> {
        let mut cache = self.cache.lock().await;
        let stale = cache.fetched.is_none_or(|t| t.elapsed() > JWKS_TTL);
        if !stale && let Some(k) = pick(&cache.keys, kid) {
            return Ok(Some(k));
        }
        // Unknown kid: fetch again, but not more often than REFETCH_EVERY.
        if !stale && cache.fetched.is_some_and(|t| t.elapsed() < REFETCH_EVERY) {
            return Ok(None);
        }
        let uri = match &self.jwks_uri {
            Some(u) => u.clone(),
            None => self
                .meta_locked(&mut cache)
                .await?
                .jwks_uri
                .ok_or("the issuer's metadata has no jwks_uri")?,
        };
        cache.fetched = Some(Instant::now());
        let doc: Value = get_json(&self.http, &uri).await?;
        cache.keys = parse_jwks(&doc);
        tracing::debug!(keys = cache.keys.len(), %uri, "fetched the issuer's JWKS");
        Ok(pick(&cache.keys, kid))
    }
}

fn pick(keys: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => keys.iter().find(|k| k.kid.as_deref() == Some(kid)).cloned(),
        None if keys.len() == 1 => keys.first().cloned(),
        None => None,
    }
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let resp = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", resp.status()));
    }
    resp.json().await.map_err(|e| format!("GET {url}: {e}"))
}

/// The metadata URLs tried for `issuer`, in order: RFC 8414 (path inserted), OpenID Connect with the path inserted,
/// then OpenID Connect appended to the issuer.
pub fn metadata_urls(issuer: &str) -> Vec<String> {
    let issuer = issuer.trim_end_matches('/');
    let Some((scheme, rest)) = issuer.split_once("://") else {
        return Vec::new();
    };
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let mut urls = vec![
        format!("{scheme}://{host}/.well-known/oauth-authorization-server{path}"),
        format!("{scheme}://{host}/.well-known/openid-configuration{path}"),
    ];
    if !path.is_empty() {
        urls.push(format!("{issuer}/.well-known/openid-configuration"));
    }
    urls
}

async fn discover(http: &reqwest::Client, issuer: &str) -> Result<IssuerMeta, String> {
    let mut last = String::from("no metadata URL");
    for url in metadata_urls(issuer) {
        match get_json(http, &url).await {
            Ok(doc) => {
                let said = doc.get("issuer").and_then(Value::as_str).unwrap_or("");
                if !same_issuer(said, issuer) {
                    return Err(format!(
                        "the metadata at {url} names issuer `{said}`, not `{issuer}`"
                    ));
                }
                let s = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_owned);
                return Ok(IssuerMeta {
                    jwks_uri: s("jwks_uri"),
                    introspection_endpoint: s("introspection_endpoint"),
                });
            }
            Err(e) => last = e,
        }
    }
    Err(format!(
        "cannot discover the metadata of issuer {issuer}: {last}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A JWKS endpoint on loopback that counts its fetches; the issuer's metadata is never asked (the URI is given).
    async fn jwks_server(fetches: Arc<AtomicUsize>) -> String {
        let doc = serde_json::json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]});
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                fetches.fetch_add(1, Ordering::SeqCst);
                let doc = doc.clone();
                async move { axum::Json(doc) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        url
    }

    #[tokio::test]
    async fn the_jwks_is_cached_and_unknown_kids_do_not_refetch_it_within_the_rate_limit() {
        let fetches = Arc::new(AtomicUsize::new(0));
        let uri = jwks_server(fetches.clone()).await;
        let keys = Keys::new(
            "http://127.0.0.1:9".into(),
            Some(uri),
            reqwest::Client::new(),
        );
        assert!(keys.key(Some("k1")).await.unwrap().is_some());
        assert!(keys.key(Some("k1")).await.unwrap().is_some());
        assert_eq!(fetches.load(Ordering::SeqCst), 1, "cached");
        for i in 0..10 {
            assert!(
                keys.key(Some(&format!("made-up-{i}")))
                    .await
                    .unwrap()
                    .is_none()
            );
        }
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "unknown kids within {REFETCH_EVERY:?} cost no fetch"
        );
        // A token naming no kid takes the only key.
        assert!(keys.key(None).await.unwrap().is_some());
    }

    #[test]
    fn metadata_urls_follow_rfc_8414_then_oidc() {
        assert_eq!(
            metadata_urls("https://as.example/tenant1/"),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            metadata_urls("http://127.0.0.1:9"),
            [
                "http://127.0.0.1:9/.well-known/oauth-authorization-server",
                "http://127.0.0.1:9/.well-known/openid-configuration",
            ]
        );
    }
}
