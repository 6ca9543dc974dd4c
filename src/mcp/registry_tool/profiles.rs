//! The `registry` tool's profile actions (`list_profiles`, `show_profile`, `create_profile`, `set_profile`,
//! `remove_profile`), each one call of the domain layer (`profiles.rs`). A caller connected through a profile may read
//! profiles but not change them: an agent must not widen the scope it was given.

use serde_json::{Value, json};

use super::reply::Outcome;
use crate::app::App;
use crate::error::Error;
use crate::mcp::actions::Action;
use crate::profiles::{Profile, ProfileChange};
use crate::proxy::Caller;

/// The outcome of a profile action (any other action is not one: an internal error).
pub(super) fn run(app: &App, action: Action, caller: &Caller) -> Outcome {
    let Some(action) = ProfileAction::of(action) else {
        return Err(Error::Internal("not a profile action".into()).into());
    };
    if !matches!(action, ProfileAction::List | ProfileAction::Show(_))
        && let Some(p) = &caller.profile
    {
        return Err(Error::invalid(
            "action",
            format!(
                "this connection serves the profile `{}`, which cannot change profiles",
                p.name
            ),
        )
        .into());
    }
    let outcome = match action {
        ProfileAction::List => app.profiles().map(|p| json!({"profiles": p})),
        ProfileAction::Show(name) => app.show_profile(&name),
        ProfileAction::Create(p) => app
            .create_profile(p)
            .and_then(|p| app.show_profile(&p.name))
            .map(|v| with_status(v, "created")),
        ProfileAction::Set(name, change) => app
            .change_profile(&name, change)
            .and_then(|p| app.show_profile(&p.name))
            .map(|v| with_status(v, "updated")),
        ProfileAction::Remove(name) => app
            .remove_profile(&name)
            .map(|was| json!({"status": if was { "removed" } else { "not_found" }, "name": name})),
    };
    outcome.map_err(Into::into)
}

fn with_status(mut v: Value, status: &str) -> Value {
    v["status"] = json!(status);
    v
}

/// A profile action with its arguments, taken out of the parsed [`Action`].
enum ProfileAction {
    List,
    Show(String),
    Create(Profile),
    Set(String, ProfileChange),
    Remove(String),
}

impl ProfileAction {
    fn of(action: Action) -> Option<ProfileAction> {
        Some(match action {
            Action::ListProfiles {} => ProfileAction::List,
            Action::ShowProfile { name } => ProfileAction::Show(name),
            Action::CreateProfile {
                name,
                description,
                servers,
                tools,
            } => ProfileAction::Create(Profile {
                name,
                description: description.unwrap_or_default(),
                servers: servers.unwrap_or_default(),
                tools: tools.unwrap_or_default(),
                overrides: Value::Null,
            }),
            Action::SetProfile {
                name,
                description,
                servers,
                tools,
                add_servers,
                remove_servers,
                add_tools,
                remove_tools,
            } => ProfileAction::Set(
                name,
                ProfileChange {
                    description,
                    servers,
                    tools,
                    add_servers: add_servers.unwrap_or_default(),
                    remove_servers: remove_servers.unwrap_or_default(),
                    add_tools: add_tools.unwrap_or_default(),
                    remove_tools: remove_tools.unwrap_or_default(),
                },
            ),
            Action::RemoveProfile { name } => ProfileAction::Remove(name),
            _ => return None,
        })
    }
}
