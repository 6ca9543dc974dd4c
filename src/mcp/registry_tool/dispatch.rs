//! The `registry` tool's call: parses the action, runs its one match arm, renders the reply or the failure.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::CallToolResponse;
use serde_json::{Value, json};

use super::installs::{apply_config, browse, catalog_install, market_install};
use super::names::{server_name, target};
use super::reply::{Failure, Outcome, Reply, error_result, failure_result, lifecycle_reply};
use super::servers::{activate, get_schema, install, list, set_secret, status};
use crate::app::App;
use crate::approval::ApprovalPolicy;
use crate::consent::{find_tool_answer, find_tools_answer};
use crate::error::Error;
use crate::mcp::actions::{self, Action};
use crate::mcp::shape::json_result;
use crate::model::{ServerSpec, Source, Transport};
use crate::proxy::Caller;

pub async fn call(
    app: &Arc<App>,
    args: serde_json::Map<String, Value>,
    caller: Caller,
) -> Result<CallToolResponse, McpError> {
    let action = match actions::parse(args) {
        Ok(a) => a,
        Err(e) => return Ok(error_result(e.body()).into()),
    };
    match run(app, action, caller).await {
        Ok(Reply::Json(value)) => Ok(json_result(&value).into()),
        Ok(Reply::Relayed(r)) => r,
        Err(f) => Ok(failure_result(f).into()),
    }
}

