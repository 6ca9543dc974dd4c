//! The second pass: what a failed server was found to need (server.json variables and arguments, variable names in
//! its messages, the `env` of client-config examples in its README, the arguments of its usage text), and placeholder
//! values for them. For a server that failed for want of arguments, its `--help` (see `help`) adds the
//! required positional arguments, required options, the subcommand that starts it and its stdio switch. Placeholders are never real secrets: paths point into the attempt's scratch directory and URLs at
//! a loopback port nothing listens on.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::category::{Category, Diagnosis};
use crate::help::HelpNeeds;
use crate::messages::{OptionNeed, credential_names, usage_options};
use crate::probe::Attempt;
use crate::targets::Target;
use crate::types::{Installed, Needs};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Env,
    Arg,
    /// The subcommand that starts the server (`serve`, `stdio`), read from its `--help`; passed first, as is.
    Subcommand,
}

/// One value filled in for the second pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placeholder {
    pub kind: Kind,
    /// The variable name, or the argument's label.
    pub name: String,
    pub value: String,
    /// Where the need was found: `server.json`, `stderr`, `readme`, `usage`.
    pub source: String,
}

impl Placeholder {
    /// Its command-line words: `--opt value`, a bare `--flag`, or a positional value; none for a variable.
    pub fn argv(&self) -> Vec<String> {
        match self.kind {
            Kind::Env => Vec::new(),
            Kind::Arg if self.name.starts_with("--") => std::iter::once(self.name.clone())
                .chain((!self.value.is_empty()).then(|| self.value.clone()))
                .collect(),
            Kind::Arg => vec![self.value.clone()],
            // A subcommand may be two words (`server start`).
            Kind::Subcommand => self.value.split_whitespace().map(str::to_owned).collect(),
        }
    }

    /// An option passed as is, never asked of the user: a bare flag (`--stdio`) or the `stdio` choice of a
    /// transport-like option.
    pub fn is_literal(&self) -> bool {
        self.kind == Kind::Subcommand
            || (self.kind == Kind::Arg
                && self.name.starts_with("--")
                && (self.value.is_empty() || self.value == "stdio"))
    }
}

pub(crate) struct Plan {
    pub placeholders: Vec<Placeholder>,
    pub needs: Needs,
}

