//! MCP client config files (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Codex, Gemini CLI): parsed into
//! [`ServerSpec`]s and rendered back. Pure: the caller reads and writes the files; nothing here runs anything.
//!
//! Variable references (`${VAR}`, `${VAR:-default}`, `${env:VAR}`, `${input:ID}`) never end up in clear in a spec:
//! an `env` value that uses one becomes a secret of the server under that env key; a header or URL that uses one
//! keeps a `${KEY}` placeholder (the proxy substitutes secrets there when it connects) and the value becomes secret
//! `KEY`. A value the environment does not have is reported in [`Imported::needs_input`].

mod clients;
mod jsonc;
mod render;
mod vars;

pub use clients::{
    CLIENTS, KnownFile, SELF_NAME, backup_path, connect_rewrite, known_files, latest_backup,
};
pub use render::{ExportServer, Rendered, Skipped, render};

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use ad_core::error::{Error, Result};
use ad_core::model::{ServerName, ServerSpec, Transport, limits, truncate_for_message};
use vars::{Place, Resolved, Resolver};

/// Files larger than this are refused before parsing (`~/.claude.json` keeps history, so it is not tiny).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// More servers than this in one file is refused.
pub const MAX_SERVERS: usize = 2000;

/// A client config format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `claude_desktop_config.json`: `mcpServers`.
    ClaudeDesktop,
    /// Claude Code's project file `.mcp.json`: `mcpServers`.
    ClaudeCode,
    /// Claude Code's `~/.claude.json`: user-scope `mcpServers` and `projects.<dir>.mcpServers`.
    ClaudeUser,
    /// `~/.cursor/mcp.json`, `.cursor/mcp.json`: `mcpServers`.
    Cursor,
    /// `.vscode/mcp.json` (and the user profile's `mcp.json`): `servers`, `inputs`; comments and trailing commas.
    Vscode,
    /// `~/.codeium/windsurf/mcp_config.json`: `mcpServers`, remote servers under `serverUrl`.
    Windsurf,
    /// `~/.codex/config.toml`: `[mcp_servers.NAME]`.
    Codex,
    /// Gemini CLI's `settings.json`: `mcpServers`, `url` (SSE) or `httpUrl` (streamable HTTP).
    Gemini,
}

