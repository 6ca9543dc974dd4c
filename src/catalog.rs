//! The introspection use case over the App: run a batch and store each record as it finishes, keep the tool
//! catalog (introspected, not installed servers: `servers` rows with `installed = 0` whose tools are indexed beside
//! installed ones), say what installing a catalog entry needs, and find what changed since the last run.
//!
//! A catalog entry is never started: activation refuses it (see `Proxy::activate`) until an explicit install or
//! registration replaces it with an installed server of the same name.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::app::App;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::introspect::{Category, Ecosystem, Options, Progress, Record, Target, run_batch};
use crate::model::{Server, ServerSpec, Source, ToolInfo};
use crate::store::IntrospectionRow;

/// Options rooted in the app's data directory (`<data>/introspect`) with this executable as the child guard.
pub fn options_for(app: &App) -> Result<Options> {
    let guard = match &app.config.guard_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()?,
    };
    Ok(Options::new(app.config.data_dir.join("introspect"), guard))
}

/// Runs a batch and stores every record as it is finished; `on_progress` sees the same events as [`run_batch`].
pub async fn run(
    app: &App,
    targets: Vec<Target>,
    options: &Options,
    mut on_progress: impl FnMut(Progress),
) -> Vec<Record> {
    run_batch(targets, options, |p| {
        if let Progress::Finished { record, .. } = &p
            && let Err(e) = save(app, record)
        {
            tracing::warn!(key = %record.key, error = %e, "storing an introspection record failed");
        }
        on_progress(p)
    })
    .await
}

/// Stores a record; an enumerated package (re)gets its catalog entry with its tools, a failed one loses it.
/// Returns the catalog entry's name.
pub fn save(app: &App, record: &Record) -> Result<Option<String>> {
    let store = app.registry.store();
    let previous = store.introspection(&record.key)?;
    let old_entry = previous
        .as_ref()
        .and_then(|p| p.server_id)
        .and_then(|id| store.server_by_id(id).ok().flatten())
        .filter(|s| !s.installed);
    if let Some(old) = &old_entry {
        app.registry.remove(&old.name)?;
    }
    let entry = if record.category.is_ok() && !record.tools.is_empty() {
        catalog_entry(app, record)?
    } else {
        None
    };
    let row = IntrospectionRow {
        key: record.key.clone(),
        ecosystem: record.ecosystem.as_str().to_owned(),
        package: record.package.clone(),
        version: record.version.clone(),
        category: record.category.as_str().to_owned(),
        evidence: record.evidence.clone(),
        hint: record.hint.clone(),
        pass: i64::from(record.pass),
        tool_count: record.tools.len() as i64,
        duration_ms: record.duration_ms as i64,
        record: serde_json::to_string(record).map_err(|e| Error::Internal(e.to_string()))?,
        server_id: entry.as_ref().map(|s| s.id),
        introspected_at: String::new(),
    };
    store.save_introspection(&row)?;
    Ok(entry.map(|s| s.name))
}

/// A free name for a record's catalog entry: the package's last segment, else with the ecosystem appended. `None`
/// when the package is already installed under that name (its tools are known from the real server).
fn entry_name(app: &App, record: &Record) -> Result<Option<String>> {
    let base = match record.ecosystem {
        Ecosystem::Command => std::path::Path::new(&record.package)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_else(|| record.package.clone()),
        _ => record.package.clone(),
    };
    let base = crate::marketplace::suggest_name(&base);
    let suffixed =
        crate::marketplace::suggest_name(&format!("{base}-{}", record.ecosystem.as_str()));
    for name in [base, suffixed] {
        match app.registry.store().server_by_name(&name)? {
            None => return Ok(Some(name)),
            Some(s)
                if s.installed && s.package_name.as_deref() == Some(record.package.as_str()) =>
            {
                return Ok(None);
            }
            Some(_) => continue,
        }
    }
    Ok(None)
}

