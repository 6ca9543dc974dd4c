//! SQL for `server_secrets` (values arrive here already encrypted) and `server_metrics`.

use std::collections::HashSet;

use super::Store;
use super::db::now_text;
use crate::args;
use ad_core::error::Result;

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
        self.write(|c| {
            c.execute(
                "INSERT INTO server_secrets (server_id, key, value, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?4)
                 ON CONFLICT (server_id, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                &args![server_id, key, value, now_text()],
            )?;
            Ok(())
        })
    }

    pub fn delete_secret(&self, server_id: i64, key: &str) -> Result<bool> {
        self.write(|c| {
            Ok(c.execute(
                "DELETE FROM server_secrets WHERE server_id = ?1 AND key = ?2",
                &args![server_id, key],
            )? > 0)
        })
    }

    pub fn secrets_of(&self, server_id: i64) -> Result<Vec<SecretRow>> {
        self.read(|c| {
            c.query(
                "SELECT key, value, updated_at FROM server_secrets WHERE server_id = ?1 ORDER BY key",
                &args![server_id],
            )?
            .iter()
            .map(|r| {
                Ok(SecretRow {
                    key: r.get(0)?,
                    value: r.get(1)?,
                    updated_at: r.get(2)?,
                })
            })
            .collect()
        })
    }

    /// Adds a batch of finished calls to the per-tool counters in one transaction.
    pub fn record_calls(&self, samples: &[CallSample]) -> Result<()> {
        self.write(|c| {
            // A server removed while its call was in flight has no row to count against: its samples are dropped
            // (checked first, as a refused row would end a PostgreSQL transaction).
            let mut exists = HashSet::new();
            let mut missing = HashSet::new();
            let now = now_text();
            for s in samples {
                if missing.contains(&s.server_id) {
                    continue;
                }
                if !exists.contains(&s.server_id) {
                    if c
                        .query_opt("SELECT 1 FROM servers WHERE id = ?1", &args![s.server_id])?
                        .is_some()
                    {
                        exists.insert(s.server_id);
                    } else {
                        missing.insert(s.server_id);
                        continue;
                    }
                }
                c.execute(
                    "INSERT INTO server_metrics (server_id, tool_name, call_count, error_count, total_latency_ms, last_called_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (server_id, tool_name) DO UPDATE SET
                        call_count = server_metrics.call_count + excluded.call_count,
                        error_count = server_metrics.error_count + excluded.error_count,
                        total_latency_ms = server_metrics.total_latency_ms + excluded.total_latency_ms,
                        last_called_at = excluded.last_called_at",
                    &args![s.server_id, &s.tool, s.calls, s.errors, s.latency_ms, &now],
                )?;
            }
            Ok(())
        })
    }

    pub fn server_metrics(&self, server_id: i64) -> Result<Vec<ToolMetrics>> {
        self.read(|c| {
            c.query(
                "SELECT tool_name, call_count, error_count, total_latency_ms, last_called_at FROM server_metrics
                 WHERE server_id = ?1 ORDER BY tool_name",
                &args![server_id],
            )?
            .iter()
            .map(|r| {
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
            })
            .collect()
        })
    }

    pub fn metrics_overview(&self) -> Result<Vec<ServerMetrics>> {
        self.read(|c| {
            c.query(
                "SELECT s.name, CAST(SUM(m.call_count) AS BIGINT), CAST(SUM(m.error_count) AS BIGINT),
                    CAST(SUM(m.total_latency_ms) AS BIGINT)
                 FROM server_metrics m JOIN servers s ON s.id = m.server_id
                 GROUP BY s.id, s.name ORDER BY s.name",
                &[],
            )?
            .iter()
            .map(|r| {
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
            })
            .collect()
        })
    }
}
