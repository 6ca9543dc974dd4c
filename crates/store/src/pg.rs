//! The PostgreSQL side of the backend-neutral [`Conn`]: a small connection pool on `tokio-postgres`, values and rows
//! mapped to PostgreSQL's types, SQLSTATEs mapped to [`StoreErrorKind`]s.
//!
//! The store is synchronous (called from `spawn_blocking` or plain threads), so the sockets are driven by one
//! background thread running a current-thread tokio runtime; callers block on a statement's future with
//! `futures::executor::block_on`, which needs no runtime of theirs. Every statement is prepared once per connection
//! (its `?N` placeholders rewritten to `$N`) and the prepared statement is reused.
//!
//! Transactions are SERIALIZABLE, so a store function written for SQLite's single writer keeps its guarantees across
//! replicas; PostgreSQL answers a conflicting one with a serialization failure, and [`PgPool::transaction`] runs the
//! closure again (a bounded number of times).

pub(super) mod backend;
mod listen;
mod schema;
mod tls;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, IsNull, Kind, ToSql, Type, to_sql_checked};
use tokio_postgres::{Client, Config, Statement};

use super::db::{Conn, Dialect, Row, StoreError, StoreErrorKind, Value};
use ad_core::error::{Error, Result};

pub use listen::{LIMITS_PAYLOAD, ListenState, PgListener, notify};
pub use schema::{PG_SCHEMA_VERSION, migrate, schema_version};
pub use tls::SslMode;

/// Connections a pool opens at most, unless told otherwise.
pub const DEFAULT_MAX_CONNECTIONS: usize = 8;
/// How long a caller waits for a free connection when all are busy.
const CHECKOUT_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a transaction is run again after a serialization failure or a deadlock.
const MAX_RETRIES: u32 = 10;
/// Prepared statements kept per connection; past this the cache starts over.
const STATEMENT_CACHE: usize = 256;

/// The one background thread that drives every PostgreSQL socket of this process.
fn runtime() -> &'static tokio::runtime::Handle {
    static HANDLE: OnceLock<tokio::runtime::Handle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("cannot build the PostgreSQL I/O runtime");
        let handle = rt.handle().clone();
        std::thread::Builder::new()
            .name("postgres-io".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("cannot start the PostgreSQL I/O thread");
        handle
    })
}

/// Runs `f` on the I/O runtime and waits for it from a synchronous caller.
fn run_on_runtime<F>(f: F) -> Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    futures::executor::block_on(runtime().spawn(f))
        .map_err(|e| Error::Internal(format!("PostgreSQL I/O task failed: {e}")))
}

/// Opens one connection and hands its socket to the I/O runtime.
fn open_client(config: &PgConfig) -> Result<Client> {
    let config = config.clone();
    run_on_runtime(async move {
        let (client, connection) = config.connect().await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("PostgreSQL connection ended: {e}");
            }
        });
        Ok::<_, tokio_postgres::Error>(client)
    })?
    .map_err(|e| {
        let e = pg_error(e);
        Error::Unavailable(format!("cannot connect to PostgreSQL: {}", e.message))
    })
}

/// Where and how to connect: tokio-postgres's settings and the TLS connector for the URL's `sslmode` and
/// `sslrootcert` (see [`SslMode`]).
#[derive(Clone, Debug)]
pub struct PgConfig {
    config: Config,
    tls: tls::PgTls,
}

impl PgConfig {
    /// tokio-postgres's settings (host, database, user, ...).
    pub fn postgres(&self) -> &Config {
        &self.config
    }

    /// Changes tokio-postgres's settings (an application name, a timeout).
    pub fn postgres_mut(&mut self) -> &mut Config {
        &mut self.config
    }

    /// The `sslmode` in force.
    pub fn ssl_mode(&self) -> SslMode {
        self.tls.mode()
    }

    /// Opens one connection; the caller drives the returned connection future.
    pub(crate) async fn connect(
        &self,
    ) -> std::result::Result<
        (
            Client,
            tokio_postgres::Connection<
                tokio_postgres::Socket,
                tls::PgTlsStream<tokio_postgres::Socket>,
            >,
        ),
        tokio_postgres::Error,
    > {
        self.config.connect(self.tls.clone()).await
    }
}

