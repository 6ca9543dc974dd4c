//! Issue 16: the PostgreSQL backend against a real server from Debian's packages (initdb + postgres in a temporary
//! directory on a loopback port): schema migrations, values, error kinds, transactions, LISTEN/NOTIFY, and the PG
//! schema kept equal to the SQLite one.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, Weak, mpsc};
use std::time::Duration;

use agent_discover::args;
use agent_discover::error::Error;
use agent_discover::store::db::{Conn, StoreErrorKind, Value};
use agent_discover::store::pg::{self, PgListener, PgPool};

/// How long a server or a notification may take on a loaded 2-core machine before the test fails.
const PATIENCE: Duration = Duration::from_secs(30);

/// The directory of Debian's PostgreSQL binaries (the newest installed version).
fn postgres_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop().expect(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): scripts/test.sh installs Debian's \
         `postgresql` package, or run `apt-get install postgresql`",
    )
}

/// The uid and gid to run PostgreSQL as: the `postgres` user when the tests run as root (initdb refuses root).
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let line = passwd.lines().find(|l| l.starts_with("postgres:")).expect(
        "running as root needs the `postgres` user (created by Debian's postgresql package)",
    );
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

fn as_postgres(cmd: &mut Command, user: Option<(u32, u32)>, dir: &Path) {
    cmd.current_dir(dir).stdin(Stdio::null());
    if let Some((uid, gid)) = user {
        cmd.uid(uid)
            .gid(gid)
            .env("HOME", dir)
            .env("USER", "postgres");
    }
}

/// A PostgreSQL server of its own in a temporary directory; stopped (its whole process group) when dropped.
pub struct PgServer {
    pub port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl PgServer {
    pub fn start() -> PgServer {
        let bin = postgres_bin();
        let user = postgres_user();
        let dir = tempfile::tempdir().unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .args(["--locale=C.UTF-8"]);
        as_postgres(&mut initdb, user, dir.path());
        let out = initdb.output().expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // A port found free may be taken before postgres binds it (tests run in parallel): try another then.
        let mut log = Vec::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut cmd = Command::new(bin.join("postgres"));
            cmd.arg("-D")
                .arg(&data)
                .arg("-p")
                .arg(port.to_string())
                .args(["-c", "listen_addresses=127.0.0.1"])
                .args(["-c", "unix_socket_directories="])
                .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
                .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .process_group(0);
            as_postgres(&mut cmd, user, dir.path());
            let mut child = cmd.spawn().expect("start postgres");
            let stderr = child.stderr.take().unwrap();
            let (tx, rx) = mpsc::channel();
            // Reads the log to its end (so postgres never blocks on a full pipe), reporting lines until ready.
            std::thread::spawn(move || {
                let mut ready = false;
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    if !ready {
                        ready = line.contains("ready to accept connections");
                        let _ = tx.send((line, ready));
                    }
                }
            });
            log.clear();
            // Until the readiness line, the end of the log (postgres exited) or a silence too long.
            while let Ok((line, ready)) = rx.recv_timeout(PATIENCE) {
                if ready {
                    return PgServer {
                        port,
                        child: Some(child),
                        _dir: dir,
                    };
                }
                log.push(line);
            }
            stop(child);
            if !log.iter().any(|l| l.contains("could not bind")) {
                break;
            }
        }
        panic!("postgres did not become ready:\n{}", log.join("\n"));
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database, and its URL.
    pub fn new_database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("t{}", NEXT.fetch_add(1, Ordering::SeqCst));
        let admin = PgPool::with_config(pg::parse_url(&self.url("postgres")).unwrap(), 1).unwrap();
        admin
            .with(|c| c.batch(&format!("CREATE DATABASE {name}")))
            .unwrap();
        self.url(&name)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child);
        }
    }
}

/// Stops a postmaster we started: an immediate shutdown (it stops its backends, reaps them and removes its shared
/// memory), then SIGKILL to its whole process group if it did not exit in time.
fn stop(mut child: Child) {
    let pid = child.id() as i32;
    // SAFETY: signalling the process we started (not reaped yet, so the id is still ours).
    unsafe { libc::kill(pid, libc::SIGQUIT) };
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = child.wait();
        let _ = tx.send(());
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        // SAFETY: the group of the postmaster we started, which has not exited.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    }
    let _ = waiter.join();
}

/// One server shared by the tests that run at the same time (each in a database of its own); stopped when the last
/// of them ends, and started again by a later test.
pub fn server() -> Arc<PgServer> {
    static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(s) = shared.upgrade() {
        return s;
    }
    let s = Arc::new(PgServer::start());
    *shared = Arc::downgrade(&s);
    s
}

