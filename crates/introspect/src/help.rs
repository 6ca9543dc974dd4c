//! The `--help` of a server that failed for want of arguments: run once, walled off like an attempt and bounded in
//! time and output, then parsed into what the second pass fills: required positional arguments, required options
//! (commander, yargs, argparse and click shapes), the subcommand that starts the server (`stdio`, `serve`, ...) and a
//! stdio switch among its options.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use crate::child_env::base_env;
use crate::messages::{OptionNeed, usage_options};
use crate::options::Options;
use crate::types::{StageTime, stage};
use ad_proxy::spawn::{self, Isolation, StderrRing};

/// Most bytes of stdout read from a `--help` run.
const HELP_BYTES: usize = 32 * 1024;
/// Longest a `--help` run may take (bounded further by the initialize limit).
const HELP_LIMIT: Duration = Duration::from_secs(15);

/// What a help text says a server needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HelpNeeds {
    /// The subcommand that starts the server, when the usage wants one.
    pub subcommand: Option<String>,
    /// Labels of required positional arguments.
    pub positionals: Vec<String>,
    /// Required options (with a value to fill, or bare flags).
    pub options: Vec<OptionNeed>,
    /// An option that selects the stdio transport (`--stdio`, `--transport <stdio|sse>`), required or not.
    pub stdio_switch: Option<OptionNeed>,
    /// An option that names the server's configuration file (`-c, --config <path>  Path to panda config file`),
    /// required or not: given a file when the server could not find its configuration by itself.
    pub config_option: Option<OptionNeed>,
    /// The usage line, for the record.
    pub usage: Option<String>,
}

impl HelpNeeds {
    pub fn is_empty(&self) -> bool {
        self.subcommand.is_none()
            && self.positionals.is_empty()
            && self.options.is_empty()
            && self.stdio_switch.is_none()
            && self.config_option.is_none()
    }
}

