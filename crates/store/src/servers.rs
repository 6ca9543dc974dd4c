//! SQL for the `servers` table: insert, update, delete, lookups and filtered listing.

use super::db::{Conn, Row, Value, now_text};
use super::{Store, json_col, search, to_json};
use crate::args;
use ad_core::error::ToolErrorKind;
use ad_core::error::{Error, Result};
use ad_core::model::{
    Health, ListFilter, Server, ServerSpec, ServerStatus, ServerSummary, Source, Transport,
};

const COLUMNS: &str = "id, name, description, source, command, args, env, tags, package_name, package_version, transport, url, headers, \
    repository, homepage, installed, active, latest_version, last_health_check, health_status, error_count, last_error, \
    activate_timeout_ms, call_timeout_ms, created_at, updated_at, origin, status, auth_url, error_kind, protocol";

fn server_from_row(r: &Row) -> Result<Server> {
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
        activate_timeout_ms: r.get(22)?,
        call_timeout_ms: r.get(23)?,
        created_at: r.get(24)?,
        updated_at: r.get(25)?,
        origin: r.get(26)?,
        status: ServerStatus::parse_lenient(&r.get::<String>(27)?),
        auth_url: r.get(28)?,
        error_kind: r
            .get::<Option<String>>(29)?
            .as_deref()
            .and_then(ToolErrorKind::parse),
        protocol: r.get(30)?,
    })
}

/// Inserts one server row from `spec` under `origin`; a taken name is [`Error::Conflict`].
pub(super) fn insert_row(c: &dyn Conn, spec: &ServerSpec, origin: &str) -> Result<i64> {
    let now = now_text();
    let res = c.query_one(
        "INSERT INTO servers (name, description, source, command, args, env, tags, package_name, package_version, transport, url, headers, repository, homepage, origin, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?16) RETURNING id",
        &args![
            &spec.name,
            &spec.description,
            spec.source.as_str(),
            spec.command.as_deref(),
            to_json(&spec.args)?,
            to_json(&spec.env)?,
            to_json(&spec.tags)?,
            spec.package_name.as_deref(),
            spec.package_version.as_deref(),
            spec.transport.as_str(),
            spec.url.as_deref(),
            to_json(&spec.headers)?,
            spec.repository.as_deref(),
            spec.homepage.as_deref(),
            origin,
            now,
        ],
    );
    match res {
        Ok(row) => row.get(0),
        Err(e) if e.is_unique_violation() => Err(Error::Conflict {
            what: "server",
            name: spec.name.clone(),
        }),
        Err(e) => Err(e),
    }
}

pub(super) fn server_row(c: &dyn Conn, id: i64) -> Result<Server> {
    server_from_row(&c.query_one(
        &format!("SELECT {COLUMNS} FROM servers WHERE id = ?1"),
        &args![id],
    )?)
}

fn server_where(c: &dyn Conn, cond: &str, key: Value) -> Result<Option<Server>> {
    c.query_opt(
        &format!("SELECT {COLUMNS} FROM servers WHERE {cond}"),
        &[key],
    )?
    .as_ref()
    .map(server_from_row)
    .transpose()
}

impl Store {
    /// Inserts a validated spec (origin `manual`); a taken name is [`Error::Conflict`].
    pub fn insert_server(&self, spec: &ServerSpec) -> Result<Server> {
        self.write(|c| {
            let id = insert_row(c, spec, ad_core::model::MANUAL_ORIGIN)?;
            server_row(c, id)
        })
    }

    /// Rewrites the configurable fields of server `id` from `spec` (the name stays).
    pub fn update_server(
        &self,
        id: i64,
        spec: &ServerSpec,
        activate_timeout_ms: Option<u64>,
        call_timeout_ms: Option<u64>,
    ) -> Result<Server> {
        self.write(|c| {
            let n = c.execute(
                "UPDATE servers SET description = ?2, command = ?3, args = ?4, env = ?5, tags = ?6, transport = ?7, url = ?8, headers = ?9,
                    activate_timeout_ms = ?10, call_timeout_ms = ?11, updated_at = ?12
                 WHERE id = ?1",
                &args![
                    id,
                    &spec.description,
                    spec.command.as_deref(),
                    to_json(&spec.args)?,
                    to_json(&spec.env)?,
                    to_json(&spec.tags)?,
                    spec.transport.as_str(),
                    spec.url.as_deref(),
                    to_json(&spec.headers)?,
                    activate_timeout_ms,
                    call_timeout_ms,
                    now_text(),
                ],
            )?;
            if n == 0 {
                return Err(Error::not_found("server", id.to_string()));
            }
            server_row(c, id)
        })
    }

