//! Domain types shared by every layer: validated names, server specs and records, tools. No I/O here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Limits on what a caller may store; each keeps a hostile or accidental payload out of the database.
pub mod limits {
    pub const NAME: usize = 64;
    pub const DESCRIPTION: usize = 16 * 1024;
    pub const COMMAND: usize = 4096;
    pub const ARG: usize = 8192;
    pub const ARGS: usize = 256;
    pub const ENV_ENTRIES: usize = 256;
    pub const ENV_VALUE: usize = 32 * 1024;
    pub const TAGS: usize = 32;
    pub const TAG: usize = 64;
    pub const URL: usize = 4096;
    pub const QUERY: usize = 10 * 1024;
}

/// A server's name: `^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`.
///
/// No spaces, slashes, shell metacharacters or `__` at the ends, so that `server__tool` stays parseable
/// and a name is safe in a path, a URL segment and an environment variable value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ServerName(String);

impl ServerName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for ServerName {
    type Err = Error;
    fn from_str(s: &str) -> Result<ServerName> {
        let bad = |reason: &str| {
            Err(Error::invalid(
                "server name",
                format!(
                    "{reason} (got {:?}); a name is 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit",
                    truncate_for_message(s)
                ),
            ))
        };
        if s.is_empty() {
            return bad("empty");
        }
        if s.len() > limits::NAME {
            return bad("too long");
        }
        let mut chars = s.chars();
        let first = chars.next().unwrap_or(' ');
        if !first.is_ascii_alphanumeric() {
            return bad("must start with a letter or digit");
        }
        if !s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        {
            return bad("contains a character that is not allowed");
        }
        if s.ends_with('_') {
            return bad("must not end with '_'");
        }
        Ok(ServerName(s.to_owned()))
    }
}

impl<'de> Deserialize<'de> for ServerName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ServerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Shortens user input quoted back in an error message so a 1 MB string does not become a 1 MB error.
pub fn truncate_for_message(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return s.to_owned();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// How agent-discover talks to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Transport {
    #[default]
    #[serde(rename = "stdio")]
    Stdio,
    #[serde(rename = "streamable-http", alias = "http", alias = "streamable_http")]
    StreamableHttp,
    #[serde(rename = "sse")]
    Sse,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::StreamableHttp => "streamable-http",
            Transport::Sse => "sse",
        }
    }
    pub fn is_remote(self) -> bool {
        !matches!(self, Transport::Stdio)
    }
}

impl FromStr for Transport {
    type Err = Error;
    fn from_str(s: &str) -> Result<Transport> {
        match s {
            "stdio" => Ok(Transport::Stdio),
            "streamable-http" | "http" | "streamable_http" => Ok(Transport::StreamableHttp),
            "sse" => Ok(Transport::Sse),
            other => Err(Error::invalid(
                "transport",
                format!(
                    "{:?}; expected stdio, streamable-http or sse",
                    truncate_for_message(other)
                ),
            )),
        }
    }
}

/// Where a registry entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    #[default]
    Manual,
    Local,
    Registry,
    Npm,
    Pypi,
    Smithery,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Manual => "manual",
            Source::Local => "local",
            Source::Registry => "registry",
            Source::Npm => "npm",
            Source::Pypi => "pypi",
            Source::Smithery => "smithery",
        }
    }
}

impl FromStr for Source {
    type Err = Error;
    fn from_str(s: &str) -> Result<Source> {
        match s {
            "manual" => Ok(Source::Manual),
            "local" => Ok(Source::Local),
            "registry" => Ok(Source::Registry),
            "npm" => Ok(Source::Npm),
            "pypi" => Ok(Source::Pypi),
            "smithery" => Ok(Source::Smithery),
            other => Err(Error::invalid(
                "source",
                format!(
                    "{:?}; expected one of manual, local, registry, npm, pypi, smithery",
                    truncate_for_message(other)
                ),
            )),
        }
    }
}

/// Health as last checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Health {
    #[default]
    Unknown,
    Healthy,
    Unhealthy,
}

