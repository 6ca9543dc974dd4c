//! SQL for approval policies and approvals (#27): per-server policy rules (`tool_policies`: a target, `''` for the
//! server-wide rule, `tool:NAME` or `annotation:HINT`, and `allow`, `ask` or `deny`) and the calls asked of a person
//! (`approvals`). The meaning of both (how rules resolve, who may decide what) is the registry's; this module stores
//! what it is given and makes each change of an approval's status one conditional statement, so two processes that
//! decide the same approval at once cannot both succeed.

use super::Store;
use super::db::{Row, now_text};
use crate::args;
use ad_core::error::Result;

/// One stored policy rule of a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRow {
    /// `''` (server-wide), `tool:NAME`, `annotation:destructive` or `annotation:open_world`.
    pub target: String,
    /// `allow`, `ask` or `deny`.
    pub policy: String,
    pub set_at: String,
}

/// One approval as stored, with its server's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRow {
    pub id: String,
    pub server_id: i64,
    pub server: String,
    pub tool: String,
    /// The call's arguments as JSON text (canonical: keys sorted).
    pub arguments: String,
    /// Hex SHA-256 of (server, tool, canonical arguments).
    pub digest: String,
    /// The caller's session (`None`: the caller has none).
    pub session: Option<String>,
    /// How it was asked: `elicitation`, `input` or `wait`.
    pub via: String,
    /// `pending`, `approved`, `denied`, `expired` or `used`.
    pub status: String,
    /// `once` or `session`, once approved.
    pub scope: Option<String>,
    pub requested_at: String,
    /// Milliseconds since the Unix epoch after which nobody may decide it.
    pub deadline_ms: i64,
    pub decided_at: Option<String>,
    pub decided_by: Option<String>,
}

/// An approval to record: pending (`via` `wait`), or already decided (`elicitation`, `input`).
#[derive(Debug, Clone)]
pub struct NewApproval<'a> {
    pub id: &'a str,
    pub server_id: i64,
    pub tool: &'a str,
    pub arguments: &'a str,
    pub digest: &'a str,
    pub session: Option<&'a str>,
    pub via: &'a str,
    pub status: &'a str,
    pub scope: Option<&'a str>,
    pub deadline_ms: i64,
    pub decided_by: Option<&'a str>,
}

/// Decided approvals are kept this long after their deadline (session approvals with them), then deleted.
pub const KEEP_MS: i64 = 7 * 86_400_000;

const SELECT: &str = "SELECT a.id, a.server_id, s.name, a.tool, a.arguments, a.digest, a.session_id, a.via, a.status,
    a.scope, a.requested_at, a.deadline_ms, a.decided_at, a.decided_by FROM approvals a JOIN servers s ON s.id = a.server_id";

fn approval_from_row(r: &Row) -> Result<ApprovalRow> {
    Ok(ApprovalRow {
        id: r.get(0)?,
        server_id: r.get(1)?,
        server: r.get(2)?,
        tool: r.get(3)?,
        arguments: r.get(4)?,
        digest: r.get(5)?,
        session: r.get(6)?,
        via: r.get(7)?,
        status: r.get(8)?,
        scope: r.get(9)?,
        requested_at: r.get(10)?,
        deadline_ms: r.get(11)?,
        decided_at: r.get(12)?,
        decided_by: r.get(13)?,
    })
}

impl Store {
    /// A server's policy rules, by target.
    pub fn tool_policies(&self, server_id: i64) -> Result<Vec<PolicyRow>> {
        self.read(|c| {
            c.query(
                "SELECT target, policy, set_at FROM tool_policies WHERE server_id = ?1 ORDER BY target",
                &args![server_id],
            )?
            .iter()
            .map(|r| {
                Ok(PolicyRow {
                    target: r.get(0)?,
                    policy: r.get(1)?,
                    set_at: r.get(2)?,
                })
            })
            .collect()
        })
    }