/// Gathers the needs of a failed attempt and chooses placeholder values for them.
pub(crate) fn plan(
    target: &Target,
    installed: &Installed,
    attempt: &Attempt,
    diagnosis: &Diagnosis,
    help: Option<&HelpNeeds>,
    scratch: &Path,
) -> Plan {
    let mut env: Vec<(String, &'static str)> = Vec::new();
    // Concrete values of a README's examples (`"MAX_TOKENS": "10000"`), used instead of a generated placeholder.
    let mut example: Vec<(String, String)> = Vec::new();
    let push_env = |name: &str, source: &'static str, env: &mut Vec<(String, &'static str)>| {
        // Variables of the runtime itself (a README's `"NODE_OPTIONS": "--max-old-space-size=..."`) are not the
        // server's settings: a placeholder there would break the runtime.
        const RUNTIME: &[&str] = &[
            "NODE_OPTIONS",
            "NODE_PATH",
            "PATH",
            "HOME",
            "PYTHONPATH",
            "PYTHONHOME",
        ];
        if !env.iter().any(|(n, _)| n == name)
            && !target.env.contains_key(name)
            && !RUNTIME.contains(&name)
        {
            env.push((name.to_owned(), source));
        }
    };
    for v in &target.declared_env {
        push_env(&v.name, "server.json", &mut env);
    }
    let mut lines: Vec<&str> = attempt.stderr.iter().map(String::as_str).collect();
    lines.extend(attempt.stdout_noise.iter().map(String::as_str));
    for n in diagnosis
        .needs
        .env
        .iter()
        .chain(credential_names(&lines).iter())
    {
        push_env(n, "stderr", &mut env);
    }
    if let Some(readme) = &installed.readme {
        for (n, v) in readme_env(readme) {
            push_env(&n, "readme", &mut env);
            if let Some(v) = v.filter(|v| usable_example(&n, v))
                && !example.iter().any(|(x, _)| *x == n)
            {
                example.push((n, v));
            }
        }
    }
    // A server that asked for a credential without naming it: the secret-like variables its entry script reads.
    if env.is_empty() && diagnosis.category == Category::NeedsCredentials {
        for n in source_secrets(Path::new(&installed.launch)) {
            push_env(&n, "source", &mut env);
        }
    }
    let mut args: Vec<(String, &'static str)> = Vec::new();
    for a in &target.declared_args {
        args.push((a.clone(), "server.json"));
    }
    if args.is_empty() {
        // A `[command]` slot is a subcommand (from the help, below), never a path.
        let command_word = |a: &str| {
            matches!(
                a.to_ascii_lowercase().as_str(),
                "command" | "cmd" | "subcommand" | "commands"
            )
        };
        for a in diagnosis
            .needs
            .args
            .iter()
            .filter(|a| !a.starts_with('-') && !command_word(a))
        {
            args.push((a.clone(), "usage"));
        }
    }
    // The help's required positional arguments when nothing else named any.
    if args.is_empty()
        && let Some(h) = help
    {
        args.extend(h.positionals.iter().map(|a| (a.clone(), "help")));
    }
    let dir = scratch.join("placeholders");
    let _ = std::fs::create_dir_all(&dir);
    let port = unused_port();
    // Options: the required ones of the usage text, else the `--stdio`-style words of the README's client configs
    // when the server failed the way a server missing its stdio switch does.
    let mut options: Vec<(OptionNeed, &'static str)> = Vec::new();
    if diagnosis.category == Category::NeedsArgs {
        options.extend(
            usage_options(&diagnosis.evidence)
                .into_iter()
                .map(|o| (o, "usage")),
        );
    }
    if options.is_empty()
        && matches!(
            diagnosis.category,
            Category::NeedsArgs | Category::NonJsonStdout | Category::InitTimeout
        )
        && let Some(readme) = &installed.readme
    {
        options.extend(readme_options(readme).into_iter().map(|o| (o, "readme")));
    }
    if let Some(h) = help {
        for o in &h.options {
            if !options.iter().any(|(x, _)| x.name == o.name) {
                options.push((o.clone(), "help"));
            }
        }
        // A server that did not find its configuration file gets one through the option that names it.
        if let Some(c) = &h.config_option
            && diagnosis.category == Category::NeedsConfig
            && !options.iter().any(|(x, _)| x.name == c.name)
        {
            options.push((c.clone(), "help"));
        }
        // A stdio switch matters to a server that did not speak MCP on stdio, or that wants arguments anyway.
        if let Some(s) = &h.stdio_switch
            && matches!(
                diagnosis.category,
                Category::NeedsArgs | Category::NonJsonStdout | Category::InitTimeout
            )
            && !options.iter().any(|(x, _)| x.name == s.name)
        {
            options.push((s.clone(), "help"));
        }
    }
    options.retain(|(o, _)| !target.args.contains(&o.name));
    let mut placeholders = Vec::new();
    if let Some(cmd) = help.and_then(|h| h.subcommand.as_ref())
        && !target.args.contains(cmd)
    {
        placeholders.push(Placeholder {
            kind: Kind::Subcommand,
            name: "command".into(),
            value: cmd.clone(),
            source: "help".into(),
        });
    }
    for (name, source) in &env {
        let value = example
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| env_value(name, &dir, port));
        placeholders.push(Placeholder {
            kind: Kind::Env,
            name: name.clone(),
            value,
            source: (*source).to_owned(),
        });
    }
    for (name, source) in &args {
        placeholders.push(Placeholder {
            kind: Kind::Arg,
            name: name.clone(),
            value: arg_value(name, &dir, port),
            source: (*source).to_owned(),
        });
    }
    for (o, source) in &options {
        let value = match (&o.metavar, o.literal()) {
            (None, _) => String::new(),
            (Some(_), Some(lit)) => lit.to_owned(),
            (Some(m), None) => {
                let label = format!("{}_{m}", o.name.trim_start_matches('-'))
                    .replace(['-', ' ', '|'], "_")
                    .to_ascii_uppercase();
                env_value(&label, &dir, port)
            }
        };
        placeholders.push(Placeholder {
            kind: Kind::Arg,
            name: o.name.clone(),
            value,
            source: (*source).to_owned(),
        });
    }
    let mut needed_args: Vec<String> = args.iter().map(|(n, _)| n.clone()).collect();
    for p in &placeholders {
        if p.kind == Kind::Arg
            && p.name.starts_with("--")
            && !p.is_literal()
            && !needed_args.contains(&p.name)
        {
            needed_args.push(p.name.clone());
        }
    }
    Plan {
        needs: Needs {
            env: env.iter().map(|(n, _)| n.clone()).collect(),
            args: needed_args,
        },
        placeholders,
    }
}

/// A loopback port nothing listens on (bound, read, released).
pub(crate) fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(9)
}

