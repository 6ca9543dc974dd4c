//! `find_tool`'s answer as agents get it (the `registry` action and a script's `find_tool` alike): the best match,
//! its server started with `auto_activate`, and a catalog entry (introspected, not installed) offered for install
//! with the user's consent, asked by elicitation of a client that declared it.

use serde_json::{Value, json};

use crate::app::App;
use crate::proxy::Caller;

/// `find_tool`'s answer as the registry action gives it (and a script's `find_tool`): the best match, its server
/// started with `auto_activate`, a catalog entry offered for install to a client that can consent.
pub async fn find_tool_answer(
    app: &App,
    query: &str,
    limit: usize,
    auto_activate: bool,
    caller: &Caller,
) -> crate::error::Result<Value> {
    let found = app
        .find_tool_in(
            query,
            limit,
            auto_activate,
            caller.principal.as_deref(),
            caller.profile.as_deref(),
        )
        .await?;
    let mut v = serde_json::to_value(found).unwrap_or_default();
    if auto_activate {
        offer_install(app, &mut v, caller).await;
    }
    Ok(v)
}

/// `find_tools`' answer: one `find_tool` answer per intent (a failed one says why), each with its `intent`.
pub async fn find_tools_answer(
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

/// Whether the client declared elicitation.
pub(crate) fn declares_elicitation(peer: &rmcp::Peer<rmcp::RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.capabilities.elicitation.is_some())
}
