//! Storage: the only module that contains SQL, behind one boundary, [`db::Conn`], that every backend implements.
//!
//! `Store` is a cheap handle over a private `Backend` (today SQLite: one file shared by every agent-discover
//! process, WAL). Store modules take a `&dyn Conn` and write their SQL once, in the subset SQLite and PostgreSQL share
//! (see `db`); `Store::read` runs them on the connection, `Store::write` in one transaction. Full-text search (FTS5,
//! `ad_bm25`) and the `PRAGMA` counters are SQLite's own and live in `schema`, `bm25`, `search` and `sqlite`.
//! Nothing here knows about MCP, HTTP or child processes.
//!
//! Must not know: MCP, HTTP, child processes, the registry's rules (it stores what it is given), or any crate of
//! this workspace but `ad-core`. `unsafe` is confined to `bm25` (the FTS5 ranking function through SQLite's C API).

pub mod agents;
mod approvals;
mod bm25;
mod calls;
pub mod copy;
pub use calls::StoredCall;
pub mod db;
mod guards;
mod introspect;
pub mod lifecycle;
mod limits;
pub mod market_cache;
mod oauth;
mod overrides;
mod personal;
pub mod pg;
mod pins;
mod profiles;
mod runtime;
mod sandbox;
mod schema;
mod scripts;
mod search;
mod secrets;
mod servers;
mod sqlite;
mod tools;
pub mod watch;

use std::path::Path;
use std::sync::Arc;

use ad_core::error::{Error, Result};
use db::Conn;

pub use approvals::{ApprovalRow, NewApproval, PolicyRow};
pub use introspect::IntrospectionRow;
pub use oauth::{RefreshClaim, RefreshOutcome};
pub use overrides::OverrideRow;
pub use pins::PinRow;
pub use schema::SCHEMA_VERSION;
pub use scripts::SavedScriptRow;
pub use search::Bm25Hit;
pub use secrets::{CallSample, SecretRow, ServerMetrics, ToolMetrics};

#[derive(Clone)]
pub struct Store {
    backend: Arc<Backend>,
}

/// The database a `Store` talks to.
enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(pg::backend::Postgres),
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
        Ok(Store::with(Backend::Sqlite(sqlite::Sqlite::open(path)?)))
    }

    /// A shared PostgreSQL registry (`postgres://…`): connects, migrates its schema (once, however many replicas
    /// start at the same moment) and listens for the other replicas' commits.
    pub fn open_url(url: &str) -> Result<Store> {
        Ok(Store::with(Backend::Postgres(pg::backend::Postgres::open(
            url,
        )?)))
    }

    /// Whether this store is a shared PostgreSQL registry.
    pub fn is_shared(&self) -> bool {
        matches!(&*self.backend, Backend::Postgres(_))
    }

    /// On a shared PostgreSQL registry, a channel that changes with every commit any replica makes (and whenever the
    /// listener reconnected); `None` on SQLite, where `watch` watches the file.
    pub fn remote_changes(&self) -> Option<tokio::sync::watch::Receiver<pg::ListenState>> {
        match &*self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(p) => Some(p.changes()),
        }
    }

    /// What this replica's PostgreSQL listener has seen so far (a lock and a copy); `None` on SQLite.
    pub fn listen_state(&self) -> Option<pg::ListenState> {
        match &*self.backend {
            Backend::Sqlite(_) => None,
            Backend::Postgres(p) => Some(p.listen_state()),
        }
    }

    /// Runs SQLite-only search code (FTS5) on the database itself, or on a PostgreSQL backend's up-to-date mirror.
    fn with_fts<T>(&self, f: impl FnOnce(&sqlite::Sqlite) -> Result<T>) -> Result<T> {
        match &*self.backend {
            Backend::Sqlite(s) => f(s),
            Backend::Postgres(p) => p.search(f),
        }
    }

    /// An in-memory database, for unit tests.
    pub fn open_in_memory() -> Result<Store> {
        Ok(Store::with(Backend::Sqlite(
            sqlite::Sqlite::open_in_memory()?,
        )))
    }

    fn with(backend: Backend) -> Store {
        Store {
            backend: Arc::new(backend),
        }
    }

    /// Runs `f` on the connection, each statement on its own: for reads, and for a single statement that needs no
    /// transaction around it.
    fn read<T>(&self, f: impl FnOnce(&dyn Conn) -> Result<T>) -> Result<T> {
        match &*self.backend {
            Backend::Sqlite(s) => s.read(f),
            Backend::Postgres(p) => p.read(f),
        }
    }

    /// Runs `f` in one transaction: every statement it runs is committed together when it returns `Ok`, none
    /// otherwise.
    fn write<T>(&self, f: impl FnMut(&dyn Conn) -> Result<T>) -> Result<T> {
        match &*self.backend {
            Backend::Sqlite(s) => s.write(f),
            Backend::Postgres(p) => p.write(f),
        }
    }

    /// The schema version stored in the database.
    pub fn schema_version(&self) -> Result<i64> {
        match &*self.backend {
            Backend::Sqlite(s) => s.schema_version(),
            Backend::Postgres(p) => p.schema_version(),
        }
    }

    /// Changes whenever another connection (another agent-discover process) commits to the database.
    pub fn data_version(&self) -> Result<i64> {
        match &*self.backend {
            Backend::Sqlite(s) => s.data_version(),
            Backend::Postgres(p) => Ok(p.data_version()),
        }
    }

    /// Row changes this process's connection has made since it opened (a test and benchmark probe for "no write").
    pub fn total_changes(&self) -> u64 {
        match &*self.backend {
            Backend::Sqlite(s) => s.total_changes(),
            Backend::Postgres(p) => p.total_changes(),
        }
    }

    /// A marker that moves with every commit to the database: another connection's (`data_version`) or this one's
    /// (rows it changed). Reads bracketed by two equal markers saw one state of the database.
    pub fn change_marker(&self) -> Result<(i64, u64)> {
        match &*self.backend {
            Backend::Sqlite(s) => s.change_marker(),
            Backend::Postgres(p) => Ok(p.change_marker()),
        }
    }

    /// [`Store::change_marker`] when it already reflects every commit made before this call, by any process: what a
    /// cache that must never serve a stale answer (approval rules) is keyed by. SQLite's does (`data_version` is read
    /// from the shared file); PostgreSQL's moves only when another replica's notification arrives, so there it is
    /// `None` and such a cache reads through.
    pub fn fresh_marker(&self) -> Option<(i64, u64)> {
        match &*self.backend {
            Backend::Sqlite(s) => s.change_marker().ok(),
            Backend::Postgres(_) => None,
        }
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
