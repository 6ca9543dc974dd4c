//! The SQLite side of the backend-neutral [`Conn`](super::db::Conn): parameters, rows and errors mapped to rusqlite's.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql};

use super::db::{Conn, Dialect, Row, StoreError, StoreErrorKind, Value};
use crate::error::{Error, Result};

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

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
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

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        Error::Store(e.into())
    }
}

impl Conn for Connection {
    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64> {
        let n = self
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(params))?;
        Ok(n as u64)
    }

    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let mut stmt = self.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut values = Vec::with_capacity(width);
            for i in 0..width {
                values.push(value_of(r.get_ref(i)?));
            }
            out.push(Row(values));
        }
        Ok(out)
    }

    fn batch(&self, sql: &str) -> Result<()> {
        Ok(self.execute_batch(sql)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args;

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
