//! Who may talk to the dashboard server: `Host` and `Origin` checks on every request (DNS-rebinding and cross-site
//! defence), and a bearer token whenever the server listens beyond loopback.
//!
//! There is no CORS: a page from another origin is refused, never let in with `Access-Control-Allow-Origin: *`.
//! Browsers cannot attach an `Authorization` header to a page load or a WebSocket, so the dashboard's token travels
//! once as `/?token=…`, is turned into a `SameSite=Strict; HttpOnly` cookie, and the URL is cleaned by a redirect.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// The token file, created in the data dir (mode 0600) the first time a token is needed.
pub const TOKEN_FILE: &str = "dashboard.token";
const COOKIE: &str = "agent_discover_token";

/// The request policy of one listener.
#[derive(Clone)]
pub struct Security {
    /// Host names (no port, IPv6 without brackets, lowercase) accepted in `Host` and in `Origin`.
    allowed_hosts: Vec<String>,
    token: Option<Arc<str>>,
    /// OAuth access tokens instead of the static token (`protect.rs`, issue 30), and the public URL they name.
    identity: Option<Arc<crate::ident::Identity>>,
    public_url: Option<String>,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("allowed_hosts", &self.allowed_hosts)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("identity", &self.identity)
            .finish()
    }
}

const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

impl Security {
    /// Loopback only, no token: the default for a server bound to 127.0.0.1.
    pub fn loopback() -> Security {
        Security {
            allowed_hosts: LOOPBACK_NAMES.iter().map(|s| s.to_string()).collect(),
            token: None,
            identity: None,
            public_url: None,
        }
    }

    /// Takes OAuth access tokens validated by `identity` (the front as a protected resource) instead of the static
    /// token; `public_url` (else `http://` and the request's Host) names the resources in metadata and challenges.
    pub fn with_identity(
        mut self,
        identity: Arc<crate::ident::Identity>,
        public_url: Option<String>,
    ) -> Security {
        self.identity = Some(identity);
        self.public_url = public_url;
        self.token = None;
        self
    }

    /// The protected front's validator, when OAuth access tokens are required.
    pub fn identity(&self) -> Option<&Arc<crate::ident::Identity>> {
        self.identity.as_ref()
    }

    /// The policy for a listener on `ip`. Beyond loopback a token is mandatory (`token` must be `Some`); on loopback
    /// it is used when given. `extra_hosts` are further names clients may use (e.g. the machine's DNS name).
    pub fn for_bind(
        ip: IpAddr,
        extra_hosts: &[String],
        token: Option<String>,
    ) -> Result<Security, String> {
        if !ip.is_loopback() && token.is_none() {
            return Err(format!(
                "listening on {ip} (beyond loopback) needs a bearer token"
            ));
        }
        let mut sec = Security::loopback();
        if !ip.is_loopback() && !ip.is_unspecified() {
            sec.allowed_hosts.push(ip.to_string().to_ascii_lowercase());
        }
        for h in extra_hosts {
            let h = normalize_host(h);
            if !h.is_empty() && !sec.allowed_hosts.contains(&h) {
                sec.allowed_hosts.push(h);
            }
        }
        sec.token = token.map(Arc::from);
        Ok(sec)
    }

    /// Host names accepted in `Host` (any port); rmcp's `/mcp` service gets the same list.
    pub fn allowed_hosts(&self) -> &[String] {
        &self.allowed_hosts
    }

    pub fn token_required(&self) -> bool {
        self.token.is_some() || self.identity.is_some()
    }

    /// Checks `Host` and `Origin`; the error says which and why.
    fn check_headers(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let host_raw = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_input",
                    "missing or unreadable Host header",
                )
            })?;
        let host = split_authority(host_raw).0;
        if !self.allowed_hosts.contains(&host) {
            tracing::warn!(
                host = host_raw,
                "refused a request for a foreign Host (possible DNS rebinding)"
            );
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "Host `{}` is not served here; allowed: {} (add names with --allowed-host)",
                    crate::model::truncate_for_message(host_raw),
                    self.allowed_hosts.join(", ")
                ),
            ));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !same_origin(origin, host_raw) {
                tracing::warn!(origin, host = host_raw, "refused a cross-origin request");
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!(
                        "Origin `{}` may not call this server (only pages it serves may)",
                        crate::model::truncate_for_message(origin)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn token_matches(&self, presented: Option<&str>) -> bool {
        match (&self.token, presented) {
            (None, _) => true,
            (Some(want), Some(got)) => constant_time_eq(want.as_bytes(), got.as_bytes()),
            (Some(_), None) => false,
        }
    }
}

/// The middleware in front of every route: header checks, then the token, then security headers on the response.
pub(crate) async fn guard(State(sec): State<Arc<Security>>, req: Request, next: Next) -> Response {
    if let Err(e) = sec.check_headers(req.headers()) {
        return e.into_response();
    }
    let mut req = req;
    if let Some(identity) = &sec.identity {
        let cookie = cookie_token(req.headers());
        match super::protect::admit(identity, sec.public_url.as_deref(), cookie, req).await {
            Ok(r) => req = r,
            Err(resp) => return with_security_headers(resp),
        }
    } else if sec.token_required() && !req.uri().path().starts_with("/oauth/callback/") {
        // The OAuth redirect target carries no token (the authorization server sends the browser there); its `state`
        // must match the authorization in progress.
        // `GET /?token=…` from the printed URL: check it, keep it as a cookie, and drop it from the address bar.
        let from_url = (req.method() == Method::GET && req.uri().path() == "/")
            .then(|| query_token(req.uri().query()))
            .flatten();
        if let Some(t) = from_url {
            if !sec.token_matches(Some(t)) {
                return unauthorized();
            }
            return login_redirect(t);
        }
        if !sec.token_matches(presented_token(req.headers()).as_deref()) {
            return unauthorized();
        }
    }
    with_security_headers(next.run(req).await)
}

/// The dashboard's login: the token from the URL kept as an HttpOnly cookie, and the address bar cleaned.
pub(super) fn login_redirect(token: &str) -> Response {
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

fn with_security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    h.entry(header::REFERRER_POLICY)
        .or_insert(HeaderValue::from_static("no-referrer"));
    h.entry(header::X_FRAME_OPTIONS)
        .or_insert(HeaderValue::from_static("DENY"));
    resp
}

/// The token of `Authorization: Bearer …`.
pub(super) fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = v.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim().to_owned())
}

