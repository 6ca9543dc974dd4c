//! SQL for the `servers` table: insert, update, delete, lookups and filtered listing.

use rusqlite::{OptionalExtension, Row, params};

use super::{Store, fts_query, json_col, to_json};
use crate::error::ToolErrorKind;
use crate::error::{Error, Result};
use crate::model::{
    Health, ListFilter, Server, ServerSpec, ServerStatus, ServerSummary, Source, Transport,
};

const COLUMNS: &str = "id, name, description, source, command, args, env, tags, package_name, package_version, transport, url, headers, \
    repository, homepage, installed, active, latest_version, last_health_check, health_status, error_count, last_error, \
    activate_timeout_ms, call_timeout_ms, created_at, updated_at, origin, status, auth_url, error_kind, protocol";

fn server_from_row(r: &Row<'_>) -> rusqlite::Result<Server> {
    let source: String = r.get(3)?;
    let transport: String = r.get(10)?;
    let health: String = r.get(19)?;
    Ok(Server {
        id: r.get(0)?,
        name: r.get(1)?,
        description: r.get(2)?,
        source: source.parse().unwrap_or(Source::Manual),
        command: r.get(4)?,
        args: json_col(r.get(5)?),
        env: json_col(r.get(6)?),
        tags: json_col(r.get(7)?),
        package_name: r.get(8)?,
        package_version: r.get(9)?,
        transport: transport.parse().unwrap_or(Transport::Stdio),
        url: r.get(11)?,
        headers: json_col(r.get(12)?),
        repository: r.get(13)?,
        homepage: r.get(14)?,
        installed: r.get(15)?,
        active: r.get(16)?,
        latest_version: r.get(17)?,
        last_health_check: r.get(18)?,
        health_status: Health::parse_lenient(&health),
        error_count: r.get(20)?,
        last_error: r.get(21)?,
        activate_timeout_ms: r.get::<_, Option<i64>>(22)?.map(|v| v.max(0) as u64),
        call_timeout_ms: r.get::<_, Option<i64>>(23)?.map(|v| v.max(0) as u64),
        created_at: r.get(24)?,
        updated_at: r.get(25)?,
        origin: r.get(26)?,
        status: ServerStatus::parse_lenient(&r.get::<_, String>(27)?),
        auth_url: r.get(28)?,
        error_kind: r
            .get::<_, Option<String>>(29)?
            .as_deref()
            .and_then(ToolErrorKind::parse),
        protocol: r.get(30)?,
    })
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE)
}