impl Format {
    pub const ALL: [Format; 8] = [
        Format::ClaudeDesktop,
        Format::ClaudeCode,
        Format::ClaudeUser,
        Format::Cursor,
        Format::Vscode,
        Format::Windsurf,
        Format::Codex,
        Format::Gemini,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::ClaudeDesktop => "claude-desktop",
            Format::ClaudeCode => "claude-code",
            Format::ClaudeUser => "claude-user",
            Format::Cursor => "cursor",
            Format::Vscode => "vscode",
            Format::Windsurf => "windsurf",
            Format::Codex => "codex",
            Format::Gemini => "gemini",
        }
    }

    /// Whether the client reads comments and trailing commas in this file.
    fn allows_comments(self) -> bool {
        matches!(self, Format::Vscode | Format::Gemini)
    }

    /// Which field names a server entry may carry: (used, known-but-ignored with the reason).
    fn fields(
        self,
    ) -> (
        &'static [&'static str],
        &'static [(&'static str, &'static str)],
    ) {
        const COMMON: &[&str] = &["type", "command", "args", "env", "url", "headers"];
        match self {
            Format::ClaudeDesktop | Format::ClaudeCode | Format::ClaudeUser => (COMMON, &[]),
            Format::Cursor => (
                COMMON,
                &[(
                    "envFile",
                    "env files are not read; set the values as secrets",
                )],
            ),
            Format::Vscode => (
                COMMON,
                &[
                    (
                        "envFile",
                        "env files are not read; set the values as secrets",
                    ),
                    ("cwd", "the working directory is not configurable"),
                    ("dev", "development mode is VS Code's own"),
                    ("gallery", "gallery metadata is not kept"),
                    ("version", "the version hint is not kept"),
                ],
            ),
            Format::Windsurf => (
                &[
                    "type",
                    "command",
                    "args",
                    "env",
                    "url",
                    "serverUrl",
                    "headers",
                ],
                &[
                    (
                        "disabled",
                        "disabled entries are imported; disable them in agent-discover",
                    ),
                    ("disabledTools", "per-tool switches are not kept"),
                ],
            ),
            Format::Gemini => (
                &[
                    "command",
                    "args",
                    "env",
                    "url",
                    "httpUrl",
                    "headers",
                    "description",
                ],
                &[
                    ("cwd", "the working directory is not configurable"),
                    ("timeout", "agent-discover's own call timeout applies"),
                    ("trust", "tool-call confirmation is the client's"),
                    ("includeTools", "per-tool filters are not kept"),
                    ("excludeTools", "per-tool filters are not kept"),
                ],
            ),
            Format::Codex => (
                &[
                    "command",
                    "args",
                    "env",
                    "env_vars",
                    "url",
                    "http_headers",
                    "env_http_headers",
                    "bearer_token_env_var",
                ],
                &[
                    ("cwd", "the working directory is not configurable"),
                    (
                        "enabled",
                        "disabled entries are imported; disable them in agent-discover",
                    ),
                    (
                        "startup_timeout_sec",
                        "agent-discover's own activation timeout applies",
                    ),
                    (
                        "startup_timeout_ms",
                        "agent-discover's own activation timeout applies",
                    ),
                    (
                        "tool_timeout_sec",
                        "agent-discover's own call timeout applies",
                    ),
                    ("enabled_tools", "per-tool filters are not kept"),
                    ("disabled_tools", "per-tool filters are not kept"),
                ],
            ),
        }
    }

    /// The format a path names by its client's conventions, then by its content.
    pub fn detect(path: &Path, text: &str) -> Option<Format> {
        let file = path.file_name()?.to_str()?;
        let parent = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|p| p.to_str())
            .unwrap_or("");
        let grandparent = path
            .parent()
            .and_then(|p| p.parent())
            .and_then(|p| p.file_name())
            .and_then(|p| p.to_str())
            .unwrap_or("");
        match (file, parent) {
            ("claude_desktop_config.json", _) => return Some(Format::ClaudeDesktop),
            (".claude.json", _) => return Some(Format::ClaudeUser),
            (".mcp.json", _) => return Some(Format::ClaudeCode),
            ("mcp.json", ".cursor") => return Some(Format::Cursor),
            ("mcp.json", ".vscode") => return Some(Format::Vscode),
            ("mcp.json", "User") if grandparent.starts_with("Code") => return Some(Format::Vscode),
            ("mcp_config.json", _) => return Some(Format::Windsurf),
            ("settings.json", ".gemini") => return Some(Format::Gemini),
            _ => {}
        }
        if file.ends_with(".toml") {
            return Some(Format::Codex);
        }
        let head = text.trim_start();
        if !head.starts_with('{') && text.contains("[mcp_servers") {
            return Some(Format::Codex);
        }
        if text.contains("\"mcpServers\"") {
            if text.contains("\"httpUrl\"") {
                return Some(Format::Gemini);
            }
            if text.contains("\"serverUrl\"") {
                return Some(Format::Windsurf);
            }
            return Some(Format::ClaudeCode);
        }
        if text.contains("\"servers\"") {
            return Some(Format::Vscode);
        }
        None
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = Error;
    fn from_str(s: &str) -> Result<Format> {
        let s = s.to_ascii_lowercase().replace('_', "-");
        let f = match s.as_str() {
            "claude-desktop" | "claude" => Format::ClaudeDesktop,
            "claude-code" | "mcp.json" => Format::ClaudeCode,
            "claude-user" | "claude.json" => Format::ClaudeUser,
            "cursor" => Format::Cursor,
            "vscode" | "vs-code" | "code" => Format::Vscode,
            "windsurf" => Format::Windsurf,
            "codex" => Format::Codex,
            "gemini" | "gemini-cli" => Format::Gemini,
            _ => {
                return Err(Error::invalid(
                    "format",
                    format!(
                        "{:?}; expected one of {}",
                        truncate_for_message(&s),
                        Format::ALL.map(|f| f.as_str()).join(", ")
                    ),
                ));
            }
        };
        Ok(f)
    }
}

