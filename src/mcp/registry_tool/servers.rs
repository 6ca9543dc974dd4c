//! The handlers over registered servers: `list`, a manual `install`, `activate`, `get_schema`, `set_secret`, `status`.

use serde_json::{Value, json};

use super::reply::{Failure, Outcome, Reply, lifecycle_reply};
use super::tooldef::actions;
use crate::app::App;
use crate::error::Error;
use crate::model::{ListFilter, ServerSpec, Source};

pub(super) fn list(
    app: &App,
    query: Option<String>,
    source: Option<String>,
    installed_only: Option<bool>,
) -> Outcome {
    let filter = ListFilter {
        query,
        source: source.map(|s| s.parse::<Source>()).transpose()?,
        installed_only: installed_only.unwrap_or(false),
    };
    let rows = app.registry.list(&filter)?;
    let mut listed = Vec::with_capacity(rows.len());
    for r in rows {
        let s = r.server;
        let mut v = json!({
            "id": s.id, "name": s.name, "description": s.description, "source": s.source, "tags": s.tags,
            "installed": s.installed, "active": s.active, "status": s.status, "origin": s.origin, "transport": s.transport,
            "health_status": s.health_status, "last_health_check": s.last_health_check,
            "error_count": s.error_count, "tool_count": r.tool_count,
        });
        app.add_sandbox_brief(&mut v, &s)?;
        listed.push(v);
    }
    Ok(Value::Array(listed))
}

pub(super) fn install(
    app: &App,
    spec: ServerSpec,
    activate_timeout_ms: Option<u64>,
    call_timeout_ms: Option<u64>,
) -> Outcome {
    spec.validate()?;
    let patch = crate::model::ServerPatch {
        activate_timeout_ms,
        call_timeout_ms,
        ..Default::default()
    };
    let s = app.registry.register(spec)?;
    let s = if activate_timeout_ms.is_some() || call_timeout_ms.is_some() {
        app.registry.update(&s.name, &patch)?
    } else {
        s
    };
    Ok(
        json!({"status": "installed", "server": s.name, "id": s.id, "transport": s.transport, "command": s.command, "args": s.args, "url": s.url,
               "activate_timeout_ms": s.activate_timeout_ms, "call_timeout_ms": s.call_timeout_ms}),
    )
}

/// `activate`: an `AddServerResult`, plus (when ready) `status` and the tools as clients call them; `isError` when
/// the server failed to start.
pub(super) async fn activate(app: &App, name: String) -> Result<Reply, Failure> {
    app.registry.get(&name)?;
    match app.proxy.activate(&name).await {
        Ok(act) => {
            let mut v = json!({
                "state": "ready",
                "id": act.name,
                "toolCount": act.tools.len(),
                "status": act.status,
                "name": act.name,
                "tools": act.tools.iter().map(|t| json!({"name": crate::proxy::names::expose(&act.name, &t.name), "description": t.description})).collect::<Vec<_>>(),
            });
            // A launcher fetched for this start (`uvx`/`npx` was not installed).
            if let Some(note) = &act.fetched {
                v["fetched"] = note.as_str().into();
            }
            Ok(Reply::Json(v))
        }
        Err(e) => Ok(lifecycle_reply(
            &crate::lifecycle::AddServerResult::from_error(&name, &e),
        )),
    }
}

pub(super) fn get_schema(app: &App, server: String, tool: String) -> Outcome {
    let stored = app.registry.store().tool(&server, &tool)?;
    match stored.filter(|_| app.registry.tool_allowed(&server, &tool)) {
        Some(t) => Ok(json!({
            "call_as": crate::proxy::names::expose(&server, &tool), "server": server, "tool": tool,
            "description": t.description, "input_schema": t.input_schema,
        })),
        None => Err(Error::not_found(
            "tool",
            format!("{server}__{tool} (activate the server once so its tools are known)"),
        )
        .into()),
    }
}