/// Parses a `postgres://` URL (or a `key=value` connection string), with agent-discover's defaults for what it
/// leaves out (application name, connect timeout). `sslmode` and `sslrootcert` are read as libpq reads them
/// (also from `PGSSLMODE` and `PGSSLROOTCERT`); a `verify-*` mode without its root certificates fails here.
pub fn parse_url(url: &str) -> Result<PgConfig> {
    let split = tls::split_options(url);
    let mut config: Config = split.rest.parse().map_err(|e| Error::Invalid {
        what: "database URL",
        reason: format!("{e}"),
    })?;
    if config.get_application_name().is_none() {
        config.application_name("agent-discover");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(10));
    }
    let tls = tls::PgTls::new(split.sslmode.as_deref(), split.sslrootcert.as_deref())?;
    config.ssl_mode(tls.negotiation());
    Ok(PgConfig { config, tls })
}

/// Transaction isolation for [`PgPool::transaction_in`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// The default of [`PgPool::transaction`]: as if transactions ran one at a time, like SQLite's.
    Serializable,
    /// Each statement sees what committed before it started (for work serialized by a lock of its own, such as
    /// migrations under an advisory lock, which must see the rows committed while they waited).
    ReadCommitted,
}

/// A small pool of PostgreSQL connections for synchronous callers.
#[derive(Clone)]
pub struct PgPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    config: PgConfig,
    max: usize,
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    idle: Vec<PgConn>,
    /// Connections open, idle or checked out.
    open: usize,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgPool")
            .field("max", &self.inner.max)
            .finish_non_exhaustive()
    }
}

impl PgPool {
    /// A pool on `url` of at most [`DEFAULT_MAX_CONNECTIONS`]; one connection is opened now, so a wrong address or
    /// password fails here.
    pub fn connect(url: &str) -> Result<PgPool> {
        PgPool::with_config(parse_url(url)?, DEFAULT_MAX_CONNECTIONS)
    }

    /// A pool of at most `max` connections (at least 1). One connection is opened now.
    pub fn with_config(config: PgConfig, max: usize) -> Result<PgPool> {
        let first = PgConn::new(open_client(&config)?);
        Ok(PgPool {
            inner: Arc::new(PoolInner {
                config,
                max: max.max(1),
                state: Mutex::new(PoolState {
                    idle: vec![first],
                    open: 1,
                }),
                freed: Condvar::new(),
            }),
        })
    }

    /// The connection settings, for a listener on the same server.
    pub fn config(&self) -> &PgConfig {
        &self.inner.config
    }

    /// Runs `f` on one connection, outside any transaction (each statement commits by itself).
    ///
    /// Don't call the pool again from inside `f`: with every connection checked out that would wait forever.
    pub fn with<T>(&self, f: impl FnOnce(&dyn Conn) -> Result<T>) -> Result<T> {
        let checkout = self.checkout()?;
        let r = f(checkout.conn());
        if checkout.conn().client.is_closed() {
            checkout.conn().broken.set(true);
        }
        r
    }

    /// Runs `f` in one SERIALIZABLE transaction: committed when `f` returns `Ok`, rolled back when it fails. A
    /// serialization failure or deadlock (from `f`'s statements or from the commit) rolls back and runs `f` again,
    /// up to 10 times, so `f` must not have effects outside the database that cannot be repeated.
    ///
    /// A statement that fails aborts the whole transaction in PostgreSQL (unlike SQLite): if `f` swallows such an
    /// error and returns `Ok`, the transaction is rolled back and that first error is returned.
    pub fn transaction<T>(&self, f: impl FnMut(&dyn Conn) -> Result<T>) -> Result<T> {
        self.transaction_in(Isolation::Serializable, f)
    }

