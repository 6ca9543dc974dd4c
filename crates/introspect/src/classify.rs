//! The failure taxonomy: one category per attempt, with the line that shows it (evidence), a fix hint, and what the
//! server was found to need (variable names from its messages, the usage text's arguments).
//!
//! Rules, in order, for a process that ended or never answered: credentials asked for, then usage text (arguments),
//! then a missing file, path or URL (config), then network errors, then a plain crash. A server that wrote only
//! non-JSON text on stdout and never answered is `non_json_stdout`.

use serde::{Deserialize, Serialize};

use super::Needs;
use super::probe::{Attempt, End};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Ok,
    OkZeroTools,
    InstallFailed,
    NoEntryPoint,
    NeedsCredentials,
    NeedsArgs,
    NeedsConfig,
    CrashedOnStart,
    InitTimeout,
    InitError,
    ProtocolMismatch,
    NonJsonStdout,
    ToolsListTimeout,
    ToolsListError,
    NetworkRequired,
}

impl Category {
    pub const ALL: [Category; 15] = [
        Category::Ok,
        Category::OkZeroTools,
        Category::InstallFailed,
        Category::NoEntryPoint,
        Category::NeedsCredentials,
        Category::NeedsArgs,
        Category::NeedsConfig,
        Category::CrashedOnStart,
        Category::InitTimeout,
        Category::InitError,
        Category::ProtocolMismatch,
        Category::NonJsonStdout,
        Category::ToolsListTimeout,
        Category::ToolsListError,
        Category::NetworkRequired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Ok => "ok",
            Category::OkZeroTools => "ok_zero_tools",
            Category::InstallFailed => "install_failed",
            Category::NoEntryPoint => "no_entry_point",
            Category::NeedsCredentials => "needs_credentials",
            Category::NeedsArgs => "needs_args",
            Category::NeedsConfig => "needs_config",
            Category::CrashedOnStart => "crashed_on_start",
            Category::InitTimeout => "init_timeout",
            Category::InitError => "init_error",
            Category::ProtocolMismatch => "protocol_mismatch",
            Category::NonJsonStdout => "non_json_stdout",
            Category::ToolsListTimeout => "tools_list_timeout",
            Category::ToolsListError => "tools_list_error",
            Category::NetworkRequired => "network_required",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The server answered the protocol (tools listed, possibly none).
    pub fn is_ok(self) -> bool {
        matches!(self, Category::Ok | Category::OkZeroTools)
    }

    /// Failures whose second pass first asks the server for its `--help`: it wants arguments, a file or path, or a
    /// stdio switch.
    pub fn asks_for_help(self) -> bool {
        matches!(
            self,
            Category::NeedsArgs
                | Category::NeedsConfig
                | Category::NonJsonStdout
                | Category::InitTimeout
        )
    }

    /// Failures that placeholder values may lift (the package is installed and started).
    pub fn retry_with_placeholders(self) -> bool {
        !matches!(
            self,
            Category::Ok
                | Category::OkZeroTools
                | Category::InstallFailed
                | Category::NoEntryPoint
                | Category::ProtocolMismatch
        )
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category with its evidence, hint and findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub category: Category,
    pub evidence: String,
    pub hint: String,
    pub needs: Needs,
    /// The package manager's error code (install_failed).
    pub code: Option<String>,
    /// `no_entry_point` because the package is a library (no bin, no console script).
    pub library: bool,
}

impl Diagnosis {
    pub fn new(category: Category, evidence: impl Into<String>, hint: &str) -> Diagnosis {
        let mut evidence = evidence.into().replace('\n', " ");
        crate::clip(&mut evidence, 500);
        Diagnosis {
            category,
            evidence,
            hint: hint.to_owned(),
            needs: Needs::default(),
            code: None,
            library: false,
        }
    }
}

/// Files an attempt under one category.
pub(crate) fn diagnose(a: &Attempt) -> Diagnosis {
    let stderr: Vec<&str> = a.stderr.iter().map(String::as_str).collect();
    match &a.end {
        End::Listed => {
            let n = a.tools.len();
            if n > 0 {
                Diagnosis::new(
                    Category::Ok,
                    format!(
                        "{n} tool(s) listed{}",
                        a.server
                            .as_ref()
                            .map(|s| format!(
                                " by {} {} (protocol {})",
                                s.name, s.version, s.protocol_version
                            ))
                            .unwrap_or_default()
                    ),
                    "nothing to fix",
                )
            } else {
                Diagnosis::new(
                    Category::OkZeroTools,
                    format!(
                        "tools/list answered with no tools{}{}",
                        a.prompts
                            .map(|p| format!("; {p} prompt(s)"))
                            .unwrap_or_default(),
                        a.resources
                            .map(|r| format!("; {r} resource(s)"))
                            .unwrap_or_default()
                    ),
                    "the server may add tools once configured (watch for tools/list_changed) or offer only prompts and resources",
                )
            }
        }
        End::SpawnFailed(msg) => Diagnosis::new(
            Category::CrashedOnStart,
            msg.clone(),
            "agent-discover could not start the child guard; check the installation",
        ),
        End::Exited | End::HardTimeout(_) => {
            if a.exit_code == Some(127) && stderr.iter().any(|l| l.contains("cannot start")) {
                return Diagnosis::new(
                    Category::NoEntryPoint,
                    last_meaningful(&stderr).unwrap_or("exit code 127 (command not found)"),
                    "the command does not exist or is not executable",
                );
            }
            from_messages(a, &stderr).unwrap_or_else(|| {
                if a.noise_count > 0 && a.json_lines == 0 {
                    return non_json(a);
                }
                let cause = a.exit.clone().unwrap_or_else(|| "ended".into());
                let line = last_meaningful(&stderr)
                    .or_else(|| a.stdout_noise.last().map(String::as_str))
                    .map(|l| format!("{cause}: {l}"))
                    .unwrap_or(cause);
                Diagnosis::new(
                    Category::CrashedOnStart,
                    line,
                    "the server ended during start-up; the evidence is its last message (often a Node or Python version, a missing native module, or a bug)",
                )
            })
        }
        End::InitTimeout => {
            if a.noise_count > 0 && a.json_lines == 0 {
                return non_json(a);
            }
            if let Some(d) = from_messages(a, &stderr) {
                return d;
            }
            Diagnosis::new(
                Category::InitTimeout,
                format!(
                    "no answer to initialize within the limit{}",
                    last_meaningful(&stderr)
                        .map(|l| format!("; last stderr line: {l}"))
                        .unwrap_or_default()
                ),
                "the server likely connects upstream before answering; give it credentials or a reachable service, or raise the initialize limit",
            )
        }
        End::InitError(msg) => {
            if mentions_version(msg) {
                return Diagnosis::new(
                    Category::ProtocolMismatch,
                    format!("initialize refused: {msg}"),
                    "the server does not speak a protocol version this client offers",
                );
            }
            let mut d = Diagnosis::new(
                Category::InitError,
                format!("initialize refused: {msg}"),
                "the server rejected the handshake; see the message (often missing configuration)",
            );
            d.needs.env = credential_names(&[msg.as_str()]);
            d
        }
        End::InitBroken(msg) => {
            if a.noise_count > 0 && a.json_lines == 0 {
                return non_json(a);
            }
            Diagnosis::new(
                Category::InitError,
                format!("initialize failed: {msg}"),
                "the server's answer to initialize could not be read as MCP",
            )
        }
        End::ProtocolMismatch(msg) => Diagnosis::new(
            Category::ProtocolMismatch,
            msg.clone(),
            "the server speaks a protocol version or message shape this client does not; a newer or older release may fit",
        ),
        End::ListTimeout => Diagnosis::new(
            Category::ToolsListTimeout,
            "initialize answered, but tools/list did not within the limit",
            "the server probably fetches its tool list upstream; give it credentials or a reachable service",
        ),
        End::ListError(msg) => {
            let names = credential_names(&[msg.as_str()]);
            if !names.is_empty() || asks_for_credentials(msg) {
                let mut d = Diagnosis::new(
                    Category::NeedsCredentials,
                    format!("tools/list refused: {msg}"),
                    &credentials_hint(&names),
                );
                d.needs.env = names;
                return d;
            }
            // A server that fetches its tool list upstream (`fetch failed`, `ECONNREFUSED`) needs the network.
            if is_network(msg) {
                return Diagnosis::new(
                    Category::NetworkRequired,
                    format!("tools/list failed: {msg}"),
                    "the server fetches its tool list from a network service; it needs that service reachable (and usually credentials for it)",
                );
            }
            Diagnosis::new(
                Category::ToolsListError,
                format!("tools/list failed: {msg}"),
                "the server answered initialize but failed to list tools; see the message",
            )
        }
        End::ListExited => from_messages(a, &stderr).unwrap_or_else(|| {
            Diagnosis::new(
                Category::ToolsListError,
                format!(
                    "the process ended during tools/list ({}){}",
                    a.exit.clone().unwrap_or_default(),
                    last_meaningful(&stderr)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                ),
                "the server crashed while listing its tools",
            )
        }),
    }
}

fn non_json(a: &Attempt) -> Diagnosis {
    Diagnosis::new(
        Category::NonJsonStdout,
        format!(
            "{} non-JSON line(s) on stdout and no JSON-RPC message; first: {}",
            a.noise_count,
            a.stdout_noise.first().cloned().unwrap_or_default()
        ),
        "the server writes text to stdout instead of speaking MCP there; it may need a `stdio` argument, or it logs to stdout",
    )
}

/// Credentials, usage text, config and network messages, in that order.
fn from_messages(a: &Attempt, stderr: &[&str]) -> Option<Diagnosis> {
    let mut lines: Vec<&str> = stderr.to_vec();
    lines.extend(a.stdout_noise.iter().map(String::as_str));
    // A key asked for as a command-line option (`required option '--api-key <key>'`) next to a usage text is an
    // argument, not a variable: filed under needs_args below.
    let has_usage = lines.iter().any(|l| is_usage(l));
    if let Some(line) = lines
        .iter()
        .find(|l| asks_for_credentials(l) && !(has_usage && l.contains("--")))
    {
        let names = credential_names(&lines);
        let mut d = Diagnosis::new(Category::NeedsCredentials, *line, &credentials_hint(&names));
        d.needs.env = names;
        return Some(d);
    }
    if let Some(i) = lines.iter().position(|l| is_usage(l)) {
        let usage: Vec<&str> = lines[i..].iter().take(3).copied().collect();
        let text = usage.join(" ");
        let mut d = Diagnosis::new(
            Category::NeedsArgs,
            text.clone(),
            "the server wants command-line arguments (see its usage text); pass them as install arguments",
        );
        d.needs.args = usage_args(&text);
        // "Please provide a database URL as a command-line argument": the argument is named in the sentence.
        if d.needs.args.is_empty()
            && let Some(label) = named_argument(&text)
        {
            d.needs.args.push(label);
        }
        // Options whose value must be supplied (a bare flag or `stdio` choice is passed as is, never asked).
        for o in usage_options(&text) {
            if o.metavar.is_some() && o.literal().is_none() && !d.needs.args.contains(&o.name) {
                d.needs.args.push(o.name);
            }
        }
        return Some(d);
    }
    if let Some(line) = lines.iter().find(|l| is_config(l)) {
        return Some(Diagnosis::new(
            Category::NeedsConfig,
            *line,
            "the server looks for a file, path or URL it was not given; provide it (argument or variable) before activating",
        ));
    }
    if let Some(line) = lines.iter().find(|l| is_network(l)) {
        return Some(Diagnosis::new(
            Category::NetworkRequired,
            *line,
            "the server reaches a network service during start-up; it needs that service reachable (or a URL setting pointing at one)",
        ));
    }
    None
}

fn credentials_hint(names: &[String]) -> String {
    if names.is_empty() {
        "the server wants credentials (an API key or token); store them as secrets before activating".into()
    } else {
        format!(
            "set {} (registry set_secret) before activating",
            names.join(", ")
        )
    }
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

const SECRET_WORDS: &[&str] = &[
    "api key",
    "api_key",
    "apikey",
    "api-key",
    "token",
    "secret",
    "credential",
    "password",
    "access key",
    "auth",
    "unauthorized",
    "client id",
    "client_id",
];
const NEED_WORDS: &[&str] = &[
    "required",
    "missing",
    "not set",
    "not provided",
    "not found",
    "must be",
    "must set",
    "please set",
    "please provide",
    "no ",
    "is undefined",
    "invalid",
    "needed",
    "need to",
    "provide",
    "environment variable",
];

/// A message asking for credentials: a secret word together with a need word, or a variable name that looks like
/// a key, with a need word.
pub(crate) fn asks_for_credentials(line: &str) -> bool {
    let l = lower(line);
    let needy = NEED_WORDS.iter().any(|w| l.contains(w));
    needy
        && (SECRET_WORDS.iter().any(|w| l.contains(w))
            || env_like_tokens(line).iter().any(|t| is_secret_name(t)))
}

fn is_secret_name(name: &str) -> bool {
    [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASS",
        "AUTH",
        "CREDENTIAL",
        "PAT",
        "CLIENT_ID",
    ]
    .iter()
    .any(|w| name.split('_').any(|part| part == *w) || name.ends_with(w))
}

/// Tokens shaped like environment variable names: upper case, digits and `_`, with an `_`, 4-64 long.
fn env_like_tokens(line: &str) -> Vec<String> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|t| {
            t.len() >= 4
                && t.len() <= 64
                && t.contains('_')
                && t.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && t.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && !t.ends_with('_')
        })
        .map(str::to_owned)
        .collect()
}

const NOT_VARIABLES: &[&str] = &[
    "ERR_MODULE_NOT_FOUND",
    "MODULE_NOT_FOUND",
    "ERR_INVALID_ARG_TYPE",
    "ERR_REQUIRE_ESM",
];

/// Variable names in lines that ask for something (need words or secret words nearby).
pub(crate) fn credential_names(lines: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in lines {
        let l = lower(line);
        let relevant = NEED_WORDS.iter().any(|w| l.contains(w))
            || l.contains("environment")
            || l.contains("env ")
            || l.contains("set ");
        if !relevant {
            continue;
        }
        for t in env_like_tokens(line) {
            if !NOT_VARIABLES.contains(&t.as_str()) && !t.starts_with("ERR_") && !out.contains(&t) {
                out.push(t);
            }
        }
    }
    out
}

fn is_usage(line: &str) -> bool {
    let l = lower(line.trim());
    l.starts_with("usage:")
        || l.contains("the following arguments are required")
        || l.contains("missing required argument")
        || l.contains("required arguments are missing")
        || l.contains("not enough non-option arguments")
        || l.contains("required argument is missing")
        || l.contains("missing required positional")
        || l.contains("error: required option")
        || (l.contains("at least one") && (l.contains("directory") || l.contains("argument")))
        || l.contains("as a command-line argument")
        || l.contains("as a command line argument")
        || l.contains("need to specify a command")
        || l.contains("--help` to see")
        || l.contains("--help' to see")
        || l.contains("--help to see")
        || l.contains("unknown command")
}

/// An option a usage text requires (outside `[...]`): `--stdio` (no value), `--transport <stdio|sse>` (the literal
/// `stdio` when a choice names it), `--api-key <key>` (a value to fill).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OptionNeed {
    pub name: String,
    /// `None`: a bare flag.
    pub metavar: Option<String>,
}

