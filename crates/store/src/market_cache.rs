//! All SQL of the marketplace: one key-value table of cached registry answers (JSON text and the Unix time it was fetched).
//!
//! The cache is local to the machine and kept in a SQLite file (the app points it at its data directory's database
//! file; a replica of a shared registry keeps its own), so it is SQLite-only by design, outside `Conn`. [`MarketCache`] is the handle the marketplace holds; the plain functions below it work on
//! its connection. Keys are built by the caller (`browse:<source>:<query>:<limit>:<cursor>`, `resolved:<setting>`);
//! values are JSON.

use crate::db::DbResult;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

/// The cache file, opened once; each call locks its connection for one statement.
pub struct MarketCache {
    conn: Mutex<Connection>,
}

impl MarketCache {
    /// Opens (creating if needed) the cache file, with its directory; see [`open`].
    pub fn open(path: &Path) -> ad_core::error::Result<MarketCache> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        Ok(MarketCache {
            conn: Mutex::new(open(path).db()?),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached JSON under `key` and when it was stored (Unix seconds), if any.
    pub fn get(&self, key: &str) -> ad_core::error::Result<Option<(String, i64)>> {
        get(&self.lock(), key).db()
    }

    /// Stores `json` under `key` with the current time, replacing an older answer.
    pub fn put(&self, key: &str, json: &str) -> ad_core::error::Result<()> {
        put(&self.lock(), key, json).db()
    }
}

/// Answers older than this are deleted by [`open`].
pub const KEEP_SECS: i64 = 30 * 24 * 60 * 60;

/// Opens (creating if needed) the SQLite file for the cache: WAL, a 5 s busy timeout, the table, old rows pruned.
pub fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // journal_mode returns a row, so it is read rather than executed.
    let _mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    migrate(&conn)?;
    prune(&conn, now_unix().saturating_sub(KEEP_SECS))?;
    Ok(conn)
}

/// Creates the cache table when it is missing. Idempotent.
pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS marketplace_cache (
             key        TEXT PRIMARY KEY NOT NULL,
             json       TEXT NOT NULL,
             fetched_at INTEGER NOT NULL
         );",
    )
}

/// The cached JSON under `key` and when it was stored (Unix seconds), if any.
pub fn get(conn: &Connection, key: &str) -> rusqlite::Result<Option<(String, i64)>> {
    conn.query_row(
        "SELECT json, fetched_at FROM marketplace_cache WHERE key = ?1",
        params![key],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
}

/// Stores `json` under `key` with the current time, replacing an older answer.
pub fn put(conn: &Connection, key: &str, json: &str) -> rusqlite::Result<()> {
    put_at(conn, key, json, now_unix())
}

/// Like [`put`] with an explicit time (Unix seconds), for tests of expiry.
pub fn put_at(conn: &Connection, key: &str, json: &str, fetched_at: i64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO marketplace_cache (key, json, fetched_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(key) DO UPDATE SET json = excluded.json, fetched_at = excluded.fetched_at",
        params![key, json, fetched_at],
    )?;
    Ok(())
}

/// Deletes answers stored before `cutoff` (Unix seconds); returns how many were deleted.
pub fn prune(conn: &Connection, cutoff: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM marketplace_cache WHERE fetched_at < ?1",
        params![cutoff],
    )
}

/// Now in Unix seconds (0 if the clock is before 1970).
pub fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_replace_prune() -> rusqlite::Result<()> {
        let conn = Connection::open_in_memory()?;
        migrate(&conn)?;
        migrate(&conn)?;
        assert_eq!(get(&conn, "k")?, None);
        put_at(&conn, "k", "[1]", 10)?;
        put_at(&conn, "k", "[2]", 20)?;
        assert_eq!(get(&conn, "k")?, Some(("[2]".to_owned(), 20)));
        put_at(&conn, "old", "[]", 5)?;
        assert_eq!(prune(&conn, 15)?, 1);
        assert_eq!(get(&conn, "old")?, None);
        Ok(())
    }
}
