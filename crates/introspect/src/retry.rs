//! What a failed second pass still says it needs, for one more attempt: options its messages name
//! (`appId, and appSecret are required` with `--app-id <appId>` in its help; `No access token was provided` with
//! `[--access-token=<token>]` in its usage), and a configuration file that failed the server's schema (filled with the
//! skeleton of the package's own example configuration). Also the OAuth client key file a credentials variable
//! points at (`GOOGLE_OAUTH_CREDENTIALS=/path/to/gcp-oauth.keys.json`).

use std::path::{Path, PathBuf};

use crate::messages::OptionNeed;
use crate::options::Options;
use crate::placeholders::{Kind, Placeholder};
use crate::types::StageTime;

/// An OAuth client key file (the `installed` application format, and the same fields at the top level), written for
/// a variable whose name says it holds credentials or OAuth keys: a path to it, or `None` for other names.
pub(crate) fn key_file(name: &str, dir: &Path) -> Option<String> {
    let up = name.to_ascii_uppercase();
    let parts: Vec<&str> = up.split(['_', '-']).collect();
    let credentials = parts.iter().any(|p| *p == "CREDENTIALS" || *p == "CREDS");
    let oauth_keys = parts.contains(&"OAUTH")
        && parts
            .iter()
            .any(|p| matches!(*p, "KEYS" | "KEY" | "FILE" | "PATH" | "JSON"));
    if !credentials && !oauth_keys {
        return None;
    }
    let client = r#"{"client_id": "placeholder.example.invalid", "client_secret": "placeholder", "project_id": "placeholder", "redirect_uris": ["http://127.0.0.1"], "auth_uri": "https://example.invalid/auth", "token_uri": "https://example.invalid/token"}"#;
    let body = format!(
        "{{\"installed\": {client}, {}\n",
        client.trim_start_matches('{')
    );
    let f = dir.join(format!("{}.json", name.to_ascii_lowercase()));
    std::fs::write(&f, body).ok()?;
    Some(f.display().to_string())
}

/// A path to a file the server keeps (`GOOGLE_CALENDAR_MCP_TOKEN_PATH`, `TOKEN_STORE_PATH`, `DB_PATH`): a variable
/// named `..._PATH` after a stored thing gets a path to a file not yet there, in a folder that is (a directory there
/// would be read as the file: `EISDIR`). `None` for other names.
pub(crate) fn kept_file(name: &str, dir: &Path) -> Option<String> {
    let up = name.to_ascii_uppercase();
    let parts: Vec<&str> = up.split(['_', '-']).collect();
    let stored = parts.iter().any(|p| {
        matches!(
            *p,
            "TOKEN"
                | "TOKENS"
                | "CACHE"
                | "DB"
                | "DATABASE"
                | "LOG"
                | "STORE"
                | "STATE"
                | "SESSION"
        )
    });
    if parts.last() != Some(&"PATH") || !stored {
        return None;
    }
    let d = dir.join(format!("{}-dir", name.to_ascii_lowercase()));
    std::fs::create_dir_all(&d).ok()?;
    let ext = if parts.iter().any(|p| matches!(*p, "DB" | "DATABASE")) {
        "db"
    } else if parts.contains(&"LOG") {
        "log"
    } else {
        "json"
    };
    Some(
        d.join(format!("{}.{ext}", name.to_ascii_lowercase()))
            .display()
            .to_string(),
    )
}

/// Every long option a text shows, with its value's name: help lines (`-a, --app-id <appId>  App ID`) and usage
/// words (`[--access-token=<token>]`, `--port PORT`).
pub(crate) fn options_in(text: &str) -> Vec<OptionNeed> {
    let mut out: Vec<OptionNeed> = Vec::new();
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        for (i, raw) in tokens.iter().enumerate() {
            let t = raw.trim_matches(|c: char| matches!(c, '[' | ']' | '(' | ')' | '|' | ','));
            let Some(body) = t.strip_prefix("--") else {
                continue;
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            if name.len() < 2
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                continue;
            }
            let meta = inline.map(str::to_owned).or_else(|| {
                let n = tokens
                    .get(i + 1)?
                    .trim_matches(|c: char| matches!(c, '[' | ']' | ','));
                let upper = n.len() > 1 && n.chars().all(|c| c.is_ascii_uppercase() || c == '_');
                (n.starts_with('<') || upper).then(|| n.to_owned())
            });
            let metavar = meta.map(|m| m.trim_matches(['<', '>', '{', '}']).to_owned());
            let name = format!("--{name}");
            if !out.iter().any(|o| o.name == name) {
                out.push(OptionNeed { name, metavar });
            }
        }
    }
    out
}

