//! SQL for the server lifecycle: a whole config applied in one transaction, and each status change as one UPDATE.

use rusqlite::params;

use super::servers::{insert_row, server_row};
use super::{Store, to_json};
use crate::error::{Error, Result, ToolErrorKind};
use crate::model::{Server, ServerSpec, ServerStatus};

/// The writes one `apply_config` needs, done together or not at all.
#[derive(Debug, Default)]
pub struct ApplyBatch<'a> {
    pub inserts: Vec<&'a ServerSpec>,
    /// (server id, new configuration); the name, source and package fields stay.
    pub updates: Vec<(i64, &'a ServerSpec)>,
    pub deletes: Vec<i64>,
}

impl ApplyBatch<'_> {
    pub fn is_empty(&self) -> bool {
        self.inserts.is_empty() && self.updates.is_empty() && self.deletes.is_empty()
    }
}

/// A server's status with what goes with it: the error (message and kind) or the authorization URL.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusChange<'a> {
    pub status: ServerStatus,
    /// Sets the cross-process `active` flag too when given.
    pub active: Option<bool>,
    pub error: Option<(&'a str, ToolErrorKind)>,
    pub auth_url: Option<&'a str>,
}

impl Store {
    /// Runs `batch` in one IMMEDIATE transaction under `origin`; returns the inserted and updated rows, inserts first.
    pub fn apply_batch(&self, origin: &str, batch: &ApplyBatch<'_>) -> Result<Vec<Server>> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut ids = Vec::with_capacity(batch.inserts.len() + batch.updates.len());
        for spec in &batch.inserts {
            ids.push(insert_row(&tx, spec, origin)?);
        }
        {
            let mut update = tx.prepare_cached(
                "UPDATE servers SET description = ?2, command = ?3, args = ?4, env = ?5, tags = ?6, transport = ?7,
                    url = ?8, headers = ?9, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
                 WHERE id = ?1",
            )?;
            for (id, spec) in &batch.updates {
                let n = update.execute(params![
                    id,
                    spec.description,
                    spec.command,
                    to_json(&spec.args)?,
                    to_json(&spec.env)?,
                    to_json(&spec.tags)?,
                    spec.transport.as_str(),
                    spec.url,
                    to_json(&spec.headers)?,
                ])?;
                if n == 0 {
                    return Err(Error::not_found("server", spec.name.clone()));
                }
                ids.push(*id);
            }
            let mut delete = tx.prepare_cached("DELETE FROM servers WHERE id = ?1")?;
            for id in &batch.deletes {
                delete.execute([id])?;
            }
        }
        let rows = ids
            .into_iter()
            .map(|id| server_row(&tx, id))
            .collect::<Result<Vec<_>>>()?;
        tx.commit()?;
        Ok(rows)
    }

    /// Records a status change as one UPDATE: subscribers never see the status without its error or URL.
    pub fn set_status(&self, id: i64, change: &StatusChange<'_>) -> Result<()> {
        let (error, kind) = match change.error {
            Some((m, k)) => (Some(m), Some(k.as_str())),
            None => (None, None),
        };
        self.lock().execute(
            "UPDATE servers SET status = ?2, active = COALESCE(?3, active),
                last_error = ?4,
                error_kind = ?5, auth_url = ?6, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
             WHERE id = ?1",
            params![
                id,
                change.status.as_str(),
                change.active,
                error,
                kind,
                change.auth_url
            ],
        )?;
        Ok(())
    }

    /// Records the protocol revision a server's child connected with (its era); no write when it is unchanged.
    pub fn set_protocol(&self, id: i64, protocol: &str) -> Result<()> {
        self.lock().execute(
            "UPDATE servers SET protocol = ?2 WHERE id = ?1 AND protocol IS NOT ?2",
            params![id, protocol],
        )?;
        Ok(())
    }

    pub fn count_tools_of(&self, server_id: i64) -> Result<i64> {
        Ok(self.lock().query_row(
            "SELECT COUNT(*) FROM server_tools WHERE server_id = ?1",
            [server_id],
            |r| r.get(0),
        )?)
    }

    /// Row changes this process's connection has made since it opened (a test and benchmark probe for "no write").
    pub fn total_changes(&self) -> u64 {
        self.lock().total_changes()
    }
}