/// A server read from a client file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportedServer {
    /// The name as the file spells it (differs from `spec.name` when it was mapped).
    pub original_name: String,
    pub spec: ServerSpec,
    /// Secret values found in the environment, by secret key. Never serialized.
    #[serde(skip)]
    pub secrets: BTreeMap<String, String>,
    /// Every secret key the server needs (found or not), in order.
    pub secret_keys: Vec<String>,
}

/// A name our rules reject, and what it became.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renamed {
    pub from: String,
    pub to: String,
}

/// A variable reference with no value at import: the secret to set before the server can start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NeedsInput {
    pub server: String,
    pub key: String,
    /// The reference as written, e.g. `${input:api-key}`.
    pub reference: String,
    /// Where it appeared, e.g. `env.API_KEY` or `headers.Authorization`.
    pub field: String,
    /// VS Code's `inputs[].description`, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the client marks it as a password (VS Code `inputs[].password`).
    pub password: bool,
}

/// What a client file holds, ready to apply.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Imported {
    pub format: Format,
    pub file: String,
    pub servers: Vec<ImportedServer>,
    pub renamed: Vec<Renamed>,
    pub needs_input: Vec<NeedsInput>,
    /// Fields the file sets that agent-discover does not use, each with the server and the reason.
    pub warnings: Vec<String>,
}

impl Imported {
    pub fn specs(&self) -> Vec<ServerSpec> {
        self.servers.iter().map(|s| s.spec.clone()).collect()
    }
}

/// What the parser needs from its surroundings.
pub struct Env<'a> {
    /// The process environment (or a stand-in in tests).
    pub var: &'a dyn Fn(&str) -> Option<String>,
    /// What `${workspaceFolder}` means (VS Code): the project directory of the file.
    pub workspace: Option<PathBuf>,
    /// What `${userHome}` means.
    pub home: Option<PathBuf>,
}

impl Env<'_> {
    /// The real environment, with the workspace derived from `file` (`<dir>/.vscode/mcp.json` -> `<dir>`).
    pub fn process(file: &Path) -> Env<'static> {
        static VAR: fn(&str) -> Option<String> = |k| std::env::var(k).ok();
        let dir = file.parent().map(Path::to_path_buf);
        let workspace = match dir {
            Some(d)
                if d.file_name()
                    .is_some_and(|n| n.to_str().is_some_and(|n| n.starts_with('.'))) =>
            {
                d.parent().map(Path::to_path_buf)
            }
            other => other,
        };
        Env {
            var: &VAR,
            workspace,
            home: std::env::var_os("HOME").map(PathBuf::from),
        }
    }
}

fn bad(file: &str, server: Option<&str>, field: Option<&str>, reason: impl fmt::Display) -> Error {
    let mut msg = file.to_owned();
    if let Some(s) = server {
        msg.push_str(&format!(": server `{}`", truncate_for_message(s)));
    }
    if let Some(f) = field {
        msg.push_str(&format!(": field `{}`", truncate_for_message(f)));
    }
    msg.push_str(&format!(": {reason}"));
    Error::invalid("client config", msg)
}

