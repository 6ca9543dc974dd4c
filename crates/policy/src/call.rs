//! The vocabulary of the policy crate: a call as policies see it, their outcome and decision, and why a set did not
//! load.

use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value};

/// The extension of policy files in a policy directory.
pub const EXTENSION: &str = "cedar";

/// The principal of a call that carries no user identity (stdio, the CLI, a single user's token): `User::"local"`.
pub const LOCAL_USER: &str = "local";

/// One tool call as policies see it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The authenticated user (`sub`); `None` is [`LOCAL_USER`].
    pub user: Option<&'a str>,
    pub groups: &'a [String],
    /// The calling client: its MCP `clientInfo.name`, else the OAuth client, else `rest` or `cli`.
    pub client: Option<&'a str>,
    /// The call is made by a code-mode script.
    pub script: bool,
    pub server: &'a str,
    pub tool: &'a str,
    pub args: Option<&'a Map<String, Value>>,
}

/// What the policies say about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Allow,
    Deny,
    Ask,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Deny => "deny",
            Outcome::Ask => "ask",
        }
    }
}

/// A policed call's outcome, the ids of the policies that decided it, and why, in words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub outcome: Outcome,
    pub policies: Vec<String>,
    pub reason: String,
}

impl Decision {
    /// The first deciding policy, or `default` for a refusal no policy made (nothing permits the call).
    pub fn policy(&self) -> &str {
        self.policies
            .first()
            .map(String::as_str)
            .unwrap_or("default")
    }
}

/// Why a policy set did not load: the file (when one is to blame) and the problem, with Cedar's diagnostics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}{message}", file.as_deref().map(|f| format!("{f}: ")).unwrap_or_default())]
pub struct LoadError {
    pub file: Option<String>,
    pub message: String,
}

impl LoadError {
    pub(crate) fn new(file: Option<&Path>, message: impl Into<String>) -> LoadError {
        LoadError {
            file: file.map(|f| f.display().to_string()),
            message: message.into(),
        }
    }
}
