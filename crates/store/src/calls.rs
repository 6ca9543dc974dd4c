//! The call log shared by a team's replicas: calls appended in batches, read newest first across replicas, pruned by
//! age. Written in the SQL subset both backends share (`db.rs`).

use super::Store;
use super::db::{Conn, Row};
use crate::args;
use ad_core::error::Result;

/// One logged call as stored: which replica proxied it, when (milliseconds since the epoch), and what it carried.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCall {
    pub id: i64,
    pub replica: String,
    pub unix_ms: i64,
    pub server: String,
    pub tool: String,
    /// The arguments as JSON text.
    pub args: String,
    pub response: String,
    pub latency_ms: i64,
    pub success: bool,
    /// Who made the call (issue 30): the user and the OAuth client of its access token.
    pub user: Option<String>,
    pub client: Option<String>,
}

const COLUMNS: &str = "id, replica, unix_ms, server, tool, args, response, latency_ms, success, caller_user, caller_client";

fn call_from_row(r: &Row) -> Result<StoredCall> {
    Ok(StoredCall {
        id: r.get(0)?,
        replica: r.get(1)?,
        unix_ms: r.get(2)?,
        server: r.get(3)?,
        tool: r.get(4)?,
        args: r.get(5)?,
        response: r.get(6)?,
        latency_ms: r.get(7)?,
        success: r.get::<i64>(8)? != 0,
        user: r.get(9)?,
        client: r.get(10)?,
    })
}

/// Appends `calls` (their `id` is ignored: the table numbers them) in the caller's transaction.
pub fn append(c: &dyn Conn, calls: &[StoredCall]) -> Result<()> {
    for call in calls {
        c.execute(
            "INSERT INTO calls (replica, unix_ms, server, tool, args, response, latency_ms, success, caller_user,
                                caller_client)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            &args![
                call.replica.as_str(),
                call.unix_ms,
                call.server.as_str(),
                call.tool.as_str(),
                call.args.as_str(),
                call.response.as_str(),
                call.latency_ms,
                i64::from(call.success),
                call.user.as_deref(),
                call.client.as_deref()
            ],
        )?;
    }
    Ok(())
}

/// The calls made at or after `since_ms`, newest first, skipping `offset`; and how many there are in all.
pub fn recent(
    c: &dyn Conn,
    since_ms: i64,
    limit: usize,
    offset: usize,
) -> Result<(Vec<StoredCall>, usize)> {
    recent_of(c, since_ms, None, limit, offset)
}

/// [`recent`], only `user`'s calls when given (issue 30: a user reads only their own).
pub fn recent_of(
    c: &dyn Conn,
    since_ms: i64,
    user: Option<&str>,
    limit: usize,
    offset: usize,
) -> Result<(Vec<StoredCall>, usize)> {
    let (filter, user) = match user {
        Some(u) => ("unix_ms >= ?1 AND caller_user = ?2", u),
        None => ("unix_ms >= ?1 AND ?2 = ?2", ""),
    };
    let total: i64 = c
        .query_one(
            &format!("SELECT COUNT(*) FROM calls WHERE {filter}"),
            &args![since_ms, user],
        )?
        .get(0)?;
    let rows = c.query(
        &format!(
            "SELECT {COLUMNS} FROM calls WHERE {filter} ORDER BY unix_ms DESC, id DESC LIMIT ?3 OFFSET ?4"
        ),
        &args![since_ms, user, limit, offset],
    )?;
    let calls = rows.iter().map(call_from_row).collect::<Result<_>>()?;
    Ok((calls, usize::try_from(total).unwrap_or(0)))
}

/// Deletes the calls made before `before_ms` (every call when `None`); returns how many went.
pub fn prune(c: &dyn Conn, before_ms: Option<i64>) -> Result<u64> {
    match before_ms {
        Some(ms) => c.execute("DELETE FROM calls WHERE unix_ms < ?1", &args![ms]),
        None => c.execute("DELETE FROM calls", &[]),
    }
}

impl Store {
    /// Appends a batch of calls in one transaction.
    pub fn append_calls(&self, calls: &[StoredCall]) -> Result<()> {
        self.write(|c| append(c, calls))
    }

    /// See [`recent`].
    pub fn recent_calls(
        &self,
        since_ms: i64,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<StoredCall>, usize)> {
        self.read(|c| recent(c, since_ms, limit, offset))
    }

    /// See [`recent_of`].
    pub fn recent_calls_of(
        &self,
        since_ms: i64,
        user: Option<&str>,
        limit: usize,
        offset: usize,
    ) -> Result<(Vec<StoredCall>, usize)> {
        self.read(|c| recent_of(c, since_ms, user, limit, offset))
    }

    /// See [`prune`].
    pub fn prune_calls(&self, before_ms: Option<i64>) -> Result<u64> {
        self.write(|c| prune(c, before_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(replica: &str, unix_ms: i64, tool: &str) -> StoredCall {
        StoredCall {
            id: 0,
            replica: replica.into(),
            unix_ms,
            server: "fx".into(),
            tool: tool.into(),
            args: r#"{"text":"hi"}"#.into(),
            response: "hi".into(),
            latency_ms: 3,
            success: tool != "fail",
            user: (replica == "a").then(|| "alice".into()),
            client: None,
        }
    }

    #[test]
    fn calls_from_several_replicas_read_newest_first_and_pruned_by_age() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        store
            .append_calls(&[call("a", 1_000, "echo"), call("b", 3_000, "fail")])
            .unwrap();
        store.append_calls(&[call("a", 2_000, "add")]).unwrap();
        let (calls, total) = store.recent_calls(0, 10, 0).unwrap();
        assert_eq!(total, 3);
        let order: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| (c.replica.as_str(), c.tool.as_str()))
            .collect();
        assert_eq!(order, [("b", "fail"), ("a", "add"), ("a", "echo")]);
        assert!(!calls[0].success && calls[1].success);
        assert_eq!(calls[2].args, r#"{"text":"hi"}"#);
        let (page, total) = store.recent_calls(1_500, 1, 1).unwrap();
        assert_eq!((page.len(), total), (1, 2));
        assert_eq!(page[0].tool, "add");
        // Only one user's calls, with who made them (issue 30).
        let (mine, total) = store.recent_calls_of(0, Some("alice"), 10, 0).unwrap();
        assert_eq!((mine.len(), total), (2, 2));
        assert!(mine.iter().all(|c| c.user.as_deref() == Some("alice")));
        assert_eq!(store.recent_calls_of(0, Some("bob"), 10, 0).unwrap().1, 0);
        assert_eq!(calls[0].user, None);
        assert_eq!(store.prune_calls(Some(2_500)).unwrap(), 2);
        assert_eq!(store.recent_calls(0, 10, 0).unwrap().1, 1);
        assert_eq!(store.prune_calls(None).unwrap(), 1);
    }
}
