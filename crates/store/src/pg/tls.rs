//! TLS for PostgreSQL connections, as libpq does it: `sslmode` (`disable`, `prefer`, `require`, `verify-ca`,
//! `verify-full`) and `sslrootcert` (a PEM file, or `system`) read from the URL or `PGSSLMODE`/`PGSSLROOTCERT`, on
//! rustls with the crypto provider reqwest already builds (aws-lc-rs).
//!
//! tokio-postgres knows only `disable`, `prefer` and `require`, and no `sslrootcert`: [`split_options`] takes both
//! out of the connection string before it is parsed, and the certificate check of each mode is the verifier given to
//! rustls ([`NoCheck`], [`ChainOnly`], or rustls's own WebPKI verifier for `verify-full`).

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use ad_core::error::{Error, Result};

/// libpq's `sslmode`, as far as agent-discover honours it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// TLS when the server offers it, plain TCP when it has no TLS (the default, as in libpq). The certificate is
    /// checked only against a root certificate file that exists.
    Prefer,
    /// TLS or no connection; the certificate is checked only against a root certificate file that exists.
    Require,
    /// TLS, the certificate chain checked against the root certificates; any host name.
    VerifyCa,
    /// TLS, the chain checked and the certificate issued for the host name connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(invalid(format!(
                    "sslmode `{other}` is not supported: use disable, prefer, require, verify-ca or verify-full"
                )));
            }
        })
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

fn invalid(reason: String) -> Error {
    Error::Invalid {
        what: "database URL",
        reason,
    }
}

/// The TLS options taken out of a connection string, and the string left for tokio-postgres.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Split {
    pub rest: String,
    pub sslmode: Option<String>,
    pub sslrootcert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a `postgres://` URL's query or a `key=value` string.
pub(crate) fn split_options(url: &str) -> Split {
    let mut split = Split::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            split.rest = url.to_owned();
            return split;
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match percent_decode(key).as_str() {
                "sslmode" => split.sslmode = Some(percent_decode(value)),
                "sslrootcert" => split.sslrootcert = Some(percent_decode(value)),
                _ => kept.push(pair),
            }
        }
        split.rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return split;
    }
    let Some(pairs) = key_values(url) else {
        // Malformed: tokio-postgres says what is wrong with it.
        split.rest = url.to_owned();
        return split;
    };
    let mut kept = Vec::new();
    for (key, value) in pairs {
        match key.as_str() {
            "sslmode" => split.sslmode = Some(value),
            "sslrootcert" => split.sslrootcert = Some(value),
            _ => kept.push(format!(
                "{key}='{}'",
                value.replace('\\', "\\\\").replace('\'', "\\'")
            )),
        }
    }
    split.rest = kept.join(" ");
    split
}

/// `key=value` pairs of a libpq keyword string (values optionally in single quotes, `\` escaping); `None` when
/// malformed.
fn key_values(s: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Some(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        chars.next_if_eq(&'=')?;
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next()? {
                    '\'' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(if c == '\\' { chars.next()? } else { c });
            }
        }
        pairs.push((key, value));
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The connector given to tokio-postgres: one rustls configuration for every connection of a pool.
#[derive(Clone)]
pub struct PgTls {
    mode: SslMode,
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTls").field("mode", &self.mode).finish()
    }
}

impl PgTls {
    /// The connector for `sslmode` and `sslrootcert` as given (or `PGSSLMODE`/`PGSSLROOTCERT`, or libpq's defaults:
    /// `prefer`, `~/.postgresql/root.crt`), and the mode tokio-postgres is to negotiate.
    pub(crate) fn new(sslmode: Option<&str>, sslrootcert: Option<&str>) -> Result<PgTls> {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let sslmode = sslmode.map(str::to_owned).or_else(|| env("PGSSLMODE"));
        let sslrootcert = sslrootcert
            .map(str::to_owned)
            .or_else(|| env("PGSSLROOTCERT"));
        let system = sslrootcert.as_deref() == Some("system");
        let mode = match sslmode.as_deref() {
            Some(m) => SslMode::parse(m)?,
            // libpq: the system's roots default to the full check.
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if system && mode != SslMode::VerifyFull && mode != SslMode::Disable {
            return Err(invalid(format!(
                "sslrootcert=system needs sslmode=verify-full (a weaker sslmode with the system's roots would \
                 trust any certificate they sign for any host), not `{}`",
                sslmode.unwrap_or_default()
            )));
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let roots = if mode == SslMode::Disable {
            None
        } else if system {
            Some(system_roots()?)
        } else {
            let explicit = sslrootcert.is_some();
            let path = sslrootcert.map(PathBuf::from).or_else(default_root_file);
            match path {
                Some(p) if p.exists() => Some(file_roots(&p)?),
                Some(p) if mode.verifies() => {
                    return Err(invalid(format!(
                        "root certificate file {} does not exist: sslmode={} checks the server's certificate \
                         against it (give sslrootcert=FILE, or sslrootcert=system for the system's roots)",
                        p.display(),
                        sslmode.unwrap_or_default()
                    )));
                }
                None if mode.verifies() => {
                    return Err(invalid(format!(
                        "sslmode={} needs root certificates: give sslrootcert=FILE (or system)",
                        sslmode.unwrap_or_default()
                    )));
                }
                // libpq: a missing file is no error when nothing has to be verified; an explicit one is named
                // only to say it was looked for.
                _ => {
                    if explicit {
                        tracing::debug!(
                            "sslrootcert does not exist; the server's certificate is not checked"
                        );
                    }
                    None
                }
            }
        };
        let algorithms = provider.signature_verification_algorithms;
        let verifier: Arc<dyn ServerCertVerifier> = match (mode, roots) {
            (_, None) => Arc::new(NoCheck(algorithms)),
            (SslMode::VerifyFull, Some(roots)) => webpki(roots, &provider)?,
            // Prefer, require (with a root file present) and verify-ca: the chain, not the name.
            (_, Some(roots)) => Arc::new(ChainOnly(webpki(roots, &provider)?)),
        };
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Internal(format!("TLS configuration: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // What libpq 17 sends; older servers ignore it, newer ones accept direct TLS with it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(PgTls {
            mode,
            config: Arc::new(config),
        })
    }

    /// The mode tokio-postgres negotiates (`verify-*` are `require` to it; the verifier does the rest).
    pub(crate) fn negotiation(&self) -> tokio_postgres::config::SslMode {
        match self.mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        }
    }

    pub fn mode(&self) -> SslMode {
        self.mode
    }
}

fn webpki(
    roots: RootCertStore,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>> {
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| invalid(format!("root certificates: {e}")))
}

/// libpq's default root certificate file.
fn default_root_file() -> Option<PathBuf> {
    #[cfg(windows)]
    let dir = std::env::var_os("APPDATA").map(|d| PathBuf::from(d).join("postgresql"));
    #[cfg(not(windows))]
    let dir = std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".postgresql"));
    dir.map(|d| d.join("root.crt"))
}

