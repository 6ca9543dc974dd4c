//! The SQLite backend: one connection to the database file (WAL, shared by every agent-discover process), its
//! transactions, the `PRAGMA` counters that tell this process about other processes' commits, and the SQLite side
//! of the backend-neutral [`Conn`](super::db::Conn) (parameters, rows and errors mapped to rusqlite's).

use crate::db::DbResult;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, TransactionBehavior};

use super::db::{Conn, Dialect, Row, StoreError, StoreErrorKind, Value};
use super::{bm25, schema};
use ad_core::error::{Error, Result};

/// The SQLite backend of a `Store`: one connection, locked for one short statement or transaction at a time.
pub(super) struct Sqlite {
    conn: Mutex<Connection>,
    /// Row lengths of the tool index for `ad_bm25` (see `bm25`), refreshed under the connection's lock.
    pub(super) doc_lengths: bm25::SharedLengths,
}

impl Sqlite {
    /// Opens (creating if needed) the database file and brings its schema up to date.
    pub(super) fn open(path: &Path) -> Result<Sqlite> {
        Sqlite::init(Connection::open(path).db()?)
    }

    /// An in-memory database, for unit tests.
    pub(super) fn open_in_memory() -> Result<Sqlite> {
        Sqlite::init(Connection::open_in_memory().db()?)
    }

    fn init(mut conn: Connection) -> Result<Sqlite> {
        conn.busy_timeout(Duration::from_secs(5)).db()?;
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
                Err(e) => return Err(Error::Store(sqlite_error(e))),
            }
        }
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
            .db()?;
        schema::migrate(&mut conn)?;
        let doc_lengths = bm25::SharedLengths::default();
        bm25::register(&conn, doc_lengths.clone()).db()?;
        Ok(Sqlite {
            conn: Mutex::new(conn),
            doc_lengths,
        })
    }

    /// The connection itself, for the SQLite-only code (FTS5 search, `PRAGMA`s).
    pub(super) fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (statements are atomic, an unfinished
        // transaction is rolled back when dropped), so poison is ignored.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the connection, each statement on its own (autocommit).
    pub(super) fn read<T>(&self, f: impl FnOnce(&dyn Conn) -> Result<T>) -> Result<T> {
        f(&*self.lock())
    }

    /// Runs `f` in one IMMEDIATE transaction (the write lock taken up front, so a read followed by a write never
    /// meets another process's commit in between), committed when `f` succeeds and rolled back otherwise.
    pub(super) fn write<T>(&self, mut f: impl FnMut(&dyn Conn) -> Result<T>) -> Result<T> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .db()?;
        let out = f(&*tx)?;
        tx.commit().db()?;
        Ok(out)
    }

    /// The schema version stored in the file (`PRAGMA user_version`).
    pub(super) fn schema_version(&self) -> Result<i64> {
        self.lock()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .db()
    }

    /// Moves whenever another connection commits to the file (`PRAGMA data_version`).
    pub(super) fn data_version(&self) -> Result<i64> {
        self.lock()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .db()
    }

    /// Rows this connection has changed since it opened.
    pub(super) fn total_changes(&self) -> u64 {
        self.lock().total_changes()
    }

    /// `data_version` and `total_changes` read under one lock.
    pub(super) fn change_marker(&self) -> Result<(i64, u64)> {
        let conn = self.lock();
        // Prepared once per connection: it is read before every proxied call (the approval rules' cache).
        let version = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get(0)))
            .db()?;
        Ok((version, conn.total_changes()))
    }
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

fn value_of(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// A driver error as a [`StoreError`], its kind read from the engine's code.
pub(crate) fn sqlite_error(e: rusqlite::Error) -> StoreError {
    {
        let kind = match &e {
            rusqlite::Error::SqliteFailure(f, _) => match f.extended_code {
                rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => StoreErrorKind::Unique,
                rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => StoreErrorKind::ForeignKey,
                _ if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
                {
                    StoreErrorKind::Retry
                }
                _ => StoreErrorKind::Other,
            },
            _ => StoreErrorKind::Other,
        };
        StoreError {
            kind,
            message: e.to_string(),
        }
    }
}

impl Conn for Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64> {
        let n = self
            .prepare_cached(sql)
            .db()?
            .execute(rusqlite::params_from_iter(params))
            .db()?;
        Ok(n as u64)
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.prepare_cached(sql).db()?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).db()?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().db()? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(value_of(r.get_ref(i).db()?));
            }
            out.push(Row(values));
        }
        Ok(out)
    }

    fn batch(&self, sql: &str) -> Result<()> {
        self.execute_batch(sql).db()
    }
}

