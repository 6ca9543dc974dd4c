//! OAuth discovery for a remote MCP server: the `WWW-Authenticate` challenge, protected resource metadata (RFC 9728)
//! and authorization server metadata (RFC 8414 and OpenID discovery), in the MCP specification's order, with the
//! 2025-03-26 fallbacks for servers that publish neither.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use url::Url;

use crate::error::OAuthError;

/// A parsed `WWW-Authenticate: Bearer ...` challenge.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

impl Challenge {
    /// Reads the parameters of the `Bearer` challenge (the first one when several schemes are offered; any scheme
    /// when none is `Bearer`). Unknown parameters are ignored.
    pub fn parse(header: &str) -> Challenge {
        let mut out = Challenge::default();
        let mut rest = header.trim();
        // Skip the scheme token.
        if let Some(i) = rest.find(|c: char| c.is_whitespace()) {
            let scheme = &rest[..i];
            if !scheme.contains('=') {
                rest = rest[i..].trim_start();
            }
        } else if !rest.contains('=') {
            return out;
        }
        while !rest.is_empty() {
            let Some(eq) = rest.find('=') else { break };
            let key = rest[..eq]
                .trim()
                .trim_start_matches(',')
                .trim()
                .to_ascii_lowercase();
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(stripped) = rest.strip_prefix('"') {
                let mut v = String::new();
                let mut chars = stripped.char_indices();
                let mut end = stripped.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = chars.next() {
                                v.push(n);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => v.push(c),
                    }
                }
                value = v;
                rest = stripped[end.min(stripped.len())..].trim_start();
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                value = rest[..end].trim().to_owned();
                rest = &rest[end..];
            }
            rest = rest.trim_start_matches(|c: char| c == ',' || c.is_whitespace());
            // A second scheme starts ("Bearer a=b, DPoP c=d"): keep only the first challenge's parameters.
            let key = match key.rsplit_once(char::is_whitespace) {
                Some((_, k)) => k.to_owned(),
                None => key,
            };
            let slot = match key.as_str() {
                "resource_metadata" => &mut out.resource_metadata,
                "scope" => &mut out.scope,
                "error" => &mut out.error,
                _ => continue,
            };
            if slot.is_none() && !value.is_empty() {
                *slot = Some(value);
            }
        }
        out
    }
}

/// Protected resource metadata (RFC 9728), the fields we use.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResourceMetadata {
    pub resource: String,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// Authorization server metadata (RFC 8414 / OpenID discovery), the fields we use.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct AuthServer {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    #[serde(default)]
    pub grant_types_supported: Option<Vec<String>>,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// DPoP proof algorithms the server accepts (RFC 9449 section 5.1); its presence means DPoP is supported.
    #[serde(default)]
    pub dpop_signing_alg_values_supported: Option<Vec<String>>,
    /// True when no metadata was published and the 2025-03-26 default endpoints are assumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub assumed: bool,
}

/// What discovery found for one server.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The protected resource metadata, when the server publishes it.
    pub resource: Option<ResourceMetadata>,
    pub server: AuthServer,
}

/// The well-known URLs of a server's protected resource metadata: the path form first, then the root.
pub fn resource_metadata_urls(server_url: &Url) -> Vec<Url> {
    let mut out = Vec::new();
    let path = server_url.path().trim_end_matches('/');
    let mut base = server_url.clone();
    base.set_query(None);
    base.set_fragment(None);
    if !path.is_empty() {
        let mut u = base.clone();
        u.set_path(&format!("/.well-known/oauth-protected-resource{path}"));
        out.push(u);
    }
    let mut u = base;
    u.set_path("/.well-known/oauth-protected-resource");
    out.push(u);
    out
}

/// The metadata URLs of an issuer in the specification's order; a path issuer never falls back to the root.
pub fn auth_server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let mut base = issuer.clone();
    base.set_query(None);
    base.set_fragment(None);
    let at = |p: String| {
        let mut u = base.clone();
        u.set_path(&p);
        u
    };
    if path.is_empty() {
        vec![
            at("/.well-known/oauth-authorization-server".into()),
            at("/.well-known/openid-configuration".into()),
        ]
    } else {
        vec![
            at(format!("/.well-known/oauth-authorization-server{path}")),
            at(format!("/.well-known/openid-configuration{path}")),
            at(format!("{path}/.well-known/openid-configuration")),
        ]
    }
}

/// Whether protected resource metadata naming `resource` may be used for `server_url`: same origin, and the
/// resource's path is the server's path or a parent of it (segment-wise).
pub fn resource_matches(resource: &str, server_url: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.origin() != server_url.origin() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server_url.path().trim_end_matches('/');
    sp == rp || sp.starts_with(&format!("{rp}/"))
}

async fn get_json(http: &reqwest::Client, url: &Url) -> Result<Option<Value>, OAuthError> {
    let resp = http
        .get(url.as_str())
        .header(http::header::ACCEPT, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("GET {url}: {e}")))?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    match resp.json::<Value>().await {
        Ok(v) if v.is_object() => Ok(Some(v)),
        _ => Ok(None),
    }
}