fn has(name: &str, words: &[&str]) -> bool {
    let upper = name.to_ascii_uppercase();
    words
        .iter()
        .any(|w| upper.split(['_', '-']).any(|p| p == *w))
}

/// Secret-like variable names (`..._API_TOKEN`, `..._KEY`, `..._SECRET`) that a Node entry point's folder reads
/// through `process.env.NAME` or `process.env["NAME"]`: the launched file (a `node_modules/.bin` link is followed) and
/// its sibling scripts, bounded in count and size. Empty for anything that is not JavaScript.
pub(crate) fn source_secrets(launch: &Path) -> Vec<String> {
    const SECRET: &[&str] = &["KEY", "TOKEN", "TKN", "SECRET", "PASSWORD", "PAT", "APIKEY"];
    let Ok(entry) = std::fs::canonicalize(launch) else {
        return Vec::new();
    };
    let script = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "js" | "mjs" | "cjs"))
    };
    let node_shebang = std::fs::read(&entry).ok().is_some_and(|b| {
        b.starts_with(b"#!")
            && b.iter()
                .take(80)
                .copied()
                .collect::<Vec<_>>()
                .windows(4)
                .any(|w| w == b"node")
    });
    if !script(&entry) && !node_shebang {
        return Vec::new();
    }
    let mut files = vec![entry.clone()];
    if let Some(dir) = entry.parent()
        && let Ok(rd) = std::fs::read_dir(dir)
    {
        let mut siblings: Vec<_> = rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| *p != entry && script(p))
            .collect();
        siblings.sort();
        files.extend(siblings.into_iter().take(40));
    }
    let mut out: Vec<String> = Vec::new();
    let mut budget: u64 = 8 << 20;
    for f in files {
        let size = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(u64::MAX);
        if size > budget.min(2 << 20) {
            continue;
        }
        budget -= size;
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let mut rest = text.as_str();
        while let Some(i) = rest.find("process.env") {
            rest = &rest[i + "process.env".len()..];
            let name = rest
                .strip_prefix('.')
                .or_else(|| rest.strip_prefix("[\"").or_else(|| rest.strip_prefix("['")))
                .map(|r| {
                    r.chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect::<String>()
                })
                .unwrap_or_default();
            if name.len() > 2
                && name.contains('_')
                && has(&name, SECRET)
                && !out.contains(&name)
                && out.len() < 6
            {
                out.push(name);
            }
        }
    }
    out
}

/// An OpenAPI document with no operations.
const MINIMAL_OPENAPI: &str = r#"{"openapi": "3.0.0", "info": {"title": "placeholder", "version": "0.0.0"}, "paths": {}}
"#;

