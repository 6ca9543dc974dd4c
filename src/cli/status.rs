//! `status` from the command line: servers, call metrics, the search mode, the sandbox, and the recent calls: a
//! team's shared call log read from the database (every replica's calls, with who made each), else the call log of
//! the agent-discover that serves the dashboard on this database.

use std::io::Write;

use serde_json::{Value, json};

use super::common::{one_line, print_json};
use super::dashboard::dashboard_calls;
use crate::app::App;
use crate::model::ListFilter;

pub(super) async fn status(
    app: &App,
    json: bool,
    port: u16,
    token: Option<&str>,
) -> anyhow::Result<()> {
    let rows = app.registry.list(&ListFilter::default())?;
    let metrics = app.registry.store().metrics_overview()?;
    let calls = if app.calllog.is_shared() {
        shared_calls(app)
    } else {
        dashboard_calls(app, port, token).await
    };
    let kernel = app.sandbox_kernel();
    if json {
        let mut servers = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut v = json!({"name": r.server.name, "active": r.server.active, "status": r.server.status, "origin": r.server.origin, "tool_count": r.tool_count,
                "health_status": r.server.health_status, "last_error": r.server.last_error, "authUrl": r.auth_url});
            app.add_sandbox_brief(&mut v, &r.server)?;
            // Its circuit breaker (`closed`, `open`, `half_open`, `off`), as the registry records it.
            v["breaker"] = json!(app.proxy.breaker_state(&r.server.name));
            // The runtime its child last ran with (`ad_proxy::runtime`), as stored at its start.
            if let Some(rt) = app.registry.store().server_runtime(r.server.id)?
                && let Ok(rt) = serde_json::from_str::<Value>(&rt)
            {
                v["runtime"] = rt;
            }
            servers.push(v);
        }
        return print_json(&json!({
            "version": env!("CARGO_PKG_VERSION"),
            "db_path": app.config.db_path,
            "servers": servers,
            "metrics": metrics,
            "search": app.search.status(),
            "scanner": crate::scan_model::status(&app.registry, &app.search.status()),
            "sandbox_kernel": kernel,
            "guards": guards_of(app, &calls)?,
            "policy": app.policy_status(),
            "calls": calls,
        }));
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "agent-discover {} — {}",
        env!("CARGO_PKG_VERSION"),
        app.config.db_path.display()
    )?;
    writeln!(
        out,
        "{} servers, {} active",
        rows.len(),
        rows.iter().filter(|r| r.server.active).count()
    )?;
    for r in rows.iter().filter(|r| r.auth_url.is_some()) {
        writeln!(
            out,
            "  {:<24} authenticating: open {} (or `agent-discover auth {}`)",
            r.server.name,
            r.auth_url.as_deref().unwrap_or_default(),
            r.server.name
        )?;
    }
    for r in rows.iter().filter(|r| {
        r.server.active
            || r.server.last_error.is_some()
            || r.server.status != crate::model::ServerStatus::Stopped
    }) {
        writeln!(
            out,
            "  {:<24} {:<14} {:>4} tools  {}",
            r.server.name,
            r.server.status.as_str(),
            r.tool_count,
            r.server
                .last_error
                .as_deref()
                .map(|e| one_line(e, 60))
                .unwrap_or_default()
        )?;
        let breaker = app.proxy.breaker_state(&r.server.name);
        if breaker == "open" || breaker == "half_open" {
            writeln!(
                out,
                "  {:<24} circuit breaker {breaker}: calls refused (`agent-discover limits show {}`)",
                "", r.server.name
            )?;
        }
        if let Some(rt) = app.registry.store().server_runtime(r.server.id)?
            && let Ok(rt) = serde_json::from_str::<Value>(&rt)
        {
            writeln!(
                out,
                "  {:<24} runtime: {} {} ({})",
                "",
                rt["kind"].as_str().unwrap_or("?"),
                rt["version"].as_str().unwrap_or("?"),
                rt["source"].as_str().unwrap_or("?")
            )?;
        }
    }
    for m in metrics {
        writeln!(
            out,
            "  calls {:<18} {:>6} calls {:>4} errors {:>8.1} ms avg",
            m.server_name, m.total_calls, m.total_errors, m.avg_latency_ms
        )?;
    }
    let search = app.search.status();
    writeln!(
        out,
        "search: {}{}",
        if search["hybrid"] == true {
            "hybrid (BM25 + embeddings)"
        } else {
            "BM25"
        },
        search["fallback_reason"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    )?;
    let scanner = crate::scan_model::status(&app.registry, &search);
    writeln!(
        out,
        "scanner: semantic signal {}{}",
        scanner["semantic"].as_str().unwrap_or("?"),
        scanner["detail"]
            .as_str()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    )?;
    writeln!(out, "sandbox: {}", sandbox_line(&kernel))?;
    writeln!(out, "{}", guards_line(&guards_of(app, &calls)?))?;
    let policy = app.policy_status();
    writeln!(
        out,
        "policies: {} from {}{}",
        policy["policies"],
        policy["source"].as_str().unwrap_or("-"),
        policy["error"]["message"]
            .as_str()
            .map(|e| format!(
                " (the last load failed, the previous set stays: {})",
                one_line(e, 200)
            ))
            .unwrap_or_default()
    )?;
    match calls {
        Value::Object(c) if c.contains_key("entries") => {
            writeln!(
                out,
                "recent calls ({}):",
                c["from"].as_str().unwrap_or_default()
            )?;
            for e in c["entries"].as_array().into_iter().flatten() {
                // Who made it (issue 30: user and OAuth client) and where, when the entry says.
                let mut who = String::new();
                if let Some(u) = e["user"].as_str() {
                    who.push_str(&format!(" by {u}"));
                }
                if let Some(c) = e["client"].as_str() {
                    who.push_str(&format!(" (client {c})"));
                }
                if let Some(r) = e["replica"].as_str() {
                    who.push_str(&format!(" via {r}"));
                }
                writeln!(
                    out,
                    "  {} {}__{} {} ms {}{who}",
                    e["timestamp"].as_str().unwrap_or_default(),
                    e["server"].as_str().unwrap_or_default(),
                    e["tool"].as_str().unwrap_or_default(),
                    e["latency_ms"],
                    if e["success"] == true { "ok" } else { "error" }
                )?;
            }
        }
        other => writeln!(
            out,
            "recent calls: {}",
            other["unavailable"].as_str().unwrap_or_default()
        )?,
    }
    Ok(())
}

