//! Where each client keeps its config file, and the rewrite `connect` makes so a client launches agent-discover.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::format::Format;
use crate::jsonc;
use ad_core::error::{Error, Result};

/// A client config file location.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KnownFile {
    /// The client's name as `connect --client` takes it.
    pub client: &'static str,
    pub format: Format,
    pub path: PathBuf,
    /// `user` (in the home directory) or `project` (in the current directory).
    pub scope: &'static str,
}

/// The client names `connect --client` accepts.
pub const CLIENTS: [&str; 7] = [
    "claude-desktop",
    "claude-code",
    "cursor",
    "vscode",
    "windsurf",
    "codex",
    "gemini",
];

/// Every documented location, user scope first; whether each exists is the caller's question.
pub fn known_files(home: &Path, cwd: &Path) -> Vec<KnownFile> {
    let user = |client, format, path: PathBuf| KnownFile {
        client,
        format,
        path,
        scope: "user",
    };
    let project = |client, format, path: PathBuf| KnownFile {
        client,
        format,
        path,
        scope: "project",
    };
    let appdata = std::env::var_os("APPDATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join("AppData/Roaming"));
    let codex_home = std::env::var_os("CODEX_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".codex"));
    vec![
        user(
            "claude-desktop",
            Format::ClaudeDesktop,
            home.join(".config/Claude/claude_desktop_config.json"),
        ),
        user(
            "claude-desktop",
            Format::ClaudeDesktop,
            home.join("Library/Application Support/Claude/claude_desktop_config.json"),
        ),
        // Windows keeps the desktop apps' files under %APPDATA% (read where the variable is set).
        user(
            "claude-desktop",
            Format::ClaudeDesktop,
            appdata.join("Claude/claude_desktop_config.json"),
        ),
        user("claude-code", Format::ClaudeUser, home.join(".claude.json")),
        user("cursor", Format::Cursor, home.join(".cursor/mcp.json")),
        user(
            "vscode",
            Format::Vscode,
            home.join(".config/Code/User/mcp.json"),
        ),
        user(
            "vscode",
            Format::Vscode,
            home.join("Library/Application Support/Code/User/mcp.json"),
        ),
        user("vscode", Format::Vscode, appdata.join("Code/User/mcp.json")),
        user(
            "windsurf",
            Format::Windsurf,
            home.join(".codeium/windsurf/mcp_config.json"),
        ),
        user("codex", Format::Codex, codex_home.join("config.toml")),
        user("gemini", Format::Gemini, home.join(".gemini/settings.json")),
        project("claude-code", Format::ClaudeCode, cwd.join(".mcp.json")),
        project("cursor", Format::Cursor, cwd.join(".cursor/mcp.json")),
        project("vscode", Format::Vscode, cwd.join(".vscode/mcp.json")),
        project("gemini", Format::Gemini, cwd.join(".gemini/settings.json")),
    ]
}

/// The server entry a connected client launches: agent-discover itself, over stdio.
pub const SELF_NAME: &str = "agent-discover";

/// `text` with its servers replaced by one entry launching `exe mcp`; every other setting is kept
/// (comments in JSONC and TOML files are not: the backup keeps the original bytes).
pub fn connect_rewrite(format: Format, text: &str, exe: &str) -> Result<String> {
    connect_rewrite_args(format, text, exe, &["mcp"])
}

/// [`connect_rewrite`] launching `exe` with `args` (`mcp --profile NAME` for a profile).
pub fn connect_rewrite_args(
    format: Format,
    text: &str,
    exe: &str,
    args: &[&str],
) -> Result<String> {
    if format == Format::Codex {
        let mut doc: toml::Table = toml::from_str(text)
            .map_err(|e| Error::invalid("client config", format!("not valid TOML: {e}")))?;
        let mut me = toml::Table::new();
        me.insert("command".into(), exe.into());
        me.insert(
            "args".into(),
            toml::Value::Array(args.iter().map(|a| (*a).into()).collect()),
        );
        let mut servers = toml::Table::new();
        servers.insert(SELF_NAME.into(), me.into());
        doc.insert("mcp_servers".into(), servers.into());
        return toml::to_string(&doc).map_err(|e| Error::Internal(format!("rendering TOML: {e}")));
    }
    let clean = jsonc::strip(text);
    let mut doc: Map<String, Value> = serde_json::from_str(&clean)
        .map_err(|e| Error::invalid("client config", format!("not valid JSON: {e}")))?;
    let mut me = Map::new();
    if matches!(
        format,
        Format::Vscode | Format::ClaudeCode | Format::ClaudeUser
    ) {
        me.insert("type".into(), "stdio".into());
    }
    me.insert("command".into(), exe.into());
    me.insert(
        "args".into(),
        Value::Array(args.iter().map(|a| (*a).into()).collect()),
    );
    let mut servers = Map::new();
    servers.insert(SELF_NAME.into(), me.into());
    let key = if format == Format::Vscode {
        "servers"
    } else {
        "mcpServers"
    };
    doc.insert(key.into(), servers.into());
    if format == Format::ClaudeUser
        && let Some(Value::Object(projects)) = doc.get_mut("projects")
    {
        for p in projects.values_mut() {
            if let Some(o) = p.as_object_mut()
                && o.contains_key("mcpServers")
            {
                o.insert("mcpServers".into(), Value::Object(Map::new()));
            }
        }
    }
    let mut out = serde_json::to_string_pretty(&Value::Object(doc))
        .map_err(|e| Error::Internal(e.to_string()))?;
    out.push('\n');
    Ok(out)
}

/// The backup `connect` writes next to `file`: `<file>.agent-discover-backup-<UTC time>`.
pub fn backup_path(file: &Path, unix_ms: u64) -> PathBuf {
    let stamp: String = ad_core::clock::rfc3339(unix_ms)
        .chars()
        .map(|c| if c == ':' { '-' } else { c })
        .collect();
    let mut name = file
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(format!(".agent-discover-backup-{stamp}"));
    file.with_file_name(name)
}

/// The newest backup of `file` (names sort by time), if any.
pub fn latest_backup(file: &Path) -> Result<Option<PathBuf>> {
    let Some(dir) = file.parent() else {
        return Ok(None);
    };
    let Some(base) = file.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    let prefix = format!("{base}.agent-discover-backup-");
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    Ok(found.pop())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_keeps_other_settings_and_leaves_one_server() {
        let text =
            "{\n // c\n \"theme\": \"dark\", \"mcpServers\": {\"a\": {\"command\": \"x\"}},\n}";
        let out = connect_rewrite(Format::Gemini, text, "/bin/agent-discover").unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["theme"], "dark");
        assert_eq!(v["mcpServers"].as_object().unwrap().len(), 1);
        assert_eq!(v["mcpServers"]["agent-discover"]["args"][0], "mcp");
        let toml_out = connect_rewrite(
            Format::Codex,
            "model = \"m\"\n[mcp_servers.a]\ncommand = \"x\"\n",
            "ad",
        )
        .unwrap();
        assert!(
            toml_out.contains("model = \"m\"") && toml_out.contains("[mcp_servers.agent-discover]"),
            "{toml_out}"
        );
        assert!(!toml_out.contains("[mcp_servers.a]"));
    }

    #[test]
    fn backups_sort_by_time() {
        let a = backup_path(Path::new("/h/.cursor/mcp.json"), 1_000);
        let b = backup_path(Path::new("/h/.cursor/mcp.json"), 2_000_000);
        assert!(
            a.to_str()
                .unwrap()
                .starts_with("/h/.cursor/mcp.json.agent-discover-backup-1970-01-01T00-00-01"),
            "{a:?}"
        );
        assert!(a < b);
    }
}