/// Runs `program args --help` with the attempt's isolation (own process group, scratch HOME and cwd, base
/// environment), stdin closed, for at most [`HELP_LIMIT`]; returns stdout and stderr (bounded) and the stage.
pub(crate) async fn run(
    program: &str,
    args: &[String],
    scratch: &std::path::Path,
    options: &Options,
    path: Option<&str>,
) -> (Option<String>, StageTime) {
    let t = Instant::now();
    let base = scratch.join("help");
    let home = base.join("home");
    let cwd = base.join("cwd");
    if std::fs::create_dir_all(&home)
        .and_then(|()| std::fs::create_dir_all(&cwd))
        .is_err()
    {
        return (None, stage("help", t, "failed"));
    }
    let mut argv = args.to_vec();
    argv.push("--help".into());
    let ring = Arc::new(StderrRing::default());
    let isolation = Isolation {
        cwd,
        clear_env: true,
    };
    let mut env = base_env(&home);
    if let Some(p) = path {
        env.insert("PATH".into(), p.to_owned());
    }
    let Ok(spawned) = crate::child_env::spawn_confined(
        options,
        &base,
        program,
        &argv,
        &env,
        ring.clone(),
        &isolation,
    ) else {
        return (None, stage("help", t, "failed"));
    };
    let pgid = spawned.pgid;
    let lifeline = spawned.lifeline;
    let mut child = spawned.child;
    // stdin closed at once: a server that ignores `--help` and starts sees end of input.
    drop(spawned.stdin);
    let mut stdout = spawned.stdout;
    let limit = HELP_LIMIT.min(options.limits.initialize.max(Duration::from_secs(1)));
    let mut out = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while out.len() < HELP_BYTES {
            match stdout.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        let _ = child.wait().await;
    };
    let outcome = match tokio::time::timeout(limit, read).await {
        Ok(()) => "ok",
        Err(_) => "timeout",
    };
    spawn::kill_group(pgid);
    drop(lifeline);
    if let Some(done) = spawned.stderr_done {
        let _ = tokio::time::timeout(Duration::from_millis(500), done).await;
    }
    out.truncate(HELP_BYTES);
    let mut text = String::from_utf8_lossy(&out).into_owned();
    for line in ring.tail(200) {
        text.push('\n');
        text.push_str(&line);
    }
    let text = strip_ansi(&text);
    let outcome = if text.trim().is_empty() && outcome == "ok" {
        "empty"
    } else {
        outcome
    };
    (Some(text), stage("help", t, outcome))
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// Subcommand names that start a server, best first.
const SERVE_COMMANDS: &[&str] = &["stdio", "mcp", "serve", "server", "start", "run"];

/// Parses a help text (see [`HelpNeeds`]).
pub(crate) fn parse(text: &str) -> HelpNeeds {
    let lines: Vec<&str> = text.lines().collect();
    let mut needs = HelpNeeds::default();
    let mut wants_command = false;
    let mut choices: Vec<String> = Vec::new();
    let mut program: Option<String> = None;
    if let Some(i) = lines.iter().position(|l| {
        let t = l.trim().to_ascii_lowercase();
        t.starts_with("usage:") || t == "usage"
    }) {
        // The usage line and its indented continuation lines (`Usage:` or a `USAGE` heading alone: the usage is on
        // the next line).
        let mut block = vec![lines[i].trim()];
        let mut i = i;
        if matches!(
            lines[i].trim().to_ascii_lowercase().as_str(),
            "usage:" | "usage"
        ) && let Some(next) = lines.get(i + 1).filter(|l| !l.trim().is_empty())
        {
            block.push(next.trim());
            i += 1;
        }
        for l in lines.iter().skip(i + 1).take(6) {
            if l.trim().is_empty() || !l.starts_with(char::is_whitespace) || l.trim().ends_with(':')
            {
                break;
            }
            block.push(l.trim());
        }
        let usage = block.join(" ");
        needs.usage = Some(usage.clone());
        let after = usage["usage".len()..].trim_start_matches(':').trim();
        // The program name (one word, or `python -m module`) is skipped.
        let mut tokens: Vec<&str> = after.split_whitespace().collect();
        if !tokens.is_empty() {
            program = Some(tokens.remove(0).to_owned());
        }
        let mut depth = 0i32;
        let mut i = 0;
        while i < tokens.len() {
            let raw = tokens[i];
            i += 1;
            depth += raw.chars().take_while(|c| *c == '[').count() as i32;
            let closing = raw
                .chars()
                .rev()
                .take_while(|c| *c == ']' || *c == '.')
                .filter(|c| *c == ']')
                .count() as i32;
            let t = raw.trim_matches(|c: char| matches!(c, '[' | ']' | '.' | ','));
            // A server that failed without arguments needs the subcommand even when the usage calls it optional.
            if depth > 0 && is_command_word(t.trim_matches(['<', '>'])) {
                wants_command = true;
            }
            if depth == 0 && !t.is_empty() {
                if t.starts_with('-') {
                    // An option's value (`--db DB_PATH`, `-d <dir>`) is not a positional argument.
                    if !t.contains('=')
                        && tokens.get(i).is_some_and(|n| {
                            is_metavar(n.trim_matches(|c: char| matches!(c, ']' | '.' | ',')))
                        })
                    {
                        i += 1;
                    }
                } else if let Some(inner) = t.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
                    wants_command = true;
                    choices.extend(inner.split(',').map(|c| c.trim().to_owned()));
                } else if let Some(inner) = t.strip_prefix('<').and_then(|x| x.strip_suffix('>')) {
                    if is_command_word(inner) {
                        wants_command = true;
                    } else if !needs.positionals.iter().any(|p| p == inner) {
                        needs.positionals.push(inner.to_owned());
                    }
                } else if is_upper(t) {
                    if is_command_word(t) {
                        wants_command = true;
                    } else if !matches!(t, "OPTIONS" | "OPTION" | "ARGS" | "ARGUMENTS" | "FLAGS") {
                        let label = t.to_ascii_lowercase().replace('_', "-");
                        if !needs.positionals.contains(&label) {
                            needs.positionals.push(label);
                        }
                    }
                }
            }
            depth = (depth - closing).max(0);
        }
        needs.options = usage_options(&usage);
    }
    // Options sections: a line marked required.
    for l in &lines {
        let trimmed = l.trim_start();
        let lower = l.to_ascii_lowercase();
        // "Required for logging in stdio mode" says when it matters, not that it must be given.
        if !trimmed.starts_with('-')
            || !lower.contains("required")
            || lower.contains("not required")
            || lower.contains("required for")
            || lower.contains("required when")
            || lower.contains("required if")
            || lower.contains("optional")
        {
            continue;
        }
        if let Some(o) = option_of(trimmed)
            && !needs.options.iter().any(|x| x.name == o.name)
        {
            needs.options.push(o);
        }
    }
    // No usage nor options section, but an error that names what is missing (`The following required arguments are
    // missing: - token ... provide it using: --token or -t`): the options named in the lines after it take values.
    if needs.options.is_empty()
        && let Some(i) = lines.iter().position(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("required")
                && (l.contains("missing") || l.contains("not specified") || l.contains("must be"))
        })
    {
        for l in lines.iter().skip(i).take(10) {
            for w in l.split_whitespace() {
                let name = w.trim_matches(|c: char| {
                    matches!(c, '`' | '\'' | '"' | ',' | ':' | ';' | '.' | '(' | ')')
                });
                let valid = name.len() > 2
                    && name.starts_with("--")
                    && name[2..]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    && !matches!(name, "--help" | "--version");
                if valid && !needs.options.iter().any(|o| o.name == name) {
                    needs.options.push(OptionNeed {
                        name: name.to_owned(),
                        metavar: (name != "--stdio").then(|| "value".to_owned()),
                    });
                }
            }
        }
    }
    // An option that takes the configuration file's path, among all options.
    needs.config_option = lines.iter().find_map(|l| config_option(l));
    // A stdio switch among all options.
    for l in &lines {
        let trimmed = l.trim_start();
        if !trimmed.starts_with('-') {
            continue;
        }
        let Some(o) = option_of(trimmed) else {
            continue;
        };
        let lower = l.to_ascii_lowercase();
        if o.name == "--stdio" && o.metavar.is_none() {
            needs.stdio_switch = Some(o);
            break;
        }
        // A bare flag whose description says it runs MCP on stdio only (`--mcp-only  ... only run MCP on stdio`).
        let described = lower
            .trim_start()
            .split_once("  ")
            .map(|(_, d)| d.to_owned())
            .unwrap_or_default();
        if o.metavar.is_none()
            && described.contains("stdio")
            && !described.contains("not ")
            && !described.contains("disable")
        {
            needs.stdio_switch = Some(o);
            break;
        }
        if (o.name.contains("transport") || o.name.contains("mode"))
            && lower.contains("stdio")
            && o.metavar.is_some()
        {
            needs.stdio_switch = Some(OptionNeed {
                name: o.name,
                metavar: Some("stdio".into()),
            });
            break;
        }
    }
    // yargs prints `prog <command>` with no `Usage:` before it.
    if needs.usage.is_none()
        && lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .take(3)
            .any(|l| l.contains("<command>") || l.contains("[command]"))
    {
        wants_command = true;
    }
    // Subcommands: the ones the usage offers (`{a,b}`), else the entries of a commands section.
    if wants_command {
        if choices.is_empty() {
            choices = commands_section(&lines);
        }
        needs.subcommand = pick_command(&choices);
    }
    // No subcommand found so far: a usage or example line that runs the program with words that start a server
    // (`mcp start [--transport stdio|sse]`, `azmcp server start`, `tool server [options]  Start the server`).
    if needs.subcommand.is_none()
        && let Some(prog) = &program
    {
        needs.subcommand = invocation(&lines, prog);
    }
    needs
}

