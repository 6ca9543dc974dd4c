//! SQL for tool search: BM25 over `server_tools_fts`, and the stored embeddings of tools.

use rusqlite::params;

use super::Store;
use crate::error::Result;
use crate::model::ToolRecord;

/// A tool with its BM25 relevance (higher is better; SQLite's bm25() is negated).
pub struct Bm25Hit {
    pub tool: ToolRecord,
    pub score: f64,
}

impl Store {
    /// Tools matching an FTS5 expression (see `store::fts_query`), best first, name weighted 4x description.
    pub fn search_tools_bm25(&self, fts: &str, limit: usize) -> Result<Vec<Bm25Hit>> {
        let conn = self.lock();
        super::bm25::refresh(&self.doc_lengths, &conn)?;
        let mut stmt = conn.prepare_cached(
            // Rank inside FTS5 first and join only the winners; joining every match before the LIMIT costs
            // a lookup per matching row. `ad_bm25` is `bm25` with row lengths from memory (see `store::bm25`).
            "WITH hits AS (
                SELECT rowid AS id, -ad_bm25(server_tools_fts, 4.0, 1.0) AS score FROM server_tools_fts
                WHERE server_tools_fts MATCH ?1 ORDER BY score DESC LIMIT ?2
             )
             SELECT t.id, t.server_id, s.name, t.name, t.description, hits.score
             FROM hits JOIN server_tools t ON t.id = hits.id JOIN servers s ON s.id = t.server_id ORDER BY hits.score DESC",
        )?;
        // Schemas are left out (Null); the caller loads them for the few tools it returns.
        let rows = stmt.query_map(params![fts, limit as i64], |r| {
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
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Tools without an embedding from `model` (never embedded, changed since, or embedded by another model).
    pub fn tools_needing_embedding(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached(
            "SELECT id, name, description FROM server_tools WHERE embedding IS NULL OR embedding_model IS NOT ?1 ORDER BY id LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![model, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Stores embeddings (little-endian f32) for tools, in one transaction.
    pub fn set_embeddings(&self, model: &str, items: &[(i64, Vec<f32>)]) -> Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare_cached(
                "UPDATE server_tools SET embedding = ?2, embedding_model = ?3 WHERE id = ?1",
            )?;
            for (id, v) in items {
                let blob: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                stmt.execute(params![id, blob, model])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Every tool embedding made by `model`, for the in-memory vector index.
    pub fn embeddings(&self, model: &str) -> Result<Vec<(i64, Vec<f32>)>> {
        let conn = self.lock();
        let mut stmt = conn.prepare_cached("SELECT id, embedding FROM server_tools WHERE embedding_model = ?1 AND embedding IS NOT NULL")?;
        let rows = stmt.query_map([model], |r| {
            let blob: Vec<u8> = r.get(1)?;
            Ok((
                r.get(0)?,
                blob.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect(),
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