/// Finds the protected resource metadata: the challenge's `resource_metadata` first, then the well-known URLs.
/// Metadata whose `resource` does not match the server is refused (an error, not a fallback).
pub async fn resource_metadata(
    http: &reqwest::Client,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<Option<ResourceMetadata>, OAuthError> {
    let mut urls = Vec::new();
    if let Some(u) = challenge.and_then(|c| c.resource_metadata.as_deref()) {
        urls.push(
            server_url.join(u).map_err(|_| {
                OAuthError::Metadata(format!("invalid resource_metadata URL {u:?}"))
            })?,
        );
    }
    urls.extend(resource_metadata_urls(server_url));
    for url in urls {
        let Some(v) = get_json(http, &url).await? else {
            continue;
        };
        let meta: ResourceMetadata = serde_json::from_value(v).map_err(|e| {
            OAuthError::Metadata(format!("protected resource metadata at {url}: {e}"))
        })?;
        if !resource_matches(&meta.resource, server_url) {
            return Err(OAuthError::Metadata(format!(
                "protected resource metadata at {url} names the resource {:?}, not this server ({server_url}); refused",
                meta.resource
            )));
        }
        return Ok(Some(meta));
    }
    Ok(None)
}

/// Fetches an issuer's metadata in the specification's order. The document's `issuer` must be the one the URL was
/// built from (2026-07-28); a mismatch is refused.
pub async fn auth_server_metadata(
    http: &reqwest::Client,
    issuer: &str,
) -> Result<Option<AuthServer>, OAuthError> {
    let issuer_url = Url::parse(issuer)
        .map_err(|_| OAuthError::Metadata(format!("invalid issuer URL {issuer:?}")))?;
    for url in auth_server_metadata_urls(&issuer_url) {
        let Some(v) = get_json(http, &url).await? else {
            continue;
        };
        let meta: AuthServer = serde_json::from_value(v).map_err(|e| {
            OAuthError::Metadata(format!("authorization server metadata at {url}: {e}"))
        })?;
        if meta.issuer != issuer
            && meta.issuer.trim_end_matches('/') != issuer.trim_end_matches('/')
        {
            return Err(OAuthError::Metadata(format!(
                "authorization server metadata at {url} names the issuer {:?}, not {issuer:?}; refused",
                meta.issuer
            )));
        }
        return Ok(Some(meta));
    }
    Ok(None)
}

/// Everything needed to authorize against `server_url`: protected resource metadata (when published), then the
/// first authorization server's metadata; for a server that publishes no resource metadata, the 2025-03-26 rules
/// (metadata at the server's origin, else `/authorize`, `/token` and `/register` there).
pub async fn discover(
    http: &reqwest::Client,
    server_url: &Url,
    challenge: Option<&Challenge>,
) -> Result<Discovered, OAuthError> {
    let resource = resource_metadata(http, server_url, challenge).await?;
    if let Some(meta) = &resource {
        let issuer = meta.authorization_servers.first().ok_or_else(|| {
            OAuthError::Metadata("protected resource metadata names no authorization server".into())
        })?;
        let server = auth_server_metadata(http, issuer).await?.ok_or_else(|| {
            OAuthError::Metadata(format!(
                "authorization server {issuer} publishes no metadata (RFC 8414 or OpenID discovery)"
            ))
        })?;
        return Ok(Discovered { resource, server });
    }
    // 2025-03-26: the server's origin is the authorization base URL.
    let mut origin = server_url.clone();
    origin.set_path("");
    origin.set_query(None);
    origin.set_fragment(None);
    let issuer = origin.as_str().trim_end_matches('/').to_owned();
    if let Some(server) = auth_server_metadata(http, &issuer).await? {
        return Ok(Discovered {
            resource: None,
            server,
        });
    }
    let at = |p: &str| format!("{issuer}{p}");
    Ok(Discovered {
        resource: None,
        server: AuthServer {
            issuer: issuer.clone(),
            authorization_endpoint: Some(at("/authorize")),
            token_endpoint: at("/token"),
            registration_endpoint: Some(at("/register")),
            assumed: true,
            ..Default::default()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_are_read() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x/.well-known/oauth-protected-resource/mcp")
        );
        let c = Challenge::parse("Bearer realm=example, scope=read");
        assert_eq!(c.scope.as_deref(), Some("read"));
        assert_eq!(Challenge::parse("Bearer"), Challenge::default());
    }

    #[test]
    fn well_known_urls_follow_the_specification_order() {
        let s = Url::parse("https://h.example/tenant/mcp").unwrap();
        let prm: Vec<String> = resource_metadata_urls(&s)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            prm,
            [
                "https://h.example/.well-known/oauth-protected-resource/tenant/mcp",
                "https://h.example/.well-known/oauth-protected-resource"
            ]
        );
        let i = Url::parse("https://as.example/tenant1").unwrap();
        let asm: Vec<String> = auth_server_metadata_urls(&i)
            .iter()
            .map(|u| u.to_string())
            .collect();
        assert_eq!(
            asm,
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        let i = Url::parse("https://as.example").unwrap();
        assert_eq!(auth_server_metadata_urls(&i).len(), 2);
    }

    #[test]
    fn resource_must_be_this_server_or_a_parent_path() {
        let s = Url::parse("http://127.0.0.1:3000/mcp").unwrap();
        assert!(resource_matches("http://127.0.0.1:3000/mcp", &s));
        assert!(resource_matches("http://127.0.0.1:3000/", &s));
        assert!(resource_matches("http://127.0.0.1:3000", &s));
        assert!(!resource_matches("https://evil.example.com/mcp", &s));
        assert!(!resource_matches("http://127.0.0.1:3000/other", &s));
        assert!(!resource_matches("http://127.0.0.1:3000/mc", &s));
    }
}
