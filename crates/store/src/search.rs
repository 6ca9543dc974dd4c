//! Full-text search, SQLite's own: BM25 over the FTS5 tool index (`ad_bm25`), the A2A skill index and the server
//! list's text filter, plus the stored embeddings of tools (plain SQL in the shared subset).
//!
//! FTS5 exists only in SQLite, so this file (with `schema` and `bm25`) is where it lives. Statements that touch an
//! FTS5 table check the connection's [`Dialect`]; on another engine the server list falls back to substring matching
//! and the skill index is left to that backend's own search.

use crate::db::DbResult;
use rusqlite::params;

use super::db::{Conn, Dialect, Value};
use super::{Store, fts_query};
use crate::args;
use ad_core::error::Result;
use ad_core::model::ToolRecord;

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

/// A skill to index: id, name, description, tags.
pub type SkillEntry<'a> = (&'a str, &'a str, &'a str, String);

/// A tool with its BM25 relevance (higher is better; SQLite's bm25() is negated).
pub struct Bm25Hit {
    pub tool: ToolRecord,
    pub score: f64,
}

/// What `list_servers` adds to its statement to filter and rank servers by text: a join, a condition (its
/// parameters already pushed) and the leading ORDER BY terms (each followed by `, `).
pub(super) struct TextFilter {
    pub join: String,
    pub cond: String,
    pub order: String,
}

/// The text filter of `list_servers` over the servers aliased `s`; `None` when the text has no searchable token.
/// SQLite ranks by FTS5's BM25 (name x4, description x1, tags x2); elsewhere every token must occur in the name,
/// description or tags.
pub(super) fn server_text_filter(
    dialect: Dialect,
    text: &str,
    params: &mut Vec<Value>,
) -> Option<TextFilter> {
    match dialect {
        Dialect::Sqlite => {
            params.push(fts_query(text, "AND", true)?.into());
            Some(TextFilter {
                join: " JOIN servers_fts f ON f.rowid = s.id".into(),
                cond: format!("servers_fts MATCH ?{}", params.len()),
                order: "bm25(servers_fts, 4.0, 1.0, 2.0), ".into(),
            })
        }
        Dialect::Postgres => {
            let tokens: Vec<String> = text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|t| !t.is_empty())
                .take(64)
                .map(str::to_lowercase)
                .collect();
            if tokens.is_empty() {
                return None;
            }
            let conds: Vec<String> = tokens
                .into_iter()
                .map(|t| {
                    params.push(format!("%{t}%").into());
                    format!(
                        "LOWER(s.name || ' ' || s.description || ' ' || s.tags) LIKE ?{}",
                        params.len()
                    )
                })
                .collect();
            Some(TextFilter {
                join: String::new(),
                cond: format!("({})", conds.join(" AND ")),
                order: String::new(),
            })
        }
    }
}