/// Reads `path` with the size limit, for [`parse`].
pub fn read(path: &Path) -> Result<String> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| bad(&shown, None, None, format!("cannot read: {e}")))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(bad(
            &shown,
            None,
            None,
            format!("{} bytes is over the limit of {MAX_FILE_BYTES}", meta.len()),
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| bad(&shown, None, None, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|_| bad(&shown, None, None, "not UTF-8 text"))
}

/// Object entries in file order; a name given twice is an error (serde_json would keep the last silently).
struct Entries<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of servers by name")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries<T>, A::Error> {
                let mut out: Vec<(String, T)> = Vec::new();
                let mut seen = BTreeSet::new();
                while let Some(k) = map.next_key::<String>()? {
                    if out.len() >= MAX_SERVERS {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_SERVERS} servers in one file"
                        )));
                    }
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "server `{}` is defined twice",
                            truncate_for_message(&k)
                        )));
                    }
                    let v = map.next_value::<T>()?;
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct JsonDoc {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Entries<Value>>,
    servers: Option<Entries<Value>>,
    inputs: Option<Vec<Value>>,
    projects: Option<Entries<ProjectDoc>>,
}

#[derive(serde::Deserialize)]
struct ProjectDoc {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Entries<Value>>,
}

#[derive(serde::Deserialize)]
struct CodexDoc {
    mcp_servers: Option<toml::Table>,
}

/// VS Code's `inputs[]` entry.
struct InputDef {
    description: Option<String>,
    password: bool,
}

/// Parses a client file. `file` names it in errors; every error names the file, and the server and field when known.
pub fn parse(format: Format, file: &str, text: &str, env: &Env) -> Result<Imported> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(
            file,
            None,
            None,
            format!("{} bytes is over the limit of {MAX_FILE_BYTES}", text.len()),
        ));
    }
    let mut inputs: BTreeMap<String, InputDef> = BTreeMap::new();
    let mut entries: Vec<(String, Value)> = Vec::new();
    if format == Format::Codex {
        let doc: CodexDoc = toml::from_str(text)
            .map_err(|e| bad(file, None, None, format!("not valid TOML: {e}")))?;
        let table = doc.mcp_servers.unwrap_or_default();
        if table.len() > MAX_SERVERS {
            return Err(bad(
                file,
                None,
                Some("mcp_servers"),
                format!("more than {MAX_SERVERS} servers in one file"),
            ));
        }
        for (name, v) in table {
            let v = serde_json::to_value(&v).map_err(|e| bad(file, Some(&name), None, e))?;
            entries.push((name, v));
        }
    } else {
        let cleaned;
        let json = if format.allows_comments() {
            cleaned = jsonc::strip(text);
            cleaned.as_str()
        } else {
            text
        };
        if !json.trim_start().starts_with('{') {
            return Err(bad(file, None, None, "not a JSON object"));
        }
        let doc: JsonDoc = serde_json::from_str(json).map_err(|e| {
            let hint = if !format.allows_comments() && (text.contains("//") || text.contains("/*"))
            {
                " (this client's file does not allow comments)"
            } else {
                ""
            };
            bad(file, None, None, format!("not valid JSON: {e}{hint}"))
        })?;
        let main = if format == Format::Vscode {
            doc.servers
        } else {
            doc.mcp_servers
        };
        entries.extend(main.map(|e| e.0).unwrap_or_default());
        if format == Format::ClaudeUser {
            for (_dir, project) in doc.projects.map(|p| p.0).unwrap_or_default() {
                entries.extend(project.mcp_servers.map(|e| e.0).unwrap_or_default());
            }
        }
        if entries.len() > MAX_SERVERS {
            return Err(bad(
                file,
                None,
                None,
                format!("more than {MAX_SERVERS} servers in one file"),
            ));
        }
        for (i, input) in doc.inputs.unwrap_or_default().into_iter().enumerate() {
            let field = format!("inputs[{i}]");
            let Some(id) = input.get("id").and_then(Value::as_str) else {
                return Err(bad(
                    file,
                    None,
                    Some(&field),
                    "an input needs a string `id`",
                ));
            };
            inputs.insert(
                id.to_owned(),
                InputDef {
                    description: input
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    password: input
                        .get("password")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
            );
        }
    }

    let mut out = Imported {
        format,
        file: file.to_owned(),
        servers: Vec::new(),
        renamed: Vec::new(),
        needs_input: Vec::new(),
        warnings: Vec::new(),
    };
    let mut taken: BTreeSet<String> = BTreeSet::new();
    // A name used in two scopes of `~/.claude.json` (user and a project) gets a suffix, like a mapped name.
    for (raw_name, value) in entries {
        let name = unique_name(&map_name(&raw_name), &taken);
        taken.insert(name.clone());
        if name != raw_name {
            out.renamed.push(Renamed {
                from: raw_name.clone(),
                to: name.clone(),
            });
        }
        let server = entry(format, file, &raw_name, name, value, env, &inputs, &mut out)?;
        out.servers.push(server);
    }
    Ok(out)
}

