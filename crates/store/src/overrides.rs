//! SQL for tool overrides: per server and tool, what the agent sees instead of the child's own definition (a JSON
//! body the registry validates and applies; the store keeps it as given).

use serde::Serialize;
use serde_json::Value;

use super::db::now_text;
use super::{Store, to_json};
use crate::args;
use ad_core::error::Result;

/// One stored override: its server, the tool's own (upstream) name, the body, when it was last set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverrideRow {
    pub server: String,
    pub tool: String,
    pub body: Value,
    pub updated_at: String,
}

impl Store {
    /// The overrides of server `server_id`, by the tool's own name.
    pub fn tool_overrides(&self, server_id: i64) -> Result<Vec<OverrideRow>> {
        self.read(|c| {
            c.query(
                "SELECT s.name, o.tool, o.body, o.updated_at FROM tool_overrides o
                 JOIN servers s ON s.id = o.server_id WHERE o.server_id = ?1 ORDER BY o.tool",
                &args![server_id],
            )?
            .iter()
            .map(override_from_row)
            .collect()
        })
    }

    /// Every stored override, by server name then tool.
    pub fn all_tool_overrides(&self) -> Result<Vec<OverrideRow>> {
        self.read(|c| {
            c.query(
                "SELECT s.name, o.tool, o.body, o.updated_at FROM tool_overrides o
                 JOIN servers s ON s.id = o.server_id ORDER BY s.name, o.tool",
                &[],
            )?
            .iter()
            .map(override_from_row)
            .collect()
        })
    }

    /// Sets (or replaces) the override of `tool` of server `server_id`.
    pub fn set_tool_override(&self, server_id: i64, tool: &str, body: &Value) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO tool_overrides (server_id, tool, body, updated_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (server_id, tool) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at",
                &args![server_id, tool, to_json(body)?, now_text()],
            )?;
            Ok(())
        })
    }

    /// Removes the override of `tool`; whether there was one.
    pub fn clear_tool_override(&self, server_id: i64, tool: &str) -> Result<bool> {
        self.write(|c| {
            let n = c.execute(
                "DELETE FROM tool_overrides WHERE server_id = ?1 AND tool = ?2",
                &args![server_id, tool],
            )?;
            Ok(n > 0)
        })
    }
}

fn override_from_row(r: &super::db::Row) -> Result<OverrideRow> {
    let body: String = r.get(2)?;
    Ok(OverrideRow {
        server: r.get(0)?,
        tool: r.get(1)?,
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
        updated_at: r.get(3)?,
    })
}