impl OptionNeed {
    /// The value to pass when it is not a placeholder: `stdio` for a transport-like choice that names it.
    pub fn literal(&self) -> Option<&'static str> {
        let m = lower(self.metavar.as_deref()?);
        (m.contains("stdio") && (m.contains('|') || m.contains(',') || m == "stdio"))
            .then_some("stdio")
    }
}

/// Options that never make a server start (help, version, verbosity).
const IDLE_OPTIONS: &[&str] = &[
    "--help",
    "--version",
    "--verbose",
    "--debug",
    "--quiet",
    "--log-level",
];

/// The required options of a usage text (see [`OptionNeed`]); options inside `[...]` are optional and skipped.
pub(crate) fn usage_options(text: &str) -> Vec<OptionNeed> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut out: Vec<OptionNeed> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < tokens.len() {
        let raw = tokens[i];
        let opening = raw.chars().take_while(|c| *c == '[').count() as i32;
        depth += opening;
        let t = raw.trim_matches(|c: char| {
            matches!(
                c,
                '[' | ']' | '\'' | '"' | '`' | ',' | ';' | ':' | '(' | ')'
            )
        });
        let closing = raw
            .chars()
            .rev()
            .take_while(|c| matches!(c, ']' | ',' | '\'' | '"' | '`' | ')'))
            .filter(|c| *c == ']')
            .count() as i32;
        i += 1;
        if t.starts_with("--") && t.len() > 2 && depth == 0 {
            let (name, inline) = match t.split_once('=') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (t.to_owned(), None),
            };
            let valid = name[2..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            let metavar = inline.or_else(|| {
                let next = tokens.get(i)?;
                let n = next.trim_matches(|c: char| matches!(c, '\'' | '"' | '`' | ',' | ';'));
                let is_meta = (n.starts_with('<') && n.ends_with('>'))
                    || (n.starts_with('{') && n.ends_with('}'))
                    || (n.len() > 1 && n.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
                is_meta.then(|| {
                    i += 1;
                    n.trim_matches(|c| matches!(c, '<' | '>' | '{' | '}'))
                        .to_owned()
                })
            });
            if valid
                && !IDLE_OPTIONS.contains(&name.as_str())
                && !out.iter().any(|o| o.name == name)
            {
                out.push(OptionNeed { name, metavar });
            }
        }
        depth = (depth - closing).max(0);
    }
    out
}