/// Inserts one server row from `spec` under `origin`; a taken name is [`Error::Conflict`].
pub(super) fn insert_row(
    conn: &rusqlite::Connection,
    spec: &ServerSpec,
    origin: &str,
) -> Result<i64> {
    let res = conn.execute(
        "INSERT INTO servers (name, description, source, command, args, env, tags, package_name, package_version, transport, url, headers, repository, homepage, origin)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
        params![
            spec.name,
            spec.description,
            spec.source.as_str(),
            spec.command,
            to_json(&spec.args)?,
            to_json(&spec.env)?,
            to_json(&spec.tags)?,
            spec.package_name,
            spec.package_version,
            spec.transport.as_str(),
            spec.url,
            to_json(&spec.headers)?,
            spec.repository,
            spec.homepage,
            origin,
        ],
    );
    match res {
        Ok(_) => Ok(conn.last_insert_rowid()),
        Err(e) if is_unique_violation(&e) => Err(Error::Conflict {
            what: "server",
            name: spec.name.clone(),
        }),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn server_row(conn: &rusqlite::Connection, id: i64) -> Result<Server> {
    Ok(conn.query_row(
        &format!("SELECT {COLUMNS} FROM servers WHERE id = ?1"),
        [id],
        server_from_row,
    )?)
}

impl Store {
    /// Inserts a validated spec (origin `manual`); a taken name is [`Error::Conflict`].
    pub fn insert_server(&self, spec: &ServerSpec) -> Result<Server> {
        let conn = self.lock();
        let id = insert_row(&conn, spec, crate::model::MANUAL_ORIGIN)?;
        server_row(&conn, id)
    }

    /// Rewrites the configurable fields of server `id` from `spec` (the name stays).
    pub fn update_server(
        &self,
        id: i64,
        spec: &ServerSpec,
        activate_timeout_ms: Option<u64>,
        call_timeout_ms: Option<u64>,
    ) -> Result<Server> {
        let conn = self.lock();
        let n = conn.execute(
            "UPDATE servers SET description = ?2, command = ?3, args = ?4, env = ?5, tags = ?6, transport = ?7, url = ?8, headers = ?9,
                activate_timeout_ms = ?10, call_timeout_ms = ?11, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now')
             WHERE id = ?1",
            params![
                id,
                spec.description,
                spec.command,
                to_json(&spec.args)?,
                to_json(&spec.env)?,
                to_json(&spec.tags)?,
                spec.transport.as_str(),
                spec.url,
                to_json(&spec.headers)?,
                activate_timeout_ms.map(|v| v as i64),
                call_timeout_ms.map(|v| v as i64),
            ],
        )?;
        if n == 0 {
            return Err(Error::not_found("server", id.to_string()));
        }
        Ok(conn.query_row(
            &format!("SELECT {COLUMNS} FROM servers WHERE id = ?1"),
            [id],
            server_from_row,
        )?)
    }

    /// Deletes a server by name (tools, secrets and metrics go with it); returns whether it existed.
    pub fn delete_server(&self, name: &str) -> Result<bool> {
        Ok(self
            .lock()
            .execute("DELETE FROM servers WHERE name = ?1", [name])?
            > 0)
    }

    pub fn server_by_name(&self, name: &str) -> Result<Option<Server>> {
        Ok(self
            .lock()
            .query_row(
                &format!("SELECT {COLUMNS} FROM servers WHERE name = ?1"),
                [name],
                server_from_row,
            )
            .optional()?)
    }

    pub fn server_by_id(&self, id: i64) -> Result<Option<Server>> {
        Ok(self
            .lock()
            .query_row(
                &format!("SELECT {COLUMNS} FROM servers WHERE id = ?1"),
                [id],
                server_from_row,
            )
            .optional()?)
    }

    /// Lists servers with their tool counts; a query ranks by FTS5 relevance, otherwise by name.
    pub fn list_servers(&self, filter: &ListFilter) -> Result<Vec<ServerSummary>> {
        let conn = self.lock();
        let cols = COLUMNS
            .split(", ")
            .map(|c| format!("s.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut sql = format!(
            "SELECT {cols}, (SELECT COUNT(*) FROM server_tools t WHERE t.server_id = s.id) FROM servers s"
        );
        let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
        let mut conds: Vec<String> = Vec::new();
        let fts = filter
            .query
            .as_deref()
            .and_then(|q| fts_query(q, "AND", true));
        if let Some(q) = &fts {
            sql.push_str(" JOIN servers_fts f ON f.rowid = s.id");
            args.push(Box::new(q.clone()));
            conds.push(format!("servers_fts MATCH ?{}", args.len()));
        }
        if let Some(source) = filter.source {
            args.push(Box::new(source.as_str()));
            conds.push(format!("s.source = ?{}", args.len()));
        }
        if filter.installed_only {
            conds.push("s.installed = 1".into());
        }
        if !conds.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conds.join(" AND "));
        }
        sql.push_str(if fts.is_some() {
            " ORDER BY bm25(servers_fts, 4.0, 1.0, 2.0), s.name"
        } else {
            " ORDER BY s.name"
        });
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map(
            rusqlite::params_from_iter(args.iter().map(|b| b.as_ref())),
            |r| {
                Ok(ServerSummary {
                    server: server_from_row(r)?,
                    tool_count: r.get(31)?,
                    auth_url: None,
                })
            },
        )?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    pub fn count_servers(&self) -> Result<i64> {
        Ok(self
            .lock()
            .query_row("SELECT COUNT(*) FROM servers", [], |r| r.get(0))?)
    }

    /// Sets the cross-process `active` flag (and clears or records the last error).
    pub fn set_active(&self, id: i64, active: bool, last_error: Option<&str>) -> Result<()> {
        self.lock().execute(
            "UPDATE servers SET active = ?2, last_error = ?3,
                status = CASE WHEN ?2 OR status = 'disabled' THEN status ELSE 'stopped' END, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ','now') WHERE id = ?1",
            params![id, active, last_error],
        )?;
        Ok(())
    }

    /// Servers to bring back at start: flagged active and installed.
    pub fn servers_to_restore(&self) -> Result<Vec<Server>> {
        let conn = self.lock();
        let mut stmt = conn.prepare(&format!(
            "SELECT {COLUMNS} FROM servers WHERE active = 1 AND installed = 1 AND status != 'disabled' ORDER BY id"
        ))?;
        let rows = stmt.query_map([], server_from_row)?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// Records a health check result; success resets the error count.
    pub fn record_health(&self, id: i64, healthy: bool, error: Option<&str>) -> Result<()> {
        self.lock().execute(
            "UPDATE servers SET health_status = ?2, last_health_check = strftime('%Y-%m-%dT%H:%M:%fZ','now'),
                error_count = CASE WHEN ?3 THEN 0 ELSE error_count + 1 END, last_error = ?4 WHERE id = ?1",
            params![id, if healthy { "healthy" } else { "unhealthy" }, healthy, error],
        )?;
        Ok(())
    }
}
