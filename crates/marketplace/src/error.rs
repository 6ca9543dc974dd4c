//! The marketplace's two error types: `MarketError` (fetching and reading registries) and `InstallError` (turning an entry into a launch config).

use super::entry::MarketSource;

/// A failure to read one registry. Every message says what to do next.
///
/// `Clone` so one failure can be reported in a [`super::SourceStatus`] and kept for the process (a registry address
/// that could not be resolved is not asked for again).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarketError {
    #[error(
        "{registry} is not configured: {hint}. Set its address in the environment ({env}) or in config.json ({key})"
    )]
    NotConfigured {
        registry: MarketSource,
        hint: String,
        env: &'static str,
        key: &'static str,
    },
    #[error(
        "{registry}: request to {url} failed: {message}. Check the network, a proxy, or the configured address"
    )]
    Unreachable {
        registry: MarketSource,
        url: String,
        message: String,
    },
    #[error(
        "{registry}: no complete answer within {timeout_ms} ms. The registry may be slow or down; try again later"
    )]
    Timeout {
        registry: MarketSource,
        timeout_ms: u64,
    },
    #[error("{registry}: {url} answered HTTP {status}{detail}. Check the configured address")]
    Http {
        registry: MarketSource,
        url: String,
        status: u16,
        /// A short excerpt of the body, prefixed with ": ", or empty.
        detail: String,
    },
    #[error(
        "{registry}: {url} sent a response that is not the expected JSON ({detail}). The configured address may not be a {registry} API"
    )]
    Malformed {
        registry: MarketSource,
        url: String,
        detail: String,
    },
    #[error("{name:?} is not a valid {what}: {reason}")]
    InvalidName {
        what: &'static str,
        name: String,
        reason: String,
    },
    #[error("marketplace configuration: {what}: {message}")]
    Config { what: String, message: String },
    #[error(
        "marketplace cache {path}: {message}. Check that the directory is writable, or run without a cache"
    )]
    Cache { path: String, message: String },
}

/// A failure to plan or prepare an install. Never a panic, never a shell.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    #[error(
        "refusing {registry_type} package identifier {identifier:?}: {reason}. The entry may be hostile; install it by hand after checking it"
    )]
    InvalidIdentifier {
        registry_type: String,
        identifier: String,
        reason: String,
    },
    #[error("refusing version {version:?} of {identifier:?}: {reason}")]
    InvalidVersion {
        identifier: String,
        version: String,
        reason: String,
    },
    #[error("refusing {what} {name:?}: {reason}")]
    InvalidValue {
        what: &'static str,
        name: String,
        reason: String,
    },
    #[error("refusing URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error(
        "{name} has no install method this tool supports (it offers: {available}). Supported: npm (npx), pypi (uvx), oci (docker) packages and streamable-http/sse remotes"
    )]
    NoInstallMethod { name: String, available: String },
    #[error(
        "{name} cannot be installed with {method} (it offers: {available}); choose another method"
    )]
    MethodUnavailable {
        name: String,
        method: String,
        available: String,
    },
    #[error("{program:?} is not a cache-warming command (allowed: npm, uv, docker)")]
    UnsupportedCommand { program: String },
    #[error("could not start {program}: {message}. Is it installed and on PATH?")]
    Spawn { program: String, message: String },
    #[error(
        "`{command}` did not finish within {secs} s and was stopped; the first start of the server will download instead"
    )]
    CommandTimeout { command: String, secs: u64 },
    #[error("`{command}` failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: String,
        stderr: String,
    },
}
