//! SQLite storage: the only module that contains SQL. One file shared by every agent-discover process (WAL).
//!
//! `Store` is a cheap handle; each call locks the connection for one short synchronous statement or transaction.
//! Nothing here knows about MCP, HTTP or child processes.

pub mod agents;
mod bm25;
mod calls;
pub use calls::StoredCall;
pub mod db;
mod introspect;
pub mod lifecycle;
pub mod market_cache;
mod oauth;
pub mod pg;
mod pins;
mod schema;
mod search;
mod secrets;
mod servers;
mod sqlite;
mod tools;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

use crate::error::{Error, Result};

pub use introspect::IntrospectionRow;
pub use pins::PinRow;
pub use schema::SCHEMA_VERSION;
pub use search::Bm25Hit;
pub use secrets::{CallSample, SecretRow, ServerMetrics, ToolMetrics};

#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
    /// Row lengths of the tool index for `ad_bm25` (see `bm25`), refreshed under the connection's lock.
    doc_lengths: bm25::SharedLengths,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        let conn = Connection::open(path)?;
        Store::init(conn)
    }

    /// An in-memory database, for unit tests.
    pub fn open_in_memory() -> Result<Store> {
        Store::init(Connection::open_in_memory()?)
    }

    fn init(mut conn: Connection) -> Result<Store> {
        conn.busy_timeout(Duration::from_secs(5))?;
        // Several processes opening a brand-new file at once race to switch it to WAL, and SQLite answers that race
        // with SQLITE_BUSY at once rather than through the busy handler: retry it for a while.
        let give_up = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            // journal_mode returns a row, so it is read rather than executed.
            match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
                Ok(_) => break,
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && std::time::Instant::now() < give_up =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e.into()),
            }
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")?;
        schema::migrate(&mut conn)?;
        let doc_lengths = bm25::SharedLengths::default();
        bm25::register(&conn, doc_lengths.clone())?;
        Ok(Store {
            conn: Arc::new(Mutex::new(conn)),
            doc_lengths,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (statements are atomic), so poison is ignored.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The schema version stored in the file.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self
            .lock()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Changes whenever another connection (another agent-discover process) commits to the file.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self
            .lock()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }
}

/// Turns free text into a safe FTS5 query: alphanumeric tokens, each quoted, as prefixes, joined by `op`.
///
/// No user input can produce FTS5 syntax (operators, column filters, quotes), so MATCH never fails on it.
/// Returns `None` when the text has no searchable token.
pub fn fts_query(text: &str, op: &str, prefix: bool) -> Option<String> {
    let tokens: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(64)
        .map(|t| format!("\"{}\"{}", t.to_lowercase(), if prefix { "*" } else { "" }))
        .collect();
    if tokens.is_empty() {
        None
    } else {
        Some(tokens.join(&format!(" {op} ")))
    }
}

fn json_col<T: serde::de::DeserializeOwned + Default>(s: Option<String>) -> T {
    s.and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

fn to_json<T: serde::Serialize>(v: &T) -> Result<String> {
    serde_json::to_string(v).map_err(|e| Error::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fts_query_escapes_everything() {
        assert_eq!(fts_query("c++", "AND", false).as_deref(), Some("\"c\""));
        assert_eq!(
            fts_query("what's up", "OR", true).as_deref(),
            Some("\"what\"* OR \"s\"* OR \"up\"*")
        );
        assert_eq!(fts_query("\"*^:-", "AND", false), None);
    }
}