/// Lowercase letters and digits only: `appId` and `--app-id` and `access token` compare as `appid`, `accesstoken`.
fn squash(s: &str) -> String {
    s.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The options among `options` (ones that take a value) that an error line of `lines` names by their name or their
/// value's name: `appId, and appSecret are required` names `--app-id <appId>` and `--app-secret <appSecret>`. Usage
/// and help lines (which name every option) are not error lines.
pub(crate) fn named_by(lines: &[&str], options: &[OptionNeed]) -> Vec<OptionNeed> {
    const GENERIC: &[&str] = &[
        "value", "string", "number", "path", "file", "options", "command", "help", "version",
        "debug", "verbose", "config", "port", "host",
    ];
    let errors: Vec<String> = lines
        .iter()
        .filter(|l| asks_for_something(l))
        .map(|l| squash(l))
        .collect();
    let mut out: Vec<OptionNeed> = Vec::new();
    for o in options.iter().filter(|o| o.metavar.is_some()) {
        let keys = [
            squash(&o.name),
            squash(o.metavar.as_deref().unwrap_or_default()),
        ];
        let hit = keys.iter().any(|k| {
            k.len() >= 5 && !GENERIC.contains(&k.as_str()) && errors.iter().any(|e| e.contains(k))
        });
        if hit && !out.iter().any(|x| x.name == o.name) {
            out.push(o.clone());
        }
    }
    out
}

/// An error line that may name what is missing (`... are required`, `No access token was provided`); usage and help
/// lines name every option and are not.
fn asks_for_something(l: &str) -> bool {
    let low = l.to_ascii_lowercase();
    !l.contains("--")
        && !low.trim_start().starts_with("usage")
        && (low.contains("required")
            || low.contains("missing")
            || low.contains("not provided")
            || low.contains("was provided")
            || low.contains("no ")
            || low.contains("must "))
}

/// A line saying a configuration file did not pass the server's checks (`is not satisfies the schema`, `Invalid
/// configuration`).
pub(crate) fn config_refused(line: &str) -> bool {
    let low = line.to_ascii_lowercase();
    (low.contains("config") || low.contains("settings"))
        && (low.contains("schema") || low.contains("invalid") || low.contains("validation"))
}

/// The folder of the npm package whose entry point `launch` is (a `node_modules/.bin` link is followed): the nearest
/// folder above it with a `package.json`.
pub(crate) fn package_root(launch: &Path) -> Option<PathBuf> {
    let entry = std::fs::canonicalize(launch).ok()?;
    entry
        .ancestors()
        .skip(1)
        .take(6)
        .find(|d| d.join("package.json").is_file())
        .map(Path::to_path_buf)
}

/// The skeleton of the package's example configuration: its top-level keys with objects and arrays emptied and
/// other values kept (`{"$schema": "...", "mcpServers": {}}`). The example is a JSON file the package ships with
/// `example` or `sample` in its name, else the README's first JSON code block.
pub(crate) fn config_skeleton(root: &Path, readme: Option<&str>) -> Option<String> {
    let mut shipped: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_ascii_lowercase();
            n.ends_with(".json") && (n.contains("example") || n.contains("sample"))
        })
        .collect();
    shipped.sort();
    let text = shipped
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .or_else(|| {
            let r = readme?;
            let start = r.find("```json")? + "```json".len();
            let end = r[start..].find("```")?;
            Some(r[start..start + end].to_owned())
        })?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let serde_json::Value::Object(map) = value else {
        return None;
    };
    let skeleton: serde_json::Map<String, serde_json::Value> = map
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::Object(_) => serde_json::json!({}),
                serde_json::Value::Array(_) => serde_json::json!([]),
                other => other,
            };
            (k, v)
        })
        .collect();
    serde_json::to_string_pretty(&skeleton).ok()
}