/// The serve words that follow the program's name on a line of the help (usage lines, examples), joined by a
/// space: the first such line wins. `prog` may be a path or a scoped package name; its last part is compared.
fn invocation(lines: &[&str], prog: &str) -> Option<String> {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    let prog = base(prog);
    for l in lines {
        let t = l.trim().trim_start_matches("$ ");
        let t = t
            .split_once(':')
            .filter(|(h, _)| h.eq_ignore_ascii_case("usage"))
            .map_or(t, |(_, r)| r.trim());
        let mut words = t.split_whitespace();
        if words.next().map(base).as_deref() != Some(prog.as_str()) {
            continue;
        }
        let serve: Vec<&str> = words
            .take_while(|w| SERVE_COMMANDS.contains(w))
            .take(2)
            .collect();
        if !serve.is_empty() {
            return Some(serve.join(" "));
        }
    }
    None
}

fn is_command_word(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "command" | "cmd" | "subcommand" | "commands"
    )
}

fn is_upper(s: &str) -> bool {
    s.len() > 1
        && s.chars().any(|c| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

fn is_metavar(s: &str) -> bool {
    (s.starts_with('<') && s.ends_with('>'))
        || (s.starts_with('{') && s.ends_with('}'))
        || is_upper(s)
}

/// The long option of an options-section line (`-d, --db-path TEXT  ...`, `--api-key <key>  ...`,
/// `--db-path  Path  [string] [required]`) and its value's name, if it takes one.
fn option_of(line: &str) -> Option<OptionNeed> {
    // The option part ends at the first run of two spaces (or a tab), where the description starts.
    let spec = line
        .split("  ")
        .next()
        .unwrap_or(line)
        .split('\t')
        .next()
        .unwrap_or(line);
    let tokens: Vec<&str> = spec.split_whitespace().collect();
    let k = tokens.iter().position(|t| t.starts_with("--"))?;
    let raw = tokens[k].trim_end_matches(',');
    let (name, inline) = match raw.split_once('=') {
        Some((n, v)) => (
            n.to_owned(),
            Some(v.trim_matches(['<', '>', '[', ']']).to_owned()),
        ),
        None => (raw.to_owned(), None),
    };
    if name.len() <= 2
        || !name[2..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        || matches!(name.as_str(), "--help" | "--version")
    {
        return None;
    }
    let metavar = inline
        .or_else(|| {
            let n = tokens.get(k + 1)?.trim_end_matches(',');
            // cobra prints the value's type in lower case (`--log-file string`, `--port int`).
            const TYPES: &[&str] = &[
                "string",
                "strings",
                "stringArray",
                "int",
                "int32",
                "int64",
                "uint",
                "float",
                "float64",
                "duration",
                "ints",
            ];
            (is_metavar(n) || TYPES.contains(&n))
                .then(|| n.trim_matches(['<', '>', '{', '}']).to_owned())
        })
        .or_else(|| {
            // yargs: no metavar, the type in brackets after the description.
            let l = line.to_ascii_lowercase();
            (l.contains("[string]")
                || l.contains("[number]")
                || l.contains("[array]")
                || l.contains("[choices:"))
            .then(|| "value".to_owned())
        });
    Some(OptionNeed { name, metavar })
}

/// The option of an options-section line that takes the path of a configuration file: its name says `config`
/// (`--config`, `--config-file`) and its value or description says it is a file or path (`<path>`, `Path to panda
/// config file`).
fn config_option(line: &str) -> Option<OptionNeed> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('-') {
        return None;
    }
    let o = option_of(trimmed)?;
    let meta = o.metavar.as_deref()?.to_ascii_lowercase();
    let low = trimmed.to_ascii_lowercase();
    let fileish = |s: &str| {
        s.split(|c: char| !c.is_ascii_alphanumeric())
            .any(|w| matches!(w, "file" | "path" | "filename" | "filepath"))
    };
    (o.name.trim_start_matches('-').starts_with("config") && (fileish(&meta) || fileish(&low)))
        .then_some(o)
}

/// Command names listed under a `Commands:` (or `Subcommands:`, `Available commands:`) heading.
fn commands_section(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for l in lines {
        let t = l.trim();
        let lower = t.to_ascii_lowercase();
        // A heading: `Commands:`, or an upper-case one without a colon (`COMMANDS`).
        let upper_heading = !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_uppercase() || c == ' ' || c == '_');
        if !l.starts_with(char::is_whitespace) && (lower.ends_with(':') || upper_heading) {
            inside = lower.contains("command");
            continue;
        }
        if !inside || t.is_empty() {
            continue;
        }
        // `serve`, `serve [options]  Start`, or commander's `tool serve  Start` (the program named first).
        let spec: Vec<&str> = t
            .split("  ")
            .next()
            .unwrap_or(t)
            .split_whitespace()
            .collect();
        let word = match spec.as_slice() {
            [_, second, ..] if !second.starts_with(['[', '<']) => *second,
            [first, ..] => *first,
            [] => continue,
        };
        let w = word.trim_end_matches(',');
        if !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            && !out.iter().any(|o: &String| o == w)
        {
            out.push(w.to_owned());
        }
    }
    out
}

/// The subcommand that starts the server: by name ([`SERVE_COMMANDS`]), else one that contains `stdio` or
/// `serve`; none when no name says so (no guessing).
fn pick_command(choices: &[String]) -> Option<String> {
    SERVE_COMMANDS
        .iter()
        .find_map(|w| choices.iter().find(|c| c.eq_ignore_ascii_case(w)))
        .or_else(|| {
            choices
                .iter()
                .find(|c| c.contains("stdio") || c.contains("serve"))
        })
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &HelpNeeds) -> Vec<&str> {
        n.options.iter().map(|o| o.name.as_str()).collect()
    }

    #[test]
    fn commander_help() {
        let h = "Usage: mcp-db [options] <database>\n\nA database server\n\nOptions:\n  -V, --version          output the version number\n  --api-key <key>        API key (required)\n  --port <port>          port (default: 3000)\n  -h, --help             display help for command\n";
        let n = parse(h);
        assert_eq!(n.positionals, ["database"]);
        assert_eq!(names(&n), ["--api-key"]);
        assert_eq!(n.options[0].metavar.as_deref(), Some("key"));
        assert_eq!(n.subcommand, None);
        assert_eq!(
            n.usage.as_deref(),
            Some("Usage: mcp-db [options] <database>")
        );
    }

    #[test]
    fn argparse_help() {
        let h = "usage: mcp-server-sqlite [-h] --db-path DB_PATH [--log-level LOG_LEVEL]\n\noptions:\n  -h, --help         show this help message and exit\n  --db-path DB_PATH  Path to the database\n";
        let n = parse(h);
        assert!(n.positionals.is_empty(), "{:?}", n.positionals);
        assert_eq!(names(&n), ["--db-path"]);
        assert_eq!(n.options[0].metavar.as_deref(), Some("DB_PATH"));
        let sub = "usage: awslabs-x [-h] {serve,stdio,version} ...\n\npositional arguments:\n  {serve,stdio,version}\n";
        assert_eq!(parse(sub).subcommand.as_deref(), Some("stdio"));
        // The failure's own usage lines (excel-mcp-server, when its `--help` did not answer in time).
        let failed = "usage: excel-mcp-server [-h] [--version] {stdio,streamable-http} ...\nexcel-mcp-server: error: the following arguments are required: transport";
        assert_eq!(parse(failed).subcommand.as_deref(), Some("stdio"));
        let pos = "usage: x [-h] [--verbose] WORKSPACE_DIR\n";
        assert_eq!(parse(pos).positionals, ["workspace-dir"]);
    }

    #[test]
    fn click_and_yargs_help() {
        let click = "Usage: office-mcp [OPTIONS] COMMAND [ARGS]...\n\nOptions:\n  --help  Show this message and exit.\n\nCommands:\n  install  Install into a client\n  serve    Start the MCP server\n";
        let n = parse(click);
        assert_eq!(n.subcommand.as_deref(), Some("serve"));
        assert!(n.positionals.is_empty());
        let req = "Usage: x [OPTIONS]\n\nOptions:\n  -d, --db-path TEXT  Path of the store  [required]\n  --help              Show this message and exit.\n";
        let n = parse(req);
        assert_eq!(names(&n), ["--db-path"]);
        assert_eq!(n.options[0].metavar.as_deref(), Some("TEXT"));
        let yargs = "Options:\n  --help       Show help  [boolean]\n  --token      Access token  [string] [required]\n  --transport  Transport  [choices: \"stdio\", \"http\"] [default: \"http\"]\n";
        let n = parse(yargs);
        assert_eq!(names(&n), ["--token"]);
        assert!(
            n.options[0].metavar.is_some(),
            "a [string] option takes a value"
        );
        let s = n.stdio_switch.expect("transport choice");
        assert_eq!(
            (s.name.as_str(), s.literal()),
            ("--transport", Some("stdio"))
        );
    }

    #[test]
    fn an_error_that_names_the_missing_options() {
        let h = "Error: The following required arguments are missing:\n  - token: Monday API token\n    You can provide it using:\n     --token or -t command line argument\n";
        let n = parse(h);
        assert_eq!(names(&n), ["--token"]);
        assert_eq!(n.options[0].metavar.as_deref(), Some("value"));
        assert!(
            parse("Error: something failed\n  see --verbose\n")
                .options
                .is_empty()
        );
    }

    #[test]
    fn cobra_types_and_conditional_requirements() {
        let h = "Usage:\n  k8s [command] [options] [flags]\n\nFlags:\n      --log-file string   Defines the log file path. Required for logging in stdio mode.\n      --token string      API token (required)\n      --port int          Port\n";
        let n = parse(h);
        assert_eq!(names(&n), ["--token"], "`Required for ...` is conditional");
        assert_eq!(n.options[0].metavar.as_deref(), Some("string"));
        assert_eq!(
            option_of("--port int          Port").and_then(|o| o.metavar),
            Some("int".to_owned())
        );
    }

    #[test]
    fn upper_case_headings_and_serve_words_on_usage_and_example_lines() {
        // stricli (Speakeasy): `USAGE` and `COMMANDS` headings, no colon; the usage line names `start`.
        let h = "USAGE\n  mcp start [--transport stdio|sse] [--api-key value]\n  mcp --help\n\nMCP server CLI\n\nFLAGS\n  -h --help  Print help\n\nCOMMANDS\n  start  Run the Model Context Protocol server\n";
        let n = parse(h);
        assert_eq!(n.subcommand.as_deref(), Some("start"));
        assert_eq!(
            n.usage.as_deref().map(|u| u.starts_with("USAGE mcp start")),
            Some(true)
        );
        // System.CommandLine: `[command]`, no commands heading, a two-word example that starts the server.
        let h = "Usage:\n  azmcp [command] [options]\n\nOptions:\n  -?, -h, --help  Show help\n\nExamples:\n  azmcp storage account get --subscription \"my-sub\"\n  azmcp server start\n\nMCP:\n  server   MCP Server operations\n";
        assert_eq!(parse(h).subcommand.as_deref(), Some("server start"));
        // One usage line per command; a bare flag described as stdio-only is the stdio switch.
        let h = "tool - MCP server\n\nUsage:\n  tool init              Setup wizard\n  tool server [options]  Start the server\n\nServer Options:\n  --port <port>   HTTP port\n  --mcp-only      Skip HTTP server, only run MCP on stdio\n";
        let n = parse(h);
        assert_eq!(n.subcommand.as_deref(), Some("server"));
        assert_eq!(
            n.stdio_switch.map(|s| s.name),
            Some("--mcp-only".to_owned())
        );
        // Words that do not start a server are not taken.
        let h = "Usage:\n  tool [command]\n\nExamples:\n  tool deploy prod\n";
        assert_eq!(parse(h).subcommand, None);
    }

    #[test]
    fn commander_subcommands_and_nothing_to_guess() {
        // `[command]` is optional, but the server failed without one: the one that starts it is picked.
        let h = "Usage: lark-mcp [options] [command]\n\nCommands:\n  whoami             Print sessions\n  login [options]    Log in\n  mcp [options]      Start the MCP service\n  help [command]     display help\n";
        assert_eq!(parse(h).subcommand.as_deref(), Some("mcp"));
        let yargs = "argocd-mcp <command>\n\nCommands:\n  argocd-mcp stdio  Start using stdio.\n  argocd-mcp sse    Start using SSE.\n";
        assert_eq!(parse(yargs).subcommand.as_deref(), Some("stdio"));
        let cobra =
            "Server\n\nUsage:\n  srv [command] <root>\n\nAvailable Commands:\n  serve   Serve\n";
        let n = parse(cobra);
        assert_eq!(
            (n.subcommand.as_deref(), n.positionals.as_slice()),
            (Some("serve"), &["root".to_owned()][..])
        );
        let h = "Usage: tool <command>\n\nCommands:\n  tool login      Log in\n  tool start      Start the MCP server\n";
        assert_eq!(parse(h).subcommand.as_deref(), Some("start"));
        let h = "Usage: tool <command>\n\nCommands:\n  login   Log in\n  deploy  Deploy\n";
        assert_eq!(parse(h).subcommand, None, "no command says it serves");
        assert!(parse("Server running on stdio\n").is_empty());
        // (`--stdio <root>` would read as an option and its value: the usual `--opt <value>` shape wins.)
        let colored = "\u{1b}[1mUsage:\u{1b}[0m srv <root> --stdio";
        let n = parse(&strip_ansi(colored));
        assert_eq!(n.positionals, ["root"]);
        assert_eq!(names(&n), ["--stdio"]);
    }

    #[test]
    fn an_option_that_takes_the_configuration_file() {
        // cac's help (`@pandacss/mcp`): the option is not required, and is kept apart from the required ones.
        let h = "panda-mcp/1.12.1\n\nUsage:\n  $ panda-mcp [command]\n\nCommands:\n  [command]  Start MCP server for AI assistants\n  init       Initialize MCP configuration for AI clients\n\nOptions:\n  -c, --config <path>  Path to panda config file \n  --cwd <cwd>          Current working directory (default: /tmp)\n  --silent             Suppress startup logs \n  -h, --help           Display this message \n";
        let n = parse(h);
        let c = n.config_option.as_ref().expect("a config option");
        assert_eq!(
            (c.name.as_str(), c.metavar.as_deref()),
            ("--config", Some("path"))
        );
        assert!(n.options.is_empty());
        assert_eq!(n.subcommand, None, "`init` does not start the server");
        let h = "Options:\n  --config-file FILE  Settings\n  --configure         Run the setup wizard\n";
        assert_eq!(
            parse(h).config_option.map(|o| o.name).as_deref(),
            Some("--config-file")
        );
        // A bare flag, or a value that is no file, is not one.
        assert_eq!(
            parse("Options:\n  --config-check  Check the config\n").config_option,
            None
        );
        assert_eq!(
            parse("Options:\n  --config-name <name>  Profile name\n").config_option,
            None
        );
    }
}