    /// Sets a server's rule for `target` to `policy`, or removes it (`None`); whether anything changed.
    pub fn set_tool_policy(
        &self,
        server_id: i64,
        target: &str,
        policy: Option<&str>,
    ) -> Result<bool> {
        self.write(|c| {
            let n = match policy {
                Some(p) => c.execute(
                    "INSERT INTO tool_policies (server_id, target, policy, set_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (server_id, target) DO UPDATE SET policy = excluded.policy, set_at = excluded.set_at
                     WHERE tool_policies.policy <> excluded.policy",
                    &args![server_id, target, p, now_text()],
                )?,
                None => c.execute(
                    "DELETE FROM tool_policies WHERE server_id = ?1 AND target = ?2",
                    &args![server_id, target],
                )?,
            };
            Ok(n > 0)
        })
    }

    /// Records an approval (pending, or already decided); false when one with this id exists already (a token used
    /// twice). Also marks pending approvals past their deadline `expired` and deletes decided ones older than
    /// [`KEEP_MS`].
    pub fn insert_approval(&self, new: &NewApproval<'_>, now_ms: i64) -> Result<bool> {
        self.write(|c| {
            sweep(c, now_ms)?;
            let decided_at = new.decided_by.map(|_| now_text());
            let n = c.execute(
                "INSERT INTO approvals (id, server_id, tool, arguments, digest, session_id, via, status, scope,
                     requested_at, deadline_ms, decided_at, decided_by)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (id) DO NOTHING",
                &args![
                    new.id,
                    new.server_id,
                    new.tool,
                    new.arguments,
                    new.digest,
                    new.session,
                    new.via,
                    new.status,
                    new.scope,
                    now_text(),
                    new.deadline_ms,
                    decided_at,
                    new.decided_by
                ],
            )?;
            Ok(n > 0)
        })
    }

    pub fn approval(&self, id: &str) -> Result<Option<ApprovalRow>> {
        self.read(|c| {
            c.query_opt(&format!("{SELECT} WHERE a.id = ?1"), &args![id])?
                .as_ref()
                .map(approval_from_row)
                .transpose()
        })
    }

    /// Approvals newest first: only those waiting for a person (`pending_only`: pending, asked `wait`, before their
    /// deadline), or every recent one, a pending one past its deadline shown `expired`. Only reads: dashboards list
    /// approvals on every change any process commits, and a write here would be such a change.
    pub fn approvals(
        &self,
        pending_only: bool,
        limit: usize,
        now_ms: i64,
    ) -> Result<Vec<ApprovalRow>> {
        self.read(|c| {
            let rows = if pending_only {
                c.query(
                    &format!(
                        "{SELECT} WHERE a.status = 'pending' AND a.via = 'wait' AND a.deadline_ms > ?2
                         ORDER BY a.requested_at DESC, a.id LIMIT ?1"
                    ),
                    &args![limit, now_ms],
                )?
            } else {
                c.query(
                    &format!("{SELECT} ORDER BY a.requested_at DESC, a.id LIMIT ?1"),
                    &args![limit],
                )?
            };
            rows.iter()
                .map(|r| {
                    let mut a = approval_from_row(r)?;
                    if a.status == "pending" && a.deadline_ms <= now_ms {
                        a.status = "expired".into();
                        a.decided_by = Some("timeout".into());
                    }
                    Ok(a)
                })
                .collect()
        })
    }

    /// A person's decision on a pending approval before its deadline: `approved` (with `scope`) or `denied`. The
    /// approval as it is after the statement, and whether this call decided it (false: it was decided or expired
    /// before, and stays as it was).
    pub fn decide_approval(
        &self,
        id: &str,
        status: &str,
        scope: Option<&str>,
        by: &str,
        now_ms: i64,
    ) -> Result<(Option<ApprovalRow>, bool)> {
        let changed = self.write(|c| {
            c.execute(
                "UPDATE approvals SET status = ?2, scope = ?3, decided_by = ?4, decided_at = ?5
                 WHERE id = ?1 AND status = 'pending' AND deadline_ms > ?6",
                &args![id, status, scope, by, now_text(), now_ms],
            )
        })?;
        Ok((self.approval(id)?, changed > 0))
    }

    /// An approval `once` taken by the call it was for (`approved` -> `used`); false when it was not (still) approved
    /// once.
    pub fn use_approval(&self, id: &str) -> Result<bool> {
        let n = self.write(|c| {
            c.execute(
                "UPDATE approvals SET status = 'used' WHERE id = ?1 AND status = 'approved' AND scope = 'once'",
                &args![id],
            )
        })?;
        Ok(n > 0)
    }

    /// A pending approval nobody decided in time, or whose caller went away (`by`: `timeout`, `cancelled`); false
    /// when it was no longer pending.
    pub fn expire_approval(&self, id: &str, by: &str) -> Result<bool> {
        let n = self.write(|c| {
            c.execute(
                "UPDATE approvals SET status = 'expired', decided_by = ?2, decided_at = ?3
                 WHERE id = ?1 AND status = 'pending'",
                &args![id, by, now_text()],
            )
        })?;
        Ok(n > 0)
    }

    /// The approval for the rest of `session` of calls with this digest, if a person gave one.
    pub fn session_approval(&self, digest: &str, session: &str) -> Result<Option<ApprovalRow>> {
        self.read(|c| {
            c.query_opt(
                &format!(
                    "{SELECT} WHERE a.digest = ?1 AND a.session_id = ?2 AND a.status = 'approved'
                     AND a.scope = 'session' ORDER BY a.requested_at DESC LIMIT 1"
                ),
                &args![digest, session],
            )?
            .as_ref()
            .map(approval_from_row)
            .transpose()
        })
    }
}