/// A pool on a fresh database of the shared server, its schema migrated.
fn migrated(server: &PgServer) -> PgPool {
    let pool = PgPool::connect(&server.new_database()).unwrap();
    pg::migrate(&pool).unwrap();
    pool
}

fn kind(e: &Error) -> StoreErrorKind {
    match e {
        Error::Store(s) => s.kind,
        other => panic!("not a store error: {other}"),
    }
}

fn count(c: &dyn Conn, sql: &str) -> i64 {
    c.query_one(sql, &[]).unwrap().get(0).unwrap()
}

#[test]
fn schema_applies_twice_idempotently() {
    let server = server();
    let pool = PgPool::connect(&server.new_database()).unwrap();
    assert_eq!(pg::schema_version(&pool).unwrap(), 0);
    pg::migrate(&pool).unwrap();
    assert_eq!(pg::schema_version(&pool).unwrap(), pg::PG_SCHEMA_VERSION);
    pool.with(|c| {
        c.execute("INSERT INTO servers (name) VALUES (?1)", &args!["kept"])?;
        Ok(())
    })
    .unwrap();
    pg::migrate(&pool).unwrap();
    assert_eq!(pg::schema_version(&pool).unwrap(), pg::PG_SCHEMA_VERSION);
    pool.with(|c| {
        assert_eq!(
            count(c, "SELECT COUNT(*) FROM schema_migrations"),
            pg::PG_SCHEMA_VERSION
        );
        assert_eq!(count(c, "SELECT COUNT(*) FROM servers"), 1);
        // The defaults SQLite computes with strftime: the same RFC 3339 text.
        let created: String = c.query_one("SELECT created_at FROM servers", &[])?.get(0)?;
        assert_eq!(created.len(), 24, "{created}");
        assert!(
            created.ends_with('Z') && created.as_bytes()[10] == b'T',
            "{created}"
        );
        Ok(())
    })
    .unwrap();
}

#[test]
fn concurrent_schema_apply_from_two_pools_migrates_once() {
    let server = server();
    let url = server.new_database();
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let url = url.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let pool = PgPool::connect(&url).unwrap();
                barrier.wait();
                pg::migrate(&pool)
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    let pool = PgPool::connect(&url).unwrap();
    assert_eq!(pg::schema_version(&pool).unwrap(), pg::PG_SCHEMA_VERSION);
    pool.with(|c| {
        assert_eq!(
            count(c, "SELECT COUNT(*) FROM schema_migrations"),
            pg::PG_SCHEMA_VERSION
        );
        Ok(())
    })
    .unwrap();
}

#[test]
fn values_round_trip() {
    let server = server();
    let pool = PgPool::connect(&server.new_database()).unwrap();
    pool.with(|c| {
        c.batch(
            "CREATE TABLE v (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, i BIGINT, small INTEGER,
             flag BOOLEAN, f DOUBLE PRECISION, s TEXT, b BYTEA)",
        )?;
        let rows = [
            args![i64::MIN, 0i64, false, -0.5, "", Vec::<u8>::new()],
            args![i64::MAX, i64::from(i32::MAX), true, 1e300, "héllo '?1' \"?2\"", vec![0u8, 255, 10]],
            args![None::<i64>, None::<i64>, None::<bool>, None::<f64>, None::<&str>, None::<Vec<u8>>],
        ];
        for row in &rows {
            let id: i64 = c
                .query_one(
                    "INSERT INTO v (i, small, flag, f, s, b) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                    row,
                )?
                .get(0)?;
            let back = c.query_one("SELECT i, small, flag, f, s, b FROM v WHERE id = ?1", &args![id])?;
            assert_eq!(&back.0[..], &row[..]);
        }
        // A placeholder used twice, and one inside quotes left alone.
        let r = c.query_one("SELECT ?1 || '?1' || ?1", &args!["x"])?;
        assert_eq!(r.0, vec![Value::Text("x?1x".into())]);
        // Integers where PostgreSQL expects a float; a float where it expects an integer is refused.
        let r = c.query_one("SELECT f FROM v WHERE f > ?1 ORDER BY f", &args![0i64])?;
        assert_eq!(r.0, vec![Value::Real(1e300)]);
        let e = c
            .query("SELECT i FROM v WHERE i = ?1", &args![0.5])
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot pass a float"), "{e}");
        // Out of the range of an INTEGER column: refused, not truncated.
        assert!(c.execute("UPDATE v SET small = ?1", &args![i64::MAX]).is_err());
        // COUNT is BIGINT; SUM of BIGINTs is NUMERIC, refused with a hint to cast it (as db.rs's subset says).
        assert_eq!(count(c, "SELECT COUNT(*) FROM v"), 3);
        let e = c.query("SELECT SUM(i) FROM v", &[]).unwrap_err().to_string();
        assert!(e.contains("numeric") && e.contains("cast"), "{e}");
        assert_eq!(count(c, "SELECT CAST(SUM(i) AS BIGINT) FROM v"), -1);
        assert_eq!(c.execute("UPDATE v SET s = ?1 WHERE i IS NOT NULL", &args!["y"])?, 2);
        assert_eq!(c.query("SELECT s FROM v WHERE s = ?1", &args!["nothing"])?, vec![]);
        Ok(())
    })
    .unwrap();
}