/// A placeholder for a variable, by what its name says it holds.
pub(crate) fn env_value(name: &str, dir: &Path, port: u16) -> String {
    if has(name, &["PORT"]) && !has(name, &["URL", "URI"]) {
        return port.to_string();
    }
    // Numeric settings (`MAX_TOKENS`, `MCP_SERVER_REQUEST_TIMEOUT`): a number passes their checks, a word does not.
    if has(
        name,
        &[
            "MAX",
            "MIN",
            "TIMEOUT",
            "LIMIT",
            "RETRIES",
            "TTL",
            "INTERVAL",
            "CONCURRENCY",
            "SIZE",
        ],
    ) && !has(name, &["URL", "URI"])
    {
        return "60".into();
    }
    if has(
        name,
        &[
            "URL", "URI", "ENDPOINT", "HOST", "BASE", "SERVER", "ADDRESS",
        ],
    ) {
        if has(name, &["HOST"]) && !has(name, &["URL", "URI"]) {
            return "127.0.0.1".into();
        }
        return format!("http://127.0.0.1:{port}");
    }
    // An API description the server loads at start: a minimal valid document (JSON is also YAML).
    if has(name, &["OPENAPI", "SWAGGER", "SPEC"]) {
        let f = dir.join(format!("{}.json", name.to_ascii_lowercase()));
        let _ = std::fs::write(&f, MINIMAL_OPENAPI);
        return f.display().to_string();
    }
    // A credentials or OAuth keys variable: an OAuth client key file.
    if let Some(f) =
        crate::retry::key_file(name, dir).or_else(|| crate::retry::kept_file(name, dir))
    {
        return f;
    }
    if has(name, &["FILE", "CONFIG", "JSON"]) {
        let f = dir.join(format!("{}.json", name.to_ascii_lowercase()));
        let _ = std::fs::write(&f, "{}\n");
        return f.display().to_string();
    }
    if has(
        name,
        &[
            "PATH",
            "DIR",
            "DIRECTORY",
            "FOLDER",
            "ROOT",
            "HOME",
            "WORKSPACE",
            "DIRS",
            "DIRECTORIES",
            "FOLDERS",
            "ROOTS",
        ],
    ) {
        let d = dir.join(name.to_ascii_lowercase());
        let _ = std::fs::create_dir_all(&d);
        return d.display().to_string();
    }
    if has(name, &["EMAIL", "MAIL"]) {
        return "placeholder@example.invalid".into();
    }
    if has(name, &["DEBUG", "VERBOSE"]) {
        return "false".into();
    }
    if has(name, &["LEVEL"]) {
        return "info".into();
    }
    format!(
        "placeholder-{}",
        name.to_ascii_lowercase().replace('_', "-")
    )
}

/// A placeholder for a positional argument: a loopback URL for URL-ish labels, else a fresh directory (most MCP
/// servers that take a positional argument take a root directory or a file path).
fn arg_value(label: &str, dir: &Path, port: u16) -> String {
    let l = label.to_ascii_lowercase();
    if l.contains("url") || l.contains("uri") || l.contains("endpoint") {
        return format!("http://127.0.0.1:{port}");
    }
    if l.contains("file") || l.contains(".json") || l.contains("db") || l.contains("database") {
        let f = dir.join(format!("arg-{}", sanitize(label)));
        // A configuration file is read as JSON (or YAML, of which `{}` is also a document); a database file stays
        // empty (SQLite opens an empty file as a new database).
        let config = l.contains("config") || l.contains("json") || l.contains("settings");
        let _ = std::fs::write(&f, if config { "{}\n" } else { "" });
        return f.display().to_string();
    }
    let d = dir.join(format!("arg-{}", sanitize(label)));
    let _ = std::fs::create_dir_all(&d);
    d.display().to_string()
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect()
}

/// The stdio switches in the `"args": [ ... ]` arrays of a README's client-config examples: a bare `--stdio`, or a
/// transport-like option followed by `stdio` (`--transport stdio`).
pub(crate) fn readme_options(readme: &str) -> Vec<OptionNeed> {
    let mut out: Vec<OptionNeed> = Vec::new();
    let mut rest = readme;
    while let Some(i) = rest.find("\"args\"") {
        rest = &rest[i + 6..];
        let Some(body) = rest.trim_start().strip_prefix(':').map(str::trim_start) else {
            continue;
        };
        let Some(body) = body.strip_prefix('[') else {
            continue;
        };
        let Some(end) = body.find(']') else { break };
        let items: Vec<&str> = body[..end]
            .split(',')
            .map(|x| x.trim().trim_matches('"'))
            .collect();
        for (k, item) in items.iter().enumerate() {
            let next = items.get(k + 1).copied().unwrap_or_default();
            let need = if *item == "--stdio" {
                Some(OptionNeed {
                    name: (*item).to_owned(),
                    metavar: None,
                })
            } else if item.starts_with("--") && next == "stdio" {
                Some(OptionNeed {
                    name: (*item).to_owned(),
                    metavar: Some("stdio".into()),
                })
            } else if let Some((n, "stdio")) =
                item.split_once('=').filter(|(n, _)| n.starts_with("--"))
            {
                Some(OptionNeed {
                    name: n.to_owned(),
                    metavar: Some("stdio".into()),
                })
            } else {
                None
            };
            if let Some(n) = need
                && !out.iter().any(|o| o.name == n.name)
            {
                out.push(n);
            }
        }
        rest = &body[end..];
    }
    out
}