/// Maps a name our rules reject onto one they accept, the same way every time.
pub fn map_name(raw: &str) -> String {
    if raw.parse::<ServerName>().is_ok() {
        return raw.to_owned();
    }
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    // Runs of '-' from replaced characters read badly; keep one.
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut s: String = s.chars().take(limits::NAME).collect();
    while s.ends_with('_') || s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() { "server".to_owned() } else { s }
}

fn unique_name(base: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    for n in 2.. {
        let suffix = format!("-{n}");
        let keep = limits::NAME - suffix.len();
        let mut b: String = base.chars().take(keep).collect();
        while b.ends_with('_') {
            b.pop();
        }
        let candidate = format!("{b}{suffix}");
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    unreachable!("some suffix is free")
}

fn get_str(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(file, Some(server), Some(field), "must be a string")),
    }
}

fn get_strs(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Vec<String>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(bad(
                    file,
                    Some(server),
                    Some(&format!("{field}[{i}]")),
                    "must be a string",
                )),
            })
            .collect(),
        Some(_) => Err(bad(
            file,
            Some(server),
            Some(field),
            "must be an array of strings",
        )),
    }
}

fn get_map(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Vec<(String, String)>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(bad(
                    file,
                    Some(server),
                    Some(&format!("{field}.{k}")),
                    "must be a string",
                )),
            })
            .collect(),
        Some(_) => Err(bad(
            file,
            Some(server),
            Some(field),
            "must be an object of strings",
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn entry(
    format: Format,
    file: &str,
    raw_name: &str,
    name: String,
    value: Value,
    env: &Env,
    inputs: &BTreeMap<String, InputDef>,
    out: &mut Imported,
) -> Result<ImportedServer> {
    let Value::Object(obj) = value else {
        return Err(bad(file, Some(raw_name), None, "must be an object"));
    };
    let (used, ignored) = format.fields();
    for k in obj.keys() {
        if used.contains(&k.as_str()) {
            continue;
        }
        if let Some((_, why)) = ignored.iter().find(|(f, _)| f == k) {
            out.warnings
                .push(format!("server `{raw_name}`: field `{k}` ignored: {why}"));
            continue;
        }
        return Err(bad(
            file,
            Some(raw_name),
            Some(k),
            format!(
                "unknown field for {format}; expected one of {}",
                used.join(", ")
            ),
        ));
    }
    let r = Resolver {
        format,
        file,
        server: raw_name,
        env,
        inputs,
    };
    let mut spec = ServerSpec {
        name: name.clone(),
        ..ServerSpec::default()
    };
    let mut secrets: BTreeMap<String, String> = BTreeMap::new();
    let mut secret_keys: Vec<String> = Vec::new();
    let mut take = |res: Resolved, needs: Vec<NeedsInput>, out: &mut Imported| -> Option<String> {
        for (k, v) in res.secrets {
            if !secret_keys.contains(&k) {
                secret_keys.push(k.clone());
            }
            if let Some(v) = v {
                secrets.insert(k, v);
            }
        }
        for mut n in needs {
            n.server = name.clone();
            out.needs_input.push(n);
        }
        res.text
    };

    let kind = get_str(file, raw_name, &obj, "type")?;
    let url_field = ["url", "serverUrl", "httpUrl"]
        .into_iter()
        .find(|f| obj.get(*f).is_some_and(|v| !v.is_null()));
    spec.transport = match (kind.as_deref(), url_field) {
        (Some("stdio"), _) => Transport::Stdio,
        (Some("http" | "streamable-http" | "streamableHttp" | "streamable_http"), _) => {
            Transport::StreamableHttp
        }
        (Some("sse"), _) => Transport::Sse,
        (Some(other), _) => {
            return Err(bad(
                file,
                Some(raw_name),
                Some("type"),
                format!(
                    "{:?}; expected stdio, http or sse",
                    truncate_for_message(other)
                ),
            ));
        }
        (None, Some("url")) if format == Format::Gemini => Transport::Sse,
        (None, Some(_)) => Transport::StreamableHttp,
        (None, None) => Transport::Stdio,
    };
    if let Some(f) = url_field {
        let u = get_str(file, raw_name, &obj, f)?.unwrap_or_default();
        let place = if u.starts_with("${") || u.starts_with('$') && format == Format::Gemini {
            Place::Inline
        } else {
            Place::Placeholder
        };
        let (res, needs) = r.resolve(f, &u, place)?;
        spec.url = take(res, needs, out);
    }
    if let Some(c) = get_str(file, raw_name, &obj, "command")? {
        let (res, needs) = r.resolve("command", &c, Place::Literal)?;
        spec.command = take(res, needs, out);
    }
    for (i, a) in get_strs(file, raw_name, &obj, "args")?
        .into_iter()
        .enumerate()
    {
        let (res, needs) = r.resolve(&format!("args[{i}]"), &a, Place::Literal)?;
        spec.args.extend(take(res, needs, out));
    }
    for (k, v) in get_map(file, raw_name, &obj, "env")? {
        let field = format!("env.{k}");
        ad_core::model::validate_key("env", &k)
            .map_err(|e| bad(file, Some(raw_name), Some(&field), e))?;
        let (res, needs) = r.resolve(&field, &v, Place::Env(&k))?;
        if let Some(v) = take(res, needs, out) {
            spec.env.insert(k, v);
        }
    }
    let header_field = if format == Format::Codex {
        "http_headers"
    } else {
        "headers"
    };
    for (k, v) in get_map(file, raw_name, &obj, header_field)? {
        let field = format!("{header_field}.{k}");
        let (res, needs) = r.resolve(&field, &v, Place::Placeholder)?;
        if let Some(v) = take(res, needs, out) {
            spec.headers.insert(k, v);
        }
    }
    if format == Format::Codex {
        for (i, var) in get_strs(file, raw_name, &obj, "env_vars")?
            .into_iter()
            .enumerate()
        {
            let field = format!("env_vars[{i}]");
            ad_core::model::validate_key("env", &var)
                .map_err(|e| bad(file, Some(raw_name), Some(&field), e))?;
            let (res, needs) = r.resolve(&field, &format!("${{{var}}}"), Place::Env(&var))?;
            take(res, needs, out);
        }
        for (k, var) in get_map(file, raw_name, &obj, "env_http_headers")? {
            let field = format!("env_http_headers.{k}");
            let (res, needs) = r.resolve(&field, &format!("${{{var}}}"), Place::Placeholder)?;
            if let Some(v) = take(res, needs, out) {
                spec.headers.insert(k, v);
            }
        }
        if let Some(var) = get_str(file, raw_name, &obj, "bearer_token_env_var")? {
            let field = "bearer_token_env_var";
            let (res, needs) =
                r.resolve(field, &format!("Bearer ${{{var}}}"), Place::Placeholder)?;
            if let Some(v) = take(res, needs, out) {
                spec.headers.insert("Authorization".into(), v);
            }
        }
    }
    if let Some(d) = get_str(file, raw_name, &obj, "description")? {
        spec.description = d;
    }
    spec.validate().map_err(|e| match e {
        Error::Invalid { what, reason } => bad(file, Some(raw_name), Some(what), reason),
        other => bad(file, Some(raw_name), None, other),
    })?;
    Ok(ImportedServer {
        original_name: raw_name.to_owned(),
        spec,
        secrets,
        secret_keys,
    })
}

#[cfg(test)]
mod tests;