impl Health {
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Healthy => "healthy",
            Health::Unhealthy => "unhealthy",
        }
    }
    pub fn parse_lenient(s: &str) -> Health {
        match s {
            "healthy" => Health::Healthy,
            "unhealthy" => Health::Unhealthy,
            _ => Health::Unknown,
        }
    }
}

/// Everything needed to register a server; validated by [`ServerSpec::validate`] before it reaches storage.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub source: Source,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub transport: Transport,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub package_name: Option<String>,
    #[serde(default)]
    pub package_version: Option<String>,
    #[serde(default)]
    pub repository: Option<String>,
    #[serde(default)]
    pub homepage: Option<String>,
}

impl ServerSpec {
    /// Checks every field against [`limits`] and the transport's needs; returns the validated name.
    pub fn validate(&self) -> Result<ServerName> {
        let name: ServerName = self.name.parse()?;
        check_len("description", &self.description, limits::DESCRIPTION)?;
        match self.transport {
            Transport::Stdio => {
                let Some(command) = self.command.as_deref() else {
                    return Err(Error::invalid(
                        "command",
                        "a stdio server needs a command (the program to run, e.g. npx)",
                    ));
                };
                validate_command(command)?;
            }
            Transport::StreamableHttp | Transport::Sse => {
                let Some(url) = self.url.as_deref() else {
                    return Err(Error::invalid(
                        "url",
                        format!("a {} server needs a url", self.transport.as_str()),
                    ));
                };
                validate_url(url)?;
                if let Some(command) = self.command.as_deref() {
                    validate_command(command)?;
                }
            }
        }
        validate_args(&self.args)?;
        validate_map("env", &self.env)?;
        validate_map("headers", &self.headers)?;
        validate_tags(&self.tags)?;
        for (what, v) in [
            ("package_name", &self.package_name),
            ("package_version", &self.package_version),
            ("repository", &self.repository),
            ("homepage", &self.homepage),
        ] {
            if let Some(v) = v {
                check_len(what, v, limits::URL)?;
            }
        }
        Ok(name)
    }
}

/// What a child is started with. Two specs with equal identities run the same child, so re-applying one leaves a
/// running server alone, and a difference restarts it. The one place that decides "changed" for `add_server` and
/// `apply_config`; fields that affect how a server is launched or authenticated belong here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchIdentity<'a> {
    pub name: &'a str,
    pub transport: Transport,
    pub url: Option<&'a str>,
    pub command: Option<&'a str>,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub headers: &'a BTreeMap<String, String>,
}

impl ServerSpec {
    pub fn launch_identity(&self) -> LaunchIdentity<'_> {
        LaunchIdentity {
            name: &self.name,
            transport: self.transport,
            url: self.url.as_deref(),
            command: self.command.as_deref(),
            args: &self.args,
            env: &self.env,
            headers: &self.headers,
        }
    }

    /// Whether storing `self` over `other` would change the stored row (launch identity, description or tags).
    /// Package metadata and the source are kept from the registered entry, so they are not compared.
    pub fn same_stored(&self, other: &ServerSpec) -> bool {
        self.launch_identity() == other.launch_identity()
            && self.description == other.description
            && self.tags == other.tags
    }
}

fn check_len(what: &'static str, s: &str, max: usize) -> Result<()> {
    if s.len() > max {
        return Err(Error::invalid(
            what,
            format!("{} bytes is over the limit of {max}", s.len()),
        ));
    }
    if s.contains('\0') {
        return Err(Error::invalid(what, "contains a NUL byte"));
    }
    Ok(())
}

/// A command is a program name or path, run directly (never through a shell), so it must be one word.
pub fn validate_command(command: &str) -> Result<()> {
    check_len("command", command, limits::COMMAND)?;
    if command.trim().is_empty() {
        return Err(Error::invalid("command", "empty"));
    }
    if command.chars().any(|c| c.is_control()) {
        return Err(Error::invalid("command", "contains control characters"));
    }
    if command.starts_with('-') {
        return Err(Error::invalid("command", "must not start with '-'"));
    }
    if command != command.trim()
        || command.contains(char::is_whitespace) && !std::path::Path::new(command).is_absolute()
    {
        return Err(Error::invalid(
            "command",
            format!(
                "{:?} looks like a shell command line; give the program in `command` and each argument in `args` (commands are never run through a shell)",
                truncate_for_message(command)
            ),
        ));
    }
    Ok(())
}

