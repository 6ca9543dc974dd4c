//! Backend-neutral SQL access: the values, rows and connection trait that the SQLite and PostgreSQL backends share.
//!
//! Store modules write their SQL once, in the subset both engines accept, with `?1`-style numbered placeholders
//! (rewritten to `$1` for PostgreSQL by [`postgres_placeholders`]). The subset, in short:
//! - integers are `BIGINT`-compatible and booleans are integers compared explicitly (`active = 1`, `?2 = 1`);
//! - timestamps are passed as parameters (RFC 3339 text from Rust), never computed in SQL (`strftime`, `now()`);
//! - upserts are `INSERT ... ON CONFLICT (cols) DO UPDATE SET x = excluded.x` or `ON CONFLICT DO NOTHING`;
//! - new ids come from `RETURNING id`; lists are expanded placeholders, not `json_each`;
//! - aggregates that PostgreSQL widens are cast back (`CAST(SUM(x) AS BIGINT)`, `CAST(AVG(x) AS DOUBLE PRECISION)`);
//! - case-insensitive matching is `LOWER(a) LIKE LOWER(?n)`.
//!
//! What only one engine has (FTS5 and the `ad_bm25` ranking function, `PRAGMA`s, `LISTEN/NOTIFY`) stays in that
//! backend's own code, reached through [`Dialect`].

use std::borrow::Cow;

use ad_core::error::Result;