/// Replaces the indexed skills of agent `agent_id`, inside the caller's transaction (SQLite's FTS5 index; another
/// engine keeps no skill index in the database).
pub(super) fn index_skills(c: &dyn Conn, agent_id: &str, skills: &[SkillEntry<'_>]) -> Result<()> {
    if c.dialect() != Dialect::Sqlite {
        return Ok(());
    }
    c.execute(
        "DELETE FROM agent_skills_fts WHERE agent_id = ?1",
        &args![agent_id],
    )?;
    for (id, name, description, tags) in skills {
        c.execute(
            "INSERT INTO agent_skills_fts (agent_id, skill_id, name, description, tags) VALUES (?1, ?2, ?3, ?4, ?5)",
            &args![agent_id, *id, *name, *description, tags],
        )?;
    }
    Ok(())
}

impl Store {
    /// Tools matching an FTS5 expression (see `store::fts_query`), best first, name weighted 4x description.
    pub fn search_tools_bm25(&self, fts: &str, limit: usize) -> Result<Vec<Bm25Hit>> {
        self.search_tools_bm25_within(fts, limit, None)
    }

    /// [`Store::search_tools_bm25`] among the tools of `within` (ids, as a JSON array) only: a profile's own search
    /// scope, ranked and cut inside FTS5 like the whole index.
    pub fn search_tools_bm25_within(
        &self,
        fts: &str,
        limit: usize,
        within: Option<&str>,
    ) -> Result<Vec<Bm25Hit>> {
        self.with_fts(|sqlite| {
        let conn = sqlite.lock();
        super::bm25::refresh(&sqlite.doc_lengths, &conn).db()?;
        // Rank inside FTS5 first and join only the winners; joining every match before the LIMIT costs
        // a lookup per matching row. `ad_bm25` is `bm25` with row lengths from memory (see `store::bm25`).
        const WHOLE: &str = "WITH hits AS (
                SELECT rowid AS id, -ad_bm25(server_tools_fts, 4.0, 1.0) AS score FROM server_tools_fts
                WHERE server_tools_fts MATCH ?1 ORDER BY score DESC LIMIT ?2
             )
             SELECT t.id, t.server_id, s.name, t.name, t.description, hits.score
             FROM hits JOIN server_tools t ON t.id = hits.id JOIN servers s ON s.id = t.server_id ORDER BY hits.score DESC";
        // `+rowid`: the scope filters the matches. A bare `rowid IN (...)` is offered to FTS5, which then runs the
        // whole MATCH once per id of the scope (150 ms instead of 3 for 250 ids among 2,000 tools).
        const WITHIN: &str = "WITH hits AS (
                SELECT rowid AS id, -ad_bm25(server_tools_fts, 4.0, 1.0) AS score FROM server_tools_fts
                WHERE server_tools_fts MATCH ?1 AND +rowid IN (SELECT value FROM json_each(?3))
                ORDER BY score DESC LIMIT ?2
             )
             SELECT t.id, t.server_id, s.name, t.name, t.description, hits.score
             FROM hits JOIN server_tools t ON t.id = hits.id JOIN servers s ON s.id = t.server_id ORDER BY hits.score DESC";
        let mut stmt = conn.prepare_cached(if within.is_some() { WITHIN } else { WHOLE }).db()?;
        // Schemas are left out (Null); the caller loads them for the few tools it returns.
        let map = |r: &rusqlite::Row<'_>| {
            Ok(Bm25Hit {
                tool: ToolRecord {
                    id: r.get(0)?,
                    server_id: r.get(1)?,
                    server: r.get(2)?,
                    name: r.get(3)?,
                    description: r.get(4)?,
                    input_schema: serde_json::Value::Null,
                },
                score: r.get(5)?,
            })
        };
        let rows = match within {
            Some(ids) => stmt.query_map(params![fts, limit as i64, ids], map),
            None => stmt.query_map(params![fts, limit as i64], map),
        }.db()?;
        rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    /// Every indexed tool as (id, server, tool), from the database the search reads (a PostgreSQL backend's
    /// mirror): what a profile's search scope is made of.
    pub fn indexed_tool_names(&self) -> Result<Vec<(i64, String, String)>> {
        self.with_fts(|sqlite| {
            let conn = sqlite.lock();
            let mut stmt = conn
                .prepare_cached(
                    "SELECT t.id, s.name, t.name FROM server_tools t JOIN servers s ON s.id = t.server_id",
                )
                .db()?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .db()?;
            rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    /// Skills matching an FTS5 expression (built by `search::query`), best first, weighted like tools
    /// (name x4, description x1, tags x2).
    pub fn search_skills(&self, fts: &str, limit: usize) -> Result<Vec<SkillHit>> {
        self.with_fts(|sqlite| {
        let conn = sqlite.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT agent_id, skill_id, name, description, tags, bm25(agent_skills_fts, 0, 0, 4.0, 1.0, 2.0) AS s
             FROM agent_skills_fts WHERE agent_skills_fts MATCH ?1 ORDER BY s LIMIT ?2",
        ).db()?;
        let rows = stmt.query_map(params![fts, limit as i64], |r| {
            Ok(SkillHit {
                agent_id: r.get(0)?,
                skill_id: r.get(1)?,
                name: r.get(2)?,
                description: r.get(3)?,
                tags: r.get(4)?,
                bm25: r.get(5)?,
            })
        }).db()?;
        rows.collect::<rusqlite::Result<Vec<_>>>().db()
        })
    }

    /// Tools without an embedding from `model` (never embedded, changed since, or embedded by another model).
    pub fn tools_needing_embedding(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>> {
        self.read(|c| {
            c.query(
                "SELECT id, name, description FROM server_tools
                 WHERE embedding IS NULL OR embedding_model IS DISTINCT FROM ?1 ORDER BY id LIMIT ?2",
                &args![model, limit],
            )?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .collect()
        })
    }

    /// Stores embeddings (little-endian f32) for tools, in one transaction.
    pub fn set_embeddings(&self, model: &str, items: &[(i64, Vec<f32>)]) -> Result<()> {
        self.write(|c| {
            for (id, v) in items {
                let blob: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                c.execute(
                    "UPDATE server_tools SET embedding = ?2, embedding_model = ?3 WHERE id = ?1",
                    &args![*id, blob, model],
                )?;
            }
            Ok(())
        })
    }

    /// Every tool embedding made by `model`, for the in-memory vector index.
    pub fn embeddings(&self, model: &str) -> Result<Vec<(i64, Vec<f32>)>> {
        self.read(|c| {
            c.query(
                "SELECT id, embedding FROM server_tools WHERE embedding_model = ?1 AND embedding IS NOT NULL",
                &args![model],
            )?
            .iter()
            .map(|r| {
                // Read in place: these blobs are most of the data the vector index loads.
                let Some(Value::Blob(blob)) = r.0.get(1) else {
                    return Err(super::db::StoreError::other("column 1: expected bytes").into());
                };
                Ok((
                    r.get(0)?,
                    blob.chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ))
            })
            .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::ServerSpec;

    /// The substring filter other engines use is itself shared SQL: run on SQLite, it keeps the servers whose name,
    /// description or tags hold every token, as FTS5's filter does for whole words.
    #[test]
    fn the_substring_text_filter_agrees_with_fts_on_whole_words() {
        let store = Store::open_in_memory().unwrap();
        for (name, description, tag) in [
            ("github", "Issues and pull requests", "git"),
            ("postgres", "Query a database", "sql"),
            ("files", "Read and write files", "fs"),
        ] {
            let spec = ServerSpec {
                name: name.into(),
                description: description.into(),
                tags: vec![tag.into()],
                command: Some("x".into()),
                ..Default::default()
            };
            store.insert_server(&spec).unwrap();
        }
        let names = |dialect: Dialect, text: &str| -> Vec<String> {
            store
                .read(|c| {
                    let mut params = Vec::new();
                    let f = server_text_filter(dialect, text, &mut params).unwrap();
                    let rows = c.query(
                        &format!(
                            "SELECT s.name FROM servers s{} WHERE {} ORDER BY s.name",
                            f.join, f.cond
                        ),
                        &params,
                    )?;
                    rows.iter().map(|r| r.get(0)).collect()
                })
                .unwrap()
        };
        for text in [
            "query database",
            "PULL requests!",
            "sql",
            "write",
            "nothing here",
        ] {
            assert_eq!(
                names(Dialect::Postgres, text),
                names(Dialect::Sqlite, text),
                "{text}"
            );
        }
        assert_eq!(names(Dialect::Postgres, "Pull"), vec!["github".to_string()]);
        assert!(server_text_filter(Dialect::Postgres, "!?", &mut Vec::new()).is_none());
    }
}