pub fn validate_args(args: &[String]) -> Result<()> {
    if args.len() > limits::ARGS {
        return Err(Error::invalid(
            "args",
            format!(
                "{} arguments is over the limit of {}",
                args.len(),
                limits::ARGS
            ),
        ));
    }
    for a in args {
        check_len("args", a, limits::ARG)?;
    }
    Ok(())
}

pub fn validate_map(what: &'static str, map: &BTreeMap<String, String>) -> Result<()> {
    if map.len() > limits::ENV_ENTRIES {
        return Err(Error::invalid(
            what,
            format!(
                "{} entries is over the limit of {}",
                map.len(),
                limits::ENV_ENTRIES
            ),
        ));
    }
    for (k, v) in map {
        validate_key(what, k)?;
        check_len(what, v, limits::ENV_VALUE)?;
    }
    Ok(())
}

/// Environment variable, secret and header names: `^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`.
pub fn validate_key(what: &'static str, k: &str) -> Result<()> {
    let ok = !k.is_empty()
        && k.len() <= 128
        && k.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            what,
            format!(
                "key {:?} must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or '_'",
                truncate_for_message(k)
            ),
        ))
    }
}

pub fn validate_tags(tags: &[String]) -> Result<()> {
    if tags.len() > limits::TAGS {
        return Err(Error::invalid(
            "tags",
            format!("{} tags is over the limit of {}", tags.len(), limits::TAGS),
        ));
    }
    for t in tags {
        check_len("tags", t, limits::TAG)?;
        if t.trim().is_empty() {
            return Err(Error::invalid("tags", "a tag is empty"));
        }
    }
    Ok(())
}

pub fn validate_url(url: &str) -> Result<()> {
    check_len("url", url, limits::URL)?;
    let lower = url.to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(Error::invalid(
            "url",
            format!(
                "{:?} must start with http:// or https://",
                truncate_for_message(url)
            ),
        ));
    }
    if url.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid(
            "url",
            "contains whitespace or control characters",
        ));
    }
    Ok(())
}

/// Where a server's lifecycle stands; stored, so every process and surface shows the same one.
///
/// `stopped`: registered, not running (started on demand). `connecting`: being started. `authenticating`: waiting for
/// the user to authorize (OAuth). `ready`: running, tools listed. `error`: the last start or the running child failed.
/// `disabled`: paused by the operator; nothing starts it until it is enabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ServerStatus {
    #[default]
    Stopped,
    Connecting,
    Authenticating,
    Ready,
    Error,
    Disabled,
}

impl ServerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::Stopped => "stopped",
            ServerStatus::Connecting => "connecting",
            ServerStatus::Authenticating => "authenticating",
            ServerStatus::Ready => "ready",
            ServerStatus::Error => "error",
            ServerStatus::Disabled => "disabled",
        }
    }

    pub fn parse_lenient(s: &str) -> ServerStatus {
        match s {
            "connecting" => ServerStatus::Connecting,
            "authenticating" => ServerStatus::Authenticating,
            "ready" => ServerStatus::Ready,
            "error" => ServerStatus::Error,
            "disabled" => ServerStatus::Disabled,
            _ => ServerStatus::Stopped,
        }
    }
}

/// Which configuration a server came from: `manual` (registered one at a time) or a client config file's path.
/// Applying a config replaces only the servers of its own origin.
pub const MANUAL_ORIGIN: &str = "manual";

pub fn validate_origin(origin: &str) -> Result<()> {
    check_len("origin", origin, limits::URL)?;
    if origin.trim().is_empty() || origin.chars().any(|c| c.is_control()) {
        return Err(Error::invalid(
            "origin",
            "must be non-empty text without control characters (`manual` or a config file's path)",
        ));
    }
    Ok(())
}