/// Positional argument labels of a usage text: `<name>` first, else `[name]`; the program name and the values of
/// options (`--api-key <key>`) are skipped.
pub(crate) fn usage_args(text: &str) -> Vec<String> {
    // Drop every `--option <value>` pair first, so an option's value is not taken for a positional argument.
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i].trim_start_matches(['[', '\'', '"', '`']);
        if t.starts_with('-') {
            if !t.ends_with(']')
                && tokens
                    .get(i + 1)
                    .is_some_and(|n| n.starts_with('<') || n.starts_with('{'))
            {
                i += 1;
            }
        } else {
            kept.push(tokens[i]);
        }
        i += 1;
    }
    let cleaned = kept.join(" ");
    let text = cleaned.as_str();
    let grab = |open: char, close: char| -> Vec<String> {
        let mut out = Vec::new();
        let mut rest = text;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else { break };
            let inner = after[..j].trim().trim_end_matches("...").trim();
            if !inner.is_empty()
                && !inner.starts_with('-')
                && inner.len() <= 40
                && !inner.contains(' ')
                && !lower(inner).contains("option")
                && !out.iter().any(|o: &String| o == inner)
            {
                out.push(inner.to_owned());
            }
            rest = &after[j..];
        }
        out
    };
    let angle = grab('<', '>');
    if !angle.is_empty() {
        return angle;
    }
    grab('[', ']').into_iter().take(1).collect()
}

