//! What one marketplace row is (`MarketEntry` with its server.json packages and remotes) and the lenient reader of server.json shapes.
//!
//! The reader accepts the current camelCase schema and the older spellings (snake_case, `registry_name`,
//! `version_detail.version`, `packages[].name`, transport as a string) and ignores unknown fields. It never fails on a
//! missing optional field: a row without a name is the only row that is skipped.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a row came from. Serialized as `registry`, `npm` or `pypi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MarketSource {
    /// The official MCP registry (or a registry speaking its API).
    Registry,
    Npm,
    Pypi,
}

impl MarketSource {
    pub fn as_str(self) -> &'static str {
        match self {
            MarketSource::Registry => "registry",
            MarketSource::Npm => "npm",
            MarketSource::Pypi => "pypi",
        }
    }
}

impl fmt::Display for MarketSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What runs the server once installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    Node,
    Python,
    Docker,
    StreamableHttp,
    Sse,
}

/// How a server is installed: a stdio command (`npx`, `uvx`, `docker`) or a remote endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstallMethod {
    Npx,
    Uvx,
    Docker,
    Remote,
}

impl InstallMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            InstallMethod::Npx => "npx",
            InstallMethod::Uvx => "uvx",
            InstallMethod::Docker => "docker",
            InstallMethod::Remote => "remote",
        }
    }
}

impl fmt::Display for InstallMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for InstallMethod {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "npx" | "npm" | "node" => Ok(InstallMethod::Npx),
            "uvx" | "pypi" | "python" | "uv" => Ok(InstallMethod::Uvx),
            "docker" | "oci" => Ok(InstallMethod::Docker),
            "remote" | "http" | "streamable-http" | "sse" => Ok(InstallMethod::Remote),
            other => Err(format!(
                "unknown install method {other:?}: use npx, uvx, docker or remote"
            )),
        }
    }
}

/// One server found in a marketplace source, with everything `plan_install` needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarketEntry {
    /// Cross-source identity: `<source>:<name>` (e.g. `registry:io.github.foo/bar`, `npm:@scope/pkg`).
    pub key: String,
    /// The server name in its source: reverse-DNS for the registry, the package name for npm and PyPI.
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub version: Option<String>,
    pub source: MarketSource,
    /// The runtime of the preferred install method; `None` when no supported method exists (e.g. nuget only).
    #[serde(default)]
    pub runtime: Option<Runtime>,
    #[serde(default)]
    pub install_method: Option<InstallMethod>,
    #[serde(default)]
    pub repository: Option<String>,
    #[serde(default)]
    pub website_url: Option<String>,
    /// Registry lifecycle status (`active`, `deprecated`, `deleted`) when the source says.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub published_at: Option<String>,
    #[serde(default)]
    pub packages: Vec<Package>,
    #[serde(default)]
    pub remotes: Vec<Remote>,
}

impl MarketEntry {
    /// Fills `runtime` and `install_method` from the packages and remotes (npm, pypi, oci, then remotes).
    pub(crate) fn derive_install(&mut self) {
        let (method, runtime) = preferred_method(&self.packages, &self.remotes)
            .map(|(m, r)| (Some(m), Some(r)))
            .unwrap_or((None, None));
        self.install_method = method;
        self.runtime = runtime;
    }
}

fn preferred_method(packages: &[Package], remotes: &[Remote]) -> Option<(InstallMethod, Runtime)> {
    let has = |t: &str| packages.iter().any(|p| p.registry_type == t);
    if has("npm") {
        return Some((InstallMethod::Npx, Runtime::Node));
    }
    if has("pypi") {
        return Some((InstallMethod::Uvx, Runtime::Python));
    }
    if has("oci") {
        return Some((InstallMethod::Docker, Runtime::Docker));
    }
    remotes.iter().find_map(|r| match r.kind.as_str() {
        "streamable-http" => Some((InstallMethod::Remote, Runtime::StreamableHttp)),
        "sse" => Some((InstallMethod::Remote, Runtime::Sse)),
        _ => None,
    })
}

/// The common fields of anything a user may have to supply (`Input` in the schema).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Input {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub is_required: bool,
    pub is_secret: bool,
    /// `string`, `number`, `boolean` or `filepath`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// A fixed value (may contain `{variable}` placeholders); not meant to be changed by the user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