/// The dashboard's cookie.
fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_owned())
        })
}

fn unauthorized() -> Response {
    let mut resp = ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!("this server needs its bearer token (Authorization: Bearer …; the token is in the data dir's {TOKEN_FILE})"),
    )
    .into_response();
    resp.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    resp
}

/// The token from `Authorization: Bearer …` or the dashboard's cookie.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    if headers.contains_key(header::AUTHORIZATION) {
        return bearer(headers);
    }
    cookie_token(headers)
}

pub(super) fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|kv| kv.strip_prefix("token="))
}

/// `(host, port)` of an authority: lowercase, brackets and a trailing dot removed.
fn split_authority(authority: &str) -> (String, Option<&str>) {
    let a = authority.trim();
    let (host, port) = if let Some(rest) = a.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (rest, None),
        }
    } else {
        match a.rsplit_once(':') {
            // A second colon means an unbracketed IPv6 address, which has no port.
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (a, None),
        }
    };
    (normalize_host(host), port)
}

fn normalize_host(h: &str) -> String {
    h.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Whether `origin` (`scheme://host[:port]`) names the same host and port as the request's `Host`.
/// The scheme may be https too, for a TLS-terminating reverse proxy in front.
fn same_origin(origin: &str, host_header: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false; // includes `null` (sandboxed frames, file: pages)
    };
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "http" => "80",
        "https" => "443",
        _ => return false,
    };
    let (oh, op) = split_authority(authority);
    let (hh, hp) = split_authority(host_header);
    oh == hh && op.unwrap_or(default_port) == hp.unwrap_or(default_port)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the dashboard token from `<data_dir>/dashboard.token`, creating it (random, mode 0600) when missing.
/// Returns the token and whether it was just created (the caller prints it once, then).
pub fn load_or_create_token(data_dir: &Path) -> std::io::Result<(String, bool, PathBuf)> {
    use chacha20poly1305::XChaCha20Poly1305;
    use chacha20poly1305::aead::{Generate, Key};
    use std::io::Write;
    let path = data_dir.join(TOKEN_FILE);
    match std::fs::read_to_string(&path) {
        Ok(t) if !t.trim().is_empty() => return Ok((t.trim().to_owned(), false, path)),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(data_dir)?;
    // 32 bytes from the OS generator (the same one the secrets key comes from), as hex.
    let bytes = Key::<XChaCha20Poly1305>::generate();
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(&path)?;
    f.write_all(token.as_bytes())?;
    f.sync_all()?;
    Ok((token, true, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorities_and_origins() {
        assert_eq!(
            split_authority("LocalHost:3424"),
            ("localhost".into(), Some("3424"))
        );
        assert_eq!(split_authority("[::1]:80"), ("::1".into(), Some("80")));
        assert_eq!(split_authority("::1"), ("::1".into(), None));
        assert!(same_origin("http://127.0.0.1:3424", "127.0.0.1:3424"));
        assert!(same_origin("http://localhost", "localhost:80"));
        assert!(!same_origin("http://127.0.0.1:9999", "127.0.0.1:3424"));
        assert!(!same_origin("http://evil.example:3424", "127.0.0.1:3424"));
        assert!(!same_origin("null", "127.0.0.1:3424"));
        assert!(!same_origin("file://", "127.0.0.1:3424"));
    }

    #[test]
    fn beyond_loopback_needs_a_token() {
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(Security::for_bind(any, &[], None).is_err());
        let s = Security::for_bind(any, &["Box.LAN".into()], Some("t".into())).unwrap();
        assert!(s.token_required());
        assert!(s.allowed_hosts().contains(&"box.lan".to_owned()));
        assert!(
            s.token_matches(Some("t")) && !s.token_matches(Some("u")) && !s.token_matches(None)
        );
        let lo = Security::for_bind("127.0.0.1".parse().unwrap(), &[], None).unwrap();
        assert!(!lo.token_required());
    }

    #[test]
    fn token_file_is_private_and_stable() {
        let dir = tempfile::tempdir().unwrap();
        let (t1, created, path) = load_or_create_token(dir.path()).unwrap();
        assert!(created && t1.len() == 64);
        let (t2, created, _) = load_or_create_token(dir.path()).unwrap();
        assert!(!created && t1 == t2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
    }
}
