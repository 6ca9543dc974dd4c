//! The client config formats: their names, the fields each one's server entries may carry, and recognising a file's
//! format by its path and content.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;

use ad_core::error::{Error, Result};
use ad_core::model::truncate_for_message;

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
    pub(crate) fn allows_comments(self) -> bool {
        matches!(self, Format::Vscode | Format::Gemini)
    }

    /// Which field names a server entry may carry: (used, known-but-ignored with the reason).
    pub(crate) fn fields(
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
