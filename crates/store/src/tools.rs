//! SQL for the `server_tools` table: a server's tool list, replaced as a whole, and lookups across servers.

use std::collections::HashSet;

use super::db::{Conn, Row, Value};
use super::{Store, to_json};
use crate::args;
use ad_core::error::Result;
use ad_core::model::{ToolInfo, ToolRecord};

fn tool_from_row(r: &Row) -> Result<ToolRecord> {
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

/// Ids per `IN (...)` list: well under either engine's limit on parameters in one statement.
const IDS_PER_STATEMENT: usize = 512;

impl Store {
    /// Replaces server `server_id`'s tools with `tools` in one transaction. Unchanged tools keep their rows
    /// (and so any stored embedding); tools that vanished are deleted.
    pub fn replace_tools(&self, server_id: i64, tools: &[ToolInfo]) -> Result<()> {
        self.write(|c| replace_tools_in(c, server_id, tools))
    }

    pub fn clear_tools(&self, server_id: i64) -> Result<()> {
        self.write(|c| {
            c.execute(
                "DELETE FROM server_tools WHERE server_id = ?1",
                &args![server_id],
            )?;
            Ok(())
        })
    }

    pub fn tools_of(&self, server_id: i64) -> Result<Vec<ToolRecord>> {
        self.read(|c| {
            c.query(
                &format!("{SELECT} WHERE t.server_id = ?1 ORDER BY t.name"),
                &args![server_id],
            )?
            .iter()
            .map(tool_from_row)
            .collect()
        })
    }

    pub fn tool(&self, server: &str, tool: &str) -> Result<Option<ToolRecord>> {
        self.read(|c| {
            c.query_opt(
                &format!("{SELECT} WHERE s.name = ?1 AND t.name = ?2"),
                &args![server, tool],
            )?
            .as_ref()
            .map(tool_from_row)
            .transpose()
        })
    }

    /// The tools with these ids, in any order.
    pub fn tools_by_ids(&self, ids: &[i64]) -> Result<Vec<ToolRecord>> {
        self.read(|c| {
            let mut out = Vec::with_capacity(ids.len());
            for chunk in ids.chunks(IDS_PER_STATEMENT) {
                // The list is padded (with its last id) to a power of two, so a few statements cover every length
                // and stay in the connection's statement cache.
                let width = chunk.len().next_power_of_two().max(8);
                let list = (1..=width)
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let last = chunk[chunk.len() - 1];
                let params: Vec<Value> = (0..width)
                    .map(|i| chunk.get(i).copied().unwrap_or(last).into())
                    .collect();
                for r in c.query(&format!("{SELECT} WHERE t.id IN ({list})"), &params)? {
                    out.push(tool_from_row(&r)?);
                }
            }
            Ok(out)
        })
    }

    pub fn count_tools(&self) -> Result<i64> {
        self.read(|c| {
            c.query_one("SELECT COUNT(*) FROM server_tools", &[])?
                .get(0)
        })
    }
}

/// [`Store::replace_tools`]'s statements, inside the caller's transaction.
pub(super) fn replace_tools_in(c: &dyn Conn, server_id: i64, tools: &[ToolInfo]) -> Result<()> {
    let keep: HashSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for r in c.query(
        "SELECT name FROM server_tools WHERE server_id = ?1",
        &args![server_id],
    )? {
        let name: String = r.get(0)?;
        if !keep.contains(name.as_str()) {
            c.execute(
                "DELETE FROM server_tools WHERE server_id = ?1 AND name = ?2",
                &args![server_id, name],
            )?;
        }
    }
    for t in tools {
        c.execute(
            "INSERT INTO server_tools (server_id, name, description, input_schema) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (server_id, name) DO UPDATE SET
                description = excluded.description,
                input_schema = excluded.input_schema,
                embedding = CASE WHEN server_tools.description = excluded.description THEN server_tools.embedding ELSE NULL END,
                embedding_model = CASE WHEN server_tools.description = excluded.description THEN server_tools.embedding_model ELSE NULL END
             WHERE server_tools.description IS DISTINCT FROM excluded.description
                OR server_tools.input_schema IS DISTINCT FROM excluded.input_schema",
            &args![server_id, &t.name, &t.description, to_json(&t.input_schema)?],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::ServerSpec;

    fn tool(name: &str, description: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    /// Replacing keeps unchanged rows (and their embeddings), drops vanished ones; lookups by id pad their lists.
    #[test]
    fn replace_keeps_unchanged_rows_and_ids_are_looked_up_in_chunks() {
        let store = Store::open_in_memory().unwrap();
        let spec = ServerSpec {
            name: "s".into(),
            command: Some("x".into()),
            ..Default::default()
        };
        let s = store.insert_server(&spec).unwrap();
        let many: Vec<ToolInfo> = (0..600).map(|i| tool(&format!("t{i}"), "d")).collect();
        store.replace_tools(s.id, &many).unwrap();
        let all = store.tools_of(s.id).unwrap();
        assert_eq!(all.len(), 600);
        store
            .set_embeddings("m", &[(all[0].id, vec![1.0, 2.0])])
            .unwrap();

        let ids: Vec<i64> = all.iter().map(|t| t.id).collect();
        assert_eq!(store.tools_by_ids(&ids).unwrap().len(), 600);
        let three = store.tools_by_ids(&ids[..3]).unwrap();
        let mut got: Vec<i64> = three.iter().map(|t| t.id).collect();
        got.sort();
        assert_eq!(got, ids[..3].to_vec());
        assert!(store.tools_by_ids(&[]).unwrap().is_empty());

        let before = store.total_changes();
        store.replace_tools(s.id, &many).unwrap();
        assert_eq!(
            store.total_changes(),
            before,
            "an unchanged list writes nothing"
        );

        let kept = vec![tool(&all[0].name, "d"), tool("t1", "changed")];
        store.replace_tools(s.id, &kept).unwrap();
        let now = store.tools_of(s.id).unwrap();
        assert_eq!(now.len(), 2);
        assert_eq!(now[0].id, all[0].id, "an unchanged tool keeps its row");
        assert_eq!(
            store.embeddings("m").unwrap(),
            vec![(all[0].id, vec![1.0, 2.0])]
        );
        assert_eq!(
            store.tools_needing_embedding("m", 10).unwrap().len(),
            1,
            "the changed tool needs a new embedding"
        );
    }
}