/// An environment variable or HTTP header (`KeyValueInput`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct KeyValueInput {
    pub name: String,
    #[serde(flatten)]
    pub input: Input,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Input>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgumentKind {
    #[default]
    Positional,
    Named,
}

/// A runtime or package argument (`PositionalArgument` / `NamedArgument`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Argument {
    #[serde(rename = "type")]
    pub kind: ArgumentKind,
    /// For named arguments: the flag, including its dashes in the current schema (`--port`); older entries omit them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// For positional arguments: a label (not part of the command line), also the key of a user input.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_hint: Option<String>,
    pub is_repeated: bool,
    #[serde(flatten)]
    pub input: Input,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Input>,
}

/// How a package talks MCP once started: `stdio` (default), or `streamable-http`/`sse` at a (templated) URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PackageTransport {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<KeyValueInput>,
}

impl Default for PackageTransport {
    fn default() -> Self {
        PackageTransport {
            kind: "stdio".into(),
            url: None,
            headers: Vec::new(),
        }
    }
}

/// One entry of server.json `packages[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Package {
    /// `npm`, `pypi`, `oci`, `nuget`, `mcpb`, … (lower-cased; the legacy `docker` is read as `oci`).
    pub registry_type: String,
    pub identifier: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_hint: Option<String>,
    pub transport: PackageTransport,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runtime_arguments: Vec<Argument>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub package_arguments: Vec<Argument>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub environment_variables: Vec<KeyValueInput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_sha256: Option<String>,
}

/// One entry of server.json `remotes[]`: a hosted endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Remote {
    /// `streamable-http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
    /// May contain `{variable}` placeholders.
    pub url: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<KeyValueInput>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub variables: BTreeMap<String, Input>,
}

// ---------------------------------------------------------------------------------------------------------------
// Lenient reading of server.json values.

/// The first of `names` present (and not null) in the object `v`.
pub(crate) fn field<'a>(v: &'a Value, names: &[&str]) -> Option<&'a Value> {
    let obj = v.as_object()?;
    names
        .iter()
        .find_map(|n| obj.get(*n).filter(|x| !x.is_null()))
}

/// A string field; numbers are accepted and printed (some legacy versions were numbers).
pub(crate) fn str_field(v: &Value, names: &[&str]) -> Option<String> {
    match field(v, names)? {
        Value::String(s) => {
            let s = s.trim();
            (!s.is_empty()).then(|| s.to_owned())
        }
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

pub(crate) fn bool_field(v: &Value, names: &[&str]) -> bool {
    match field(v, names) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

fn array_field<'a>(v: &'a Value, names: &[&str]) -> &'a [Value] {
    field(v, names)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(crate) fn parse_input(v: &Value) -> Input {
    Input {
        description: str_field(v, &["description"]),
        is_required: bool_field(v, &["isRequired", "is_required", "required"]),
        is_secret: bool_field(v, &["isSecret", "is_secret", "secret"]),
        format: str_field(v, &["format"]),
        value: str_field(v, &["value"]),
        default: str_field(v, &["default", "default_value", "defaultValue"]),
        placeholder: str_field(v, &["placeholder"]),
        choices: array_field(v, &["choices"])
            .iter()
            .filter_map(|c| match c {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                Value::Bool(b) => Some(b.to_string()),
                _ => None,
            })
            .collect(),
    }
}

fn parse_variables(v: &Value) -> BTreeMap<String, Input> {
    field(v, &["variables"])
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, x)| (k.clone(), parse_input(x)))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn parse_key_value(v: &Value) -> Option<KeyValueInput> {
    Some(KeyValueInput {
        name: str_field(v, &["name"])?,
        input: parse_input(v),
        variables: parse_variables(v),
    })
}

/// Environment variables come as a list of `{name, …}`; a few legacy entries used a `{NAME: {…}}` map.
fn parse_key_values(v: &Value, names: &[&str]) -> Vec<KeyValueInput> {
    match field(v, names) {
        Some(Value::Array(items)) => items.iter().filter_map(parse_key_value).collect(),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, x)| KeyValueInput {
                name: k.clone(),
                input: if x.is_object() {
                    parse_input(x)
                } else {
                    Input {
                        default: x.as_str().map(str::to_owned),
                        ..Input::default()
                    }
                },
                variables: parse_variables(x),
            })
            .collect(),
        _ => Vec::new(),
    }
}

