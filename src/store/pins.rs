//! SQL for tool pins (approved and last seen fingerprint and definition per tool) and per-server tool filters.

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;
use serde_json::Value;

use super::{Store, to_json};
use crate::error::Result;

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
}

impl PinRow {
    pub fn pending(&self) -> bool {
        self.approved_fingerprint.as_deref() != Some(self.current_fingerprint.as_str())
    }
}

const SELECT: &str = "SELECT s.name, p.tool, p.approved_fingerprint, p.approved_definition, p.approved_at,
    p.current_fingerprint, p.current_definition, p.seen_at FROM tool_pins p JOIN servers s ON s.id = p.server_id";

fn pin_from_row(r: &Row<'_>) -> rusqlite::Result<PinRow> {
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
    })
}

impl Store {
    /// Every pin of server `server_id`, by tool name.
    pub fn pins_of(&self, server_id: i64) -> Result<Vec<PinRow>> {
        let conn = self.lock();
        let mut stmt =
            conn.prepare_cached(&format!("{SELECT} WHERE p.server_id = ?1 ORDER BY p.tool"))?;
        let rows = stmt.query_map([server_id], pin_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn pin(&self, server: &str, tool: &str) -> Result<Option<PinRow>> {
        Ok(self
            .lock()
            .query_row(
                &format!("{SELECT} WHERE s.name = ?1 AND p.tool = ?2"),
                [server, tool],
                pin_from_row,
            )
            .optional()?)
    }

    /// Pins whose current fingerprint is not the approved one, optionally of one server.
    pub fn pending_pins(&self, server: Option<&str>) -> Result<Vec<PinRow>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(&format!(
            "{SELECT} WHERE p.approved_fingerprint IS NOT p.current_fingerprint AND (?1 IS NULL OR s.name = ?1)
             ORDER BY s.name, p.tool"
        ))?;
        let rows = stmt.query_map([server], pin_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Records what a server offers now for `tool`; with `approve`, that is also the approved definition.
    pub fn record_pin(
        &self,
        server_id: i64,
        tool: &str,
        fingerprint: &str,
        definition: &Value,
        approve: bool,
    ) -> Result<()> {
        let def = to_json(definition)?;
        self.lock().execute(
            "INSERT INTO tool_pins (server_id, tool, current_fingerprint, current_definition,
                 approved_fingerprint, approved_definition, approved_at)
             VALUES (?1, ?2, ?3, ?4,
                 CASE WHEN ?5 THEN ?3 END, CASE WHEN ?5 THEN ?4 END,
                 CASE WHEN ?5 THEN strftime('%Y-%m-%dT%H:%M:%fZ','now') END)
             ON CONFLICT (server_id, tool) DO UPDATE SET
                 current_fingerprint = excluded.current_fingerprint,
                 current_definition = excluded.current_definition,
                 seen_at = strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                 approved_fingerprint = CASE WHEN ?5 THEN excluded.current_fingerprint ELSE tool_pins.approved_fingerprint END,
                 approved_definition = CASE WHEN ?5 THEN excluded.current_definition ELSE tool_pins.approved_definition END,
                 approved_at = CASE WHEN ?5 THEN excluded.approved_at ELSE tool_pins.approved_at END",
            params![server_id, tool, fingerprint, def, approve],
        )?;
        Ok(())
    }

    /// Approves what `server_id` offers now for `tool` (or for every pending tool): returns the tools approved.
    pub fn approve_pins(&self, server_id: i64, tool: Option<&str>) -> Result<Vec<String>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "UPDATE tool_pins SET approved_fingerprint = current_fingerprint, approved_definition = current_definition,
                 approved_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
             WHERE server_id = ?1 AND (?2 IS NULL OR tool = ?2) AND approved_fingerprint IS NOT current_fingerprint
             RETURNING tool",
        )?;
        let rows = stmt.query_map(params![server_id, tool], |r| r.get(0))?;
        let mut tools = rows.collect::<rusqlite::Result<Vec<String>>>()?;
        tools.sort();
        Ok(tools)
    }

    /// A server's tool filters: (allow, deny) glob patterns.
    pub fn tool_filter(&self, server_id: i64) -> Result<(Vec<String>, Vec<String>)> {
        let row: Option<(String, String)> = self
            .lock()
            .query_row(
                "SELECT allow, deny FROM tool_filters WHERE server_id = ?1",
                [server_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let list = |s: &str| serde_json::from_str(s).unwrap_or_default();
        Ok(row.map(|(a, d)| (list(&a), list(&d))).unwrap_or_default())
    }

    pub fn set_tool_filter(&self, server_id: i64, allow: &[String], deny: &[String]) -> Result<()> {
        self.lock().execute(
            "INSERT INTO tool_filters (server_id, allow, deny) VALUES (?1, ?2, ?3)
             ON CONFLICT (server_id) DO UPDATE SET allow = excluded.allow, deny = excluded.deny",
            params![server_id, to_json(&allow)?, to_json(&deny)?],
        )?;
        Ok(())
    }
}