fn catalog_entry(app: &App, record: &Record) -> Result<Option<Server>> {
    let Some(name) = entry_name(app, record)? else {
        return Ok(None);
    };
    let versioned = |sep: &str| match &record.version {
        Some(v) => format!("{}{sep}{v}", record.package),
        None => record.package.clone(),
    };
    let launch_args: Vec<String> = record
        .launch
        .as_ref()
        .map(|l| l.iter().skip(1).cloned().collect())
        .unwrap_or_default();
    // Arguments that were placeholders are not part of the entry (installing asks for them), except the literal
    // switches (`--stdio`, `--transport stdio`) that are kept as they are.
    let filled: usize = record.placeholders.iter().map(|p| p.argv().len()).sum();
    let mut fixed_args: Vec<String> =
        launch_args[..launch_args.len().saturating_sub(filled)].to_vec();
    fixed_args.extend(
        record
            .placeholders
            .iter()
            .filter(|p| p.is_literal())
            .flat_map(|p| p.argv()),
    );
    let (source, command, args) = match record.ecosystem {
        Ecosystem::Npm => (
            Source::Npm,
            "npx".to_owned(),
            ["-y".to_owned(), versioned("@")]
                .into_iter()
                .chain(fixed_args)
                .collect(),
        ),
        Ecosystem::Pypi => (
            Source::Pypi,
            "uvx".to_owned(),
            std::iter::once(versioned("==")).chain(fixed_args).collect(),
        ),
        Ecosystem::Command => (Source::Local, record.package.clone(), fixed_args),
    };
    let source = if record.registry_name.is_some() {
        Source::Registry
    } else {
        source
    };
    let mut description = record
        .description
        .clone()
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| format!("{} (introspected)", record.package));
    crate::introspect::clip(
        &mut description,
        crate::model::limits::DESCRIPTION.min(1000),
    );
    let spec = ServerSpec {
        name: name.clone(),
        description,
        source,
        command: Some(command),
        args,
        env: BTreeMap::new(),
        tags: vec!["catalog".into(), record.ecosystem.as_str().to_owned()],
        package_name: (record.ecosystem != Ecosystem::Command).then(|| record.package.clone()),
        package_version: record.version.clone(),
        ..ServerSpec::default()
    };
    let server = app.registry.register(spec)?;
    let store = app.registry.store();
    store.set_installed(server.id, false)?;
    let tools: Vec<ToolInfo> = record
        .tools
        .iter()
        .filter(|t| !t.name.is_empty())
        .map(|t| ToolInfo {
            name: t.name.clone(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect();
    app.registry.save_tools(server.id, &tools)?;
    app.events.emit(Event::ToolsChanged {
        name: server.name.clone(),
    });
    Ok(Some(app.registry.get_by_id(server.id)?))
}

/// The tool scanner's findings on an introspected package's tools: `[{tool, findings}]` for each tool it would
/// withhold (`high`) or show with a warning (`medium`).
pub fn record_findings(app: &App, record: &Record) -> Vec<Value> {
    record
        .tools
        .iter()
        .filter_map(|t| {
            let def = json!({"name": t.name, "description": t.description, "inputSchema": t.input_schema});
            let f = app.registry.catalog_findings(&record.package, &def);
            (ad_scan::outcome(&f) != ad_scan::Outcome::Clean)
                .then(|| json!({"tool": t.name, "findings": f}))
        })
        .collect()
}

/// Every stored record (optionally of one category).
pub fn stored(app: &App, category: Option<Category>) -> Result<Vec<Record>> {
    let rows = app
        .registry
        .store()
        .introspections(category.map(Category::as_str))?;
    Ok(rows
        .iter()
        .filter_map(|r| serde_json::from_str::<Record>(&r.record).ok())
        .collect())
}

/// The stored records as headlines (no tool lists), with the count per category: what the REST route and the dashboard
/// show.
pub fn overview(app: &App, category: Option<Category>) -> Result<Value> {
    let store = app.registry.store();
    let all = store.introspections(None)?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &all {
        *counts.entry(r.category.as_str()).or_default() += 1;
    }
    let records: Vec<Value> = all
        .iter()
        .filter(|r| category.is_none_or(|c| c.as_str() == r.category))
        .map(|r| {
            let entry = r
                .server_id
                .and_then(|id| store.server_by_id(id).ok().flatten())
                .map(|s| s.name);
            json!({
                "key": r.key, "ecosystem": r.ecosystem, "package": r.package, "version": r.version,
                "category": r.category, "evidence": r.evidence, "hint": r.hint, "pass": r.pass,
                "tool_count": r.tool_count, "duration_ms": r.duration_ms, "introspected_at": r.introspected_at,
                "catalog_entry": entry,
            })
        })
        .collect();
    Ok(json!({"total": all.len(), "categories": counts, "records": records}))
}

/// What installing a catalog entry needs: the `install` arguments (or the registration for a local command), the
/// secrets and arguments it was found to need, and whether its tools were listed under placeholders.
pub fn install_info(app: &App, server: &Server) -> Result<Option<Value>> {
    if server.installed {
        return Ok(None);
    }
    let Some(row) = app.registry.store().introspection_of_server(server.id)? else {
        return Ok(None);
    };
    let Ok(record) = serde_json::from_str::<Record>(&row.record) else {
        return Ok(None);
    };
    // Installing the entry itself keeps the launch (and version) whose tools were listed; the marketplace install
    // resolves the package again (maybe a newer version).
    let inputs: Vec<String> = entry_inputs(app, &server.name)?
        .into_iter()
        .map(|m| m.name)
        .collect();
    let mut how = json!({"action": "install", "name": server.name});
    if !inputs.is_empty() {
        how["inputs"] = json!(inputs);
    }
    let marketplace = match (record.ecosystem, &record.registry_name) {
        (Ecosystem::Command, _) => None,
        (_, Some(registry)) => {
            Some(json!({"action": "install", "name": registry, "source": "registry"}))
        }
        (eco, None) => Some(
            json!({"action": "install", "name": format!("{}:{}", eco.as_str(), record.package), "source": eco.as_str()}),
        ),
    };
    Ok(Some(json!({
        "install": how,
        "marketplace_install": marketplace,
        "required_secrets": record.needs.env,
        "required_args": record.needs.args,
        "listed_under_placeholders": record.pass == 2,
        "version": record.version,
        "introspected_at": row.introspected_at,
    })))
}

/// What `catalog refresh` re-introspects: stored npm, PyPI and registry records whose latest version differs from
/// the stored one. Returns the targets and the keys left as they are (with why).
pub async fn changed_targets(app: &App) -> Result<(Vec<Target>, Vec<(String, String)>)> {
    let market = app.marketplace()?;
    let mut targets = Vec::new();
    let mut unchanged = Vec::new();
    for record in stored(app, None)? {
        let lookup_name = match (&record.registry_name, record.ecosystem) {
            (_, Ecosystem::Command) => {
                unchanged.push((
                    record.key.clone(),
                    "a local command has no version to compare".into(),
                ));
                continue;
            }
            (Some(r), _) => format!("registry:{r}"),
            (None, eco) => format!("{}:{}", eco.as_str(), record.package),
        };
        let entry = match market.lookup(&lookup_name).await {
            Ok(Some(e)) => e,
            Ok(None) => {
                unchanged.push((
                    record.key.clone(),
                    "no longer found in the marketplace".into(),
                ));
                continue;
            }
            Err(e) => {
                unchanged.push((record.key.clone(), format!("lookup failed: {e}")));
                continue;
            }
        };
        let Some(mut target) = Target::from_entry(&entry) else {
            unchanged.push((
                record.key.clone(),
                "the entry no longer has an npm or PyPI package".into(),
            ));
            continue;
        };
        if target.version.is_none() {
            target.version = entry.version.clone();
        }
        if target.version.is_some() && target.version == record.version {
            unchanged.push((
                record.key.clone(),
                format!("still {}", record.version.unwrap_or_default()),
            ));
            continue;
        }
        if record.registry_name.is_none() {
            target.registry_name = None;
        }
        targets.push(target);
    }
    Ok((targets, unchanged))
}

/// What installing a catalog entry did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum EntryInstall {
    /// The entry is now an installed server of the same name, launched as it was introspected.
    Installed {
        server: String,
        command: Option<String>,
        args: Vec<String>,
        /// Secret values stored encrypted (names only).
        secrets: Vec<String>,
    },
    /// Nothing was changed: these values are required. Pass them as `inputs` and install again.
    NeedsInput {
        name: String,
        missing: Vec<crate::marketplace::MissingInput>,
    },
}

/// The record behind catalog entry `name`; `None` when `name` is not a catalog entry (unknown, or installed).
fn entry_record(app: &App, name: &str) -> Result<Option<(Server, Record)>> {
    let Some(server) = app.registry.store().server_by_name(name)? else {
        return Ok(None);
    };
    if server.installed {
        return Ok(None);
    }
    let Some(row) = app.registry.store().introspection_of_server(server.id)? else {
        return Ok(None);
    };
    Ok(serde_json::from_str::<Record>(&row.record)
        .ok()
        .map(|r| (server, r)))
}

/// Whether `name` is a catalog entry (introspected, not installed).
pub fn is_entry(app: &App, name: &str) -> Result<bool> {
    Ok(entry_record(app, name)?.is_some())
}

/// The values installing entry `name` needs: its required secrets (environment variables) and its required
/// arguments (labels of positional arguments, or option names such as `--api-key`). Empty for an unknown name.
pub fn entry_inputs(app: &App, name: &str) -> Result<Vec<crate::marketplace::MissingInput>> {
    use crate::marketplace::{InputKind, MissingInput};
    let Some((_, record)) = entry_record(app, name)? else {
        return Ok(Vec::new());
    };
    let mut out: Vec<MissingInput> = record
        .needs
        .env
        .iter()
        .map(|n| MissingInput {
            name: n.clone(),
            description: format!(
                "environment variable {n} (the server asked for it; stored encrypted)"
            ),
            is_secret: true,
            kind: InputKind::Env,
        })
        .collect();
    for a in &record.needs.args {
        // A literal switch (`--stdio`) was kept in the entry's arguments: nothing to ask.
        if is_literal(&record, a) {
            continue;
        }
        out.push(MissingInput {
            name: a.clone(),
            description: if a.starts_with('-') {
                format!("value of the option {a} the server requires")
            } else {
                format!("the <{a}> argument the server requires")
            },
            is_secret: false,
            kind: InputKind::Argument,
        });
    }
    Ok(out)
}

/// Whether required argument `label` was filled by a literal switch in the second pass.
fn is_literal(record: &Record, label: &str) -> bool {
    record
        .placeholders
        .iter()
        .any(|p| p.name == label && p.is_literal())
}

/// Installs catalog entry `name` with `inputs` for its required values: the entry (the introspected launch, version
/// pinned) becomes an installed server of the same name, the required arguments are appended (`--opt value` for an
/// option, the value for a positional one) and the required secrets are stored encrypted. Nothing is started.
pub fn install_entry(
    app: &App,
    name: &str,
    inputs: &BTreeMap<String, String>,
) -> Result<EntryInstall> {
    let Some((server, _record)) = entry_record(app, name)? else {
        return Err(Error::not_found(
            "catalog entry",
            format!("{name} (find_tool names catalog entries as servers with `installed: false`)"),
        ));
    };
    let needed = entry_inputs(app, name)?;
    let missing: Vec<_> = needed
        .iter()
        .filter(|m| inputs.get(&m.name).is_none_or(|v| v.trim().is_empty()))
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Ok(EntryInstall::NeedsInput {
            name: server.name,
            missing,
        });
    }
    let mut args = server.args.clone();
    for m in needed
        .iter()
        .filter(|m| m.kind == crate::marketplace::InputKind::Argument)
    {
        if m.name.starts_with('-') {
            args.push(m.name.clone());
        }
        args.push(inputs[&m.name].clone());
    }
    let patch = crate::model::ServerPatch {
        args: Some(args),
        tags: Some(
            server
                .tags
                .iter()
                .filter(|t| t.as_str() != "catalog")
                .cloned()
                .collect(),
        ),
        ..Default::default()
    };
    let updated = app.registry.update(&server.name, &patch)?;
    let mut secrets = Vec::new();
    for m in needed
        .iter()
        .filter(|m| m.kind == crate::marketplace::InputKind::Env)
    {
        app.secrets.set(&server.name, &m.name, &inputs[&m.name])?;
        secrets.push(m.name.clone());
    }
    app.registry.store().set_installed(server.id, true)?;
    app.events.emit(Event::ServerUpdated {
        name: server.name.clone(),
    });
    Ok(EntryInstall::Installed {
        server: updated.name,
        command: updated.command,
        args: updated.args,
        secrets,
    })
}