pub(super) fn set_secret(app: &App, name: String, key: String, value: String) -> Outcome {
    crate::model::validate_key("secret key", &key)?;
    app.secrets.set(&name, &key, &value)?;
    Ok(
        json!({"status": "set", "name": name, "key": key, "masked_value": crate::secrets::mask(&value),
               "note": "takes effect the next time the server is activated"}),
    )
}

pub(super) async fn status(
    app: &App,
    principal: Option<&ad_core::identity::Principal>,
) -> crate::error::Result<Value> {
    let store = app.registry.store();
    // A team's user who is not an admin (issue 30) is shown only the servers their groups may see and their own calls.
    let restricted = !app.proxy.sees_all(principal);
    let children = app.proxy.children();
    let mut servers: Vec<Value> = Vec::with_capacity(children.len());
    for c in &children {
        if restricted && !app.proxy.visible_to(principal, &c.name, None) {
            continue;
        }
        let server = app.registry.get(&c.name).ok();
        let description = server
            .as_ref()
            .map(|s| s.description.clone())
            .unwrap_or_default();
        let mut v = json!({"name": c.name, "description": description, "status": c.status, "transport": c.transport, "pid": c.pid,
               "tool_count": c.tool_count, "tools": c.tools, "stderr_tail": c.stderr_tail, "last_error": c.last_error,
               "started_at": c.started_at, "restarts": c.restarts, "protocol": c.protocol});
        if let Some(r) = &c.runtime {
            v["runtime"] = json!(r);
        }
        if let Some(s) = &server {
            app.add_sandbox_brief(&mut v, s)?;
        }
        servers.push(v);
    }
    let (mut recent, logged) = app.calllog.entries(10, 0);
    if let (true, Some(p)) = (restricted, principal) {
        let me = p.user_key();
        recent.retain(|e| e.user.as_deref() == Some(me.as_str()));
    }
    let recent_len = recent.len();
    // Remote servers waiting for a person to authorize them (OAuth), with the URL to open: as REST's status. A
    // server each user authorizes for themselves is listed with the caller's own URL (issue 30).
    let mut authenticating: Vec<Value> = Vec::new();
    for r in app.registry.list(&ListFilter::default())? {
        if restricted && !app.proxy.visible_to(principal, &r.server.name, None) {
            continue;
        }
        let mut row =
            json!({"name": r.server.name, "state": "authenticating", "authUrl": r.auth_url});
        app.apply_personal_auth(&mut row, &r.server, principal)
            .await;
        if let Some(u) = row.get("authUrl").filter(|u| u.is_string()).cloned() {
            authenticating
                .push(json!({"name": r.server.name, "state": "authenticating", "authUrl": u}));
        }
    }
    let mut v = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "active_count": servers.len(),
        "servers": servers,
        "authenticating": authenticating,
        "calls": {"logged": logged, "recent": recent},
        "metrics": store.metrics_overview()?,
        "search": app.search.status(),
        "scanner": crate::scan_model::status(&app.registry, &app.search.status()),
        "sandbox_kernel": app.sandbox_kernel(),
        // The guards on calls: the global settings and each server's decisions since this process started.
        "guards": app.guards_view(None)?,
        // The policies for calls: where from, how many, the last load's failure (`policy.rs`).
        "policy": app.policy_status(),
        // Proxied tool calls this process relayed by its fast lane (`proxy/relay.rs`), and the tools it leaves to the
        // normal path for their approval policy (#27).
        "relay": {"fast_lane_calls": app.proxy.fast_lane_calls(), "approval_gated": app.proxy.approval_gated()},
        "registry": {
            "db_path": app.config.db_path,
            "schema_version": store.schema_version()?,
            "server_count": store.count_servers()?,
            "tool_count": store.count_tools()?,
        },
        "actions": actions(),
    });
    if restricted && let Some(o) = v.as_object_mut() {
        // Totals across everyone's calls and every server are for administrators.
        for k in ["metrics", "registry", "relay", "policy"] {
            o.remove(k);
        }
        o["calls"]["logged"] = json!(recent_len);
    }
    Ok(v)
}
