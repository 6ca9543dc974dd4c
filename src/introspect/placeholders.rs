//! The second pass: what a failed server was found to need (server.json variables and arguments, variable names in
//! its messages, the `env` of client-config examples in its README, the arguments of its usage text), and placeholder
//! values for them. For a server that failed for want of arguments, its `--help` (see `help`) adds the
//! required positional arguments, required options, the subcommand that starts it and its stdio switch. Placeholders are never real secrets: paths point into the attempt's scratch directory and URLs at
//! a loopback port nothing listens on.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::classify::{Category, Diagnosis, OptionNeed, credential_names, usage_options};
use super::help::HelpNeeds;
use super::probe::Attempt;
use super::{Installed, Needs, Target};

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
            Kind::Arg | Kind::Subcommand => vec![self.value.clone()],
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
        for n in readme_env(readme) {
            push_env(&n, "readme", &mut env);
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
        placeholders.push(Placeholder {
            kind: Kind::Env,
            name: name.clone(),
            value: env_value(name, &dir, port),
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
fn unused_port() -> u16 {
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

/// A placeholder for a variable, by what its name says it holds.
fn env_value(name: &str, dir: &Path, port: u16) -> String {
    if has(name, &["PORT"]) && !has(name, &["URL", "URI"]) {
        return port.to_string();
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
        let _ = std::fs::write(&f, "");
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

/// Variable names in the `"env": { ... }` objects of a README's client-config examples.
pub(crate) fn readme_env(readme: &str) -> Vec<String> {
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
            if after_key.starts_with(':')
                && !key.is_empty()
                && key.len() <= 64
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !out.iter().any(|o| o == key)
            {
                out.push(key.to_owned());
            }
            s = &tail[close + 1..];
            // Skip the value string, if any.
            if let Some(v) = s.trim_start().strip_prefix(':') {
                let v = v.trim_start();
                if let Some(vs) = v.strip_prefix('"') {
                    s = vs.find('"').map(|j| &vs[j + 1..]).unwrap_or("");
                } else {
                    s = v;
                }
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
        assert_eq!(
            readme_env(readme),
            vec!["BRAVE_API_KEY", "BRAVE_REGION", "OTHER_TOKEN"]
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
        let a = arg_value("allowed-directory", dir.path(), port);
        assert!(Path::new(&a).is_dir());
        assert_eq!(
            arg_value("server-url", dir.path(), port),
            "http://127.0.0.1:4321"
        );
    }
}
