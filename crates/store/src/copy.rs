//! SQL for copying one registry into another (`agent-discover migrate`): every server with its rows (tools, pins,
//! filters, overrides, settings, paging limit, users' own secret values and the rule for users without), the agents, the introspection records, the saved scripts and the
//! profiles (with their overrides), in one target transaction, with server ids assigned by the target.
//!
//! Encrypted columns are bound to their row (server id, key), so each sealed value goes through a caller's `reseal`
//! function that opens it with the source's key and seals it again for the target row; this module holds no key.

use std::collections::{BTreeMap, HashMap};

use super::Store;
use super::db::{Conn, Row, Value};
use ad_core::error::Result;

/// A sealed value being copied, and the row it was and will be bound to.
#[derive(Debug, Clone, Copy)]
pub enum Sealed<'a> {
    /// `server_secrets.value` of `key`.
    Secret { from: i64, to: i64, key: &'a str },
    /// `server_oauth.value` of `kind`.
    OAuth { from: i64, to: i64, kind: &'a str },
    /// `personal_secrets.value`: `user`'s own value of `key`.
    Personal {
        from: i64,
        to: i64,
        user: &'a str,
        key: &'a str,
    },
    /// `agents.headers` of the agent `id` (bound to the id, which does not change).
    AgentHeaders { id: &'a str },
}

/// Opens a sealed value with the source's key and seals it for its target row.
pub type Reseal<'r> = dyn Fn(Sealed<'_>, &[u8]) -> Result<Vec<u8>> + 'r;

/// What a copy did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CopyReport {
    /// Servers copied (by name), with `replaced` ones among them.
    pub copied: Vec<String>,
    /// Servers whose name the target already had (left as they are).
    pub skipped: Vec<String>,
    /// Servers the target had and that were replaced by the source's (with `replace`).
    pub replaced: Vec<String>,
    /// Agents copied and agents the target already had (by id).
    pub agents_copied: Vec<String>,
    pub agents_skipped: Vec<String>,
    /// Profiles copied and profiles the target already had (by name; with `replace` they are replaced and copied).
    pub profiles_copied: Vec<String>,
    pub profiles_skipped: Vec<String>,
    /// Saved scripts copied and saved scripts the target already had (by name, as profiles).
    pub scripts_copied: Vec<String>,
    pub scripts_skipped: Vec<String>,
    /// Rows inserted, per table.
    pub rows: BTreeMap<&'static str, u64>,
}

const SERVER_COLS: &str = "name, description, source, command, args, env, tags, package_name, package_version, \
     transport, url, headers, repository, homepage, installed, active, latest_version, last_health_check, \
     health_status, error_count, last_error, activate_timeout_ms, call_timeout_ms, created_at, updated_at, origin, \
     status, auth_url, error_kind, protocol";
/// Index of `active` and `status` in [`SERVER_COLS`]: a copied server starts inactive and stopped.
const SERVER_ACTIVE: usize = 15;
const SERVER_STATUS: usize = 26;

/// The per-server tables copied as they are, with `server_id` rewritten: (table, columns other than `server_id`).
const PLAIN: &[(&str, &str)] = &[
    (
        "server_tools",
        "name, description, input_schema, embedding, embedding_model",
    ),
    (
        "server_metrics",
        "tool_name, call_count, error_count, total_latency_ms, last_called_at",
    ),
    (
        "tool_pins",
        "tool, approved_fingerprint, approved_definition, approved_at, current_fingerprint, current_definition, seen_at",
    ),
    ("tool_filters", "allow, deny"),
    ("server_sandbox", "settings"),
    ("server_guards", "settings"),
    ("server_limits", "settings"),
    ("tool_policies", "target, policy, set_at"),
    ("tool_overrides", "tool, body, updated_at"),
    ("server_paging", "page_bytes"),
    ("personal_settings", "allow_shared"),
];
/// The registry-wide tables keyed by a name (their first column), copied row by row: (table, columns).
const NAMED: &[(&str, &str)] = &[
    (
        "saved_scripts",
        "name, description, input_schema, code, timeout_ms, created_at, updated_at",
    ),
    ("profiles", "name, spec, updated_at"),
];
const SECRET_COLS: &str = "key, value, masked, created_at, updated_at";
const OAUTH_COLS: &str = "kind, value, auth_url, updated_at";
const PERSONAL_COLS: &str = "user_key, key, value, created_at, updated_at";
/// The tables of sealed values per server: (table, columns after `server_id`, index of the sealed value in them).
const SEALED: &[(&str, &str, usize)] = &[
    ("server_secrets", SECRET_COLS, 1),
    ("server_oauth", OAUTH_COLS, 1),
    ("personal_secrets", PERSONAL_COLS, 2),
];
const AGENT_COLS: &str = "id, url, command, args, card, card_url, headers, max_concurrent, status, last_error, \
     created_at, updated_at";
