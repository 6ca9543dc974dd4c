//! SQL for `server_oauth`: a server's OAuth records (tokens, client registration, pending authorization), stored
//! already encrypted by `secrets`; only a pending authorization's URL is kept in clear, to be shown.
//!
//! Token refresh across processes and replicas: a `refresh_lease` row (kind `refresh_lease`, value
//! `<until unix seconds> <holder>` in clear, nothing secret) claimed and released in short write transactions that are
//! serialized per server: on SQLite by the IMMEDIATE write transaction itself (one writer per file), on PostgreSQL by
//! `pg_advisory_xact_lock` on a key derived from the server id. The HTTP call to the token endpoint happens between
//! the two transactions, never inside one.

use std::collections::HashMap;

use super::db::Conn;
use super::db::now_text;
use super::{Backend, Store};
use crate::args;
use ad_core::error::Result;

/// The advisory lock key of a server's token refresh on PostgreSQL ("adrf" in the high half, the server id below).
fn refresh_key(server_id: i64) -> i64 {
    0x6164_7266_0000_0000_i64 ^ (server_id & 0xffff_ffff)
}

const LEASE: &str = "refresh_lease";

/// What [`Store::claim_oauth_refresh`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefreshClaim {
    /// The stored tokens need no refresh (another process refreshed them): use them.
    Fresh(Option<Vec<u8>>),
    /// The caller holds the lease: refresh, then [`Store::finish_oauth_refresh`]. Carries the stored tokens.
    Claimed(Option<Vec<u8>>),
    /// Another process holds an unexpired lease and is refreshing now.
    Busy,
}

/// What the holder of a refresh lease writes when it releases it.
#[derive(Debug, Clone, Copy)]
pub enum RefreshOutcome<'a> {
    /// New tokens (sealed).
    Store(&'a [u8]),
    /// The refresh token was rejected: the tokens go.
    Delete,
    /// Nothing changes (the refresh failed, or was not needed after all).
    Keep,
}

impl Store {
    /// Runs `f` in a write transaction that no other process or replica runs at the same time for `server_id`.
    fn refresh_tx<T>(&self, server_id: i64, f: impl FnMut(&dyn Conn) -> Result<T>) -> Result<T> {
        match &*self.backend {
            // BEGIN IMMEDIATE: one writer per database file, across processes.
            Backend::Sqlite(s) => s.write(f),
            Backend::Postgres(p) => p.write_locked(refresh_key(server_id), f),
        }
    }

    /// Claims the right to refresh the tokens of `kind` of `server_id` for `lease_secs`, unless `needs_refresh` says
    /// the stored tokens (as they are now, read under the lock) are good, or another holder's lease is unexpired.
    pub fn claim_oauth_refresh(
        &self,
        server_id: i64,
        kind: &str,
        holder: &str,
        now: u64,
        lease_secs: u64,
        mut needs_refresh: impl FnMut(Option<&[u8]>) -> bool,
    ) -> Result<RefreshClaim> {
        self.refresh_tx(server_id, |c| {
            let current: Option<Vec<u8>> = c
                .query_opt(
                    "SELECT value FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                    &args![server_id, kind],
                )?
                .map(|r| r.get(0))
                .transpose()?;
            if !needs_refresh(current.as_deref()) {
                return Ok(RefreshClaim::Fresh(current));
            }
            if let Some((until, by)) = lease(c, server_id)?
                && until > now
                && by != holder
            {
                return Ok(RefreshClaim::Busy);
            }
            let value = format!("{} {holder}", now + lease_secs);
            c.execute(
                "INSERT INTO server_oauth (server_id, kind, value, auth_url, updated_at) VALUES (?1, ?2, ?3, NULL, ?4)
                 ON CONFLICT (server_id, kind) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
                &args![server_id, LEASE, value.as_bytes(), now_text()],
            )?;
            Ok(RefreshClaim::Claimed(current))
        })
    }

    /// Releases `holder`'s refresh lease and writes `outcome` in the same transaction. When the lease is no longer
    /// `holder`'s (it expired and another process claimed it), nothing is written and `false` comes back.
    pub fn finish_oauth_refresh(
        &self,
        server_id: i64,
        kind: &str,
        holder: &str,
        outcome: RefreshOutcome<'_>,
    ) -> Result<bool> {
        self.refresh_tx(server_id, |c| {
            if lease(c, server_id)?.is_none_or(|(_, by)| by != holder) {
                return Ok(false);
            }
            c.execute(
                "DELETE FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                &args![server_id, LEASE],
            )?;
            match outcome {
                RefreshOutcome::Store(value) => {
                    c.execute(
                        "INSERT INTO server_oauth (server_id, kind, value, auth_url, updated_at) VALUES (?1, ?2, ?3, NULL, ?4)
                         ON CONFLICT (server_id, kind) DO UPDATE SET value = excluded.value, auth_url = excluded.auth_url,
                         updated_at = excluded.updated_at",
                        &args![server_id, kind, value, now_text()],
                    )?;
                }
                RefreshOutcome::Delete => {
                    c.execute(
                        "DELETE FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                        &args![server_id, kind],
                    )?;
                }
                RefreshOutcome::Keep => {}
            }
            Ok(true)
        })
    }

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

    /// Stores `value` unless the server already has a record of `kind`; returns the record kept (the one stored
    /// first, when processes race to create it).
    pub fn put_oauth_once(&self, server_id: i64, kind: &str, value: &[u8]) -> Result<Vec<u8>> {
        self.write(|c| {
            c.execute(
                "INSERT INTO server_oauth (server_id, kind, value, auth_url, updated_at) VALUES (?1, ?2, ?3, NULL, ?4)
                 ON CONFLICT (server_id, kind) DO NOTHING",
                &args![server_id, kind, value, now_text()],
            )?;
            let kept: Option<Vec<u8>> = c
                .query_opt(
                    "SELECT value FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
                    &args![server_id, kind],
                )?
                .map(|r| r.get(0))
                .transpose()?;
            Ok(kept.unwrap_or_else(|| value.to_vec()))
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

/// The refresh lease of a server: `(until, holder)`.
fn lease(c: &dyn Conn, server_id: i64) -> Result<Option<(u64, String)>> {
    let Some(row) = c.query_opt(
        "SELECT value FROM server_oauth WHERE server_id = ?1 AND kind = ?2",
        &args![server_id, LEASE],
    )?
    else {
        return Ok(None);
    };
    let value: Vec<u8> = row.get(0)?;
    let text = String::from_utf8_lossy(&value);
    let (until, holder) = text.split_once(' ').unwrap_or(("0", ""));
    Ok(Some((until.parse().unwrap_or(0), holder.to_owned())))
}
