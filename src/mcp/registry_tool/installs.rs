//! The handlers that install: `browse` the marketplaces, install from them or from the catalog, offer find_tool's
//! uninstalled best match, `apply_config`; missing values and consent are asked of the user by elicitation.

use serde_json::{Value, json};

use super::reply::Outcome;
use crate::app::App;
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

/// `find_tool`'s answer as the registry action gives it (and a script's `find_tool`): the best match, its server
/// started with `auto_activate`, a catalog entry offered for install to a client that can consent.
pub(crate) async fn find_tool_answer(
    app: &App,
    query: &str,
    limit: usize,
    auto_activate: bool,
    caller: &Caller,
) -> crate::error::Result<Value> {
    let found = app.find_tool(query, limit, auto_activate).await?;
    let mut v = serde_json::to_value(found).unwrap_or_default();
    if auto_activate {
        offer_install(app, &mut v, caller).await;
    }
    Ok(v)
}

/// `find_tools`' answer: one `find_tool` answer per intent (a failed one says why), each with its `intent`.
pub(crate) async fn find_tools_answer(
    app: &App,
    intents: &[String],
    limit: usize,
    auto_activate: bool,
    caller: &Caller,
) -> Value {
    let mut results = Vec::new();
    for intent in intents {
        let mut v = match find_tool_answer(app, intent, limit, auto_activate, caller).await {
            Ok(v) => v,
            Err(e) => json!({"found": false, "error": e.to_string(), "code": e.code().as_str()}),
        };
        v["intent"] = Value::String(intent.clone());
        results.push(v);
    }
    json!({"results": results})
}

/// find_tool's best match is a catalog entry (introspected, not installed) and the agent asked for activation: ask the
/// user's consent by elicitation (with the values installing needs in the same form), then install and activate it.
/// Catalog entries are never installed without that consent; a client without elicitation is told to call
/// `install` explicitly. The outcome is `install_consent`: `accepted`, `declined`, `cancelled`, `failed` (the
/// request failed) or `not_asked` (the client did not declare elicitation).
async fn offer_install(app: &App, v: &mut Value, caller: &Caller) {
    use crate::catalog::{EntryInstall, entry_inputs, install_entry};
    if v["found"] != true || v["installed"] != false {
        return;
    }
    let (Some(server), Some(call_as)) = (
        v["server"].as_str().map(str::to_owned),
        v["call_as"].as_str().map(str::to_owned),
    ) else {
        return;
    };
    let explicit = v["install"]["install"].clone();
    let Some(peer) = caller.peer.as_ref().filter(|p| declares_elicitation(p)) else {
        v["install_consent"] = json!("not_asked");
        v["next_step"] = json!(format!(
            "`{server}` is not installed and this client cannot be asked for consent (it did not declare \
             elicitation): ask the user, and if they agree call the registry tool with {explicit} (filling `inputs` \
             with real values), then activate `{server}` and call `{call_as}`"
        ));
        return;
    };
    let missing = match entry_inputs(app, &server) {
        Ok(m) => m,
        Err(e) => {
            v["install_consent"] = json!("failed");
            v["install_error"] = json!(e.to_string());
            return;
        }
    };
    let mut props = serde_json::Map::new();
    for m in &missing {
        props.insert(
            m.name.clone(),
            json!({"type": "string", "title": m.name, "description": m.description}),
        );
    }
    let required: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
    let placeholders = if v["install"]["listed_under_placeholders"] == true {
        " Its tools were listed with placeholder values, so it may need real ones to work."
    } else {
        ""
    };
    let version = v["install"]["version"]
        .as_str()
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    let message = format!(
        "The tool `{}` ({}) belongs to `{server}`{version}, which is not installed. Install and start it?{placeholders}",
        v["tool"].as_str().unwrap_or_default(),
        crate::model::truncate_for_message(v["description"].as_str().unwrap_or_default()),
    );
    let schema = serde_json::from_value(
        json!({"type": "object", "properties": props, "required": required}),
    );
    let answer = match schema {
        Ok(requested_schema) => peer
            .create_elicitation(rmcp::model::ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema,
            })
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let answer = match answer {
        Ok(a) => a,
        Err(e) => {
            v["install_consent"] = json!("failed");
            v["install_error"] = json!(e);
            v["next_step"] = json!(format!(
                "asking the user failed; if they agree, call the registry tool with {explicit}, then activate `{server}`"
            ));
            return;
        }
    };
    match answer.action {
        rmcp::model::ElicitationAction::Accept => {}
        other => {
            let word = if other == rmcp::model::ElicitationAction::Decline {
                "declined"
            } else {
                "cancelled"
            };
            v["install_consent"] = json!(word);
            v["next_step"] = json!(format!(
                "the user {word} installing `{server}`: do not install it unless they ask; `other_matches` may hold an \
                 installed alternative"
            ));
            return;
        }
    }
    v["install_consent"] = json!("accepted");
    let inputs: std::collections::BTreeMap<String, String> = answer
        .content
        .as_ref()
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    match install_entry(app, &server, &inputs) {
        Ok(EntryInstall::Installed { .. }) => {}
        Ok(EntryInstall::NeedsInput { missing, .. }) => {
            v["missing"] = serde_json::to_value(&missing).unwrap_or_default();
            v["next_step"] = json!(format!(
                "the user agreed but left required values empty: call the registry tool with {explicit} and `inputs`"
            ));
            return;
        }
        Err(e) => {
            v["install_error"] = json!(e.to_string());
            return;
        }
    }
    v["installed"] = json!(true);
    match app.proxy.activate(&server).await {
        Ok(_) => {
            v["next_step"] = json!(format!(
                "installed with the user's consent and active: call the tool `{call_as}` directly, or use registry \
                 proxy_call with call_as `{call_as}`"
            ));
        }
        Err(e) => {
            v["activation_error"] = json!(e.to_string());
            v["next_step"] = json!(format!(
                "installed with the user's consent, but `{server}` failed to start; fix that (see activation_error), \
                 then activate it"
            ));
        }
    }
    v["server_status"] = json!(app.proxy.state_of(&server));
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

fn declares_elicitation(peer: &rmcp::Peer<rmcp::RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
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
