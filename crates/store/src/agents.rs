//! SQL for A2A agents (#15): one row per agent (a card URL or a worker command), its last card and status. The
//! full-text index of its skills that `find_tool` searches beside tools is FTS5, so it lives in `search`.

use super::db::{Row, now_text};
use super::{Store, json_col, search, to_json};
use crate::args;
pub use crate::search::{SkillEntry, SkillHit};
use ad_core::error::Result;

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

const SELECT: &str = "SELECT id, url, command, args, card, card_url, headers, max_concurrent, status, last_error, \
    created_at FROM agents";

fn row(r: &Row) -> Result<AgentRow> {
    Ok(AgentRow {
        id: r.get(0)?,
        url: r.get(1)?,
        command: r.get(2)?,
        args: json_col(r.get(3)?),
        card: r
            .get::<Option<String>>(4)?
            .and_then(|s| serde_json::from_str(&s).ok()),
        card_url: r.get(5)?,
        headers: r.get(6)?,
        max_concurrent: r.get::<i64>(7)?.clamp(1, 1024) as u32,
        status: r.get(8)?,
        last_error: r.get(9)?,
        created_at: r.get(10)?,
    })
}

impl Store {
    /// Inserts or replaces agent `a` and its skill index in one transaction.
    pub fn upsert_agent(&self, a: &AgentRow, skills: &[SkillEntry<'_>]) -> Result<()> {
        let card = a.card.as_ref().map(to_json).transpose()?;
        self.write(|c| {
            c.execute(
                "INSERT INTO agents (id, url, command, args, card, card_url, headers, max_concurrent, status, last_error,
                    created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url, command = excluded.command, args = excluded.args,
                    card = excluded.card, card_url = excluded.card_url, headers = excluded.headers,
                    max_concurrent = excluded.max_concurrent, status = excluded.status,
                    last_error = excluded.last_error, updated_at = excluded.updated_at",
                &args![
                    &a.id,
                    a.url.as_deref(),
                    a.command.as_deref(),
                    to_json(&a.args)?,
                    card.as_deref(),
                    a.card_url.as_deref(),
                    a.headers.as_deref(),
                    a.max_concurrent,
                    &a.status,
                    a.last_error.as_deref(),
                    now_text()
                ],
            )?;
            search::index_skills(c, &a.id, skills)
        })
    }

    pub fn agent(&self, id: &str) -> Result<Option<AgentRow>> {
        self.read(|c| {
            c.query_opt(&format!("{SELECT} WHERE id = ?1"), &args![id])?
                .as_ref()
                .map(row)
                .transpose()
        })
    }

    /// Every agent, oldest first (the worker executor's order).
    pub fn agents(&self) -> Result<Vec<AgentRow>> {
        self.read(|c| {
            c.query(&format!("{SELECT} ORDER BY created_at, id"), &[])?
                .iter()
                .map(row)
                .collect()
        })
    }

    /// Removes an agent and its skills; false when there was none.
    pub fn remove_agent(&self, id: &str) -> Result<bool> {
        self.write(|c| {
            search::index_skills(c, id, &[])?;
            Ok(c.execute("DELETE FROM agents WHERE id = ?1", &args![id])? > 0)
        })
    }

    /// Records a probed status and its error (none when healthy).
    pub fn set_agent_status(&self, id: &str, status: &str, error: Option<&str>) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE agents SET status = ?2, last_error = ?3, updated_at = ?4
                 WHERE id = ?1 AND (status <> ?2 OR last_error IS DISTINCT FROM ?3)",
                &args![id, status, error, now_text()],
            )?;
            Ok(())
        })
    }
}
