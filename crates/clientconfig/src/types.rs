//! What parsing produces (the imported servers, renamed servers, inputs still needed) and what it needs (the
//! environment, VS Code's inputs), with the shape of every parse error (file, then server and field when known).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::format::Format;
use ad_core::error::Error;
use ad_core::model::{ServerSpec, truncate_for_message};

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

/// VS Code's `inputs[]` entry.
pub(crate) struct InputDef {
    pub(crate) description: Option<String>,
    pub(crate) password: bool,
}

pub(crate) fn bad(
    file: &str,
    server: Option<&str>,
    field: Option<&str>,
    reason: impl fmt::Display,
) -> Error {
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