/// Whether a README example's value for a variable can be used as is: a concrete setting (`10000`, `100/1h`,
/// `space,project`), not something the user is told to fill in (`your-api-key`, `<token>`, `sk-...`), not a secret
/// by the variable's name, and not an address or a path (those get a loopback or scratch placeholder).
fn usable_example(name: &str, value: &str) -> bool {
    const SECRET: &[&str] = &[
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASS",
        "PWD",
        "AUTH",
        "CREDENTIAL",
        "CREDENTIALS",
        "COOKIE",
        "SESSION",
        "PAT",
        "APIKEY",
    ];
    const FILL_IN: &[&str] = &[
        "your",
        "<",
        ">",
        "xxx",
        "...",
        "…",
        "here",
        "replace",
        "placeholder",
        "change",
        "example",
        "$",
        "{",
        "insert",
        "enter",
        "todo",
        "my-",
        "my_",
    ];
    let lower = value.to_ascii_lowercase();
    let address = lower.contains("://")
        || value.starts_with(['/', '~', '.', '\\'])
        || value.contains(['@', '\\', ' '])
        || (value.contains('.') && value.chars().any(|c| c.is_ascii_alphabetic()))
        || has(
            name,
            &[
                "URL", "URI", "ENDPOINT", "HOST", "SERVER", "ADDRESS", "DOMAIN", "PATH", "DIR",
                "FILE",
            ],
        );
    !value.is_empty()
        && value.len() <= 100
        && !has(name, SECRET)
        && !address
        && !FILL_IN.iter().any(|w| lower.contains(w))
}

