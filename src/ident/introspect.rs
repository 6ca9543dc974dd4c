//! Opaque access tokens checked by RFC 7662 introspection at the issuer, the answers cached per token (by its
//! SHA-256, never the token itself) until the token expires, and at most [`CACHE_FOR`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The longest an introspection answer (active or not) is reused.
pub const CACHE_FOR: Duration = Duration::from_secs(60);
const MAX_CACHED: usize = 10_000;

/// The introspection endpoint and this resource server's credentials there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

type Key = [u8; 32];
/// Until when (seconds since the epoch) an answer stands, and the claims of an active token.
type Cached = (u64, Option<Map<String, Value>>);

#[derive(Default)]
pub struct Introspector {
    cache: Mutex<HashMap<Key, Cached>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn key_of(token: &str) -> Key {
    let d = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut k = [0; 32];
    k.copy_from_slice(d.as_ref());
    k
}

impl Introspector {
    /// The token's claims when the issuer says it is active; `None` when it is not.
    pub async fn introspect(
        &self,
        http: &reqwest::Client,
        at: &Endpoint,
        token: &str,
    ) -> Result<Option<Map<String, Value>>, String> {
        let key = key_of(token);
        let now = now();
        {
            let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((until, claims)) = cache.get(&key)
                && *until > now
            {
                return Ok(claims.clone());
            }
        }
        let mut req = http
            .post(&at.url)
            .header("accept", "application/json")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                url::form_urlencoded::Serializer::new(String::new())
                    .append_pair("token", token)
                    .append_pair("token_type_hint", "access_token")
                    .finish(),
            );
        if let Some(id) = &at.client_id {
            req = req.basic_auth(id, at.client_secret.as_deref());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| format!("introspection at {}: {e}", at.url))?;
        if !resp.status().is_success() {
            return Err(format!(
                "introspection at {}: HTTP {}",
                at.url,
                resp.status()
            ));
        }
        let doc: Value = resp
            .json()
            .await
            .map_err(|e| format!("introspection at {}: {e}", at.url))?;
        let claims = match doc {
            Value::Object(m) if m.get("active") == Some(&Value::Bool(true)) => Some(m),
            _ => None,
        };
        let exp = claims
            .as_ref()
            .and_then(|c| c.get("exp"))
            .and_then(Value::as_u64);
        let until = (now + CACHE_FOR.as_secs()).min(exp.unwrap_or(u64::MAX));
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= MAX_CACHED {
            cache.retain(|_, (u, _)| *u > now);
            if cache.len() >= MAX_CACHED {
                cache.clear();
            }
        }
        cache.insert(key, (until, claims.clone()));
        Ok(claims)
    }
}