#[test]
fn violations_map_to_their_kinds() {
    let server = server();
    let pool = migrated(&server);
    pool.with(|c| {
        c.execute("INSERT INTO servers (name) VALUES (?1)", &args!["a"])?;
        let e = c
            .execute("INSERT INTO servers (name) VALUES (?1)", &args!["a"])
            .unwrap_err();
        assert!(e.is_unique_violation(), "{e}");
        assert!(e.to_string().contains("23505"), "{e}");
        let e = c
            .execute(
                "INSERT INTO server_tools (server_id, name) VALUES (?1, ?2)",
                &args![999_999i64, "t"],
            )
            .unwrap_err();
        assert_eq!(kind(&e), StoreErrorKind::ForeignKey, "{e}");
        let e = c
            .execute(
                "INSERT INTO servers (name, status) VALUES (?1, ?2)",
                &args!["b", "bogus"],
            )
            .unwrap_err();
        assert_eq!(kind(&e), StoreErrorKind::Other, "{e}");
        assert!(e.to_string().contains("23514"), "{e}");
        let e = c.batch("SELEC 1").unwrap_err();
        assert_eq!(kind(&e), StoreErrorKind::Other);
        assert!(e.to_string().contains("syntax error"), "{e}");
        // The connection is still usable after errors outside a transaction.
        assert_eq!(count(c, "SELECT COUNT(*) FROM servers"), 1);
        Ok(())
    })
    .unwrap();
}

