//! ad-scan: the tool scanner. Reads a tool, prompt or resource-template definition as a server lists it and says
//! whether it carries instructions aimed at the agent instead of a description for it (tool poisoning).
//!
//! What it knows: the text of a definition (every name, title, description, default, enum value and example down
//! the input and output schemas, annotations, prompt arguments, URI templates), hidden and encoded forms of text
//! (invisible and bidirectional Unicode, tag characters, ANSI escapes, base64, hex, percent and entity encodings),
//! and the names of the tools the *other* registered servers offer (cross-server shadowing). Each finding names its
//! rule, a severity, where it sits and the offending excerpt with hidden characters made visible.
//!
//! What it must not know: storage, the registry, the proxy or MCP transports. It is a pure, deterministic function
//! of its input (no I/O, no clock), cheap enough to run on every definition when first seen and when it changes;
//! whoever calls it decides what a finding means (the registry withholds, the catalog reports). One signal may use a
//! sentence encoder the caller lends ([`scan_with`], [`Model`]): the definition's orders compared with attack and
//! honest exemplars and with the tool's purpose; without one the rules decide alone.

mod decode;
mod fields;
pub mod guard;
mod pattern;
mod rules;
mod text;

use serde::Serialize;
use serde_json::Value;

pub use fields::Kind;
pub use rules::semantic::{Encoder, Model, Score};

/// How much a finding weighs: `medium` and `high` withhold a definition until a person approves it; `low` is shown
/// beside it but withholds nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Low,
    Medium,
    High,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
        }
    }
}

/// One reason a definition looks poisoned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's stable name (`hidden_characters`, `data_exfiltration`, ...; see `docs/scanner.md`).
    pub rule: &'static str,
    pub severity: Severity,
    /// Where it sits, as a path into the definition (`description`, `inputSchema.properties.path.default`).
    pub field: String,
    /// The offending text (at most about 160 characters), hidden characters shown as `<U+200B>`, `<ESC>`.
    pub excerpt: String,
    /// One sentence for a person.
    pub detail: String,
}

/// A tool offered by a server, for cross-server shadowing: a definition that names another server's tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolRef<'a> {
    pub server: &'a str,
    pub tool: &'a str,
}

/// What the scanner knows besides the definition: the tools of every registered server (the definition's own
/// server's tools are allowed to be named; other servers' are not).
#[derive(Debug, Clone, Copy, Default)]
pub struct Context<'a> {
    pub server: &'a str,
    pub tools: &'a [ToolRef<'a>],
}

/// Scans one definition of `kind` (its JSON as the server lists it). Findings are ordered by severity, highest
/// first, then by where they sit.
pub fn scan(kind: Kind, definition: &Value, ctx: &Context<'_>) -> Vec<Finding> {
    scan_with(kind, definition, ctx, None)
}

/// As [`scan`], with the semantic signal when `model` is given and usable (`resembles_attack` findings); when it
/// is not ([`Model::ready`] says why), the rules' findings alone.
pub fn scan_with(
    kind: Kind,
    definition: &Value,
    ctx: &Context<'_>,
    model: Option<&Model>,
) -> Vec<Finding> {
    let fields = fields::collect(kind, definition);
    let mut findings = rules::run(&fields, ctx);
    // A definition the rules already withhold is not embedded: the signal could only agree.
    if let Some(m) = model
        && !withholds(&findings)
    {
        let semantic = rules::semantic::check(&fields, m, &findings);
        findings.extend(semantic);
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.field.cmp(&b.field))
            .then_with(|| a.rule.cmp(b.rule))
    });
    findings.dedup_by(|a, b| a.rule == b.rule && a.field == b.field);
    findings
}

/// The semantic signal's scores of a definition's orders (for calibration and diagnosis), or why the model cannot
/// be used.
pub fn semantic_scores(
    kind: Kind,
    definition: &Value,
    model: &Model,
) -> Result<Vec<Score>, String> {
    rules::semantic::scores(&fields::collect(kind, definition), model)
}

/// What a definition's findings mean for it: `high` withholds it until a person approves it; `medium` shows it with
/// a warning; `low` alone is only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Clean,
    Warn,
    Withhold,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Clean => "clean",
            Outcome::Warn => "warn",
            Outcome::Withhold => "withhold",
        }
    }
}

/// The outcome of a definition's findings.
pub fn outcome(findings: &[Finding]) -> Outcome {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::High) => Outcome::Withhold,
        Some(Severity::Medium) => Outcome::Warn,
        _ => Outcome::Clean,
    }
}

/// Whether these findings withhold the definition (any of `high` severity).
pub fn withholds(findings: &[Finding]) -> bool {
    outcome(findings) == Outcome::Withhold
}

/// Whether these findings show the definition with a warning (`medium` at most): served, not withheld.
pub fn warns(findings: &[Finding]) -> bool {
    outcome(findings) == Outcome::Warn
}

#[cfg(test)]
mod tests;