/// Index of `headers` in [`AGENT_COLS`].
const AGENT_HEADERS: usize = 6;
const INTROSPECTION_COLS: &str = "key, ecosystem, package, version, category, evidence, hint, pass, tool_count, \
     duration_ms, record, server_id, introspected_at";
/// Index of `server_id` in [`INTROSPECTION_COLS`].
const INTROSPECTION_SERVER: usize = 11;

/// Everything read from the source, before any write.
struct Snapshot {
    /// (source id, server columns) in id order.
    servers: Vec<(i64, Row)>,
    /// Per table of [`PLAIN`], secrets and OAuth: source server id → rows.
    per_server: HashMap<(&'static str, i64), Vec<Row>>,
    agents: Vec<Row>,
    introspections: Vec<Row>,
    /// Per table of [`NAMED`], its rows.
    named: Vec<(&'static str, &'static str, Vec<Row>)>,
}

impl Store {
    /// One sealed secret of the registry, if it has any: `(server id, key, value)`, to check a key opens it.
    pub fn any_secret(&self) -> Result<Option<(i64, String, Vec<u8>)>> {
        self.read(|c| {
            c.query_opt(
                "SELECT server_id, key, value FROM server_secrets ORDER BY id LIMIT 1",
                &[],
            )?
            .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .transpose()
        })
    }