fn file_roots(path: &Path) -> Result<RootCertStore> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| invalid(format!("sslrootcert {}: {e}", path.display())))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(invalid(format!(
            "sslrootcert {}: no usable certificate in it",
            path.display()
        )));
    }
    Ok(roots)
}

/// The system's trusted roots (`SSL_CERT_FILE`/`SSL_CERT_DIR`, else the platform's store).
fn system_roots() -> Result<RootCertStore> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(invalid(format!(
            "sslrootcert=system: no trusted root certificate found on this system{}",
            found
                .errors
                .first()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )));
    }
    Ok(roots)
}

/// Checks nothing of the certificate (libpq's `require` without a root file), only that the handshake is signed by
/// its key.
#[derive(Debug)]
struct NoCheck(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for NoCheck {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The chain checked against the roots, the host name not (libpq's `verify-ca`). WebPKI checks the name last, so
/// a name mismatch means everything before it passed.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl<S> MakeTlsConnect<S> for PgTls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type TlsConnect = PgTlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> io::Result<PgTlsConnect> {
        // verify-ca checks no name, so a host that is no valid name (a socket path) still connects there.
        let name = match ServerName::try_from(domain.to_owned()) {
            Ok(n) => n,
            Err(_) if self.mode != SslMode::VerifyFull => ServerName::try_from("postgresql")
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("host `{domain}` is no name a certificate can be checked against: {e}"),
                ));
            }
        };
        Ok(PgTlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

/// One connection's handshake.
pub struct PgTlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl<S> TlsConnect<S> for PgTlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = PgTlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await?;
            Ok(PgTlsStream(tls))
        })
    }
}

/// A TLS connection to PostgreSQL. It offers no channel binding, so SCRAM runs without it (as with
/// `channel_binding=prefer` against a server that offers none).
pub struct PgTlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> tokio_postgres::tls::TlsStream for PgTlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for PgTlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for PgTlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_options_are_taken_out_and_the_rest_kept() {
        let s = split_options(
            "postgres://u@h:5/db?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca%20a.pem",
        );
        assert_eq!(s.rest, "postgres://u@h:5/db?application_name=x");
        assert_eq!(s.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(s.sslrootcert.as_deref(), Some("/tmp/ca a.pem"));
        let s = split_options("postgresql://h/db?sslmode=require");
        assert_eq!(s.rest, "postgresql://h/db");
        assert_eq!(split_options("postgres://h/db").rest, "postgres://h/db");
    }

    #[test]
    fn keyword_options_are_taken_out_and_the_rest_requoted() {
        let s = split_options(
            r"host=h  dbname = 'my db' sslmode=verify-ca sslrootcert='/a\'b.pem' user=u\ v",
        );
        assert_eq!(s.rest, r"host='h' dbname='my db' user='u v'");
        assert_eq!(s.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(s.sslrootcert.as_deref(), Some("/a'b.pem"));
        // Malformed strings are left to tokio-postgres's error.
        assert_eq!(split_options("host").rest, "host");
    }

    #[test]
    fn modes_that_check_need_roots_and_system_roots_need_the_full_check() {
        let err = |mode: &str, root: &str| {
            PgTls::new(Some(mode), Some(root))
                .map(|t| t.mode())
                .unwrap_err()
                .to_string()
        };
        assert!(err("verify-full", "/nonexistent/root.crt").contains("does not exist"));
        assert!(err("verify-ca", "/nonexistent/root.crt").contains("does not exist"));
        assert!(err("require", "system").contains("verify-full"));
        assert!(err("allow", "/nonexistent").contains("not supported"));
        // Nothing to check: a missing file is no error, as in libpq.
        let tls = PgTls::new(Some("require"), Some("/nonexistent/root.crt")).unwrap();
        assert_eq!(tls.mode(), SslMode::Require);
    }
}