/// Variables in the `"env": { ... }` objects of a README's client-config examples, with the example's value when it
/// is a string, number or boolean.
pub(crate) fn readme_env(readme: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(i) = rest.find("\"env\"") {
        rest = &rest[i + 5..];
        let after = rest.trim_start();
        let Some(obj) = after.strip_prefix(':').map(str::trim_start) else {
            continue;
        };
        let Some(body) = obj.strip_prefix('{') else {
            continue;
        };
        let Some(end) = body.find('}') else { break };
        // Keys are the quoted strings followed by a colon.
        let inner = &body[..end];
        let mut s = inner;
        while let Some(q) = s.find('"') {
            let tail = &s[q + 1..];
            let Some(close) = tail.find('"') else { break };
            let key = &tail[..close];
            let after_key = tail[close + 1..].trim_start();
            let is_key = after_key.starts_with(':')
                && !key.is_empty()
                && key.len() <= 64
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            s = &tail[close + 1..];
            // The value: a string (skipped over), or a bare number or boolean.
            let mut value = None;
            if let Some(v) = s.trim_start().strip_prefix(':') {
                let v = v.trim_start();
                if let Some(vs) = v.strip_prefix('"') {
                    let end = vs.find('"');
                    value = end.map(|j| vs[..j].to_owned());
                    s = end.map(|j| &vs[j + 1..]).unwrap_or("");
                } else {
                    let end = v.find([',', '\n', '}']).unwrap_or(v.len());
                    let bare = v[..end].trim();
                    if !bare.is_empty()
                        && bare
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
                    {
                        value = Some(bare.to_owned());
                    }
                    s = v;
                }
            }
            if is_key && !out.iter().any(|(o, _)| o == key) {
                out.push((key.to_owned(), value));
            }
        }
        rest = &body[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readme_examples() {
        let readme = r#"
Add to claude_desktop_config.json:
```json
{ "mcpServers": { "brave": { "command": "npx", "args": ["-y", "x"],
    "env": { "BRAVE_API_KEY": "YOUR_KEY_HERE", "BRAVE_REGION": "us" } } } }
```
Or "env": {"OTHER_TOKEN": "<token>"} and "env":{} and "envelope": 1
"#;
        let env = readme_env(readme);
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["BRAVE_API_KEY", "BRAVE_REGION", "OTHER_TOKEN"]);
        assert_eq!(env[1].1.as_deref(), Some("us"));
    }

    #[test]
    fn readme_example_values_are_used_when_concrete() {
        // Optional settings shown with concrete values keep them (a placeholder would fail their format checks);
        // values the user is told to fill in, secrets, addresses and paths get generated placeholders.
        let readme = r#""env": { "SVC_API_KEY": "your-api-key", "SVC_DOMAIN": "your-domain.example.com",
            "MAX_TOKENS": "10000", "RATE_LIMIT": "100/1h", "ENABLE_TOOLSETS": "space,project",
            "OPTIMIZE": 1, "DEBUG": true, "SVC_TOKEN": "abc123", "SVC_URL": "https://api.svc.io",
            "DATA_DIR": "/Users/me/data", "MODE": "<mode>" }"#;
        let env = readme_env(readme);
        let usable: Vec<(&str, &str)> = env
            .iter()
            .filter_map(|(n, v)| {
                v.as_deref()
                    .filter(|v| usable_example(n, v))
                    .map(|v| (n.as_str(), v))
            })
            .collect();
        assert_eq!(
            usable,
            vec![
                ("MAX_TOKENS", "10000"),
                ("RATE_LIMIT", "100/1h"),
                ("ENABLE_TOOLSETS", "space,project"),
                ("OPTIMIZE", "1"),
                ("DEBUG", "true"),
            ]
        );
    }

    #[test]
    fn readme_stdio_switches() {
        let readme = r#"{"command": "npx", "args": ["-y", "pkg", "--transport", "stdio"]}
        and "args": ["pkg", "--stdio", "--port", "3000"] and "args": ["x", "--mode=stdio"]"#;
        let o = readme_options(readme);
        let names: Vec<&str> = o.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["--transport", "--stdio", "--mode"]);
        assert_eq!(o[0].literal(), Some("stdio"));
        assert_eq!(o[1].metavar, None);
    }

    #[test]
    fn secrets_read_by_the_entry_script() {
        let dir = tempfile::tempdir().unwrap();
        let dist = dir.path().join("dist");
        std::fs::create_dir_all(&dist).unwrap();
        std::fs::write(
            dist.join("server.js"),
            "#!/usr/bin/env node\nlet t = process.env.SVC_API_TKN || process.env[\"SVC_API_TOKEN\"];\nconst ro = process.env.SVC_READONLY; const h = process.env.HOME;\n",
        )
        .unwrap();
        std::fs::write(
            dist.join("client.mjs"),
            "const k = process.env['OTHER_SECRET'];",
        )
        .unwrap();
        std::fs::write(dist.join("notes.txt"), "process.env.NOT_A_SCRIPT_KEY").unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(dist.join("server.js"), bin.join("svc")).unwrap();
        assert_eq!(
            source_secrets(&bin.join("svc")),
            ["SVC_API_TKN", "SVC_API_TOKEN", "OTHER_SECRET"]
        );
        std::fs::write(
            dir.path().join("tool"),
            "#!/bin/sh\necho process.env.X_API_KEY\n",
        )
        .unwrap();
        assert!(
            source_secrets(&dir.path().join("tool")).is_empty(),
            "not JavaScript"
        );
    }

    #[test]
    fn values() {
        let dir = tempfile::tempdir().unwrap();
        let port = 4321;
        assert_eq!(
            env_value("API_BASE_URL", dir.path(), port),
            "http://127.0.0.1:4321"
        );
        assert_eq!(env_value("DB_HOST", dir.path(), port), "127.0.0.1");
        assert_eq!(env_value("SERVER_PORT", dir.path(), port), "4321");
        assert_eq!(
            env_value("BRAVE_API_KEY", dir.path(), port),
            "placeholder-brave-api-key"
        );
        let p = env_value("DATA_DIR", dir.path(), port);
        assert!(Path::new(&p).is_dir() && p.starts_with(&*dir.path().to_string_lossy()));
        let f = env_value("CONFIG_FILE", dir.path(), port);
        assert!(Path::new(&f).is_file());
        assert_eq!(env_value("MAX_TOKENS", dir.path(), port), "60");
        assert_eq!(
            env_value("MCP_SERVER_REQUEST_TIMEOUT", dir.path(), port),
            "60"
        );
        assert_eq!(env_value("LOG_LEVEL", dir.path(), port), "info");
        let spec = env_value("OPENAPI_SPEC_PATH", dir.path(), port);
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&spec).unwrap()).unwrap();
        assert_eq!(doc["openapi"], "3.0.0");
        let c = arg_value("config-file-path", dir.path(), port);
        assert_eq!(std::fs::read_to_string(&c).unwrap(), "{}\n");
        let db = arg_value("db-path", dir.path(), port);
        assert_eq!(std::fs::read_to_string(&db).unwrap(), "");
        let a = arg_value("allowed-directory", dir.path(), port);
        assert!(Path::new(&a).is_dir());
        assert_eq!(
            arg_value("server-url", dir.path(), port),
            "http://127.0.0.1:4321"
        );
    }
}
