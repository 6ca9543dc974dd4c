//! SQL for the `server_tools` table: a server's tool list, replaced as a whole, and lookups across servers.

use rusqlite::{Row, params};

use super::{Store, to_json};
use crate::error::Result;
use crate::model::{ToolInfo, ToolRecord};

fn tool_from_row(r: &Row<'_>) -> rusqlite::Result<ToolRecord> {
    let schema: String = r.get(5)?;
    Ok(ToolRecord {
        id: r.get(0)?,
        server_id: r.get(1)?,
        server: r.get(2)?,
        name: r.get(3)?,
        description: r.get(4)?,
        input_schema: serde_json::from_str(&schema)
            .unwrap_or_else(|_| serde_json::json!({"type": "object"})),
    })
}

const SELECT: &str = "SELECT t.id, t.server_id, s.name, t.name, t.description, t.input_schema FROM server_tools t JOIN servers s ON s.id = t.server_id";

impl Store {
    /// Replaces server `server_id`'s tools with `tools` in one transaction. Unchanged tools keep their rows
    /// (and so any stored embedding); tools that vanished are deleted.
    pub fn replace_tools(&self, server_id: i64, tools: &[ToolInfo]) -> Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        replace_tools_in(&tx, server_id, tools)?;
        tx.commit()?;
        Ok(())
    }

    pub fn clear_tools(&self, server_id: i64) -> Result<()> {
        self.lock()
            .execute("DELETE FROM server_tools WHERE server_id = ?1", [server_id])?;
        Ok(())
    }

    pub fn tools_of(&self, server_id: i64) -> Result<Vec<ToolRecord>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(&format!("{SELECT} WHERE t.server_id = ?1 ORDER BY t.name"))?;
        let rows = stmt.query_map([server_id], tool_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn tool(&self, server: &str, tool: &str) -> Result<Option<ToolRecord>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .lock()
            .query_row(
                &format!("{SELECT} WHERE s.name = ?1 AND t.name = ?2"),
                [server, tool],
                tool_from_row,
            )
            .optional()?)
    }

    /// The tools with these ids, in any order.
    pub fn tools_by_ids(&self, ids: &[i64]) -> Result<Vec<ToolRecord>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(&format!(
            "{SELECT} WHERE t.id IN (SELECT value FROM json_each(?1))"
        ))?;
        let list = serde_json::to_string(ids).unwrap_or_else(|_| "[]".into());
        let rows = stmt.query_map([list], tool_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn count_tools(&self) -> Result<i64> {
        Ok(self
            .lock()
            .query_row("SELECT COUNT(*) FROM server_tools", [], |r| r.get(0))?)
    }
}

/// [`Store::replace_tools`]'s statements, inside the caller's transaction.
pub(super) fn replace_tools_in(
    tx: &rusqlite::Transaction<'_>,
    server_id: i64,
    tools: &[ToolInfo],
) -> Result<()> {
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    let keep = to_json(&names)?;
    tx.execute(
            "DELETE FROM server_tools WHERE server_id = ?1 AND name NOT IN (SELECT value FROM json_each(?2))",
            params![server_id, keep],
        )?;
    let mut upsert = tx.prepare(
            "INSERT INTO server_tools (server_id, name, description, input_schema) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (server_id, name) DO UPDATE SET
                description = excluded.description,
                input_schema = excluded.input_schema,
                embedding = CASE WHEN server_tools.description = excluded.description THEN server_tools.embedding ELSE NULL END,
                embedding_model = CASE WHEN server_tools.description = excluded.description THEN server_tools.embedding_model ELSE NULL END
             WHERE server_tools.description IS NOT excluded.description OR server_tools.input_schema IS NOT excluded.input_schema",
        )?;
    for t in tools {
        upsert.execute(params![
            server_id,
            t.name,
            t.description,
            to_json(&t.input_schema)?
        ])?;
    }
    Ok(())
}
