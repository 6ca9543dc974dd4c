//! SQL for A2A agents (#15): one row per agent (a card URL or a worker command), its last card and status, and
//! the full-text index of its skills that `find_tool` searches beside tools.

use rusqlite::{OptionalExtension, Row, params};

use super::{Store, json_col, to_json};
use crate::error::Result;

/// One stored agent.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRow {
    pub id: String,
    pub url: Option<String>,
    pub command: Option<String>,
    pub args: Vec<String>,
    pub card: Option<serde_json::Value>,
    pub card_url: Option<String>,
    /// Auth headers, sealed (`Secrets::seal_bytes`).
    pub headers: Option<Vec<u8>>,
    pub max_concurrent: u32,
    pub status: String,
    pub last_error: Option<String>,
    pub created_at: String,
}

/// A skill matched by a search: its agent, id, name and description, and a BM25 score (lower is better).
#[derive(Debug, Clone, PartialEq)]
pub struct SkillHit {
    pub agent_id: String,
    pub skill_id: String,
    pub name: String,
    pub description: String,
    pub tags: String,
    pub bm25: f64,
}

const SELECT: &str = "SELECT id, url, command, args, card, card_url, headers, max_concurrent, status, last_error, \
    created_at FROM agents";

fn row(r: &Row<'_>) -> rusqlite::Result<AgentRow> {
    Ok(AgentRow {
        id: r.get(0)?,
        url: r.get(1)?,
        command: r.get(2)?,
        args: json_col(r.get(3)?),
        card: r
            .get::<_, Option<String>>(4)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        card_url: r.get(5)?,
        headers: r.get(6)?,
        max_concurrent: r.get::<_, i64>(7)?.clamp(1, 1024) as u32,
        status: r.get(8)?,
        last_error: r.get(9)?,
        created_at: r.get(10)?,
    })
}

/// A skill to index: id, name, description, tags.
pub type SkillEntry<'a> = (&'a str, &'a str, &'a str, String);

impl Store {
    /// Inserts or replaces agent `a` and its skill index in one transaction.
    pub fn upsert_agent(&self, a: &AgentRow, skills: &[SkillEntry<'_>]) -> Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        let card = a.card.as_ref().map(to_json).transpose()?;
        tx.execute(
            "INSERT INTO agents (id, url, command, args, card, card_url, headers, max_concurrent, status, last_error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT(id) DO UPDATE SET url = ?2, command = ?3, args = ?4, card = ?5, card_url = ?6, headers = ?7,
                max_concurrent = ?8, status = ?9, last_error = ?10, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
            params![
                a.id,
                a.url,
                a.command,
                to_json(&a.args)?,
                card,
                a.card_url,
                a.headers,
                a.max_concurrent,
                a.status,
                a.last_error
            ],
        )?;
        tx.execute("DELETE FROM agent_skills_fts WHERE agent_id = ?1", [&a.id])?;
        for (id, name, description, tags) in skills {
            tx.execute(
                "INSERT INTO agent_skills_fts (agent_id, skill_id, name, description, tags) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![a.id, id, name, description, tags],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn agent(&self, id: &str) -> Result<Option<AgentRow>> {
        Ok(self
            .lock()
            .query_row(&format!("{SELECT} WHERE id = ?1"), [id], row)
            .optional()?)
    }

    /// Every agent, oldest first (the worker executor's order).
    pub fn agents(&self) -> Result<Vec<AgentRow>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(&format!("{SELECT} ORDER BY created_at, id"))?;
        let rows = stmt.query_map([], row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Removes an agent and its skills; false when there was none.
    pub fn remove_agent(&self, id: &str) -> Result<bool> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        tx.execute("DELETE FROM agent_skills_fts WHERE agent_id = ?1", [id])?;
        let n = tx.execute("DELETE FROM agents WHERE id = ?1", [id])?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// Records a probed status and its error (none when healthy).
    pub fn set_agent_status(&self, id: &str, status: &str, error: Option<&str>) -> Result<()> {
        self.lock().execute(
            "UPDATE agents SET status = ?2, last_error = ?3, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
             WHERE id = ?1 AND (status <> ?2 OR last_error IS NOT ?3)",
            params![id, status, error],
        )?;
        Ok(())
    }

    /// Skills matching an FTS5 expression (built by `search::query`), best first, weighted like tools
    /// (name x4, description x1, tags x2).
    pub fn search_skills(&self, fts: &str, limit: usize) -> Result<Vec<SkillHit>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT agent_id, skill_id, name, description, tags, bm25(agent_skills_fts, 0, 0, 4.0, 1.0, 2.0) AS s
             FROM agent_skills_fts WHERE agent_skills_fts MATCH ?1 ORDER BY s LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![fts, limit as i64], |r| {
            Ok(SkillHit {
                agent_id: r.get(0)?,
                skill_id: r.get(1)?,
                name: r.get(2)?,
                description: r.get(3)?,
                tags: r.get(4)?,
                bm25: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
