//! Reading what a server said: messages that ask for credentials (and the variable names in them), usage texts (their
//! positional arguments and required options), missing files or paths, network failures, protocol-version refusals,
//! and the last line worth showing.

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

pub(crate) fn is_usage(line: &str) -> bool {
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
pub(crate) fn named_argument(text: &str) -> Option<String> {
    let l = lower(text);
    let end = l.find(" as a command")?;
    let start = l[..end].rfind("provide ")? + "provide ".len();
    let words: Vec<&str> = l[start..end]
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .collect();
    (!words.is_empty() && words.len() <= 4).then(|| words.join("-"))
}

pub(crate) fn is_config(line: &str) -> bool {
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
        || walked_up(&l)
}

/// A folder it was refused listing (`EACCES: permission denied, scandir '/…/scratch/12-3'`): a server that walks up
/// from its working directory for its configuration file reaches the folders above it, which the sandbox hides, so
/// it did not find its configuration.
fn walked_up(l: &str) -> bool {
    (l.contains("eacces") || l.contains("permission denied"))
        && (l.contains("scandir") || l.contains("opendir") || l.contains("readdir"))
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

pub(crate) fn is_network(line: &str) -> bool {
    let l = lower(line);
    NETWORK.iter().any(|w| l.contains(w))
}

pub(crate) fn mentions_version(msg: &str) -> bool {
    let l = lower(msg);
    l.contains("protocol version")
        || l.contains("protocolversion")
        || l.contains("unsupported version")
}

/// The last stderr line worth showing (not blank, not a stack frame).
pub(crate) fn last_meaningful<'a>(lines: &[&'a str]) -> Option<&'a str> {
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
        // Walking up for its configuration, it reached a folder the sandbox hides.
        assert!(is_config(
            "EACCES: permission denied, scandir '/data/introspect/scratch/21461-2'"
        ));
        assert!(!is_config(
            "EACCES: permission denied, open '/data/out.log'"
        ));
    }
}
