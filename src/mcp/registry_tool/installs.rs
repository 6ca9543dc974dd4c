//! The handlers that install: `browse` the marketplaces, install from them or from the catalog, `apply_config`;
//! missing values are asked of the user by elicitation (find_tool's offer of an uninstalled match is `consent.rs`).

use serde_json::{Value, json};

use super::reply::Outcome;
use crate::app::App;
use crate::consent::declares_elicitation;
use crate::mcp::actions::ArgError;
use crate::proxy::Caller;

pub(super) async fn browse(
    app: &App,
    query: Option<String>,
    limit: Option<u64>,
    cursor: Option<String>,
) -> Outcome {
    let query = query.unwrap_or_default();
    let limit = limit.unwrap_or(20).clamp(1, 100) as usize;
    let market = app.marketplace()?;
    let res = market.browse(&query, limit, cursor.as_deref()).await;
    let servers: Vec<Value> = res
        .servers
        .iter()
        .map(|e| {
            json!({"name": e.name, "title": e.title, "description": e.description, "version": e.version, "source": e.source,
                   "runtime": e.runtime, "install_method": e.install_method, "repository": e.repository, "key": e.key})
        })
        .collect();
    let prereqs = app.prereqs().await;
    Ok(
        json!({"servers": servers, "next_cursor": res.next_cursor, "sources": res.sources, "prereqs": prereqs}),
    )
}

/// Installs from the marketplace; missing required values are asked of the user through elicitation when the client
/// supports it, else returned as `needs_input` for a second call with `inputs`.
pub(super) async fn market_install(
    app: &App,
    name: String,
    inputs: Option<std::collections::BTreeMap<String, String>>,
    caller: &Caller,
) -> Outcome {
    if name.len() > 214 || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(ArgError::new(
            "name",
            format!(
                "invalid package name {:?}",
                crate::model::truncate_for_message(&name)
            ),
        )
        .into());
    }
    let mut inputs = inputs.unwrap_or_default();
    let mut outcome = crate::install::install(app, &name, &inputs).await;
    if let (Ok(crate::install::InstallOutcome::NeedsInput { missing, .. }), Some(peer)) =
        (&outcome, &caller.peer)
        && peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some())
        && let Some(answers) = elicit_inputs(peer, &name, missing).await
    {
        inputs.extend(answers);
        outcome = crate::install::install(app, &name, &inputs).await;
    }
    Ok(serde_json::to_value(outcome?).unwrap_or_default())
}

/// Installs a catalog entry; missing required values are asked through elicitation when the client supports it,
/// else returned as `needs_input` for a second call with `inputs`.
pub(super) async fn catalog_install(
    app: &App,
    name: String,
    inputs: Option<std::collections::BTreeMap<String, String>>,
    caller: &Caller,
) -> Outcome {
    use crate::catalog::{EntryInstall, install_entry};
    let mut inputs = inputs.unwrap_or_default();
    let mut outcome = install_entry(app, &name, &inputs)?;
    if let (EntryInstall::NeedsInput { missing, .. }, Some(peer)) = (&outcome, &caller.peer)
        && declares_elicitation(peer)
        && let Some(answers) = elicit_inputs(peer, &name, missing).await
    {
        inputs.extend(answers);
        outcome = install_entry(app, &name, &inputs)?;
    }
    Ok(serde_json::to_value(outcome).unwrap_or_default())
}

/// Asks the connected user for the missing values in one form; `None` if they decline or the request fails.
async fn elicit_inputs(
    peer: &rmcp::Peer<rmcp::RoleServer>,
    name: &str,
    missing: &[crate::marketplace::MissingInput],
) -> Option<std::collections::BTreeMap<String, String>> {
    let mut props = serde_json::Map::new();
    for m in missing {
        props.insert(
            m.name.clone(),
            json!({"type": "string", "title": m.name, "description": m.description}),
        );
    }
    let required: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    let schema = serde_json::from_value(
        json!({"type": "object", "properties": props, "required": required}),
    )
    .ok()?;
    let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "Installing `{name}` needs these values (secret ones are stored encrypted)"
        ),
        requested_schema: schema,
    };
    let res = peer.create_elicitation(params).await.ok()?;
    if res.action != rmcp::model::ElicitationAction::Accept {
        return None;
    }
    let content = res.content?;
    let map = content.as_object()?;
    Some(
        map.iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
            .collect(),
    )
}

/// Imports a client config; values it references but the environment lacks are asked of the user through
/// elicitation when the client supports it (answers stored as secrets), else returned as `needs_input`.
pub(super) async fn apply_config(
    app: &App,
    req: &crate::configimport::ApplyConfigRequest,
    caller: &Caller,
) -> Outcome {
    let mut report = app.apply_client_config(req).await?;
    if !report.needs_input.is_empty()
        && let Some(peer) = &caller.peer
        && peer
            .peer_info()
            .is_some_and(|i| i.capabilities.elicitation.is_some())
    {
        let mut props = serde_json::Map::new();
        for n in &report.needs_input {
            let description = n.description.clone().unwrap_or_else(|| {
                format!("{} of server `{}` ({})", n.reference, n.server, n.field)
            });
            props.insert(
                format!("{}.{}", n.server, n.key),
                json!({"type": "string", "title": n.key, "description": description}),
            );
        }
        let schema = serde_json::from_value(json!({"type": "object", "properties": props}));
        if let Ok(schema) = schema {
            let params = rmcp::model::ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: format!(
                    "The servers imported from {} need these values (stored encrypted)",
                    report.file
                ),
                requested_schema: schema,
            };
            if let Ok(res) = peer.create_elicitation(params).await
                && res.action == rmcp::model::ElicitationAction::Accept
                && let Some(Value::Object(answers)) = res.content
            {
                let mut stored = std::collections::BTreeSet::new();
                for n in &report.needs_input {
                    let field = format!("{}.{}", n.server, n.key);
                    if let Some(Value::String(v)) = answers.get(&field)
                        && !v.is_empty()
                    {
                        app.secrets.set(&n.server, &n.key, v)?;
                        stored.insert(field);
                    }
                }
                report
                    .needs_input
                    .retain(|n| !stored.contains(&format!("{}.{}", n.server, n.key)));
            }
        }
    }
    Ok(serde_json::to_value(report).unwrap_or_default())
}
