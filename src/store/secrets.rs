//! SQL for `server_secrets` (values arrive here already encrypted) and `server_metrics`.

use rusqlite::params;

use super::Store;
use crate::error::Result;

/// A stored secret: the encrypted value and when it was last set.
pub struct SecretRow {
    pub key: String,
    pub value: Vec<u8>,
    pub updated_at: String,
}

/// Per-tool call statistics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToolMetrics {
    pub tool_name: String,
    pub call_count: i64,
    pub error_count: i64,
    pub total_latency_ms: i64,
    pub avg_latency_ms: f64,
    pub last_called_at: Option<String>,
}

/// Per-server totals.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ServerMetrics {
    pub server_name: String,
    pub total_calls: i64,
    pub total_errors: i64,
    pub avg_latency_ms: f64,
}

/// Finished calls of one tool, added to its counters by [`Store::record_calls`].
pub struct CallSample {
    pub server_id: i64,
    pub tool: String,
    pub calls: u64,
    pub errors: u64,
    pub latency_ms: u64,
}

impl Store {
    pub fn upsert_secret(&self, server_id: i64, key: &str, value: &[u8]) -> Result<()> {
        self.lock().execute(
            "INSERT INTO server_secrets (server_id, key, value) VALUES (?1, ?2, ?3)
             ON CONFLICT (server_id, key) DO UPDATE SET value = excluded.value, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
            params![server_id, key, value],
        )?;
        Ok(())
    }

    pub fn delete_secret(&self, server_id: i64, key: &str) -> Result<bool> {
        Ok(self.lock().execute(
            "DELETE FROM server_secrets WHERE server_id = ?1 AND key = ?2",
            params![server_id, key],
        )? > 0)
    }

    pub fn secrets_of(&self, server_id: i64) -> Result<Vec<SecretRow>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT key, value, updated_at FROM server_secrets WHERE server_id = ?1 ORDER BY key",
        )?;
        let rows = stmt.query_map([server_id], |r| {
            Ok(SecretRow {
                key: r.get(0)?,
                value: r.get(1)?,
                updated_at: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Adds a batch of finished calls to the per-tool counters in one transaction.
    pub fn record_calls(&self, samples: &[CallSample]) -> Result<()> {
        let mut conn = self.lock();
        let tx = conn.transaction()?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO server_metrics (server_id, tool_name, call_count, error_count, total_latency_ms, last_called_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, strftime('%Y-%m-%dT%H:%M:%fZ','now'))
                 ON CONFLICT (server_id, tool_name) DO UPDATE SET
                    call_count = call_count + excluded.call_count, error_count = error_count + excluded.error_count,
                    total_latency_ms = total_latency_ms + excluded.total_latency_ms, last_called_at = excluded.last_called_at",
            )?;
            for s in samples {
                // A server removed while its call was in flight has no row to count against.
                match stmt.execute(params![
                    s.server_id,
                    s.tool,
                    s.calls as i64,
                    s.errors as i64,
                    s.latency_ms as i64
                ]) {
                    Ok(_) => {}
                    Err(rusqlite::Error::SqliteFailure(f, _))
                        if f.code == rusqlite::ErrorCode::ConstraintViolation => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn server_metrics(&self, server_id: i64) -> Result<Vec<ToolMetrics>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT tool_name, call_count, error_count, total_latency_ms, last_called_at FROM server_metrics WHERE server_id = ?1 ORDER BY tool_name",
        )?;
        let rows = stmt.query_map([server_id], |r| {
            let calls: i64 = r.get(1)?;
            let total: i64 = r.get(3)?;
            Ok(ToolMetrics {
                tool_name: r.get(0)?,
                call_count: calls,
                error_count: r.get(2)?,
                total_latency_ms: total,
                avg_latency_ms: if calls > 0 {
                    total as f64 / calls as f64
                } else {
                    0.0
                },
                last_called_at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn metrics_overview(&self) -> Result<Vec<ServerMetrics>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT s.name, SUM(m.call_count), SUM(m.error_count), SUM(m.total_latency_ms) FROM server_metrics m JOIN servers s ON s.id = m.server_id
             GROUP BY s.id ORDER BY s.name",
        )?;
        let rows = stmt.query_map([], |r| {
            let calls: i64 = r.get(1)?;
            let total: i64 = r.get(3)?;
            Ok(ServerMetrics {
                server_name: r.get(0)?,
                total_calls: calls,
                total_errors: r.get(2)?,
                avg_latency_ms: if calls > 0 {
                    total as f64 / calls as f64
                } else {
                    0.0
                },
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }
}
