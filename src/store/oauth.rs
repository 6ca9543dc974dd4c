//! SQL for `server_oauth`: a server's OAuth records (tokens, client registration, pending authorization), stored
//! already encrypted by `secrets`; only a pending authorization's URL is kept in clear, to be shown.

use std::collections::HashMap;

use super::Store;
use super::db::now_text;
use crate::args;
use crate::error::Result;

impl Store {
    pub fn put_oauth(
        &self,
        server_id: i64,
        kind: &str,
        value: &[u8],
        auth_url: Option<&str>,
    ) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO server_oauth (server_id, kind, value, auth_url, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (server_id, kind) DO UPDATE SET value = excluded.value, auth_url = excluded.auth_url,
                 updated_at = excluded.updated_at",
                &args![server_id, kind, value, auth_url, now_text()],
            )?;
            Ok(())
        })
    }

    pub fn oauth(&self, server_id: i64, kind: &str) -> Result<Option<Vec<u8>>> {
        self.read(|c| {
            c.query_opt(
                "SELECT value FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                &args![server_id, kind],
            )?
            .map(|r| r.get(0))
            .transpose()
        })
    }

    pub fn delete_oauth(&self, server_id: i64, kind: &str) -> Result<bool> {
        self.write(|c| {
            Ok(c.execute(
                "DELETE FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                &args![server_id, kind],
            )? > 0)
        })
    }

    /// The authorize URL of every server with an authorization in progress, by server id.
    pub fn pending_auth_urls(&self) -> Result<HashMap<i64, String>> {
        self.read(|c| {
            c.query(
                "SELECT server_id, auth_url FROM server_oauth WHERE kind = 'pending' AND auth_url IS NOT NULL",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?)))
            .collect()
        })
    }
}
