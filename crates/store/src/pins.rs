//! SQL for tool pins (approved and last seen fingerprint and definition per tool) and per-server tool filters.

use serde::Serialize;
use serde_json::Value;

use super::db::{Row, now_text};
use super::{Store, to_json};
use crate::args;
use ad_core::error::Result;

/// One tool's pin: what was approved and what the server offers now. Pending when they differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PinRow {
    pub server: String,
    pub tool: String,
    pub approved_fingerprint: Option<String>,
    pub approved_definition: Option<Value>,
    pub approved_at: Option<String>,
    pub current_fingerprint: String,
    pub current_definition: Value,
    pub seen_at: String,
    /// The scanner's findings on the current definition (none, or not scanned: `None`).
    pub findings: Option<Value>,
    /// Who approved it: `policy`, `scanner`, `cli:USER`, `rest`, `dashboard`, `mcp`.
    pub approved_by: Option<String>,
}

impl PinRow {
    pub fn pending(&self) -> bool {
        self.approved_fingerprint.as_deref() != Some(self.current_fingerprint.as_str())
    }
}

const SELECT: &str =
    "SELECT s.name, p.tool, p.approved_fingerprint, p.approved_definition, p.approved_at,
    p.current_fingerprint, p.current_definition, p.seen_at, p.findings, p.approved_by
    FROM tool_pins p JOIN servers s ON s.id = p.server_id";

fn pin_from_row(r: &Row) -> Result<PinRow> {
    let json = |s: Option<String>| s.and_then(|s| serde_json::from_str(&s).ok());
    Ok(PinRow {
        server: r.get(0)?,
        tool: r.get(1)?,
        approved_fingerprint: r.get(2)?,
        approved_definition: json(r.get(3)?),
        approved_at: r.get(4)?,
        current_fingerprint: r.get(5)?,
        current_definition: json(r.get(6)?).unwrap_or(Value::Null),
        seen_at: r.get(7)?,
        findings: json(r.get(8)?),
        approved_by: r.get(9)?,
    })
}

impl Store {
    /// Every pin of server `server_id`, by tool name.
    pub fn pins_of(&self, server_id: i64) -> Result<Vec<PinRow>> {
        self.read(|c| {
            c.query(
                &format!("{SELECT} WHERE p.server_id = ?1 ORDER BY p.tool"),
                &args![server_id],
            )?
            .iter()
            .map(pin_from_row)
            .collect()
        })
    }

    pub fn pin(&self, server: &str, tool: &str) -> Result<Option<PinRow>> {
        self.read(|c| {
            c.query_opt(
                &format!("{SELECT} WHERE s.name = ?1 AND p.tool = ?2"),
                &args![server, tool],
            )?
            .as_ref()
            .map(pin_from_row)
            .transpose()
        })
    }

    /// Pins whose current fingerprint is not the approved one, optionally of one server.
    pub fn pending_pins(&self, server: Option<&str>) -> Result<Vec<PinRow>> {
        self.read(|c| {
            let pending = "p.approved_fingerprint IS DISTINCT FROM p.current_fingerprint";
            let rows = match server {
                Some(name) => c.query(
                    &format!("{SELECT} WHERE {pending} AND s.name = ?1 ORDER BY s.name, p.tool"),
                    &args![name],
                )?,
                None => c.query(
                    &format!("{SELECT} WHERE {pending} ORDER BY s.name, p.tool"),
                    &[],
                )?,
            };
            rows.iter().map(pin_from_row).collect()
        })
    }

    /// Pins served as they are (not pending) whose findings include a `medium` one: the definitions the scanner
    /// shows with a warning. Optionally of one server.
    pub fn warned_pins(&self, server: Option<&str>) -> Result<Vec<PinRow>> {
        self.read(|c| {
            let warned = "p.approved_fingerprint = p.current_fingerprint
                AND p.findings LIKE '%\"severity\":\"medium\"%'";
            let rows = match server {
                Some(name) => c.query(
                    &format!("{SELECT} WHERE {warned} AND s.name = ?1 ORDER BY s.name, p.tool"),
                    &args![name],
                )?,
                None => c.query(
                    &format!("{SELECT} WHERE {warned} ORDER BY s.name, p.tool"),
                    &[],
                )?,
            };
            rows.iter().map(pin_from_row).collect()
        })
    }