#[test]
fn transactions_commit_roll_back_and_retry_serialization_failures() {
    let server = server();
    let pool = migrated(&server);
    let names = |pool: &PgPool| -> Vec<String> {
        pool.with(|c| {
            c.query("SELECT name FROM servers ORDER BY name", &[])?
                .iter()
                .map(|r| r.get(0))
                .collect()
        })
        .unwrap()
    };
    pool.transaction(|c| {
        c.execute(
            "INSERT INTO servers (name) VALUES (?1)",
            &args!["committed"],
        )?;
        Ok(())
    })
    .unwrap();
    // An error returned by the closure rolls back what it wrote.
    let e = pool
        .transaction(|c| {
            c.execute(
                "INSERT INTO servers (name) VALUES (?1)",
                &args!["rolled-back"],
            )?;
            Err::<(), _>(Error::Internal("closure failed".into()))
        })
        .unwrap_err();
    assert!(e.to_string().contains("closure failed"), "{e}");
    // A failed statement whose error the closure swallows still rolls back (PostgreSQL aborted the transaction),
    // and its error is returned.
    let e = pool
        .transaction(|c| {
            c.execute(
                "INSERT INTO servers (name) VALUES (?1)",
                &args!["swallowed"],
            )?;
            let dup = c.execute(
                "INSERT INTO servers (name) VALUES (?1)",
                &args!["committed"],
            );
            assert!(dup.unwrap_err().is_unique_violation());
            Ok(())
        })
        .unwrap_err();
    assert!(e.is_unique_violation(), "{e}");
    assert_eq!(names(&pool), vec!["committed".to_string()]);

    // Two transactions read the same row, then both write it: the second write is a serialization failure, and
    // its transaction runs again on top of the first one's commit.
    let attempts = Arc::new(AtomicUsize::new(0));
    let barrier = Arc::new(Barrier::new(2));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let pool = pool.clone();
            let attempts = attempts.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let mut first = true;
                pool.transaction(|c| {
                    attempts.fetch_add(1, Ordering::SeqCst);
                    let n: i64 = c
                        .query_one(
                            "SELECT error_count FROM servers WHERE name = ?1",
                            &args!["committed"],
                        )?
                        .get(0)?;
                    if std::mem::take(&mut first) {
                        barrier.wait();
                    }
                    c.execute(
                        "UPDATE servers SET error_count = ?1 WHERE name = ?2",
                        &args![n + 1, "committed"],
                    )?;
                    Ok(())
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 3);
    pool.with(|c| {
        assert_eq!(count(c, "SELECT error_count FROM servers"), 2);
        Ok(())
    })
    .unwrap();
}

#[test]
fn the_pool_bounds_its_connections_and_recovers_from_a_panic() {
    let server = server();
    let url = server.new_database();
    let pool = PgPool::with_config(pg::parse_url(&url).unwrap(), 2).unwrap();
    pool.with(|c| c.batch("CREATE TABLE n (i BIGINT PRIMARY KEY)"))
        .unwrap();
    let threads: Vec<_> = (0..6)
        .map(|t| {
            let pool = pool.clone();
            std::thread::spawn(move || {
                for i in 0..10i64 {
                    pool.transaction(|c| {
                        c.execute("INSERT INTO n (i) VALUES (?1)", &args![t * 100 + i])?;
                        // Every connection of this database, counted while one is checked out.
                        let open = count(
                            c,
                            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()",
                        );
                        assert!((1..=2).contains(&open), "{open} connections");
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // A closure that panics inside a transaction: its connection is not given back in that state.
    let p = pool.clone();
    let panicked = std::thread::spawn(move || {
        p.transaction(|c| -> agent_discover::error::Result<()> {
            c.execute("INSERT INTO n (i) VALUES (?1)", &args![-1i64])?;
            panic!("closure panicked");
        })
    })
    .join();
    assert!(panicked.is_err());
    // Both connections the pool may hand out (one inside the other): neither sees the panicked transaction's row,
    // which only that transaction's session would see.
    pool.with(|a| {
        pool.with(|b| {
            for c in [a, b] {
                assert_eq!(count(c, "SELECT COUNT(*) FROM n"), 60);
                assert_eq!(count(c, "SELECT COUNT(*) FROM n WHERE i = -1"), 0);
            }
            Ok(())
        })
    })
    .unwrap();
}

#[test]
fn notify_from_one_pool_reaches_another_pools_listener() {
    let server = server();
    let url = server.new_database();
    let listening = PgPool::connect(&url).unwrap();
    let writing = PgPool::connect(&url).unwrap();
    let listener = PgListener::start(&listening, "agent_discover").unwrap();
    assert_eq!(listener.state().notifications, 0);
    assert!(listener.state().connected);
    // A rolled-back transaction notifies nobody; committed ones do, in commit order.
    let _ = writing.transaction(|c| {
        pg::notify(c, "agent_discover", "rolled back")?;
        Err::<(), _>(Error::Internal("no".into()))
    });
    writing
        .transaction(|c| pg::notify(c, "agent_discover", "first"))
        .unwrap();
    // Another channel is not counted.
    writing
        .with(|c| pg::notify(c, "other_channel", "x"))
        .unwrap();
    writing
        .with(|c| pg::notify(c, "agent_discover", "second"))
        .unwrap();
    let (state, done) = listener.wait_until(PATIENCE, |s| s.notifications >= 2);
    assert!(done, "{state:?}");
    // Had the rolled-back or the other channel's notification arrived, it would have been counted before "second".
    assert_eq!(state.notifications, 2);
    assert_eq!(state.version(), 2);
    // Async waiters see the same state.
    assert_eq!(listener.subscribe().borrow().notifications, 2);
    // On SQLite, notify does nothing.
    let sqlite = rusqlite::Connection::open_in_memory().unwrap();
    pg::notify(&sqlite, "agent_discover", "x").unwrap();
    // Channel names are identifiers, checked before use.
    assert!(PgListener::start(&listening, "bad\"name").is_err());
}

#[test]
fn listener_survives_termination_of_its_connection() {
    let server = server();
    let url = server.new_database();
    let pool = PgPool::connect(&url).unwrap();
    let listener = PgListener::start(&pool, "agent_discover").unwrap();
    let before = listener.state();
    assert!(before.connected && before.backend_pid != 0, "{before:?}");
    let terminated: bool = pool
        .with(|c| {
            c.query_one(
                "SELECT pg_terminate_backend(?1)",
                &args![i64::from(before.backend_pid)],
            )?
            .get(0)
        })
        .unwrap();
    assert!(terminated);
    let (state, done) = listener.wait_until(PATIENCE, |s| s.losses >= 1);
    assert!(done, "the loss was not reported: {state:?}");
    let (state, done) = listener.wait_until(PATIENCE, |s| s.connected && s.reconnects >= 1);
    assert!(done, "no reconnection: {state:?}");
    assert_ne!(state.backend_pid, before.backend_pid);
    assert_eq!(state.losses, 1);
    // The reconnection counts as a change (notifications may have been missed meanwhile).
    assert!(state.version() > before.version());
    pool.with(|c| pg::notify(c, "agent_discover", "after"))
        .unwrap();
    let (state, done) = listener.wait_until(PATIENCE, |s| s.notifications >= 1);
    assert!(done, "no notification after reconnecting: {state:?}");
    assert_eq!(state.notifications, 1);
}

/// (type, NOT NULL) of each (table, column).
type Columns = BTreeMap<(String, String), (String, bool)>;

/// The SQLite schema's tables and columns, without the FTS5 tables and their shadow tables, and its named indexes.
fn sqlite_schema() -> (Columns, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("registry.db");
    drop(agent_discover::store::Store::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%'")
        .unwrap();
    let virtual_tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert!(virtual_tables.iter().any(|t| t == "server_tools_fts"));
    let mut stmt = conn
        .prepare(
            "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk FROM sqlite_master m, pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'",
        )
        .unwrap();
    let mut columns = Columns::new();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
                r.get::<_, i64>(4)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (table, column, ty, not_null, pk) = row.unwrap();
        if virtual_tables
            .iter()
            .any(|v| table == *v || table.starts_with(&format!("{v}_")))
        {
            continue;
        }
        let ty = match ty.as_str() {
            "INTEGER" => "bigint",
            "TEXT" => "text",
            "BLOB" => "bytea",
            "REAL" => "double precision",
            other => {
                panic!("{table}.{column}: SQLite type {other} has no PostgreSQL counterpart here")
            }
        };
        // A primary key is NOT NULL in PostgreSQL (SQLite lets a non-integer one hold NULL, which nothing stores).
        columns.insert((table, column), (ty.to_string(), not_null || pk > 0));
    }
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name",
        )
        .unwrap();
    let indexes = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    (columns, indexes)
}

/// The same for the PostgreSQL schema (without its `schema_migrations` table, and without the indexes that back
/// constraints, which SQLite creates without a name of its own).
fn postgres_schema(pool: &PgPool) -> (Columns, Vec<String>) {
    pool.with(|c| {
        let mut columns = Columns::new();
        for r in c.query(
            "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'",
            &[],
        )? {
            let nullable: String = r.get(3)?;
            columns.insert((r.get(0)?, r.get(1)?), (r.get(2)?, nullable == "NO"));
        }
        let indexes = c
            .query(
                "SELECT CAST(i.relname AS TEXT) FROM pg_index x
                 JOIN pg_class i ON i.oid = x.indexrelid
                 JOIN pg_class t ON t.oid = x.indrelid
                 JOIN pg_namespace n ON n.oid = t.relnamespace
                 WHERE n.nspname = current_schema()
                   AND t.relname <> 'schema_migrations'
                   AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid)
                 ORDER BY 1",
                &[],
            )?
            .iter()
            .map(|r| r.get(0))
            .collect::<agent_discover::error::Result<Vec<String>>>()?;
        Ok((columns, indexes))
    })
    .unwrap()
}

/// A SQLite migration that adds or changes a table, a column or an index needs the same in the PostgreSQL schema.
#[test]
fn schema_matches_sqlite() {
    let server = server();
    let pool = migrated(&server);
    let (sqlite_columns, sqlite_indexes) = sqlite_schema();
    let (pg_columns, pg_indexes) = postgres_schema(&pool);
    assert!(sqlite_columns.len() > 50, "{sqlite_columns:?}");
    let only = |a: &Columns, b: &Columns| -> Vec<String> {
        a.iter()
            .filter(|(k, v)| b.get(*k) != Some(*v))
            .map(|((t, c), (ty, nn))| format!("{t}.{c} {ty}{}", if *nn { " NOT NULL" } else { "" }))
            .collect()
    };
    assert!(
        sqlite_columns == pg_columns,
        "the PostgreSQL schema (src/store/pg/schema.rs) drifted from SQLite's (src/store/schema.rs):\n\
         only in SQLite: {:?}\nonly in PostgreSQL: {:?}",
        only(&sqlite_columns, &pg_columns),
        only(&pg_columns, &sqlite_columns)
    );
    assert_eq!(sqlite_indexes, pg_indexes, "named indexes differ");
}