pub(crate) fn parse_argument(v: &Value) -> Option<Argument> {
    if let Value::String(s) = v {
        // A bare string in a legacy list: a fixed positional argument.
        return Some(Argument {
            kind: ArgumentKind::Positional,
            input: Input {
                value: Some(s.clone()),
                ..Input::default()
            },
            ..Argument::default()
        });
    }
    if !v.is_object() {
        return None;
    }
    let name = str_field(v, &["name"]);
    let kind = match str_field(v, &["type"]).as_deref() {
        Some("named") => ArgumentKind::Named,
        Some("positional") => ArgumentKind::Positional,
        // Untyped legacy arguments: a name means a flag.
        _ if name.is_some() => ArgumentKind::Named,
        _ => ArgumentKind::Positional,
    };
    Some(Argument {
        kind,
        name,
        value_hint: str_field(v, &["valueHint", "value_hint"]),
        is_repeated: bool_field(v, &["isRepeated", "is_repeated"]),
        input: parse_input(v),
        variables: parse_variables(v),
    })
}

fn parse_arguments(v: &Value, names: &[&str]) -> Vec<Argument> {
    array_field(v, names)
        .iter()
        .filter_map(parse_argument)
        .collect()
}

fn normalize_transport_kind(s: &str) -> String {
    match s.trim().to_ascii_lowercase().as_str() {
        "streamable-http" | "streamable_http" | "streamablehttp" | "streamable" | "http" => {
            "streamable-http".into()
        }
        "sse" => "sse".into(),
        "stdio" | "" => "stdio".into(),
        other => other.into(),
    }
}

fn parse_package_transport(v: &Value) -> PackageTransport {
    match field(v, &["transport"]) {
        Some(Value::String(s)) => PackageTransport {
            kind: normalize_transport_kind(s),
            url: None,
            headers: Vec::new(),
        },
        Some(t @ Value::Object(_)) => PackageTransport {
            kind: str_field(t, &["type", "transport_type", "transportType"])
                .map(|s| normalize_transport_kind(&s))
                .unwrap_or_else(|| "stdio".into()),
            url: str_field(t, &["url"]),
            headers: parse_key_values(t, &["headers"]),
        },
        _ => PackageTransport {
            kind: str_field(v, &["transport_type", "transportType"])
                .map(|s| normalize_transport_kind(&s))
                .unwrap_or_else(|| "stdio".into()),
            url: None,
            headers: Vec::new(),
        },
    }
}

pub(crate) fn parse_package(v: &Value) -> Option<Package> {
    let registry_type = str_field(
        v,
        &[
            "registryType",
            "registry_type",
            "registry_name",
            "registryName",
            "registry",
        ],
    )
    .map(|s| match s.to_ascii_lowercase().as_str() {
        "docker" | "docker-hub" | "dockerhub" | "ghcr" => "oci".to_owned(),
        "pip" | "python" => "pypi".to_owned(),
        other => other.to_owned(),
    })
    .unwrap_or_default();
    let identifier = str_field(v, &["identifier", "name", "package_name", "packageName"])?;
    Some(Package {
        registry_type,
        identifier,
        version: str_field(v, &["version"]).or_else(|| {
            field(v, &["version_detail", "versionDetail"]).and_then(|d| str_field(d, &["version"]))
        }),
        registry_base_url: str_field(v, &["registryBaseUrl", "registry_base_url"]),
        runtime_hint: str_field(v, &["runtimeHint", "runtime_hint"]),
        transport: parse_package_transport(v),
        runtime_arguments: parse_arguments(v, &["runtimeArguments", "runtime_arguments"]),
        package_arguments: parse_arguments(v, &["packageArguments", "package_arguments"]),
        environment_variables: parse_key_values(
            v,
            &["environmentVariables", "environment_variables", "env"],
        ),
        file_sha256: str_field(v, &["fileSha256", "file_sha256"]),
    })
}

pub(crate) fn parse_remote(v: &Value) -> Option<Remote> {
    let url = str_field(v, &["url"])?;
    let kind = str_field(v, &["type", "transport_type", "transportType", "transport"])
        .map(|s| normalize_transport_kind(&s))
        .unwrap_or_else(|| "streamable-http".into());
    Some(Remote {
        kind,
        url,
        headers: parse_key_values(v, &["headers"]),
        variables: parse_variables(v),
    })
}