/// The argument a sentence asks for: "provide a database URL as a command-line argument" -> `database-url`.
fn named_argument(text: &str) -> Option<String> {
    let l = lower(text);
    let end = l.find(" as a command")?;
    let start = l[..end].rfind("provide ")? + "provide ".len();
    let words: Vec<&str> = l[start..end]
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect();
    (!words.is_empty() && words.len() <= 4).then(|| words.join("-"))
}

fn is_config(line: &str) -> bool {
    let l = lower(line);
    ((l.contains("config") || l.contains("configuration"))
        && (l.contains("cannot find") || l.contains("could not find")))
        || (l.contains("enoent")
            || l.contains("no such file or directory")
            || l.contains("filenotfounderror"))
        || ((l.contains("config") || l.contains("configuration") || l.contains("settings"))
            && (l.contains("not found")
                || l.contains("missing")
                || l.contains("required")
                || l.contains("does not exist")
                || l.contains("could not")))
        || l.contains("invalid url")
        || l.contains("must be a valid url")
        || l.contains("is not a directory")
        || (l.contains("path") && (l.contains("does not exist") || l.contains("required")))
}

const NETWORK: &[&str] = &[
    "enotfound",
    "eai_again",
    "econnrefused",
    "etimedout",
    "econnreset",
    "ehostunreach",
    "enetunreach",
    "getaddrinfo",
    "fetch failed",
    "connection refused",
    "name or service not known",
    "temporary failure in name resolution",
    "network is unreachable",
    "failed to establish a new connection",
    "connecterror",
    "connection error",
    "could not connect",
    "unable to connect",
];

