//! Finding and installing from the command line: `browse` the marketplaces, `install` from them (asking for required
//! values on a terminal), `find` the tool for a task.

use std::collections::BTreeMap;
use std::io::Write;

use super::common::{one_line, print_json, spinner};
use crate::app::App;

pub(super) async fn browse(
    app: &App,
    query: String,
    limit: usize,
    cursor: Option<String>,
    json: bool,
) -> anyhow::Result<()> {
    let market = app.marketplace()?;
    let progress = (!json).then(|| spinner("asking the official MCP registry, npm and PyPI"));
    let res = market
        .browse(&query, limit.clamp(1, 100), cursor.as_deref())
        .await;
    if let Some(p) = progress {
        p.abort();
        eprint!("\r\x1b[2K");
    }
    if json {
        return print_json(&serde_json::to_value(&res)?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{:<45} {:<12} {:<8} {:<8} DESCRIPTION",
        "NAME", "VERSION", "SOURCE", "INSTALL"
    )?;
    for e in &res.servers {
        let method = e
            .install_method
            .map(|m| {
                serde_json::to_value(m)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default()
            })
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:<45} {:<12} {:<8} {:<8} {}",
            e.name,
            e.version.as_deref().unwrap_or("-"),
            e.source.as_str(),
            method,
            one_line(&e.description, 60)
        )?;
    }
    for s in res.sources.iter().filter(|s| !s.ok) {
        eprintln!(
            "warning: {} failed: {}",
            s.source.as_str(),
            s.error.as_deref().unwrap_or("unknown error")
        );
    }
    if let Some(c) = res.next_cursor {
        eprintln!("more: agent-discover browse {query:?} --cursor {c}");
    }
    Ok(())
}

pub(super) async fn install(
    app: &App,
    name: String,
    inputs: Vec<(String, String)>,
    json: bool,
) -> anyhow::Result<()> {
    let mut inputs: BTreeMap<String, String> = inputs.into_iter().collect();
    let mut outcome = crate::install::install(app, &name, &inputs).await?;
    if let crate::install::InstallOutcome::NeedsInput { missing, .. } = &outcome {
        use std::io::IsTerminal;
        if !json && std::io::stdin().is_terminal() {
            for m in missing {
                eprint!(
                    "{}{} ({}): ",
                    m.name,
                    if m.is_secret { " [secret]" } else { "" },
                    m.description
                );
                let mut v = String::new();
                std::io::stdin().read_line(&mut v)?;
                inputs.insert(m.name.clone(), v.trim_end_matches(['\r', '\n']).to_owned());
            }
            outcome = crate::install::install(app, &name, &inputs).await?;
        }
    }
    if json {
        return print_json(&serde_json::to_value(&outcome)?);
    }
    match outcome {
        crate::install::InstallOutcome::Installed {
            server,
            command,
            args,
            url,
            warming,
            ..
        } => {
            println!("{server}");
            eprintln!(
                "installed `{server}`: {}",
                url.unwrap_or_else(|| format!(
                    "{} {}",
                    command.unwrap_or_default(),
                    args.join(" ")
                ))
            );
            if let Some(w) = warming {
                eprintln!("warming the package cache in the background: {w}");
            }
            Ok(())
        }
        crate::install::InstallOutcome::NeedsInput { missing, .. } => {
            let names: Vec<String> = missing
                .iter()
                .map(|m| format!("--input {}=...", m.name))
                .collect();
            anyhow::bail!("`{name}` needs values: {}", names.join(" "))
        }
    }
}

pub(super) async fn find(
    app: &App,
    query: String,
    limit: usize,
    activate: bool,
    json: bool,
) -> anyhow::Result<()> {
    let outcome = app.find_tool(&query, limit, activate).await;
    app.proxy.shutdown().await;
    let v = serde_json::to_value(outcome?)?;
    if json {
        return print_json(&v);
    }
    let mut out = std::io::stdout().lock();
    if v["found"] != true {
        anyhow::bail!(
            "no good match (top score {}): {}",
            v["top_score"],
            v["hint"].as_str().unwrap_or_default()
        );
    }
    writeln!(
        out,
        "{}  (score {}, {} confidence)",
        v["call_as"].as_str().unwrap_or_default(),
        v["score"],
        v["confidence"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "  {}",
        one_line(v["description"].as_str().unwrap_or_default(), 100)
    )?;
    for a in v["required_args"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "  required: {} ({})",
            a["name"].as_str().unwrap_or_default(),
            a["type"]
        )?;
    }
    for m in v["other_matches"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "also: {}  (score {})",
            m["call_as"].as_str().unwrap_or_default(),
            m["score"]
        )?;
    }
    Ok(())
}