/// The newest calls of a team's shared call log, read from the database this CLI runs on: every replica's, each
/// naming its user, client and replica (issue 30).
fn shared_calls(app: &App) -> Value {
    let (entries, total) = app.calllog.entries(10, 0);
    json!({"entries": entries, "total": total, "from": "the call log every replica of this database shares"})
}

/// The guards: the global settings here, and the decisions counted by the agent-discover whose calls are shown.
fn guards_of(app: &App, calls: &Value) -> anyhow::Result<Value> {
    let mut v = app.guards_view(None)?;
    v["counts"] = calls["guards"]["counts"].clone();
    Ok(v)
}

/// The guards in one line: the settings, and each decision's count summed over servers.
fn guards_line(v: &Value) -> String {
    let g = &v["global"];
    let mut sums: std::collections::BTreeMap<String, u64> = Default::default();
    for counts in v["counts"].as_object().into_iter().flat_map(|m| m.values()) {
        for (k, n) in counts.as_object().into_iter().flatten() {
            *sums.entry(k.clone()).or_default() += n.as_u64().unwrap_or(0);
        }
    }
    let decided: Vec<String> = sums
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "guards: arguments {}, result secrets {}, result instructions {}; decisions: {}",
        g["arguments"].as_str().unwrap_or("?"),
        g["result_secrets"].as_str().unwrap_or("?"),
        g["result_instructions"].as_str().unwrap_or("?"),
        if decided.is_empty() {
            "none".to_owned()
        } else {
            decided.join(", ")
        }
    )
}

/// The sandbox in one line: off, unavailable (and why), or what confines the stdio servers.
fn sandbox_line(kernel: &Value) -> String {
    if kernel["enabled"] == false {
        return "off (AGENT_DISCOVER_SANDBOX=off): stdio servers run unconfined".to_owned();
    }
    if let Some(why) = kernel["missing"].as_str() {
        return format!("unavailable: {why}");
    }
    match kernel["landlock_abi"].as_u64() {
        Some(abi) => format!("on (Landlock ABI {abi})"),
        None => "on".to_owned(),
    }
}