/// One arm per action: turn its typed arguments into one domain call.
async fn run(app: &Arc<App>, action: Action, caller: Caller) -> Result<Reply, Failure> {
    // A team's user who is not an admin (issue 30) finds, reads and calls what their groups may see; changing the
    // registry is for admins.
    let restricted = !app.proxy.sees_all(caller.principal.as_deref());
    if restricted && !reading(&action) {
        return Err(Error::invalid(
            "action",
            "this action changes the registry: only an administrator of this server may use it",
        )
        .into());
    }
    let result: Outcome = match action {
        a @ (Action::ListProfiles {}
        | Action::ShowProfile { .. }
        | Action::CreateProfile { .. }
        | Action::SetProfile { .. }
        | Action::RemoveProfile { .. }) => super::profiles::run(app, a, &caller),
        Action::List {
            query,
            source,
            installed_only,
        } => match list(app, query, source, installed_only) {
            Ok(mut v) => {
                if let Value::Array(rows) = &mut v {
                    rows.retain(|r| {
                        r["name"]
                            .as_str()
                            .is_some_and(|n| app.proxy.visible(&caller, n, None))
                    });
                    // A server each user authorizes for themselves is shown as this user stands (issue 30).
                    for r in rows.iter_mut() {
                        let name = r["name"].as_str().unwrap_or_default().to_owned();
                        if let Ok(server) = app.registry.get(&name) {
                            app.apply_personal_auth(r, &server, caller.principal.as_deref())
                                .await;
                        }
                    }
                }
                Ok(v)
            }
            Err(e) => Err(e),
        },
        Action::Install {
            source: Some(source),
            name,
            inputs,
            ..
        } if source != "manual" => market_install(app, name, inputs, &caller).await,
        // A catalog entry (introspected, not installed) named alone: install it as it was introspected.
        Action::Install {
            name,
            command: None,
            url: None,
            inputs,
            ..
        } if crate::catalog::is_entry(app, &name)? => {
            catalog_install(app, name, inputs, &caller).await
        }
        Action::Install {
            name,
            command,
            args,
            env,
            description,
            tags,
            transport,
            url,
            headers,
            activate_timeout_ms,
            call_timeout_ms,
            ..
        } => {
            let spec = ServerSpec {
                name,
                description: description.unwrap_or_default(),
                source: Source::Manual,
                command,
                args: args.unwrap_or_default(),
                env: env.unwrap_or_default(),
                tags: tags.unwrap_or_default(),
                transport: match transport {
                    Some(t) => t.parse::<Transport>()?,
                    None => Transport::Stdio,
                },
                url,
                headers: headers.unwrap_or_default(),
                ..Default::default()
            };
            install(app, spec, activate_timeout_ms, call_timeout_ms)
        }
        Action::Browse {
            query,
            limit,
            cursor,
        } => browse(app, query, limit, cursor).await,
        Action::Uninstall { name } => {
            let name = server_name(name)?;
            app.uninstall(&name)
                .await
                .map(|()| json!({"status": "uninstalled", "name": name}))
                .map_err(Into::into)
        }
        Action::Activate { name } => return activate(app, server_name(name)?).await,
        Action::Deactivate { name } => {
            let name = server_name(name)?;
            app.proxy
                .deactivate(&name)
                .await
                .map(|was| json!({"status": if was { "deactivated" } else { "not_active" }, "name": name}))
                .map_err(Into::into)
        }
        Action::ProxyCall {
            call_as,
            server,
            tool,
            arguments,
            page_bytes,
        } => {
            let (server, tool) = target(app, call_as, server, tool)?;
            let mut caller = caller;
            if let Some(b) = page_bytes {
                caller.page_bytes = Some(crate::proxy::pages::check_limit(b, "page_bytes")?);
            }
            // One outside the caller's profile reaches the proxy, which refuses it as such (`outside_profile`).
            if !app
                .proxy
                .visible_to(caller.principal.as_deref(), &server, Some(&tool))
            {
                return Ok(Reply::Relayed(Ok(crate::mcp::calls::unknown_tool(
                    app,
                    &crate::proxy::names::expose(&server, &tool),
                    &caller,
                )
                .into())));
            }
            return Ok(Reply::Relayed(
                crate::mcp::calls::proxy_call(app, &server, &tool, arguments, caller).await,
            ));
        }
        Action::GetSchema {
            call_as,
            server,
            tool,
        } => match target(app, call_as, server, tool) {
            // A tool the caller's profile overrides, by the name the profile shows (`profile_overrides.rs`).
            Ok((server, tool)) => match app.schema_in_profile(&caller, &server, &tool) {
                Some(r) => r.map_err(Into::into),
                None if !app.proxy.visible(&caller, &server, Some(&tool)) => Err(Error::not_found(
                    "tool",
                    format!("{server}__{tool} (activate the server once so its tools are known)"),
                )
                .into()),
                None => get_schema(app, server, tool),
            },
            Err(e) => Err(e.into()),
        },
        Action::SetSecret { name, key, value } => set_secret(app, server_name(name)?, key, value),
        Action::DeleteSecret { name, key } => {
            let name = server_name(name)?;
            app.secrets
                .delete(&name, &key)
                .map(|existed| json!({"status": if existed { "deleted" } else { "not_found" }, "name": name, "key": key}))
                .map_err(Into::into)
        }
        Action::ListSecrets { name } => {
            let name = server_name(name)?;
            app.secrets
                .list(&name)
                .map(|s| json!({"name": name, "secrets": s}))
                .map_err(Into::into)
        }
        Action::PolicyTest {
            call_as,
            server,
            tool,
            arguments,
            user,
            groups,
            client,
        } => {
            let (server, tool) = target(app, call_as, server, tool)?;
            app.policy_test(&crate::policy::PolicyTest {
                user,
                groups: groups.unwrap_or_default(),
                client,
                script: false,
                server,
                tool,
                arguments,
            })
            .map_err(Into::into)
        }
        Action::Status {} => status(app, caller.principal.as_deref())
            .await
            .map_err(Into::into),
        Action::ApplyConfig {
            config,
            format,
            path,
        } => {
            let req = crate::configimport::ApplyConfigRequest {
                config: config.map(Value::Object),
                format,
                path,
            };
            apply_config(app, &req, &caller).await
        }
        Action::ToolsPending { name } => app
            .pending_tools(name.as_deref())
            .map(|p| json!({"pending": p}))
            .map_err(Into::into),
        Action::ApproveTools { name, tool } => {
            let name = server_name(name)?;
            app.approve_tools(&name, tool.as_deref(), "mcp")
                .await
                .map_err(Into::into)
        }
        Action::ToolDiff { name, tool } => app
            .tool_diff(&server_name(name)?, &tool)
            .map_err(Into::into),
        Action::ToolFilter { name, allow, deny } => {
            let name = server_name(name)?;
            let filter = if allow.is_some() || deny.is_some() {
                let filter = crate::pinning::ToolFilter {
                    allow: allow.unwrap_or_default(),
                    deny: deny.unwrap_or_default(),
                    ..Default::default()
                };
                app.set_tool_filter(&name, filter).await?
            } else {
                app.tool_filter(&name)?
            };
            Ok(json!({"name": name, "allow": filter.allow, "deny": filter.deny}))
        }
        Action::ToolOverride {
            name,
            tool,
            set,
            clear,
            profile,
        } => {
            let name = server_name(name)?;
            let profile = profile.as_deref();
            // A connection through a profile cannot change profiles, their overrides included.
            if let (Some(_), Some(own)) = (profile, &caller.profile)
                && (set.is_some() || clear == Some(true))
            {
                return Err(Error::invalid(
                    "profile",
                    format!(
                        "this connection serves the profile `{}`, which cannot change profiles",
                        own.name
                    ),
                )
                .into());
            }
            match (tool, set, clear == Some(true)) {
                (None, None, false) => app
                    .tool_overrides_in(profile, Some(&name))
                    .map(|o| json!({"overrides": o})),
                (Some(tool), None, true) => app.clear_tool_override_in(profile, &name, &tool).await,
                (Some(tool), Some(set), false) => {
                    match serde_json::from_value(Value::Object(set)) {
                        Ok(o) => app.set_tool_override_in(profile, &name, &tool, o).await,
                        Err(e) => Err(Error::invalid("set", e.to_string())),
                    }
                }
                (Some(tool), None, false) => app.tool_override_in(profile, &name, &tool),
                (None, _, _) => Err(Error::invalid("tool", "required with `set` or `clear`")),
                (Some(_), Some(_), true) => {
                    Err(Error::invalid("clear", "give `set` or `clear`, not both"))
                }
            }
            .map_err(Into::into)
        }
        Action::ToolPolicy {
            name,
            tool,
            policy,
            annotation,
        } => {
            let name = server_name(name)?;
            let target = crate::approvals::target_of(tool.as_deref(), annotation.as_deref())?;
            match policy.as_deref() {
                None => app.tool_policy(&name),
                Some(p) => {
                    let wanted = match p {
                        "clear" => None,
                        p => Some(p.parse::<ApprovalPolicy>()?),
                    };
                    // An agent may tighten a rule, never loosen one: the rule may be what asks a person about it.
                    app.tighten_tool_policy(&name, &target, wanted)
                }
            }
            .map_err(Into::into)
        }
        Action::Sandbox {
            name,
            network,
            read,
            write,
            enabled,
        } => {
            let name = server_name(name)?;
            let patch = crate::sandbox::SandboxPatch {
                enabled,
                network,
                read,
                write,
            };
            if patch.is_empty() {
                app.sandbox_view(&name)
            } else {
                app.set_sandbox(&name, patch)
            }
            .map_err(Into::into)
        }
        Action::Guards {
            name,
            arguments,
            result_secrets,
            result_instructions,
        } => {
            let name = server_name(name)?;
            let patch = crate::guards::GuardsPatch {
                arguments,
                result_secrets,
                result_instructions,
            };
            if patch.is_empty() {
                app.guards_view(Some(&name))
            } else {
                app.set_guards(&name, patch, true)
            }
            .map_err(Into::into)
        }
        Action::Limits {
            name,
            rate,
            burst,
            tool,
            tool_rate,
            caller_rate,
            concurrency,
            queue,
            wait,
            breaker,
            cooldown,
        } => {
            let name = server_name(name)?;
            let patch = crate::limits::LimitsPatch {
                reset: false,
                rate,
                burst,
                tool,
                tool_rate,
                caller_rate,
                concurrency: concurrency.map(ad_core::limits::Cap::Calls),
                queue,
                wait,
                breaker,
                cooldown,
            };
            if patch.is_empty() {
                app.limits_view(&name)
            } else {
                // An agent may tighten its limits, never loosen them.
                app.tighten_limits(&name, patch)
            }
            .map_err(Into::into)
        }
        Action::FinishAuth { name, callback } => app
            .finish_auth(&server_name(name)?, &callback)
            .await
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .map_err(Into::into),
        Action::Reauthorize { name } => app
            .reauthorize(&server_name(name)?)
            .await
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .map_err(Into::into),
        Action::Enable { name } => {
            let r = app.enable(&server_name(name)?).await?;
            return Ok(lifecycle_reply(&r));
        }
        Action::Disable { name } => {
            let name = server_name(name)?;
            app.disable(&name)
                .await
                .map(|changed| json!({"status": if changed { "disabled" } else { "already_disabled" }, "name": name}))
                .map_err(Into::into)
        }
        Action::RunScript { code, timeout_ms } => {
            return Ok(Reply::Relayed(
                crate::mcp::scripts::run(
                    app,
                    crate::scripts::RunRequest { code, timeout_ms },
                    caller,
                )
                .await,
            ));
        }
        Action::ScriptApi { servers, query } => {
            let text = app
                .script_api_in(
                    servers,
                    query,
                    caller.principal.as_deref(),
                    caller.profile.as_deref(),
                )
                .await?;
            return Ok(Reply::Relayed(Ok(rmcp::model::CallToolResult::success(
                vec![rmcp::model::ContentBlock::text(text)],
            )
            .into())));
        }
        Action::SaveScript {
            name,
            code,
            description,
            input_schema,
            timeout_ms,
        } => app
            .save_script(crate::saved_scripts::SaveRequest {
                name,
                code,
                description,
                input_schema: input_schema.map(Value::Object),
                timeout_ms,
            })
            .map(|s| json!({"status": "saved", "script": s}))
            .map_err(Into::into),
        Action::ReadResult { id, offset, limit } => app
            .proxy
            .read_result(
                &id,
                offset.unwrap_or(0) as usize,
                limit.map(|l| l as usize),
                caller.principal.as_deref(),
            )
            .map(|p| json!(p))
            .map_err(Into::into),
        Action::FindTool {
            query,
            limit,
            auto_activate,
        } => find_tool_answer(
            app,
            &query,
            limit.unwrap_or(5) as usize,
            auto_activate.unwrap_or(true),
            &caller,
        )
        .await
        .map_err(Into::into),
        Action::FindTools {
            intents,
            limit,
            auto_activate,
        } => Ok(find_tools_answer(
            app,
            &intents,
            limit.unwrap_or(5) as usize,
            auto_activate.unwrap_or(true),
            &caller,
        )
        .await),
    };
    result.map(Reply::Json)
}

/// The actions a restricted user may take: finding, reading and calling what they may see.
fn reading(action: &Action) -> bool {
    matches!(
        action,
        Action::List { .. }
            | Action::Status {}
            | Action::ProxyCall { .. }
            | Action::GetSchema { .. }
            | Action::FindTool { .. }
            | Action::FindTools { .. }
            | Action::ScriptApi { .. }
            | Action::RunScript { .. }
            | Action::ReadResult { .. }
            | Action::ListProfiles {}
            | Action::ShowProfile { .. }
    )
}