/// Which SQL engine a connection speaks, for the few statements that must differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// One parameter or column value. Booleans travel as `Int(0 | 1)`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Value {
        Value::Int(v.into())
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Value {
        Value::Int(v.into())
    }
}
impl From<u64> for Value {
    /// Saturates at `i64::MAX` (no stored count or duration comes near it).
    fn from(v: u64) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<usize> for Value {
    fn from(v: usize) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Real(v)
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::Text(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::Text(v.to_owned())
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Value {
        Value::Text(v.clone())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Value {
        Value::Blob(v)
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Value {
        Value::Blob(v.to_vec())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Null, Into::into)
    }
}

/// `args![a, b, c]` is `[Value::from(a), Value::from(b), Value::from(c)]`, for a statement's parameters.
#[macro_export]
macro_rules! args {
    ($($v:expr),* $(,)?) => { [$($crate::db::Value::from($v)),*] };
}

/// A value read back from a column.
pub trait FromValue: Sized {
    fn from_value(v: &Value) -> std::result::Result<Self, String>;
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> std::result::Result<i64, String> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(format!("expected an integer, found {other:?}")),
        }
    }
}
impl FromValue for u64 {
    /// Negative integers read as 0.
    fn from_value(v: &Value) -> std::result::Result<u64, String> {
        i64::from_value(v).map(|i| i.max(0) as u64)
    }
}
impl FromValue for u32 {
    fn from_value(v: &Value) -> std::result::Result<u32, String> {
        i64::from_value(v).map(|i| i.clamp(0, u32::MAX.into()) as u32)
    }
}
impl FromValue for bool {
    fn from_value(v: &Value) -> std::result::Result<bool, String> {
        i64::from_value(v).map(|i| i != 0)
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> std::result::Result<f64, String> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            other => Err(format!("expected a number, found {other:?}")),
        }
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> std::result::Result<String, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => Err(format!("expected text, found {other:?}")),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> std::result::Result<Vec<u8>, String> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            other => Err(format!("expected bytes, found {other:?}")),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> std::result::Result<Option<T>, String> {
        match v {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One result row: its values in the order of the statement's columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Row(pub Vec<Value>);

impl Row {
    /// The column at `idx`, converted; a missing column or a wrong type is an [`Error::Store`] naming the column.
    pub fn get<T: FromValue>(&self, idx: usize) -> Result<T> {
        let v = self.0.get(idx).ok_or_else(|| {
            StoreError::other(format!(
                "column {idx} out of range ({} columns)",
                self.0.len()
            ))
        })?;
        T::from_value(v).map_err(|e| StoreError::other(format!("column {idx}: {e}")).into())
    }
}

pub use ad_core::error::{StoreError, StoreErrorKind};

/// One connection, or one open transaction on it. Statements run synchronously and return every row.
pub trait Conn {
    fn dialect(&self) -> Dialect;
    /// Runs one statement; returns the number of rows it changed.
    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64>;
    /// Runs one statement and returns its rows.
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Row>>;
    /// Runs several `;`-separated statements without parameters (migrations).
    fn batch(&self, sql: &str) -> Result<()>;

    /// The first row, if any.
    fn query_opt(&self, sql: &str, params: &[Value]) -> Result<Option<Row>> {
        Ok(self.query(sql, params)?.into_iter().next())
    }
    /// Exactly the first row; none is an error.
    fn query_one(&self, sql: &str, params: &[Value]) -> Result<Row> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StoreError::other("query returned no row").into())
    }
}

/// Rewrites `?N` placeholders to PostgreSQL's `$N`, leaving quoted strings, quoted identifiers and comments alone.
/// A bare `?` (no number) is not part of the shared subset and is left as it is, so PostgreSQL rejects it loudly.
pub fn postgres_placeholders(sql: &str) -> Cow<'_, str> {
    if !sql.contains('?') {
        return Cow::Borrowed(sql);
    }
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' if chars.peek().is_some_and(char::is_ascii_digit) => out.push('$'),
            _ => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Now as RFC 3339 UTC text with milliseconds (`2026-11-25T12:00:00.000Z`), the format every timestamp column holds
/// (the same text SQLite's `strftime('%Y-%m-%dT%H:%M:%fZ','now')` gives, so old and new rows sort together).
pub fn now_text() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    text_of_unix_millis(d.as_millis() as i64)
}

/// Milliseconds since the Unix epoch as the timestamp text of [`now_text`].
pub fn text_of_unix_millis(ms: i64) -> String {
    ad_core::clock::rfc3339_signed(ms)
}

/// `?` for driver results: a SQLite or PostgreSQL driver error becomes this crate's [`Error`] (the drivers' errors and
/// [`Error`] live in other crates, so no `From` between them can be written here).
pub(crate) trait DbResult<T> {
    fn db(self) -> Result<T>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_rewritten_outside_quotes_and_comments() {
        assert_eq!(
            postgres_placeholders(
                "SELECT a FROM t WHERE b = ?1 AND c = '?2' AND \"?3\" = ?10 -- ?4\n AND d = ?4"
            ),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND \"?3\" = $10 -- ?4\n AND d = $4"
        );
        assert!(matches!(
            postgres_placeholders("SELECT 1"),
            Cow::Borrowed(_)
        ));
        assert_eq!(postgres_placeholders("SELECT ?"), "SELECT ?");
    }

    #[test]
    fn rows_convert_and_name_the_failing_column() {
        let row = Row(vec![Value::Int(3), Value::Null, Value::Text("x".into())]);
        assert_eq!(row.get::<i64>(0).unwrap(), 3);
        assert!(row.get::<bool>(0).unwrap());
        assert_eq!(row.get::<Option<String>>(1).unwrap(), None);
        let e = row.get::<i64>(2).unwrap_err().to_string();
        assert!(e.contains("column 2"), "{e}");
        assert!(row.get::<i64>(7).is_err());
        assert_eq!(Value::from(Some(true)), Value::Int(1));
        assert_eq!(Value::from(None::<&str>), Value::Null);
    }

    #[test]
    fn timestamps_match_sqlite_text() {
        assert_eq!(text_of_unix_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            text_of_unix_millis(1_795_608_000_123),
            "2026-11-25T12:00:00.123Z"
        );
        assert_eq!(
            text_of_unix_millis(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(now_text().len(), 24);
    }
}
