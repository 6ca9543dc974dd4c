//! The scanner's step of the gate: a definition seen for the first time or changed is scanned (`ad_scan`), its
//! findings recorded on its pin, and a flagged one withheld until a person approves it. Prompts and resource
//! templates pass the same step (pinned as `prompt:NAME`, `resource_template:NAME`), though only a flagged one is
//! held: unlike tools they are not withheld for changing.

use std::collections::HashMap;

use serde_json::Value;

use super::policy::ScanMode;
use super::{canonical, fingerprint};
use crate::registry::Registry;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_scan::{Context, Finding, Kind, ToolRef};
use ad_store::PinRow;

/// The registry's tool names, for cross-server shadowing: `(server, tool)` pairs, `server`'s own listing replacing
/// what the store holds for it.
pub(crate) struct Names {
    pairs: Vec<(String, String)>,
}

impl Names {
    pub(crate) fn load(registry: &Registry, server: &str, own: &[String]) -> Result<Names> {
        let mut pairs: Vec<(String, String)> = registry
            .store()
            .all_tool_names()?
            .into_iter()
            .filter(|(s, _)| s != server)
            .collect();
        pairs.extend(own.iter().map(|t| (server.to_owned(), t.clone())));
        Ok(Names { pairs })
    }

    pub(crate) fn scan(&self, server: &str, kind: Kind, definition: &Value) -> Vec<Finding> {
        let refs: Vec<ToolRef> = self
            .pairs
            .iter()
            .map(|(s, t)| ToolRef { server: s, tool: t })
            .collect();
        ad_scan::scan(kind, definition, &Context { server, tools: &refs })
    }
}

/// The findings as stored and shown: `None` when there are none.
pub fn findings_json(findings: &[Finding]) -> Option<Value> {
    (!findings.is_empty()).then(|| serde_json::to_value(findings).unwrap_or(Value::Null))
}

/// One line per finding, for refusals and logs: `rule (severity) at field: excerpt`.
pub fn reasons(findings: &Value) -> Vec<String> {
    findings
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] != "low")
        .map(|f| {
            format!(
                "{} ({}) at {}: {}",
                f["rule"].as_str().unwrap_or_default(),
                f["severity"].as_str().unwrap_or_default(),
                f["field"].as_str().unwrap_or_default(),
                f["excerpt"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

/// The pin key of a prompt or resource template (`prompt:NAME`); a tool's key is its name.
pub fn pin_key(kind: Kind, name: &str) -> String {
    match kind {
        Kind::Tool => name.to_owned(),
        other => format!("{}:{name}", other.as_str()),
    }
}

/// The kind and name a pin key stands for.
pub fn split_key(key: &str) -> (Kind, &str) {
    for kind in [Kind::Prompt, Kind::ResourceTemplate] {
        if let Some(name) = key
            .strip_prefix(kind.as_str())
            .and_then(|r| r.strip_prefix(':'))
        {
            return (kind, name);
        }
    }
    (Kind::Tool, key)
}

/// The error a call of a withheld, flagged definition gets.
pub fn flagged_error(server: &str, pin: &PinRow) -> Option<Error> {
    let findings = pin.findings.as_ref()?;
    let reasons = reasons(findings);
    if reasons.is_empty() {
        return None;
    }
    let (kind, name) = split_key(&pin.tool);
    Some(Error::ToolFlagged {
        server: server.to_owned(),
        tool: name.to_owned(),
        kind: kind.as_str(),
        reasons,
    })
}

impl Registry {
    /// Which of a server's prompts or resource templates (`kind`, each given as its listed JSON) may be shown:
    /// one the scanner flags is withheld until approved (`tools approve SERVER prompt:NAME`). Fails closed.
    pub fn gate_definitions(
        &self,
        server_id: i64,
        server: &str,
        kind: Kind,
        items: &[Value],
    ) -> Vec<bool> {
        match self.try_gate_definitions(server_id, server, kind, items) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(server, error = %e, "cannot check {} pins; withholding them", kind.as_str());
                vec![false; items.len()]
            }
        }
    }

    fn try_gate_definitions(
        &self,
        server_id: i64,
        server: &str,
        kind: Kind,
        items: &[Value],
    ) -> Result<Vec<bool>> {
        let mode = self.pin_policy().scan;
        if mode == ScanMode::Off {
            return Ok(vec![true; items.len()]);
        }
        let pins: HashMap<String, PinRow> = self
            .store()
            .pins_of(server_id)?
            .into_iter()
            .map(|p| (p.tool.clone(), p))
            .collect();
        let mut names: Option<Names> = None;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let name = item["name"].as_str().unwrap_or_default();
            let key = pin_key(kind, name);
            let def = canonical(item);
            let fp = fingerprint(&def);
            match pins.get(&key) {
                Some(p) if p.approved_fingerprint.as_deref() == Some(fp.as_str()) => {
                    out.push(true);
                    continue;
                }
                Some(p) if p.current_fingerprint == fp => {
                    out.push(false);
                    continue;
                }
                _ => {}
            }
            if names.is_none() {
                names = Some(Names::load(self, server, &[])?);
            }
            let findings = names.as_ref().map(|n| n.scan(server, kind, &def)).unwrap_or_default();
            let flagged = ad_scan::withholds(&findings);
            let hold = flagged && mode == ScanMode::On;
            self.store().record_pin(
                server_id,
                &key,
                &fp,
                &def,
                findings_json(&findings).as_ref(),
                (!hold).then_some("scanner"),
            )?;
            if flagged {
                self.announce_flag(server, name, kind, &findings, hold);
            }
            out.push(!hold);
        }
        Ok(out)
    }

    /// The scanner's findings on a catalog entry's tool (introspected, not installed), for `find_tool` and `catalog
    /// list`: read when shown, against the definition alone (the registry's other tools are checked when the entry
    /// is installed and activated, and a flagged tool is withheld then). Empty when scanning is off.
    pub fn catalog_findings(&self, server: &str, definition: &Value) -> Vec<Finding> {
        if self.pin_policy().scan == ScanMode::Off {
            return Vec::new();
        }
        ad_scan::scan(Kind::Tool, definition, &Context { server, tools: &[] })
    }

    /// Tells the log and the event stream that a definition was flagged.
    pub(crate) fn announce_flag(
        &self,
        server: &str,
        name: &str,
        kind: Kind,
        findings: &[Finding],
        withheld: bool,
    ) {
        let rules: Vec<&'static str> = findings
            .iter()
            .filter(|f| f.severity > ad_scan::Severity::Low)
            .map(|f| f.rule)
            .collect();
        tracing::warn!(
            server,
            kind = kind.as_str(),
            name,
            rules = ?rules,
            withheld,
            "the scanner flagged a definition{}",
            if withheld { "; withheld until approved" } else { " (AGENT_DISCOVER_SCAN=warn: not withheld)" }
        );
        self.emit(Event::ToolFlagged {
            name: server.to_owned(),
            tool: name.to_owned(),
            kind: kind.as_str(),
            rules,
            withheld,
        });
    }
}