/// Pending approvals past their deadline become `expired`; decided ones older than [`KEEP_MS`] are deleted.
fn sweep(c: &dyn super::db::Conn, now_ms: i64) -> Result<()> {
    c.execute(
        "UPDATE approvals SET status = 'expired', decided_by = 'timeout', decided_at = ?2
         WHERE status = 'pending' AND deadline_ms <= ?1",
        &args![now_ms, now_text()],
    )?;
    c.execute(
        "DELETE FROM approvals WHERE status <> 'pending' AND deadline_ms < ?1",
        &args![now_ms.saturating_sub(KEEP_MS)],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::ServerSpec;

    fn server(store: &Store, name: &str) -> i64 {
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": name, "command": "true"})).unwrap();
        store.insert_server(&spec).unwrap().id
    }

    fn pending<'a>(id: &'a str, server_id: i64, deadline_ms: i64) -> NewApproval<'a> {
        NewApproval {
            id,
            server_id,
            tool: "echo",
            arguments: r#"{"text":"hi"}"#,
            digest: "d1",
            session: Some("cli:s"),
            via: "wait",
            status: "pending",
            scope: None,
            deadline_ms,
            decided_by: None,
        }
    }

    #[test]
    fn policy_rules_are_set_changed_and_removed() {
        let store = Store::open_in_memory().unwrap();
        let id = server(&store, "fx");
        assert!(store.tool_policies(id).unwrap().is_empty());
        assert!(store.set_tool_policy(id, "tool:echo", Some("ask")).unwrap());
        assert!(
            !store.set_tool_policy(id, "tool:echo", Some("ask")).unwrap(),
            "unchanged"
        );
        assert!(store.set_tool_policy(id, "", Some("deny")).unwrap());
        assert!(
            store
                .set_tool_policy(id, "tool:echo", Some("allow"))
                .unwrap()
        );
        let rules: Vec<(String, String)> = store
            .tool_policies(id)
            .unwrap()
            .into_iter()
            .map(|r| (r.target, r.policy))
            .collect();
        assert_eq!(
            rules,
            [
                ("".into(), "deny".into()),
                ("tool:echo".into(), "allow".into())
            ]
        );
        assert!(store.set_tool_policy(id, "tool:echo", None).unwrap());
        assert!(!store.set_tool_policy(id, "tool:echo", None).unwrap());
        assert!(store.delete_server("fx").unwrap());
        assert!(store.tool_policies(id).unwrap().is_empty());
    }

    #[test]
    fn an_approval_is_decided_once_used_once_and_expires() {
        let store = Store::open_in_memory().unwrap();
        let id = server(&store, "fx");
        assert!(
            store
                .insert_approval(&pending("a1", id, 10_000), 0)
                .unwrap()
        );
        assert!(
            !store
                .insert_approval(&pending("a1", id, 10_000), 0)
                .unwrap(),
            "ids are unique"
        );
        let listed = store.approvals(true, 10, 0).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].server.as_str(), listed[0].status.as_str()),
            ("fx", "pending")
        );
        // Past its deadline nobody may decide it.
        let (row, decided) = store
            .decide_approval("a1", "approved", Some("once"), "rest", 10_000)
            .unwrap();
        assert!(!decided);
        assert_eq!(row.unwrap().status, "pending");
        let (row, decided) = store
            .decide_approval("a1", "approved", Some("once"), "rest", 9_000)
            .unwrap();
        assert!(decided);
        let row = row.unwrap();
        assert_eq!(
            (
                row.status.as_str(),
                row.scope.as_deref(),
                row.decided_by.as_deref()
            ),
            ("approved", Some("once"), Some("rest"))
        );
        // A second decision changes nothing.
        let (row, decided) = store
            .decide_approval("a1", "denied", None, "cli:x", 9_000)
            .unwrap();
        assert!(!decided);
        assert_eq!(row.unwrap().status, "approved");
        assert!(!store.expire_approval("a1", "timeout").unwrap());
        assert!(store.use_approval("a1").unwrap());
        assert!(!store.use_approval("a1").unwrap(), "used once");
        assert!(store.approvals(true, 10, 0).unwrap().is_empty());

        // A pending one past its deadline is no longer listed as waiting, and shows expired; the next record marks
        // it so.
        assert!(store.insert_approval(&pending("a2", id, 5_000), 0).unwrap());
        assert_eq!(store.approvals(true, 10, 4_999).unwrap().len(), 1);
        assert_eq!(store.approvals(true, 10, 5_000).unwrap().len(), 0);
        let all = store.approvals(false, 10, 5_000).unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.iter().any(|a| a.id == "a2" && a.status == "expired"));
        assert_eq!(store.approval("a2").unwrap().unwrap().status, "pending");
        assert!(
            store
                .insert_approval(&pending("a3", id, 9_000), 5_000)
                .unwrap()
        );
        assert_eq!(store.approval("a2").unwrap().unwrap().status, "expired");
        // Decided approvals are deleted KEEP_MS after their deadline, when the next one is recorded.
        assert!(
            store
                .insert_approval(&pending("a4", id, i64::MAX / 2), 10_001 + KEEP_MS)
                .unwrap()
        );
        let left: Vec<String> = store
            .approvals(false, 10, 0)
            .unwrap()
            .into_iter()
            .map(|a| a.id)
            .collect();
        assert_eq!(left, ["a4"]);
    }

    /// `migrate` copies a server's rules with it; approvals stay behind (they belong to calls of this registry).
    #[test]
    fn rules_are_copied_with_their_server_and_approvals_are_not() {
        let source = Store::open_in_memory().unwrap();
        let target = Store::open_in_memory().unwrap();
        server(&target, "other");
        let id = server(&source, "fx");
        source
            .set_tool_policy(id, "tool:echo", Some("ask"))
            .unwrap();
        source
            .set_tool_policy(id, "annotation:destructive", Some("deny"))
            .unwrap();
        source.insert_approval(&pending("p1", id, 10), 0).unwrap();
        let report = source
            .copy_into(&target, false, &|_, blob| Ok(blob.to_vec()))
            .unwrap();
        assert_eq!(report.rows.get("tool_policies"), Some(&2));
        let copied = target.server_by_name("fx").unwrap().unwrap().id;
        assert_ne!(copied, id);
        assert_eq!(
            target.tool_policies(copied).unwrap(),
            source.tool_policies(id).unwrap()
        );
        assert!(target.approvals(false, 10, 0).unwrap().is_empty());
    }

    #[test]
    fn a_session_approval_is_found_by_digest_and_session_only() {
        let store = Store::open_in_memory().unwrap();
        let id = server(&store, "fx");
        let mut new = pending("s1", id, i64::MAX / 2);
        new.via = "elicitation";
        new.status = "approved";
        new.scope = Some("session");
        new.decided_by = Some("elicitation");
        assert!(store.insert_approval(&new, 0).unwrap());
        assert_eq!(
            store.session_approval("d1", "cli:s").unwrap().unwrap().id,
            "s1"
        );
        assert!(store.session_approval("d2", "cli:s").unwrap().is_none());
        assert!(store.session_approval("d1", "cli:other").unwrap().is_none());
        // An approval once is no session approval.
        let mut once = pending("o1", id, i64::MAX / 2);
        once.digest = "d3";
        once.status = "approved";
        once.scope = Some("once");
        store.insert_approval(&once, 0).unwrap();
        assert!(store.session_approval("d3", "cli:s").unwrap().is_none());
    }
}
