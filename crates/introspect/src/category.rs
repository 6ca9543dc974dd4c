//! The failure taxonomy's vocabulary: the categories an attempt is filed under, and a diagnosis (category, evidence
//! line, fix hint, what the server was found to need).

use serde::{Deserialize, Serialize};

use crate::types::{Needs, clip};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Ok,
    OkZeroTools,
    InstallFailed,
    NoEntryPoint,
    NeedsCredentials,
    NeedsArgs,
    NeedsConfig,
    CrashedOnStart,
    InitTimeout,
    InitError,
    ProtocolMismatch,
    NonJsonStdout,
    ToolsListTimeout,
    ToolsListError,
    NetworkRequired,
}

impl Category {
    pub const ALL: [Category; 15] = [
        Category::Ok,
        Category::OkZeroTools,
        Category::InstallFailed,
        Category::NoEntryPoint,
        Category::NeedsCredentials,
        Category::NeedsArgs,
        Category::NeedsConfig,
        Category::CrashedOnStart,
        Category::InitTimeout,
        Category::InitError,
        Category::ProtocolMismatch,
        Category::NonJsonStdout,
        Category::ToolsListTimeout,
        Category::ToolsListError,
        Category::NetworkRequired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Ok => "ok",
            Category::OkZeroTools => "ok_zero_tools",
            Category::InstallFailed => "install_failed",
            Category::NoEntryPoint => "no_entry_point",
            Category::NeedsCredentials => "needs_credentials",
            Category::NeedsArgs => "needs_args",
            Category::NeedsConfig => "needs_config",
            Category::CrashedOnStart => "crashed_on_start",
            Category::InitTimeout => "init_timeout",
            Category::InitError => "init_error",
            Category::ProtocolMismatch => "protocol_mismatch",
            Category::NonJsonStdout => "non_json_stdout",
            Category::ToolsListTimeout => "tools_list_timeout",
            Category::ToolsListError => "tools_list_error",
            Category::NetworkRequired => "network_required",
        }
    }

    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// The server answered the protocol (tools listed, possibly none).
    pub fn is_ok(self) -> bool {
        matches!(self, Category::Ok | Category::OkZeroTools)
    }

    /// Failures whose second pass first asks the server for its `--help`: it wants arguments, a file or path, or a
    /// stdio switch.
    pub fn asks_for_help(self) -> bool {
        matches!(
            self,
            Category::NeedsArgs
                | Category::NeedsConfig
                | Category::NonJsonStdout
                | Category::InitTimeout
        )
    }

    /// Failures that placeholder values may lift (the package is installed and started).
    pub fn retry_with_placeholders(self) -> bool {
        !matches!(
            self,
            Category::Ok
                | Category::OkZeroTools
                | Category::InstallFailed
                | Category::NoEntryPoint
                | Category::ProtocolMismatch
        )
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A category with its evidence, hint and findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    pub category: Category,
    pub evidence: String,
    pub hint: String,
    pub needs: Needs,
    /// The package manager's error code (install_failed).
    pub code: Option<String>,
    /// `no_entry_point` because the package is a library (no bin, no console script).
    pub library: bool,
}

impl Diagnosis {
    pub fn new(category: Category, evidence: impl Into<String>, hint: &str) -> Diagnosis {
        let mut evidence = evidence.into().replace('\n', " ");
        clip(&mut evidence, 500);
        Diagnosis {
            category,
            evidence,
            hint: hint.to_owned(),
            needs: Needs::default(),
            code: None,
            library: false,
        }
    }
}
