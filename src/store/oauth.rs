//! SQL for `server_oauth`: a server's OAuth records (tokens, client registration, pending authorization), stored
//! already encrypted by `secrets`; only a pending authorization's URL is kept in clear, to be shown.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, params};

use super::Store;
use crate::error::Result;

impl Store {
    pub fn put_oauth(
        &self,
        server_id: i64,
        kind: &str,
        value: &[u8],
        auth_url: Option<&str>,
    ) -> Result<()> {
        self.lock().execute(
            "INSERT INTO server_oauth (server_id, kind, value, auth_url) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (server_id, kind) DO UPDATE SET value = excluded.value, auth_url = excluded.auth_url,
             updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')",
            params![server_id, kind, value, auth_url],
        )?;
        Ok(())
    }

    pub fn oauth(&self, server_id: i64, kind: &str) -> Result<Option<Vec<u8>>> {
        Ok(self
            .lock()
            .query_row(
                "SELECT value FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                params![server_id, kind],
                |r| r.get(0),
            )
            .optional()?)
    }

    pub fn delete_oauth(&self, server_id: i64, kind: &str) -> Result<bool> {
        Ok(self.lock().execute(
            "DELETE FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
            params![server_id, kind],
        )? > 0)
    }

    /// The authorize URL of every server with an authorization in progress, by server id.
    pub fn pending_auth_urls(&self) -> Result<HashMap<i64, String>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(
            "SELECT server_id, auth_url FROM server_oauth WHERE kind = 'pending' AND auth_url IS NOT NULL",
        )?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<HashMap<_, _>>>()?)
    }
}
