//! SQL for batch introspection: one record per package key (the latest attempt, as JSON with its headline columns),
//! linked to the package's catalog entry (a `servers` row with `installed = 0`) when it was enumerated.

use super::Store;
use super::db::{Row, now_text};
use crate::args;
use ad_core::error::Result;

/// The headline of an introspection record; `record` is the full JSON the engine produced.
#[derive(Debug, Clone, PartialEq)]
pub struct IntrospectionRow {
    pub key: String,
    pub ecosystem: String,
    pub package: String,
    pub version: Option<String>,
    pub category: String,
    pub evidence: String,
    pub hint: String,
    pub pass: i64,
    pub tool_count: i64,
    pub duration_ms: i64,
    pub record: String,
    pub server_id: Option<i64>,
    pub introspected_at: String,
}

const COLUMNS: &str = "key, ecosystem, package, version, category, evidence, hint, pass, tool_count, duration_ms, record, server_id, introspected_at";

fn from_row(r: &Row) -> Result<IntrospectionRow> {
    Ok(IntrospectionRow {
        key: r.get(0)?,
        ecosystem: r.get(1)?,
        package: r.get(2)?,
        version: r.get(3)?,
        category: r.get(4)?,
        evidence: r.get(5)?,
        hint: r.get(6)?,
        pass: r.get(7)?,
        tool_count: r.get(8)?,
        duration_ms: r.get(9)?,
        record: r.get(10)?,
        server_id: r.get(11)?,
        introspected_at: r.get(12)?,
    })
}

impl Store {
    /// Inserts or replaces the record of `row.key` (`introspected_at` is set now).
    pub fn save_introspection(&self, row: &IntrospectionRow) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO introspections (key, ecosystem, package, version, category, evidence, hint, pass, tool_count, duration_ms, record, server_id, introspected_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT (key) DO UPDATE SET ecosystem = excluded.ecosystem, package = excluded.package,
                    version = excluded.version, category = excluded.category, evidence = excluded.evidence, hint = excluded.hint,
                    pass = excluded.pass, tool_count = excluded.tool_count, duration_ms = excluded.duration_ms,
                    record = excluded.record, server_id = excluded.server_id,
                    introspected_at = excluded.introspected_at",
                &args![
                    &row.key,
                    &row.ecosystem,
                    &row.package,
                    row.version.as_deref(),
                    &row.category,
                    &row.evidence,
                    &row.hint,
                    row.pass,
                    row.tool_count,
                    row.duration_ms,
                    &row.record,
                    row.server_id,
                    now_text()
                ],
            )?;
            Ok(())
        })
    }

    /// Every record, optionally of one category, by key.
    pub fn introspections(&self, category: Option<&str>) -> Result<Vec<IntrospectionRow>> {
        self.read(|c| {
            let rows = match category {
                Some(cat) => c.query(
                    &format!(
                        "SELECT {COLUMNS} FROM introspections WHERE category = ?1 ORDER BY key"
                    ),
                    &args![cat],
                )?,
                None => c.query(
                    &format!("SELECT {COLUMNS} FROM introspections ORDER BY key"),
                    &[],
                )?,
            };
            rows.iter().map(from_row).collect()
        })
    }

    pub fn introspection(&self, key: &str) -> Result<Option<IntrospectionRow>> {
        self.read(|c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM introspections WHERE key = ?1"),
                &args![key],
            )?
            .as_ref()
            .map(from_row)
            .transpose()
        })
    }

    /// The record whose catalog entry is server `server_id`.
    pub fn introspection_of_server(&self, server_id: i64) -> Result<Option<IntrospectionRow>> {
        self.read(|c| {
            c.query_opt(
                &format!("SELECT {COLUMNS} FROM introspections WHERE server_id = ?1 ORDER BY introspected_at DESC LIMIT 1"),
                &args![server_id],
            )?
            .as_ref()
            .map(from_row)
            .transpose()
        })
    }

    /// Marks a server as a catalog entry (`false`: introspected, not installed) or installed.
    pub fn set_installed(&self, server_id: i64, installed: bool) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE servers SET installed = ?2, active = CASE WHEN CAST(?2 AS BIGINT) = 1 THEN active ELSE 0 END,
                    updated_at = ?3 WHERE id = ?1",
                &args![server_id, installed, now_text()],
            )?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let store = Store::open_in_memory().unwrap();
        let mut row = IntrospectionRow {
            key: "npm:x".into(),
            ecosystem: "npm".into(),
            package: "x".into(),
            version: Some("1.0.0".into()),
            category: "init_timeout".into(),
            evidence: "no answer".into(),
            hint: "h".into(),
            pass: 2,
            tool_count: 0,
            duration_ms: 15000,
            record: "{}".into(),
            server_id: None,
            introspected_at: String::new(),
        };
        store.save_introspection(&row).unwrap();
        row.category = "ok".into();
        row.tool_count = 3;
        store.save_introspection(&row).unwrap();
        let all = store.introspections(None).unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].category, "ok");
        assert_eq!(all[0].tool_count, 3);
        assert!(!all[0].introspected_at.is_empty());
        assert_eq!(store.introspections(Some("init_timeout")).unwrap().len(), 0);
        assert!(store.introspection("npm:x").unwrap().is_some());
        assert!(store.introspection("npm:y").unwrap().is_none());
    }
}
