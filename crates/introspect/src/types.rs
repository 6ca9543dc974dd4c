//! The small types every stage shares: a stage's timing, what a package needs, an installed package ready to start;
//! with the helpers that make a stage time and clip a text.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// How long one stage took and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTime {
    pub stage: String,
    pub ms: u64,
    /// `ok`, `cached`, `failed`, `timeout`, `skipped`.
    pub outcome: String,
}

/// What installing the package needs, for the catalog (`install` arguments and secrets).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Needs {
    /// Environment variables the server asked for (by stderr, README or server.json).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Positional arguments its usage text asks for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// A package ready to start: what to run and what pre-flight learned.
#[derive(Debug, Clone)]
pub(crate) struct Installed {
    /// The package's own name (read from its manifest; for a local path this differs from the target).
    pub name: String,
    pub version: Option<String>,
    pub description: Option<String>,
    /// The executable (absolute path, or a program on PATH for command targets).
    pub launch: String,
    /// README text (npm README file, PyPI long description), for client-config examples.
    pub readme: Option<String>,
    pub flags: Vec<String>,
    /// The npm install folder, when the package's lifecycle scripts were skipped there and have not run since.
    pub scripts_skipped_in: Option<PathBuf>,
    /// The Node range an npm package's `engines.node` asks for.
    pub engines: Option<String>,
}

/// Shortens `s` to at most `max` bytes, at a character boundary.
pub fn clip(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// Milliseconds since `t`.
fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

pub(crate) fn stage(stage: &str, started: Instant, outcome: &str) -> StageTime {
    StageTime {
        stage: stage.to_owned(),
        ms: ms(started),
        outcome: outcome.to_owned(),
    }
}