/// A stored server: the spec plus the state the registry keeps about it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Server {
    pub id: i64,
    pub name: String,
    pub description: String,
    pub source: Source,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub tags: Vec<String>,
    pub transport: Transport,
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub package_name: Option<String>,
    pub package_version: Option<String>,
    pub repository: Option<String>,
    pub homepage: Option<String>,
    pub installed: bool,
    pub active: bool,
    pub latest_version: Option<String>,
    pub last_health_check: Option<String>,
    pub health_status: Health,
    pub error_count: i64,
    pub last_error: Option<String>,
    pub activate_timeout_ms: Option<u64>,
    pub call_timeout_ms: Option<u64>,
    pub created_at: String,
    pub updated_at: String,
    /// `manual` or the config file it was applied from.
    pub origin: String,
    pub status: ServerStatus,
    /// Where to authorize, while `status` is `authenticating`.
    pub auth_url: Option<String>,
    /// The kind of `last_error`, while `status` is `error`.
    pub error_kind: Option<crate::error::ToolErrorKind>,
    /// The protocol revision its child last connected with (`2026-07-28`, `2025-11-25`, ...); issue 18.
    pub protocol: Option<String>,
}

impl Server {
    /// The registered configuration, as a spec (what `add_server` compares a new one against).
    pub fn to_spec(&self) -> ServerSpec {
        ServerPatch::default().apply(self)
    }
}

/// A partial update; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerPatch {
    pub description: Option<String>,
    pub command: Option<String>,
    pub args: Option<Vec<String>>,
    pub env: Option<BTreeMap<String, String>>,
    pub tags: Option<Vec<String>>,
    pub transport: Option<Transport>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub activate_timeout_ms: Option<u64>,
    pub call_timeout_ms: Option<u64>,
}

impl ServerPatch {
    pub fn apply(&self, server: &Server) -> ServerSpec {
        ServerSpec {
            name: server.name.clone(),
            description: self
                .description
                .clone()
                .unwrap_or_else(|| server.description.clone()),
            source: server.source,
            command: self.command.clone().or_else(|| server.command.clone()),
            args: self.args.clone().unwrap_or_else(|| server.args.clone()),
            env: self.env.clone().unwrap_or_else(|| server.env.clone()),
            tags: self.tags.clone().unwrap_or_else(|| server.tags.clone()),
            transport: self.transport.unwrap_or(server.transport),
            url: self.url.clone().or_else(|| server.url.clone()),
            headers: self
                .headers
                .clone()
                .unwrap_or_else(|| server.headers.clone()),
            package_name: server.package_name.clone(),
            package_version: server.package_version.clone(),
            repository: server.repository.clone(),
            homepage: server.homepage.clone(),
        }
    }
}

/// A tool as a server advertises it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "empty_schema")]
    pub input_schema: serde_json::Value,
}

fn empty_schema() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

/// A stored tool with its owner.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolRecord {
    pub id: i64,
    pub server_id: i64,
    pub server: String,
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// Filters for listing servers.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub query: Option<String>,
    pub source: Option<Source>,
    pub installed_only: bool,
}

/// A row of a server listing: the server plus its tool count.
#[derive(Debug, Clone, Serialize)]
pub struct ServerSummary {
    #[serde(flatten)]
    pub server: Server,
    pub tool_count: i64,
    /// Where a person authorizes agent-discover, while the server waits for it (OAuth, status `authenticating`).
    #[serde(rename = "authUrl", skip_serializing_if = "Option::is_none")]
    pub auth_url: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "fs", "my-server", "x.y_z", "A1", &"a".repeat(64)] {
            assert!(ok.parse::<ServerName>().is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "_a",
            "a b",
            "x; rm -rf /",
            "a/b",
            "a_",
            "ü",
            &"a".repeat(65),
            "a\n",
        ] {
            assert!(bad.parse::<ServerName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn commands() {
        assert!(validate_command("npx").is_ok());
        assert!(validate_command("/usr/bin/node").is_ok());
        assert!(validate_command("npx -y foo").is_err());
        assert!(validate_command("rm -rf /; echo").is_err());
        assert!(validate_command("-e").is_err());
        assert!(validate_command("").is_err());
    }
}