fn is_network(line: &str) -> bool {
    let l = lower(line);
    NETWORK.iter().any(|w| l.contains(w))
}

fn mentions_version(msg: &str) -> bool {
    let l = lower(msg);
    l.contains("protocol version")
        || l.contains("protocolversion")
        || l.contains("unsupported version")
}

/// The last stderr line worth showing (not blank, not a stack frame).
fn last_meaningful<'a>(lines: &[&'a str]) -> Option<&'a str> {
    lines.iter().rev().map(|l| l.trim()).find(|l| {
        !l.is_empty()
            && !l.starts_with("at ")
            && !l.starts_with("File \"")
            && !l.starts_with('^')
            && !l.starts_with("Node.js v")
            && !l.starts_with('}')
            && *l != "{"
    })
}

/// Whether `version` (e.g. `20.20.2`) satisfies an npm range (`>=18`, `^20.1`, `18 || 20`, `>=18 <21`, `20.x`).
/// Ranges it cannot read count as satisfied (the check only adds a flag).
pub(crate) fn version_satisfies(version: &str, range: &str) -> bool {
    let parse = |s: &str| -> Option<[u64; 3]> {
        let s = s.trim().trim_start_matches('v');
        let mut parts = s.split('.').map(|p| {
            if p == "x" || p == "*" || p == "X" {
                Some(0)
            } else {
                p.split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<u64>()
                    .ok()
            }
        });
        let a = parts.next()??;
        let b = parts.next().flatten().unwrap_or(0);
        let c = parts.next().flatten().unwrap_or(0);
        Some([a, b, c])
    };
    let Some(v) = parse(version) else { return true };
    range.split("||").any(|alt| {
        let alt = alt.trim();
        if alt.is_empty() || alt == "*" || alt == "x" {
            return true;
        }
        alt.split_whitespace().all(|cmp| {
            let (op, rest) = if let Some(r) = cmp.strip_prefix(">=") {
                (">=", r)
            } else if let Some(r) = cmp.strip_prefix("<=") {
                ("<=", r)
            } else if let Some(r) = cmp.strip_prefix('>') {
                (">", r)
            } else if let Some(r) = cmp.strip_prefix('<') {
                ("<", r)
            } else if let Some(r) = cmp.strip_prefix('^') {
                ("^", r)
            } else if let Some(r) = cmp.strip_prefix('~') {
                ("~", r)
            } else if let Some(r) = cmp.strip_prefix('=') {
                ("=", r)
            } else {
                ("=", cmp)
            };
            let Some(want) = parse(rest) else { return true };
            let wildcard = rest.contains('x') || rest.contains('*') || rest.split('.').count() < 3;
            match op {
                ">=" => v >= want,
                "<=" => v <= want,
                ">" => v > want,
                "<" => v < want,
                "^" => v >= want && v[0] == want[0],
                "~" => v >= want && v[0] == want[0] && v[1] == want[1],
                _ if wildcard => {
                    let n = rest
                        .split('.')
                        .filter(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
                        .count();
                    v[..n.min(3)] == want[..n.min(3)]
                }
                _ => v == want,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_and_config_messages_of_real_servers() {
        assert!(is_usage(
            "Please provide a database URL as a command-line argument"
        ));
        assert!(is_usage("You need to specify a command"));
        assert!(is_usage(
            "Not enough non-option arguments: got 0, need at least 1"
        ));
        assert_eq!(
            named_argument("Please provide a database URL as a command-line argument").as_deref(),
            Some("database-url")
        );
        assert!(is_usage(
            "Error: The following required arguments are missing:"
        ));
        assert!(is_usage("(Run `mcp-use --help` to see available commands)"));
        assert!(!is_usage("Server running on stdio"));
        assert!(is_config(
            "Cannot find config file `panda.config.{ts,js,mjs,mts}`. Did you forget to run `panda init`?"
        ));
        assert!(!is_config(
            "TypeError: Cannot read properties of undefined (reading 'bind')"
        ));
    }

    #[test]
    fn credential_messages() {
        assert!(asks_for_credentials(
            "Error: API key required: set FIXTURE_API_KEY"
        ));
        assert!(asks_for_credentials(
            "GITHUB_PERSONAL_ACCESS_TOKEN environment variable is not set"
        ));
        assert!(asks_for_credentials("Missing BRAVE_API_KEY"));
        assert!(!asks_for_credentials("Server running on stdio"));
        assert!(!asks_for_credentials(
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'x'"
        ));
        assert_eq!(
            credential_names(&[
                "Error: API key required: set FIXTURE_API_KEY",
                "Missing SLACK_BOT_TOKEN and SLACK_TEAM_ID"
            ]),
            vec!["FIXTURE_API_KEY", "SLACK_BOT_TOKEN", "SLACK_TEAM_ID"]
        );
        assert!(credential_names(&["Error [ERR_MODULE_NOT_FOUND]: not found"]).is_empty());
    }

    #[test]
    fn usage_text() {
        assert!(is_usage(
            "Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]"
        ));
        assert_eq!(
            usage_args(
                "Usage: mcp-server-filesystem [allowed-directory] [additional-directories...]"
            ),
            vec!["allowed-directory"]
        );
        assert_eq!(
            usage_args("usage: server <root> <db-path> [--verbose]"),
            vec!["root", "db-path"]
        );
        assert!(is_usage(
            "server.py: error: the following arguments are required: --db"
        ));
    }

    #[test]
    fn usage_options_of_real_shapes() {
        let text = "Usage: srv --stdio --api-key <key> --transport <stdio|sse> --root DIR [--port <n>] [--verbose] <db>";
        let opts = usage_options(text);
        let names: Vec<&str> = opts.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["--stdio", "--api-key", "--transport", "--root"]);
        assert_eq!(opts[0].metavar, None);
        assert_eq!(opts[1].metavar.as_deref(), Some("key"));
        assert_eq!(opts[1].literal(), None);
        assert_eq!(opts[2].literal(), Some("stdio"));
        assert_eq!(opts[3].metavar.as_deref(), Some("DIR"));
        assert_eq!(
            usage_args(text),
            vec!["db"],
            "option values are not positional arguments"
        );
        // commander's message
        let c = usage_options("error: required option '--api-key <key>' not specified");
        assert_eq!(
            c,
            [OptionNeed {
                name: "--api-key".into(),
                metavar: Some("key".into())
            }]
        );
        assert!(usage_options("Usage: x [options] [--help]").is_empty());
    }

    #[test]
    fn other_messages() {
        assert!(is_network("Error: getaddrinfo ENOTFOUND api.example.com"));
        assert!(is_network("TypeError: fetch failed"));
        assert!(is_config(
            "Error: ENOENT: no such file or directory, open '/x/config.json'"
        ));
        assert!(is_config("Config file not found at ~/.foo.json"));
        assert!(!is_config("Server started"));
    }

    #[test]
    fn a_tools_list_error_that_is_a_network_failure() {
        let mut a = crate::probe::Attempt::new();
        a.end = crate::probe::End::ListError("fetch failed (code -32603)".into());
        assert_eq!(diagnose(&a).category, Category::NetworkRequired);
        a.end = crate::probe::End::ListError("cannot read properties of undefined".into());
        assert_eq!(diagnose(&a).category, Category::ToolsListError);
    }

    #[test]
    fn engines() {
        assert!(version_satisfies("20.20.2", ">=18"));
        assert!(!version_satisfies("20.20.2", ">=22"));
        assert!(version_satisfies("20.20.2", "^20.1.0"));
        assert!(!version_satisfies("20.20.2", "^18"));
        assert!(version_satisfies("20.20.2", "18 || 20"));
        assert!(version_satisfies("20.20.2", ">=18 <21"));
        assert!(!version_satisfies("20.20.2", ">=18.0.0 <20"));
        assert!(version_satisfies("20.20.2", "20.x"));
        assert!(version_satisfies("20.20.2", "what"));
    }
}
