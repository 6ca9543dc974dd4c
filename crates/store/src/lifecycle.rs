//! SQL for the server lifecycle: a whole config applied in one transaction, and each status change as one UPDATE.

use super::db::{Conn, now_text};
use super::servers::{insert_row, server_row};
use super::{Store, to_json};
use crate::args;
use ad_core::error::{Error, Result, ToolErrorKind};
use ad_core::model::{Server, ServerSpec, ServerStatus};

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
    /// Runs `batch` in one transaction under `origin`; returns the inserted and updated rows, inserts first.
    pub fn apply_batch(&self, origin: &str, batch: &ApplyBatch<'_>) -> Result<Vec<Server>> {
        self.write(|c| {
            let mut ids = Vec::with_capacity(batch.inserts.len() + batch.updates.len());
            for spec in &batch.inserts {
                ids.push(insert_row(c, spec, origin)?);
            }
            let now = now_text();
            for (id, spec) in &batch.updates {
                let n = c.execute(
                    "UPDATE servers SET description = ?2, command = ?3, args = ?4, env = ?5, tags = ?6, transport = ?7,
                        url = ?8, headers = ?9, updated_at = ?10
                     WHERE id = ?1",
                    &args![
                        *id,
                        &spec.description,
                        spec.command.as_deref(),
                        to_json(&spec.args)?,
                        to_json(&spec.env)?,
                        to_json(&spec.tags)?,
                        spec.transport.as_str(),
                        spec.url.as_deref(),
                        to_json(&spec.headers)?,
                        &now,
                    ],
                )?;
                if n == 0 {
                    return Err(Error::not_found("server", spec.name.clone()));
                }
                ids.push(*id);
            }
            for id in &batch.deletes {
                c.execute("DELETE FROM servers WHERE id = ?1", &args![*id])?;
            }
            ids.into_iter().map(|id| server_row(c, id)).collect()
        })
    }

    /// Records a status change as one UPDATE: subscribers never see the status without its error or URL.
    pub fn set_status(&self, id: i64, change: &StatusChange<'_>) -> Result<()> {
        self.write(|c| set_status_in(c, id, change))
    }

    /// A server's new tool list and its status in one transaction: a server becomes `ready` together with the tools
    /// it listed, never before or after them.
    pub fn set_tools_and_status(
        &self,
        id: i64,
        tools: &[ad_core::model::ToolInfo],
        change: &StatusChange<'_>,
    ) -> Result<()> {
        self.write(|c| {
            super::tools::replace_tools_in(c, id, tools)?;
            set_status_in(c, id, change)
        })
    }

    /// Records the protocol revision a server's child connected with (its era); no write when it is unchanged.
    pub fn set_protocol(&self, id: i64, protocol: &str) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE servers SET protocol = ?2 WHERE id = ?1 AND protocol IS DISTINCT FROM ?2",
                &args![id, protocol],
            )?;
            Ok(())
        })
    }

    pub fn count_tools_of(&self, server_id: i64) -> Result<i64> {
        self.read(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM server_tools WHERE server_id = ?1",
                &args![server_id],
            )?
            .get(0)
        })
    }
}

/// [`Store::set_status`]'s UPDATE, inside the caller's transaction.
fn set_status_in(c: &dyn Conn, id: i64, change: &StatusChange<'_>) -> Result<()> {
    let (error, kind) = match change.error {
        Some((m, k)) => (Some(m), Some(k.as_str())),
        None => (None, None),
    };
    c.execute(
        "UPDATE servers SET status = ?2, active = COALESCE(?3, active),
                last_error = ?4,
                error_kind = ?5, auth_url = ?6, updated_at = ?7
             WHERE id = ?1",
        &args![
            id,
            change.status.as_str(),
            change.active,
            error,
            kind,
            change.auth_url,
            now_text()
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker moves with this connection's writes and with another connection's commits, and stays put for reads.
    #[test]
    fn change_marker_moves_with_every_commit_and_only_then() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let (a, b) = (Store::open(&path).unwrap(), Store::open(&path).unwrap());
        let m0 = a.change_marker().unwrap();
        assert_eq!(a.change_marker().unwrap(), m0);
        let spec = ServerSpec {
            name: "s".into(),
            command: Some("x".into()),
            ..Default::default()
        };
        let s = a.insert_server(&spec).unwrap();
        let m1 = a.change_marker().unwrap();
        assert_ne!(m1, m0, "this connection's write");
        a.list_servers(&Default::default()).unwrap();
        a.tools_of(s.id).unwrap();
        assert_eq!(a.change_marker().unwrap(), m1, "reads move nothing");
        let ready = StatusChange {
            status: ServerStatus::Ready,
            active: Some(true),
            error: None,
            auth_url: None,
        };
        b.set_tools_and_status(s.id, &[], &ready).unwrap();
        assert_ne!(
            a.change_marker().unwrap(),
            m1,
            "another connection's commit"
        );
        assert_eq!(
            a.server_by_id(s.id).unwrap().unwrap().status,
            ServerStatus::Ready
        );
    }
}