    /// [`PgPool::transaction`] at the given isolation level.
    pub fn transaction_in<T>(
        &self,
        isolation: Isolation,
        mut f: impl FnMut(&dyn Conn) -> Result<T>,
    ) -> Result<T> {
        let begin = match isolation {
            Isolation::Serializable => "BEGIN ISOLATION LEVEL SERIALIZABLE",
            Isolation::ReadCommitted => "BEGIN ISOLATION LEVEL READ COMMITTED",
        };
        let mut attempt = 0;
        loop {
            let checkout = self.checkout()?;
            let c = checkout.conn();
            c.batch(begin)?;
            c.in_tx.set(true);
            *c.aborted.borrow_mut() = None;
            let outcome = match f(c) {
                Ok(v) => match c.aborted.borrow_mut().take() {
                    Some(first) => Err(Error::Store(StoreError {
                        kind: first.kind,
                        message: format!(
                            "the transaction was rolled back because a statement in it failed: {}",
                            first.message
                        ),
                    })),
                    None => Ok(v),
                },
                Err(e) => Err(e),
            };
            let outcome = match outcome {
                Ok(v) => {
                    c.in_tx.set(false);
                    c.batch("COMMIT").map(|()| v)
                }
                Err(e) => Err(e),
            };
            c.in_tx.set(false);
            match outcome {
                Ok(v) => return Ok(v),
                Err(e) => {
                    // After a failed COMMIT the transaction is already over; ROLLBACK then only warns.
                    if c.batch("ROLLBACK").is_err() {
                        c.broken.set(true);
                    }
                    let retry = matches!(
                        &e,
                        Error::Store(StoreError {
                            kind: StoreErrorKind::Retry,
                            ..
                        })
                    );
                    if !retry || attempt >= MAX_RETRIES {
                        return Err(e);
                    }
                    drop(checkout);
                    attempt += 1;
                    std::thread::sleep(backoff(attempt));
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn checkout(&self) -> Result<Checkout<'_>> {
        let deadline = Instant::now() + CHECKOUT_TIMEOUT;
        let mut state = self.lock();
        loop {
            while let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(Checkout {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.inner.max {
                state.open += 1;
                drop(state);
                return match open_client(&self.inner.config) {
                    Ok(client) => Ok(Checkout {
                        pool: self,
                        conn: Some(PgConn::new(client)),
                    }),
                    Err(e) => {
                        self.lock().open -= 1;
                        self.inner.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Unavailable(format!(
                    "all {} PostgreSQL connections stayed busy for {} s",
                    self.inner.max,
                    CHECKOUT_TIMEOUT.as_secs()
                )));
            }
            state = self
                .inner
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// A short, jittered, growing pause before running a transaction again.
fn backoff(attempt: u32) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    let cap_ms = (1u64 << attempt.min(6)).min(50);
    Duration::from_micros(u64::from(nanos) % (cap_ms * 1000) + 100)
}

/// A connection taken from the pool; given back (or closed, when broken) on drop.
struct Checkout<'a> {
    pool: &'a PgPool,
    conn: Option<PgConn>,
}

impl Checkout<'_> {
    fn conn(&self) -> &PgConn {
        self.conn.as_ref().expect("a checkout holds its connection")
    }
}

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        let mut state = self.pool.lock();
        // Still in a transaction: the closure panicked, and the session holds an open (or aborted) transaction.
        if conn.broken.get() || conn.in_tx.get() || conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.pool.inner.freed.notify_one();
    }
}

/// One PostgreSQL connection with its prepared statements.
struct PgConn {
    client: Client,
    statements: RefCell<HashMap<String, Statement>>,
    /// Inside [`PgPool::transaction_in`]: a failed statement has aborted the transaction.
    in_tx: Cell<bool>,
    /// The first statement failure inside the current transaction.
    aborted: RefCell<Option<StoreError>>,
    /// Not to be given back to the pool (its session state is unknown).
    broken: Cell<bool>,
}

impl PgConn {
    fn new(client: Client) -> PgConn {
        PgConn {
            client,
            statements: RefCell::new(HashMap::new()),
            in_tx: Cell::new(false),
            aborted: RefCell::new(None),
            broken: Cell::new(false),
        }
    }

    fn prepare(&self, sql: &str) -> std::result::Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.statements.borrow().get(sql) {
            return Ok(s.clone());
        }
        let statement = futures::executor::block_on(
            self.client.prepare(&super::db::postgres_placeholders(sql)),
        )?;
        let mut cache = self.statements.borrow_mut();
        if cache.len() >= STATEMENT_CACHE {
            cache.clear();
        }
        cache.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    /// Runs `op` with `sql` prepared. A prepared statement whose result type a schema change altered is prepared
    /// again (at once outside a transaction; inside one, the aborted transaction is retried).
    fn run<T>(
        &self,
        sql: &str,
        op: impl Fn(&Statement) -> std::result::Result<T, tokio_postgres::Error>,
    ) -> Result<T> {
        let mut again = !self.in_tx.get();
        loop {
            let result = self.prepare(sql).and_then(|s| op(&s));
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let stale = is_stale_plan(&e);
                    if stale {
                        self.statements.borrow_mut().clear();
                        if again {
                            again = false;
                            continue;
                        }
                    }
                    let mut err = pg_error(e);
                    if stale {
                        err.kind = StoreErrorKind::Retry;
                    }
                    return Err(self.failed(err));
                }
            }
        }
    }

    /// Records a failure inside a transaction (PostgreSQL aborted it) and returns it as the crate's error.
    fn failed(&self, e: StoreError) -> Error {
        if self.in_tx.get() {
            let mut aborted = self.aborted.borrow_mut();
            if aborted.is_none() {
                *aborted = Some(e.clone());
            }
        }
        Error::Store(e)
    }
}

/// PostgreSQL refuses a prepared statement whose result columns changed since it was prepared (after a migration).
fn is_stale_plan(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        *db.code() == SqlState::FEATURE_NOT_SUPPORTED && db.message().contains("cached plan")
    })
}