/// What a failed second pass still asks for, added to `placeholders` for a third attempt: a configuration file the
/// server's schema refused gets the skeleton of the package's example; options its messages name (read from its own
/// output, else from the `--help` of the command pass 2 ran) get values. Returns notes on what changed (empty: no
/// third attempt).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn after_pass2(
    launch: &str,
    readme: Option<&str>,
    target_args: &[String],
    lines: &[&str],
    placeholders: &mut Vec<Placeholder>,
    scratch: &Path,
    options: &Options,
    path: Option<&str>,
) -> (Vec<String>, Option<StageTime>) {
    let mut notes = Vec::new();
    let dir = scratch.join("placeholders");
    if lines.iter().any(|l| config_refused(l))
        && let Some(root) = package_root(Path::new(launch))
        && let Some(skeleton) = config_skeleton(&root, readme)
    {
        for p in placeholders.iter() {
            let f = Path::new(&p.value);
            if f.starts_with(&dir)
                && std::fs::read_to_string(f).is_ok_and(|t| t.trim() == "{}")
                && std::fs::write(f, &skeleton).is_ok()
            {
                notes.push(format!("{}: the example configuration's skeleton", p.name));
            }
        }
    }
    let mut stage_time = None;
    let mut named = named_by(lines, &options_in(&lines.join("\n")));
    if named.is_empty() && lines.iter().any(|l| asks_for_something(l)) {
        // The command pass 2 ran (its subcommand first) asked for its help.
        let mut prefix = target_args.to_vec();
        prefix.extend(
            placeholders
                .iter()
                .filter(|p| p.kind == Kind::Subcommand)
                .flat_map(Placeholder::argv),
        );
        let (text, st) = crate::help::run(launch, &prefix, scratch, options, path).await;
        stage_time = Some(st);
        if let Some(t) = text {
            named = named_by(lines, &options_in(&t));
        }
    }
    let port = crate::placeholders::unused_port();
    for o in named {
        if placeholders.iter().any(|p| p.name == o.name) {
            continue;
        }
        let label = format!(
            "{}_{}",
            o.name.trim_start_matches('-'),
            o.metavar.as_deref().unwrap_or_default()
        )
        .replace(['-', ' ', '|'], "_")
        .to_ascii_uppercase();
        let value = crate::placeholders::env_value(&label, &dir, port);
        notes.push(format!("{} (named by the failure)", o.name));
        placeholders.push(Placeholder {
            kind: Kind::Arg,
            name: o.name,
            value,
            source: "stderr".into(),
        });
    }
    (notes, stage_time)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oauth_key_files_for_credentials_variables() {
        let dir = std::env::temp_dir().join(format!("ad-keyfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = key_file("GOOGLE_OAUTH_CREDENTIALS", &dir).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        assert_eq!(v["installed"]["client_secret"], "placeholder");
        assert_eq!(v["client_id"], v["installed"]["client_id"]);
        assert!(v["redirect_uris"].is_array());
        assert!(key_file("GMAIL_OAUTH_PATH", &dir).is_some());
        assert!(key_file("GITHUB_TOKEN", &dir).is_none());
        assert!(key_file("OAUTH_CLIENT_ID", &dir).is_none());
        // A token store: a file not there yet, in a folder that is.
        let t = kept_file("GOOGLE_CALENDAR_MCP_TOKEN_PATH", &dir).unwrap();
        assert!(t.ends_with(".json") && !Path::new(&t).exists());
        assert!(Path::new(&t).parent().unwrap().is_dir());
        assert!(kept_file("SQLITE_DB_PATH", &dir).unwrap().ends_with(".db"));
        assert!(kept_file("ALLOWED_PATH", &dir).is_none());
        assert!(kept_file("TOKEN_PATHS", &dir).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_named_by_an_error() {
        // lark-mcp's `mcp --help` and its failure.
        let help = "Usage: lark-mcp mcp [options]\n\nOptions:\n  -a, --app-id <appId>   Feishu/Lark App ID\n  -s, --app-secret <appSecret>   Feishu/Lark App Secret\n  -d, --domain <domain>   (Optional) Domain\n  --oauth   (Optional) Enable MCP Auth Server\n  -h, --help  display help";
        let options = options_in(help);
        assert!(
            options
                .iter()
                .any(|o| o.name == "--oauth" && o.metavar.is_none())
        );
        let named = named_by(
            &["Error: [Lark MCP]  appId, and appSecret are required"],
            &options,
        );
        let names: Vec<&str> = named.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["--app-id", "--app-secret"]);
        // @sentry/mcp-server: the option is in the usage the failure printed, written with `=`.
        let out = "Error: No access token was provided.\nUsage: @sentry/mcp-server [--access-token=<token>] [--host=<host>] [--insecure-http]";
        let options = options_in(out);
        assert_eq!(options[0].metavar.as_deref(), Some("token"));
        let named = named_by(&out.lines().collect::<Vec<_>>(), &options);
        assert_eq!(named.len(), 1);
        assert_eq!(named[0].name, "--access-token");
        // A usage line alone names nothing; neither does a line that is not an error.
        assert!(named_by(&[out.lines().nth(1).unwrap()], &options).is_empty());
        assert!(named_by(&["Connected with access token"], &options).is_empty());
    }

    #[test]
    fn config_skeleton_of_a_shipped_example() {
        let dir = std::env::temp_dir().join(format!("ad-skeleton-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(config_skeleton(&dir, None).is_none());
        let readme = "Config:\n```json\n{\"servers\": [{\"a\": 1}], \"name\": \"x\"}\n```\n";
        let s: serde_json::Value =
            serde_json::from_str(&config_skeleton(&dir, Some(readme)).unwrap()).unwrap();
        assert_eq!(s, serde_json::json!({"servers": [], "name": "x"}));
        std::fs::write(
            dir.join("config.example.json"),
            r#"{"$schema": "https://example.invalid/s.json", "mcpServers": {"p": {"command": "npx"}}}"#,
        )
        .unwrap();
        let s: serde_json::Value =
            serde_json::from_str(&config_skeleton(&dir, Some(readme)).unwrap()).unwrap();
        assert_eq!(
            s,
            serde_json::json!({"$schema": "https://example.invalid/s.json", "mcpServers": {}})
        );
        assert!(config_refused(
            "[error] Error: Specified configuration file is not satisfies the schema: /x/arg-config"
        ));
        assert!(!config_refused(
            "error: missing required argument 'config-file-path'"
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
