//! The registered servers from the command line: `list`, `add`, `remove`, `show`, their lifecycle (`activate`,
//! `deactivate`, `enable`, `disable`) and their `secrets`.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::json;

use super::args::SecretsCommand;
use super::common::{one_line, print_json};
use crate::app::App;
use crate::model::{ListFilter, ServerSpec, Source, Transport};

pub(super) fn list(
    app: &App,
    query: Option<String>,
    source: Option<String>,
    installed: bool,
    json: bool,
) -> anyhow::Result<()> {
    let source = source.map(|s| s.parse::<Source>()).transpose()?;
    let rows = app.registry.list(&ListFilter {
        query,
        source,
        installed_only: installed,
    })?;
    if json {
        let mut listed = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut v = serde_json::to_value(r)?;
            app.add_sandbox_brief(&mut v, &r.server)?;
            listed.push(v);
        }
        return print_json(&serde_json::Value::Array(listed));
    }
    let mut out = std::io::stdout().lock();
    if rows.is_empty() {
        eprintln!(
            "no servers registered; add one with `agent-discover add NAME -- COMMAND [ARGS...]`"
        );
        return Ok(());
    }
    writeln!(
        out,
        "{:<24} {:<16} {:<7} {:<14} {:>5}  {:<9} DESCRIPTION",
        "NAME", "TRANSPORT", "ACTIVE", "STATUS", "TOOLS", "SOURCE"
    )?;
    for r in rows {
        let s = r.server;
        writeln!(
            out,
            "{:<24} {:<16} {:<7} {:<14} {:>5}  {:<9} {}",
            s.name,
            s.transport.as_str(),
            if s.active { "yes" } else { "no" },
            s.status.as_str(),
            r.tool_count,
            s.source.as_str(),
            one_line(&s.description, 60)
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn add(
    app: &App,
    name: String,
    description: String,
    tags: Vec<String>,
    env: Vec<(String, String)>,
    transport: String,
    url: Option<String>,
    headers: Vec<(String, String)>,
    json: bool,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let transport: Transport = transport.parse()?;
    let mut command = command.into_iter();
    let spec = ServerSpec {
        name,
        description,
        source: Source::Manual,
        command: command.next(),
        args: command.collect(),
        env: env.into_iter().collect::<BTreeMap<_, _>>(),
        tags,
        transport,
        url,
        headers: headers.into_iter().collect(),
        ..Default::default()
    };
    let server = app.registry.register(spec)?;
    if json {
        return print_json(&serde_json::to_value(&server)?);
    }
    println!("{}", server.name);
    eprintln!("registered `{}` (id {})", server.name, server.id);
    Ok(())
}

pub(super) async fn remove(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    app.uninstall(&name).await?;
    if json {
        return print_json(&json!({"status": "removed", "name": name}));
    }
    eprintln!("removed `{name}`");
    Ok(())
}

pub(super) fn show(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    let server = app.registry.get(&name)?;
    let tools = app.registry.tools(server.id)?;
    if json {
        let mut v = serde_json::to_value(&server)?;
        v["tools"] = serde_json::to_value(&tools)?;
        return print_json(&v);
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "name:        {}", server.name)?;
    writeln!(out, "description: {}", server.description)?;
    writeln!(out, "transport:   {}", server.transport.as_str())?;
    if let Some(c) = &server.command {
        writeln!(out, "command:     {} {}", c, server.args.join(" "))?;
    }
    if let Some(u) = &server.url {
        writeln!(out, "url:         {u}")?;
    }
    writeln!(out, "source:      {}", server.source.as_str())?;
    writeln!(out, "active:      {}", server.active)?;
    writeln!(out, "health:      {}", server.health_status.as_str())?;
    if !server.tags.is_empty() {
        writeln!(out, "tags:        {}", server.tags.join(", "))?;
    }
    writeln!(out, "tools:       {}", tools.len())?;
    for t in tools {
        writeln!(out, "  {:<30} {}", t.name, one_line(&t.description, 70))?;
    }
    Ok(())
}

pub(super) async fn activate(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    let act = app.proxy.activate(&name).await;
    // The flag stays set: every agent-discover process restores the server; this one stops its copy now.
    app.proxy.shutdown().await;
    let act = act?;
    if json {
        return print_json(&serde_json::to_value(&act)?);
    }
    if let Some(note) = &act.fetched {
        eprintln!("{note}");
    }
    eprintln!(
        "activated `{}` ({} tools); agent-discover processes start it from now on",
        act.name,
        act.tools.len()
    );
    let mut out = std::io::stdout().lock();
    for t in act.tools {
        writeln!(
            out,
            "{:<40} {}",
            crate::proxy::names::expose(&name, &t.name),
            one_line(&t.description, 70)
        )?;
    }
    Ok(())
}

pub(super) async fn deactivate(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    let server = app.registry.get(&name)?;
    let was = app.proxy.deactivate(&name).await? || server.active;
    app.registry.set_active(server.id, false, None)?;
    if json {
        return print_json(
            &json!({"status": if was { "deactivated" } else { "not_active" }, "name": name}),
        );
    }
    eprintln!(
        "{} `{name}`",
        if was {
            "deactivated"
        } else {
            "was not active:"
        }
    );
    Ok(())
}

pub(super) fn secrets(app: &App, cmd: SecretsCommand) -> anyhow::Result<()> {
    // A user's own values, and who has them (`personal.rs`).
    let cmd = match super::personal::secrets(app, cmd)? {
        Some(cmd) => cmd,
        None => return Ok(()),
    };
    match cmd {
        SecretsCommand::Set {
            name, key, value, ..
        } => {
            let value = super::personal::value_or_stdin(value)?;
            app.secrets.set(&name, &key, &value)?;
            eprintln!(
                "set `{key}` for `{name}` ({})",
                crate::secrets::mask(&value)
            );
            Ok(())
        }
        SecretsCommand::Rm { name, key, .. } => {
            if !app.secrets.delete(&name, &key)? {
                anyhow::bail!("server `{name}` has no secret `{key}`");
            }
            eprintln!("removed `{key}` from `{name}`");
            Ok(())
        }
        SecretsCommand::Ls { name, json, .. } => {
            let list = app.secrets.list(&name)?;
            if json {
                return print_json(&serde_json::to_value(&list)?);
            }
            let mut out = std::io::stdout().lock();
            for s in list {
                writeln!(out, "{:<32} {:<12} {}", s.key, s.masked_value, s.updated_at)?;
            }
            Ok(())
        }
        // Handled by `personal.rs`.
        SecretsCommand::Users { .. } | SecretsCommand::Shared { .. } => Ok(()),
    }
}

pub(super) async fn enable(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    let r = app.enable(&name).await;
    // Like `activate`: the flag stays set for the agent-discover processes; this one stops its copy now.
    app.proxy.shutdown().await;
    let r = r?;
    if json {
        return print_json(&serde_json::to_value(&r)?);
    }
    match &r.state {
        crate::lifecycle::ServerState::Ready { tool_count } => {
            eprintln!("enabled `{name}` ({tool_count} tools)");
            Ok(())
        }
        crate::lifecycle::ServerState::Authenticating { auth_url } => {
            eprintln!("enabled `{name}`; it needs authorization: open {auth_url}");
            Ok(())
        }
        crate::lifecycle::ServerState::Error { error } => Err(anyhow::anyhow!(
            "enabled `{name}`, but it failed to start ({}): {}",
            error.kind.as_str(),
            error.message
        )),
        _ => Ok(()),
    }
}

pub(super) async fn disable(app: &App, name: String, json: bool) -> anyhow::Result<()> {
    let changed = app.disable(&name).await?;
    let status = if changed {
        "disabled"
    } else {
        "already_disabled"
    };
    if json {
        return print_json(&json!({"status": status, "name": name}));
    }
    eprintln!("{status}: `{name}`");
    Ok(())
}