    /// Deletes a server by name (tools, secrets and metrics go with it); returns whether it existed.
    pub fn delete_server(&self, name: &str) -> Result<bool> {
        self.write(|c| Ok(c.execute("DELETE FROM servers WHERE name = ?1", &args![name])? > 0))
    }

    pub fn server_by_name(&self, name: &str) -> Result<Option<Server>> {
        self.read(|c| server_where(c, "name = ?1", name.into()))
    }

    pub fn server_by_id(&self, id: i64) -> Result<Option<Server>> {
        self.read(|c| server_where(c, "id = ?1", id.into()))
    }

    /// Lists servers with their tool counts; a query ranks by full-text relevance (see `search`), otherwise by name.
    pub fn list_servers(&self, filter: &ListFilter) -> Result<Vec<ServerSummary>> {
        self.read(|c| {
            let cols = COLUMNS
                .split(", ")
                .map(|c| format!("s.{c}"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut sql = format!(
                "SELECT {cols}, (SELECT COUNT(*) FROM server_tools t WHERE t.server_id = s.id) FROM servers s"
            );
            let mut params: Vec<Value> = Vec::new();
            let mut conds: Vec<String> = Vec::new();
            let text = filter
                .query
                .as_deref()
                .and_then(|q| search::server_text_filter(c.dialect(), q, &mut params));
            if let Some(t) = &text {
                sql.push_str(&t.join);
                conds.push(t.cond.clone());
            }
            if let Some(source) = filter.source {
                params.push(source.as_str().into());
                conds.push(format!("s.source = ?{}", params.len()));
            }
            if filter.installed_only {
                conds.push("s.installed = 1".into());
            }
            if !conds.is_empty() {
                sql.push_str(" WHERE ");
                sql.push_str(&conds.join(" AND "));
            }
            sql.push_str(" ORDER BY ");
            if let Some(t) = &text {
                sql.push_str(&t.order);
            }
            sql.push_str("s.name");
            c.query(&sql, &params)?
                .iter()
                .map(|r| {
                    Ok(ServerSummary {
                        server: server_from_row(r)?,
                        tool_count: r.get(31)?,
                        auth_url: None,
                    })
                })
                .collect()
        })
    }

    pub fn count_servers(&self) -> Result<i64> {
        self.read(|c| c.query_one("SELECT COUNT(*) FROM servers", &[])?.get(0))
    }

    /// Sets the cross-process `active` flag (and clears or records the last error).
    pub fn set_active(&self, id: i64, active: bool, last_error: Option<&str>) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE servers SET active = ?2, last_error = ?3,
                    status = CASE WHEN CAST(?2 AS BIGINT) = 1 OR status = 'disabled' THEN status ELSE 'stopped' END, updated_at = ?4 WHERE id = ?1",
                &args![id, active, last_error, now_text()],
            )?;
            Ok(())
        })
    }

    /// Servers to bring back at start: flagged active and installed.
    pub fn servers_to_restore(&self) -> Result<Vec<Server>> {
        self.read(|c| {
            c.query(
                &format!(
                    "SELECT {COLUMNS} FROM servers WHERE active = 1 AND installed = 1 AND status <> 'disabled' ORDER BY id"
                ),
                &[],
            )?
            .iter()
            .map(server_from_row)
            .collect()
        })
    }

    /// Records a health check result; success resets the error count.
    pub fn record_health(&self, id: i64, healthy: bool, error: Option<&str>) -> Result<()> {
        self.write(|c| {
            c.execute(
                "UPDATE servers SET health_status = ?2, last_health_check = ?5,
                    error_count = CASE WHEN ?3 = 1 THEN 0 ELSE error_count + 1 END, last_error = ?4 WHERE id = ?1",
                &args![
                    id,
                    if healthy { "healthy" } else { "unhealthy" },
                    healthy,
                    error,
                    now_text()
                ],
            )?;
            Ok(())
        })
    }
}