    /// Records what a server offers now for `tool`, with the scanner's findings on it; with `approved_by`, that is
    /// also the approved definition.
    pub fn record_pin(
        &self,
        server_id: i64,
        tool: &str,
        fingerprint: &str,
        definition: &Value,
        findings: Option<&Value>,
        approved_by: Option<&str>,
    ) -> Result<()> {
        let def = to_json(definition)?;
        let findings = findings.map(to_json).transpose()?;
        let approve = approved_by.is_some();
        self.write(|c| {
            c.execute(
                "INSERT INTO tool_pins (server_id, tool, current_fingerprint, current_definition,
                     approved_fingerprint, approved_definition, approved_at, seen_at, findings, approved_by)
                 VALUES (?1, ?2, ?3, ?4,
                     CASE WHEN ?5 = 1 THEN ?3 END, CASE WHEN ?5 = 1 THEN ?4 END, CASE WHEN ?5 = 1 THEN ?6 END, ?6,
                     ?7, ?8)
                 ON CONFLICT (server_id, tool) DO UPDATE SET
                     current_fingerprint = excluded.current_fingerprint,
                     current_definition = excluded.current_definition,
                     seen_at = excluded.seen_at,
                     findings = excluded.findings,
                     approved_fingerprint = CASE WHEN ?5 = 1 THEN excluded.current_fingerprint ELSE tool_pins.approved_fingerprint END,
                     approved_definition = CASE WHEN ?5 = 1 THEN excluded.current_definition ELSE tool_pins.approved_definition END,
                     approved_at = CASE WHEN ?5 = 1 THEN excluded.approved_at ELSE tool_pins.approved_at END,
                     approved_by = CASE WHEN ?5 = 1 THEN excluded.approved_by ELSE tool_pins.approved_by END",
                &args![server_id, tool, fingerprint, def.as_str(), approve, now_text(), findings.as_deref(), approved_by],
            )?;
            Ok(())
        })
    }

    /// Every (server, tool) name of the registry, installed or catalogued: what a definition may not give orders about.
    pub fn all_tool_names(&self) -> Result<Vec<(String, String)>> {
        self.read(|c| {
            c.query(
                "SELECT s.name, t.name FROM server_tools t JOIN servers s ON s.id = t.server_id",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?)))
            .collect()
        })
    }

    /// Approves what `server_id` offers now for `tool` (or for every pending tool): returns the tools approved.
    pub fn approve_pins(
        &self,
        server_id: i64,
        tool: Option<&str>,
        by: &str,
    ) -> Result<Vec<String>> {
        let approve = "UPDATE tool_pins SET approved_fingerprint = current_fingerprint,
                 approved_definition = current_definition, approved_at = ?2, approved_by = ?3
             WHERE server_id = ?1 AND approved_fingerprint IS DISTINCT FROM current_fingerprint";
        let rows = self.write(|c| match tool {
            Some(t) => c.query(
                &format!("{approve} AND tool = ?4 RETURNING tool"),
                &args![server_id, now_text(), by, t],
            ),
            None => c.query(
                &format!("{approve} RETURNING tool"),
                &args![server_id, now_text(), by],
            ),
        })?;
        let mut tools = rows
            .iter()
            .map(|r| r.get(0))
            .collect::<Result<Vec<String>>>()?;
        tools.sort();
        Ok(tools)
    }

    /// A server's tool filters: (allow, deny) glob patterns.
    pub fn tool_filter(&self, server_id: i64) -> Result<(Vec<String>, Vec<String>)> {
        let row: Option<(String, String)> = self.read(|c| {
            c.query_opt(
                "SELECT allow, deny FROM tool_filters WHERE server_id = ?1",
                &args![server_id],
            )?
            .map(|r| Ok((r.get(0)?, r.get(1)?)))
            .transpose()
        })?;
        let list = |s: &str| serde_json::from_str(s).unwrap_or_default();
        Ok(row.map(|(a, d)| (list(&a), list(&d))).unwrap_or_default())
    }

    pub fn set_tool_filter(&self, server_id: i64, allow: &[String], deny: &[String]) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO tool_filters (server_id, allow, deny) VALUES (?1, ?2, ?3)
                 ON CONFLICT (server_id) DO UPDATE SET allow = excluded.allow, deny = excluded.deny",
                &args![server_id, to_json(&allow)?, to_json(&deny)?],
            )?;
            Ok(())
        })
    }
}
