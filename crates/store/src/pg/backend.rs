//! The PostgreSQL backend of a `Store`: a pool for the shared SQL, a `LISTEN` connection that tells this replica of
//! every commit, and an in-memory SQLite mirror of the searchable tables for full-text search (FTS5, `ad_bm25`), so
//! find_tool ranks exactly as on the SQLite backend.
//!
//! Every write transaction ends with `NOTIFY agent_discover`: the other replicas' listeners count it (their
//! `data_version` moves, their feeds rebuild, their MCP clients get `list_changed`). The mirror holds the servers,
//! tools and agent skills with PostgreSQL's ids; it is checked when a search runs after a commit (a fingerprint of the
//! searchable columns, computed by PostgreSQL) and rebuilt only when that fingerprint differs, so call metrics and
//! embeddings, which commit often, cost a fingerprint query and no rebuild.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::super::db::Conn;
use super::super::sqlite::Sqlite;
use super::{Isolation, ListenState, PgListener, PgPool, migrate, notify, schema_version};
use crate::args;
use ad_core::error::Result;

/// The channel every replica listens to and every write transaction notifies.
pub const CHANNEL: &str = "agent_discover";

pub(crate) struct Postgres {
    pool: PgPool,
    listener: PgListener,
    /// Write transactions this process committed (its own commits, before their notification comes back).
    writes: AtomicU64,
    mirror: Mutex<Mirror>,
}

struct Mirror {
    db: Sqlite,
    /// `(listener version, writes)` when the mirror was last checked.
    checked: Option<(u64, u64)>,
    /// The fingerprint of what the mirror holds.
    fingerprint: String,
}

/// One text that changes whenever a searchable column of servers, tools or agents does (ids included).
const FINGERPRINT: &str = "SELECT md5(
    COALESCE((SELECT string_agg(id::text || ':' || md5(name || chr(1) || description || chr(1) || tags), ',' ORDER BY id) FROM servers), '')
    || '|' || COALESCE((SELECT string_agg(id::text || ':' || server_id::text || ':' || md5(name || chr(1) || description), ',' ORDER BY id) FROM server_tools), '')
    || '|' || COALESCE((SELECT string_agg(id || ':' || md5(COALESCE(card, '')), ',' ORDER BY id) FROM agents), ''))";

impl Postgres {
    /// Connects to `url`, migrates the schema (once, whoever else starts at the same moment) and starts listening.
    pub(crate) fn open(url: &str) -> Result<Postgres> {
        let pool = PgPool::connect(url)?;
        migrate(&pool)?;
        let listener = PgListener::start(&pool, CHANNEL)?;
        Ok(Postgres {
            pool,
            listener,
            writes: AtomicU64::new(0),
            mirror: Mutex::new(Mirror {
                db: Sqlite::open_in_memory()?,
                checked: None,
                fingerprint: String::new(),
            }),
        })
    }

    pub(crate) fn read<T>(&self, f: impl FnOnce(&dyn Conn) -> Result<T>) -> Result<T> {
        self.pool.with(f)
    }

    /// One SERIALIZABLE transaction (re-run on a serialization failure) that notifies the other replicas.
    pub(crate) fn write<T>(&self, mut f: impl FnMut(&dyn Conn) -> Result<T>) -> Result<T> {
        let out = self.pool.transaction(|c| {
            let out = f(c)?;
            notify(c, CHANNEL, "")?;
            Ok(out)
        })?;
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(out)
    }

    /// One READ COMMITTED transaction that first takes the transaction-scoped advisory lock `key` (released at commit
    /// or rollback), then runs `f` and notifies the other replicas. Every statement after the lock sees what the
    /// previous holder committed, which a SERIALIZABLE snapshot taken before waiting would not.
    pub(crate) fn write_locked<T>(
        &self,
        key: i64,
        mut f: impl FnMut(&dyn Conn) -> Result<T>,
    ) -> Result<T> {
        let out = self.pool.transaction_in(Isolation::ReadCommitted, |c| {
            c.execute("SELECT pg_advisory_xact_lock(?1)", &args![key])?;
            let out = f(c)?;
            notify(c, CHANNEL, "")?;
            Ok(out)
        })?;
        self.writes.fetch_add(1, Ordering::SeqCst);
        Ok(out)
    }