impl Conn for PgConn {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64> {
        let params = Params::new(params);
        self.run(sql, |s| {
            futures::executor::block_on(self.client.execute(s, &params.refs()))
        })
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let params = Params::new(params);
        let rows = self.run(sql, |s| {
            futures::executor::block_on(self.client.query(s, &params.refs()))
        })?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<_, ColumnValue>(i).map(|c| c.0))
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map(Row)
                    .map_err(|e| self.failed(pg_error(e)))
            })
            .collect()
    }

    fn batch(&self, sql: &str) -> Result<()> {
        futures::executor::block_on(self.client.batch_execute(sql))
            .map_err(|e| self.failed(pg_error(e)))
    }
}

/// Statement parameters, borrowed as tokio-postgres wants them.
struct Params<'a>(Vec<Param<'a>>);

impl<'a> Params<'a> {
    fn new(values: &'a [Value]) -> Params<'a> {
        Params(values.iter().map(Param).collect())
    }
    fn refs(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.0.iter().map(|p| p as &(dyn ToSql + Sync)).collect()
    }
}

/// A domain's underlying type (information_schema's columns are domains over `name`, `text` and `int4`).
fn base_type(ty: &Type) -> &Type {
    match ty.kind() {
        Kind::Domain(inner) => base_type(inner),
        _ => ty,
    }
}

fn variant(v: &Value) -> &'static str {
    match v {
        Value::Null => "NULL",
        Value::Int(_) => "an integer",
        Value::Real(_) => "a float",
        Value::Text(_) => "text",
        Value::Blob(_) => "bytes",
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// One parameter, encoded for the type PostgreSQL inferred for its placeholder.
#[derive(Debug)]
struct Param<'a>(&'a Value);

impl ToSql for Param<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        let ty = base_type(ty);
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) if *ty == Type::INT8 => i.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
            Value::Int(i) if *ty == Type::OID => u32::try_from(*i)?.to_sql(ty, out),
            // Booleans travel as 0/1 (see db.rs); a placeholder PostgreSQL types as boolean takes them too.
            Value::Int(i) if *ty == Type::BOOL => (*i != 0).to_sql(ty, out),
            Value::Int(i) if *ty == Type::FLOAT8 => (*i as f64).to_sql(ty, out),
            Value::Int(i) if *ty == Type::FLOAT4 => (*i as f32).to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT8 => f.to_sql(ty, out),
            Value::Real(f) if *ty == Type::FLOAT4 => (*f as f32).to_sql(ty, out),
            Value::Text(s) if *ty == Type::JSON => {
                out.put_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            Value::Text(s) if *ty == Type::JSONB => {
                out.put_u8(1);
                out.put_slice(s.as_bytes());
                Ok(IsNull::No)
            }
            Value::Text(s) if <&str as ToSql>::accepts(ty) => s.as_str().to_sql(ty, out),
            Value::Blob(b) if *ty == Type::BYTEA => b.as_slice().to_sql(ty, out),
            v => Err(format!(
                "cannot pass {} where PostgreSQL expects {ty} (cast the placeholder, e.g. CAST(?1 AS BIGINT))",
                variant(v)
            )
            .into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// One column value read back into a [`Value`].
struct ColumnValue(Value);

impl<'a> FromSql<'a> for ColumnValue {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<ColumnValue, BoxError> {
        let ty = base_type(ty);
        let v = if *ty == Type::INT8 {
            Value::Int(i64::from_sql(ty, raw)?)
        } else if *ty == Type::INT4 {
            Value::Int(i32::from_sql(ty, raw)?.into())
        } else if *ty == Type::INT2 {
            Value::Int(i16::from_sql(ty, raw)?.into())
        } else if *ty == Type::OID {
            Value::Int(u32::from_sql(ty, raw)?.into())
        } else if *ty == Type::BOOL {
            Value::Int(bool::from_sql(ty, raw)?.into())
        } else if *ty == Type::FLOAT8 {
            Value::Real(f64::from_sql(ty, raw)?)
        } else if *ty == Type::FLOAT4 {
            Value::Real(f32::from_sql(ty, raw)?.into())
        } else if *ty == Type::BYTEA {
            Value::Blob(raw.to_vec())
        } else if *ty == Type::JSON {
            Value::Text(std::str::from_utf8(raw)?.to_owned())
        } else if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => Value::Text(std::str::from_utf8(rest)?.to_owned()),
                _ => return Err("unsupported jsonb encoding".into()),
            }
        } else if *ty == Type::VOID {
            Value::Null
        } else if <&str as FromSql>::accepts(ty) {
            Value::Text(<&str as FromSql>::from_sql(ty, raw)?.to_owned())
        } else {
            return Err(format!(
                "unsupported PostgreSQL type {ty} (cast the column to BIGINT, DOUBLE PRECISION, TEXT or BYTEA)"
            )
            .into());
        };
        Ok(ColumnValue(v))
    }

    fn from_sql_null(_: &Type) -> std::result::Result<ColumnValue, BoxError> {
        Ok(ColumnValue(Value::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A driver error as a [`StoreError`], its kind read from the engine's code.
pub(crate) fn pg_error(e: tokio_postgres::Error) -> StoreError {
    {
        let kind = match e.code() {
            Some(c) if *c == SqlState::UNIQUE_VIOLATION => StoreErrorKind::Unique,
            Some(c) if *c == SqlState::FOREIGN_KEY_VIOLATION => StoreErrorKind::ForeignKey,
            Some(c)
                if *c == SqlState::T_R_SERIALIZATION_FAILURE
                    || *c == SqlState::T_R_DEADLOCK_DETECTED =>
            {
                StoreErrorKind::Retry
            }
            _ => StoreErrorKind::Other,
        };
        let message = match e.as_db_error() {
            Some(db) => {
                let mut m = format!(
                    "{}: {} (SQLSTATE {})",
                    db.severity(),
                    db.message(),
                    db.code().code()
                );
                if let Some(detail) = db.detail() {
                    m.push_str("; ");
                    m.push_str(detail);
                }
                m
            }
            None => {
                // tokio-postgres's own message is only the category; the cause says what happened.
                let mut m = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    m.push_str(": ");
                    m.push_str(&s.to_string());
                    source = s.source();
                }
                m
            }
        };
        StoreError { kind, message }
    }
}

impl<T> crate::db::DbResult<T> for std::result::Result<T, tokio_postgres::Error> {
    fn db(self) -> Result<T> {
        self.map_err(|e| Error::Store(pg_error(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_follow_the_inferred_type_and_refuse_mismatches() {
        let mut out = BytesMut::new();
        let int = Value::Int(7);
        Param(&int).to_sql(&Type::INT4, &mut out).unwrap();
        assert_eq!(&out[..], &7i32.to_be_bytes());
        out.clear();
        Param(&int).to_sql(&Type::BOOL, &mut out).unwrap();
        assert_eq!(&out[..], &[1]);
        let big = Value::Int(i64::MAX);
        assert!(Param(&big).to_sql(&Type::INT4, &mut out).is_err());
        let text = Value::Text("x".into());
        let e = Param(&text)
            .to_sql(&Type::INT8, &mut out)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("cannot pass text"), "{e}");
        assert!(matches!(
            Param(&Value::Null).to_sql(&Type::NUMERIC, &mut out),
            Ok(IsNull::Yes)
        ));
    }

    #[test]
    fn columns_read_back_as_values() {
        let v = ColumnValue::from_sql(&Type::INT4, &5i32.to_be_bytes())
            .unwrap()
            .0;
        assert_eq!(v, Value::Int(5));
        let v = ColumnValue::from_sql(&Type::BOOL, &[1]).unwrap().0;
        assert_eq!(v, Value::Int(1));
        let v = ColumnValue::from_sql(&Type::JSONB, b"\x01{}").unwrap().0;
        assert_eq!(v, Value::Text("{}".into()));
        let e = ColumnValue::from_sql(&Type::NUMERIC, &[0; 8])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("numeric"), "{e}");
    }

    #[test]
    fn backoff_is_short_and_bounded() {
        for attempt in 1..=MAX_RETRIES {
            assert!(backoff(attempt) <= Duration::from_millis(51));
        }
    }
}