impl<T> DbResult<T> for std::result::Result<T, rusqlite::Error> {
    fn db(self) -> Result<T> {
        self.map_err(|e| Error::Store(sqlite_error(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args;

    /// The files allowed to name the SQLite crate: SQLite's own code (this backend, migrations, FTS5 ranking and
    /// search) and the machine-local marketplace cache.
    const SQLITE_FILES: &[&str] = &[
        "crates/store/src/sqlite.rs",
        "crates/store/src/schema.rs",
        "crates/store/src/bm25.rs",
        "crates/store/src/search.rs",
        "crates/store/src/market_cache.rs",
    ];

    /// Statement openings that mark SQL in code (comments are skipped).
    const SQL_MARKS: &[&str] = &[
        "SELECT ",
        "INSERT INTO ",
        "DELETE FROM ",
        "CREATE TABLE",
        "CREATE INDEX",
        "ALTER TABLE",
        "PRAGMA ",
        " ON CONFLICT",
    ];

    /// What is wrong with source file `path` (relative to the workspace root, `/`-separated) holding `text`.
    fn boundary_offences(path: &str, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let crate_name = concat!("rus", "qlite");
        if !SQLITE_FILES.contains(&path)
            && let Some(n) = text.lines().position(|l| l.contains(crate_name))
        {
            out.push(format!(
                "{path}:{}: names {crate_name} (only {SQLITE_FILES:?} may)",
                n + 1
            ));
        }
        if !path.starts_with("crates/store/") {
            for (n, line) in text.lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                if let Some(mark) = SQL_MARKS.iter().find(|m| code.contains(**m)) {
                    out.push(format!(
                        "{path}:{}: SQL ({mark:?}) outside crates/store",
                        n + 1
                    ));
                }
            }
        }
        out
    }

    fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_checker_finds_both_kinds_of_offence() {
        let crate_name = concat!("rus", "qlite");
        let line = format!("use {crate_name}::Connection;");
        assert_eq!(
            boundary_offences("crates/store/src/sqlite.rs", &line),
            Vec::<String>::new()
        );
        let found = boundary_offences("crates/store/src/servers.rs", &line);
        assert!(
            found[0].starts_with("crates/store/src/servers.rs:1: names"),
            "{found:?}"
        );
        let sql = "// SELECT in a comment is fine\nlet q = \"SELECT id FROM servers\";";
        let found = boundary_offences("src/feed.rs", sql);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("src/feed.rs:2: SQL"), "{found:?}");
        assert!(boundary_offences("crates/store/src/tools.rs", sql).is_empty());
    }

    /// Only SQLite's own files name the SQLite crate, and only the store crate holds SQL: across the workspace (the
    /// application's `src/` and every crate's), not just this crate.
    #[test]
    fn only_the_store_has_sql_and_only_sqlite_files_name_the_crate() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .and_then(std::path::Path::parent)
            .expect("the store crate lives at crates/store in the workspace");
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        for krate in std::fs::read_dir(root.join("crates")).unwrap() {
            let src = krate.unwrap().path().join("src");
            if src.is_dir() {
                rust_files(&src, &mut files);
            }
        }
        assert!(
            files.len() > 50,
            "found only {} files under src",
            files.len()
        );
        let mut offences = Vec::new();
        for file in files {
            let rel = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            offences.extend(boundary_offences(
                &rel,
                &std::fs::read_to_string(&file).unwrap(),
            ));
        }
        assert!(
            offences.is_empty(),
            "storage boundary broken:\n{}",
            offences.join("\n")
        );
    }

    #[test]
    fn sqlite_conn_round_trips_values_and_classifies_errors() {
        let conn = Connection::open_in_memory().unwrap();
        let c: &dyn Conn = &conn;
        c.batch("CREATE TABLE t (id INTEGER PRIMARY KEY, n BIGINT, f DOUBLE PRECISION, s TEXT UNIQUE, b BLOB)")
            .unwrap();
        let id: i64 = c
            .query_one(
                "INSERT INTO t (n, f, s, b) VALUES (?1, ?2, ?3, ?4) RETURNING id",
                &args![7i64, 0.5, "x", vec![1u8, 2]],
            )
            .unwrap()
            .get(0)
            .unwrap();
        let row = c
            .query_one("SELECT n, f, s, b, NULL FROM t WHERE id = ?1", &args![id])
            .unwrap();
        assert_eq!(
            row.0,
            vec![
                Value::Int(7),
                Value::Real(0.5),
                Value::Text("x".into()),
                Value::Blob(vec![1, 2]),
                Value::Null
            ]
        );
        let e = c
            .execute("INSERT INTO t (s) VALUES (?1)", &args!["x"])
            .unwrap_err();
        assert!(e.is_unique_violation(), "{e}");
        assert_eq!(c.execute("UPDATE t SET n = n + 1", &[]).unwrap(), 1);
    }
}
