//! The installer's answer: the install plan (launch config, secrets kept apart and masked, missing inputs) and the
//! launch config it carries.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Serialize, Serializer};

use crate::entry::InstallMethod;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    Stdio,
    StreamableHttp,
    Sse,
}

/// What to run (stdio) or where to connect (HTTP). A package served over HTTP has both a command and a URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchConfig {
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Non-secret environment only; secrets are in [`InstallPlan::secrets`].
    pub env: BTreeMap<String, String>,
    pub transport: Transport,
    pub url: Option<String>,
    /// Non-secret headers, and `${NAME}` references to secrets.
    pub headers: BTreeMap<String, String>,
}

/// Which kind of value a [`MissingInput`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Env,
    Header,
    Variable,
    Argument,
}

/// A required value nobody supplied: the caller asks for it (by `name` in the inputs map) instead of registering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingInput {
    /// The key to use in the inputs map.
    pub name: String,
    pub description: String,
    pub is_secret: bool,
    pub kind: InputKind,
}

/// A launch config plus what the caller must store or ask for. `secrets` are masked in `Debug` and `Serialize`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct InstallPlan {
    /// Suggested local server name: the last path segment of the server name, made to fit `^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`.
    pub name: String,
    pub description: String,
    pub launch: LaunchConfig,
    #[serde(serialize_with = "masked")]
    pub secrets: BTreeMap<String, String>,
    pub missing: Vec<MissingInput>,
    pub method: InstallMethod,
    pub package_name: Option<String>,
    pub package_version: Option<String>,
    pub repository: Option<String>,
    /// A command that downloads the package ahead of the first start (`npm cache add`, `uv tool install`, `docker pull`).
    pub warm: Option<(String, Vec<String>)>,
}

impl fmt::Debug for InstallPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets: Vec<&String> = self.secrets.keys().collect();
        f.debug_struct("InstallPlan")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("launch", &self.launch)
            .field("secrets (keys)", &secrets)
            .field("missing", &self.missing)
            .field("method", &self.method)
            .field("package_name", &self.package_name)
            .field("package_version", &self.package_version)
            .field("repository", &self.repository)
            .field("warm", &self.warm)
            .finish()
    }
}

fn masked<S: Serializer>(m: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(m.keys().map(|k| (k, "********")))
}