    /// Copies this registry into `target` in one target transaction. A server whose name `target` already has is
    /// skipped, or with `replace` deleted there (with its rows) and copied again; an agent whose id it has is
    /// skipped; an introspection record whose key it has is kept. Copied servers are inactive and stopped.
    pub fn copy_into(
        &self,
        target: &Store,
        replace: bool,
        reseal: &Reseal<'_>,
    ) -> Result<CopyReport> {
        let snap = self.read(snapshot)?;
        target.write(|c| copy(c, &snap, replace, reseal))
    }
}

fn snapshot(c: &dyn Conn) -> Result<Snapshot> {
    let servers = c
        .query(
            &format!("SELECT id, {SERVER_COLS} FROM servers ORDER BY id"),
            &[],
        )?
        .into_iter()
        .map(|mut r| {
            let id = r.get(0)?;
            r.0.remove(0);
            Ok((id, r))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut per_server: HashMap<(&'static str, i64), Vec<Row>> = HashMap::new();
    let tables = PLAIN
        .iter()
        .copied()
        .chain(SEALED.iter().map(|(table, cols, _)| (*table, *cols)));
    for (table, cols) in tables {
        for mut r in c.query(
            &format!("SELECT server_id, {cols} FROM {table} ORDER BY server_id"),
            &[],
        )? {
            let id: i64 = r.get(0)?;
            r.0.remove(0);
            per_server.entry((table, id)).or_default().push(r);
        }
    }
    let agents = c.query(&format!("SELECT {AGENT_COLS} FROM agents ORDER BY id"), &[])?;
    let introspections = c.query(
        &format!("SELECT {INTROSPECTION_COLS} FROM introspections ORDER BY key"),
        &[],
    )?;
    let named = NAMED
        .iter()
        .map(|(table, cols)| {
            let rows = c.query(&format!("SELECT {cols} FROM {table} ORDER BY name"), &[])?;
            Ok((*table, *cols, rows))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Snapshot {
        servers,
        per_server,
        agents,
        introspections,
        named,
    })
}

fn insert(c: &dyn Conn, table: &str, cols: &str, values: &[Value], suffix: &str) -> Result<u64> {
    let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
    c.execute(
        &format!(
            "INSERT INTO {table} ({cols}) VALUES ({}) {suffix}",
            marks.join(", ")
        ),
        values,
    )
}

fn copy(c: &dyn Conn, snap: &Snapshot, replace: bool, reseal: &Reseal<'_>) -> Result<CopyReport> {
    let mut report = CopyReport::default();
    let count = |report: &mut CopyReport, table: &'static str, n: u64| {
        *report.rows.entry(table).or_default() += n;
    };
    let mut new_ids: HashMap<i64, i64> = HashMap::new();
    for (old, row) in &snap.servers {
        let name: String = row.get(0)?;
        let existing = c.query_opt(
            "SELECT id FROM servers WHERE name = ?1",
            &[Value::Text(name.clone())],
        )?;
        if existing.is_some() {
            if !replace {
                report.skipped.push(name);
                continue;
            }
            c.execute(
                "DELETE FROM servers WHERE name = ?1",
                &[Value::Text(name.clone())],
            )?;
            report.replaced.push(name.clone());
        }
        let mut values = row.0.clone();
        values[SERVER_ACTIVE] = Value::Int(0);
        values[SERVER_STATUS] = Value::Text("stopped".into());
        let marks: Vec<String> = (1..=values.len()).map(|i| format!("?{i}")).collect();
        let new: i64 = c
            .query_one(
                &format!(
                    "INSERT INTO servers ({SERVER_COLS}) VALUES ({}) RETURNING id",
                    marks.join(", ")
                ),
                &values,
            )?
            .get(0)?;
        new_ids.insert(*old, new);
        count(&mut report, "servers", 1);
        for (table, cols) in PLAIN {
            for r in snap.per_server.get(&(*table, *old)).into_iter().flatten() {
                let mut values = vec![Value::Int(new)];
                values.extend(r.0.iter().cloned());
                let n = insert(c, table, &format!("server_id, {cols}"), &values, "")?;
                count(&mut report, table, n);
            }
        }
        // Sealed rows, each value re-sealed for its new server id.
        for (table, cols, at) in SEALED {
            for r in snap.per_server.get(&(*table, *old)).into_iter().flatten() {
                let label: String = r.get(0)?;
                let blob: Vec<u8> = r.get(*at)?;
                let sealed = match *table {
                    "server_secrets" => reseal(
                        Sealed::Secret {
                            from: *old,
                            to: new,
                            key: &label,
                        },
                        &blob,
                    )?,
                    "server_oauth" => reseal(
                        Sealed::OAuth {
                            from: *old,
                            to: new,
                            kind: &label,
                        },
                        &blob,
                    )?,
                    _ => {
                        let key: String = r.get(1)?;
                        reseal(
                            Sealed::Personal {
                                from: *old,
                                to: new,
                                user: &label,
                                key: &key,
                            },
                            &blob,
                        )?
                    }
                };
                let mut values = vec![Value::Int(new)];
                values.extend(r.0.iter().cloned());
                values[at + 1] = Value::Blob(sealed);
                let n = insert(c, table, &format!("server_id, {cols}"), &values, "")?;
                count(&mut report, table, n);
            }
        }
        report.copied.push(name);
    }
    for r in &snap.agents {
        let id: String = r.get(0)?;
        if c.query_opt(
            "SELECT id FROM agents WHERE id = ?1",
            &[Value::Text(id.clone())],
        )?
        .is_some()
        {
            report.agents_skipped.push(id);
            continue;
        }
        let mut values = r.0.clone();
        if let Some(blob) = r.get::<Option<Vec<u8>>>(AGENT_HEADERS)? {
            values[AGENT_HEADERS] = Value::Blob(reseal(Sealed::AgentHeaders { id: &id }, &blob)?);
        }
        let n = insert(c, "agents", AGENT_COLS, &values, "")?;
        count(&mut report, "agents", n);
        report.agents_copied.push(id);
    }
    for r in &snap.introspections {
        let mut values = r.0.clone();
        // Linked to the server it describes only when that server was copied now.
        values[INTROSPECTION_SERVER] = match r.get::<Option<i64>>(INTROSPECTION_SERVER)? {
            Some(old) => new_ids.get(&old).copied().into(),
            None => Value::Null,
        };
        let n = insert(
            c,
            "introspections",
            INTROSPECTION_COLS,
            &values,
            "ON CONFLICT (key) DO NOTHING",
        )?;
        count(&mut report, "introspections", n);
    }
    // Saved scripts and profiles: one the target has by name is skipped, or with `replace` replaced.
    for (table, cols, rows) in &snap.named {
        for r in rows {
            let name: String = r.get(0)?;
            let exists = c
                .query_opt(
                    &format!("SELECT 1 FROM {table} WHERE name = ?1"),
                    &[Value::Text(name.clone())],
                )?
                .is_some();
            let (copied, skipped) = match *table {
                "profiles" => (&mut report.profiles_copied, &mut report.profiles_skipped),
                _ => (&mut report.scripts_copied, &mut report.scripts_skipped),
            };
            if exists {
                if !replace {
                    skipped.push(name);
                    continue;
                }
                c.execute(
                    &format!("DELETE FROM {table} WHERE name = ?1"),
                    &[Value::Text(name.clone())],
                )?;
            }
            copied.push(name);
            let n = insert(c, table, cols, &r.0, "")?;
            count(&mut report, table, n);
        }
    }
    Ok(report)
}