    pub(crate) fn schema_version(&self) -> Result<i64> {
        schema_version(&self.pool)
    }

    /// Moves with every commit to the registry: other replicas' (notifications, and reconnections of the listener,
    /// after which anything may have changed) and this process's own.
    pub(crate) fn data_version(&self) -> i64 {
        (self.listener.state().version() + self.writes.load(Ordering::SeqCst)) as i64
    }

    pub(crate) fn total_changes(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }

    pub(crate) fn change_marker(&self) -> (i64, u64) {
        (
            self.listener.state().version() as i64,
            self.writes.load(Ordering::SeqCst),
        )
    }

    /// What the listener has seen so far.
    pub(crate) fn listen_state(&self) -> ListenState {
        self.listener.state()
    }

    /// The listener's state as a watch channel: it changes with every notification and reconnection.
    pub(crate) fn changes(&self) -> tokio::sync::watch::Receiver<ListenState> {
        self.listener.subscribe()
    }

    /// Runs `f` on the search mirror, brought up to date first.
    pub(crate) fn search<T>(&self, f: impl FnOnce(&Sqlite) -> Result<T>) -> Result<T> {
        let mut mirror = self.mirror.lock().unwrap_or_else(|p| p.into_inner());
        let now = (
            self.listener.state().version(),
            self.writes.load(Ordering::SeqCst),
        );
        if mirror.checked != Some(now) {
            let fingerprint: String = self.pool.with(|c| c.query_one(FINGERPRINT, &[])?.get(0))?;
            if fingerprint != mirror.fingerprint {
                self.rebuild(&mirror.db)?;
                mirror.fingerprint = fingerprint;
            }
            mirror.checked = Some(now);
        }
        f(&mirror.db)
    }

    /// Copies the searchable columns into the mirror, in one of its transactions (its triggers fill the FTS5 tables).
    fn rebuild(&self, mirror: &Sqlite) -> Result<()> {
        let (servers, tools, agents) = self.pool.with(|c| {
            Ok((
                c.query(
                    "SELECT id, name, description, tags FROM servers ORDER BY id",
                    &[],
                )?,
                c.query(
                    "SELECT id, server_id, name, description FROM server_tools ORDER BY id",
                    &[],
                )?,
                c.query("SELECT id, url, command, card FROM agents ORDER BY id", &[])?,
            ))
        })?;
        mirror.write(|c| {
            c.batch(
                "DELETE FROM agent_skills_fts; DELETE FROM agents; DELETE FROM server_tools; DELETE FROM servers;",
            )?;
            for s in &servers {
                c.execute(
                    "INSERT INTO servers (id, name, description, tags) VALUES (?1, ?2, ?3, ?4)",
                    &s.0,
                )?;
            }
            for t in &tools {
                c.execute(
                    "INSERT INTO server_tools (server_id, id, name, description) VALUES (?2, ?1, ?3, ?4)",
                    &t.0,
                )?;
            }
            for a in &agents {
                let id: String = a.get(0)?;
                c.execute(
                    "INSERT INTO agents (id, url, command, card) VALUES (?1, ?2, ?3, ?4)",
                    &a.0,
                )?;
                let card: Option<String> = a.get(3)?;
                let card: serde_json::Value = card
                    .and_then(|c| serde_json::from_str(&c).ok())
                    .unwrap_or_default();
                for skill in card["skills"].as_array().into_iter().flatten() {
                    let text = |k: &str| skill[k].as_str().unwrap_or_default().to_owned();
                    let tags: Vec<&str> = skill["tags"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t.as_str())
                        .collect();
                    c.execute(
                        "INSERT INTO agent_skills_fts (agent_id, skill_id, name, description, tags)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                        &args![id.as_str(), text("id"), text("name"), text("description"), tags.join(" ")],
                    )?;
                }
            }
            Ok(())
        })
    }
}