pub(crate) fn parse_packages(v: &Value) -> Vec<Package> {
    array_field(v, &["packages"])
        .iter()
        .filter_map(parse_package)
        .collect()
}

pub(crate) fn parse_remotes(v: &Value) -> Vec<Remote> {
    array_field(v, &["remotes"])
        .iter()
        .filter_map(parse_remote)
        .collect()
}

/// `repository` is `{url, source}` in server.json and npm; npm also allows a bare string or `github:owner/repo`.
pub(crate) fn parse_repository(v: Option<&Value>) -> Option<String> {
    let raw = match v? {
        Value::String(s) => s.clone(),
        r @ Value::Object(_) => str_field(r, &["url"])?,
        _ => return None,
    };
    normalize_repository_url(&raw)
}

/// `git+https://host/o/r.git` -> `https://host/o/r`; `github:o/r` and `o/r` -> a GitHub URL; other strings kept.
pub(crate) fn normalize_repository_url(raw: &str) -> Option<String> {
    let mut s = raw.trim().to_owned();
    if s.is_empty() {
        return None;
    }
    for (prefix, host) in [
        ("github:", "https://github.com/"),
        ("gitlab:", "https://gitlab.com/"),
    ] {
        if let Some(rest) = s.strip_prefix(prefix) {
            s = format!("{host}{rest}");
        }
    }
    if let Some(rest) = s.strip_prefix("git+") {
        s = rest.to_owned();
    }
    if let Some(rest) = s.strip_prefix("git://") {
        s = format!("https://{rest}");
    }
    if let Some(rest) = s.strip_prefix("git@") {
        // git@host:owner/repo.git
        s = format!("https://{}", rest.replacen(':', "/", 1));
    }
    if !s.contains("://") {
        let looks_like_owner_repo = s.split('/').count() == 2
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
        if looks_like_owner_repo {
            s = format!("https://github.com/{s}");
        }
    }
    if let Some(rest) = s.strip_suffix(".git") {
        s = rest.to_owned();
    }
    Some(s.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn legacy_package_spellings() {
        let p = parse_package(&json!({
            "registry_name": "npm", "name": "@a/b", "version": "1.0.0", "transport": "stdio",
            "environment_variables": [{"name": "K", "is_secret": true, "is_required": true}],
            "runtime_arguments": [{"name": "port", "value_hint": "8080"}]
        }))
        .expect("parsed");
        assert_eq!(p.registry_type, "npm");
        assert_eq!(p.identifier, "@a/b");
        assert_eq!(p.transport.kind, "stdio");
        assert!(p.environment_variables[0].input.is_secret);
        assert!(p.environment_variables[0].input.is_required);
        assert_eq!(p.runtime_arguments[0].kind, ArgumentKind::Named);
    }

    #[test]
    fn repositories() {
        assert_eq!(
            normalize_repository_url("git+https://github.com/o/r.git").as_deref(),
            Some("https://github.com/o/r")
        );
        assert_eq!(
            normalize_repository_url("github:o/r").as_deref(),
            Some("https://github.com/o/r")
        );
        assert_eq!(
            normalize_repository_url("git@github.com:o/r.git").as_deref(),
            Some("https://github.com/o/r")
        );
    }

    #[test]
    fn entry_round_trips_through_json() {
        let mut e = MarketEntry {
            key: "npm:x".into(),
            name: "x".into(),
            title: None,
            description: "d".into(),
            version: Some("1.0.0".into()),
            source: MarketSource::Npm,
            runtime: None,
            install_method: None,
            repository: None,
            website_url: None,
            status: None,
            published_at: None,
            packages: vec![Package {
                registry_type: "npm".into(),
                identifier: "x".into(),
                ..Package::default()
            }],
            remotes: vec![],
        };
        e.derive_install();
        let s = serde_json::to_string(&e).expect("serializes");
        assert!(s.contains("\"install_method\":\"npx\""), "{s}");
        assert!(s.contains("\"runtime\":\"node\""), "{s}");
        let back: MarketEntry = serde_json::from_str(&s).expect("deserializes");
        assert_eq!(back, e);
    }
}
