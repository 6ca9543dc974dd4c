//! `agent-discover tools`: review and approve pinned tools whose definition changed, set per-server allow/deny
//! filters, tool overrides, and approval policies (#27). Over the same `App` methods as the `registry` actions and the REST
//! routes.

use std::io::Write;

use clap::Subcommand;
use serde_json::Value;

use super::common::{one_line, print_json};
use crate::app::App;
use crate::approval::ApprovalPolicy;
use crate::pinning::ToolFilter;

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Tools withheld until approved: flagged by the tool scanner (with its findings), changed since their
    /// approval, or new while new tools are held. Flagged prompts and resource templates are listed as
    /// `prompt:NAME` and `resource_template:NAME`.
    Pending {
        /// Only this server's.
        name: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Approve a server's tool as it is now (without TOOL: every pending tool of the server); records who (`cli:$USER`)
    /// and when.
    Approve {
        name: String,
        tool: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// What changed in a tool since it was approved: each differing field, approved and current.
    Diff {
        name: String,
        tool: String,
        #[arg(long)]
        json: bool,
    },
    /// Show, or with --allow/--deny/--clear replace, a server's tool filters (glob patterns: `*`, `?`). With an
    /// allow list only matching tools are exposed; a deny match always hides a tool.
    Filter {
        name: String,
        /// Expose only tools matching one of these patterns (repeatable).
        #[arg(long)]
        allow: Vec<String>,
        /// Hide tools matching any of these patterns (repeatable).
        #[arg(long)]
        deny: Vec<String>,
        /// Remove every pattern.
        #[arg(long, conflicts_with_all = ["allow", "deny"])]
        clear: bool,
        #[arg(long)]
        json: bool,
    },
    /// Show, or change, what the agent sees of a server's tool instead of its own definition: a new name, title,
    /// description or annotations, a parameter fixed to a value (hidden, given on every call) or hidden (its default
    /// given). The flags are added to the tool's current override; `--clear` removes it. A changed override
    /// withholds the tool until it is approved with it (`tools approve SERVER TOOL`).
    Override {
        name: String,
        /// The tool's own name on the server.
        tool: String,
        /// The name the agent sees.
        #[arg(long = "name", value_name = "NEW_NAME")]
        new_name: Option<String>,
        #[arg(long)]
        title: Option<String>,
        #[arg(long)]
        description: Option<String>,
        /// `KEY=VALUE`: an annotation set over the tool's own (`readOnlyHint=true`, `title=...`; repeatable).
        #[arg(long = "annotation", value_name = "KEY=VALUE")]
        annotations: Vec<String>,
        /// `PARAM=VALUE`: the parameter is hidden and given this value (JSON, else a string) on every call
        /// (repeatable).
        #[arg(long = "fix", value_name = "PARAM=VALUE")]
        fixed: Vec<String>,
        /// The parameter is hidden; its schema's default, when it has one, is given on every call (repeatable).
        #[arg(long = "hide", value_name = "PARAM")]
        hidden: Vec<String>,
        /// Remove the tool's override.
        #[arg(long, conflicts_with_all = ["new_name", "title", "description", "annotations", "fixed", "hidden"])]
        clear: bool,
        /// The override of this profile (what its clients see, over the server's own override).
        #[arg(long, value_name = "PROFILE")]
        profile: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Tool overrides, of every server or of one: each tool, the name it is shown as and whether it is served
    /// (`approved`), withheld until approved (`pending`) or not listed since (`unseen`).
    Overrides {
        name: Option<String>,
        /// The overrides of this profile.
        #[arg(long, value_name = "PROFILE")]
        profile: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show, or set, a server's approval policy (#27): `--allow` (the default), `--ask` (a person approves each call,
    /// bound to its exact arguments) or `--deny`; for the whole server, one TOOL, or with `--annotation` the tools
    /// that declare `destructive` or `open_world`. A tool rule beats an annotation rule, which beats the server-wide
    /// rule. `--clear` removes the rule.
    Policy {
        name: String,
        /// The tool's own name on the server (without it: the server-wide rule, or the annotation rule).
        tool: Option<String>,
        #[arg(long, group = "policy")]
        ask: bool,
        #[arg(long, group = "policy")]
        allow: bool,
        #[arg(long, group = "policy")]
        deny: bool,
        /// Remove the rule.
        #[arg(long, group = "policy")]
        clear: bool,
        /// A rule for the server's tools that declare this hint true.
        #[arg(long, value_parser = ["destructive", "open_world"], conflicts_with = "tool")]
        annotation: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(app: &App, cmd: ToolsCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match cmd {
        ToolsCommand::Pending { name, json } => {
            let pending = app.pending_tools(name.as_deref())?;
            if json {
                return print_json(&Value::Array(pending));
            }
            if !pending.iter().any(|p| p["status"] != "warning") {
                eprintln!("no tool is waiting for approval");
            }
            for p in &pending {
                let fields: Vec<&str> = p["changes"]
                    .as_array()
                    .map(|c| c.iter().filter_map(|f| f["field"].as_str()).collect())
                    .unwrap_or_default();
                writeln!(
                    out,
                    "{:<24} {:<32} {:<8} {}",
                    p["server"].as_str().unwrap_or_default(),
                    p["tool"].as_str().unwrap_or_default(),
                    p["status"].as_str().unwrap_or_default(),
                    fields.join(", ")
                )?;
                for f in p["findings"].as_array().into_iter().flatten() {
                    writeln!(
                        out,
                        "    {} ({}) at {}: {}",
                        f["rule"].as_str().unwrap_or_default(),
                        f["severity"].as_str().unwrap_or_default(),
                        f["field"].as_str().unwrap_or_default(),
                        one_line(f["excerpt"].as_str().unwrap_or_default(), 160)
                    )?;
                }
            }
            Ok(())
        }
        ToolsCommand::Approve { name, tool, json } => {
            let res = app
                .approve_tools(&name, tool.as_deref(), &super::common::cli_user())
                .await?;
            if json {
                return print_json(&res);
            }
            let approved: Vec<&str> = res["approved"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if approved.is_empty() {
                eprintln!("nothing to approve for `{name}`");
            }
            for t in approved {
                writeln!(out, "approved {name}__{t}")?;
            }
            Ok(())
        }
        ToolsCommand::Diff { name, tool, json } => {
            let d = app.tool_diff(&name, &tool)?;
            if json {
                return print_json(&d);
            }
            if d["pending"] != true {
                writeln!(out, "{name}__{tool} is as approved")?;
            }
            for c in d["changes"].as_array().into_iter().flatten() {
                let show = |v: &Value| match v {
                    Value::String(s) => one_line(s, 400),
                    Value::Null => "(none)".to_owned(),
                    other => one_line(&other.to_string(), 400),
                };
                writeln!(out, "{}:", c["field"].as_str().unwrap_or_default())?;
                writeln!(out, "  - approved: {}", show(&c["approved"]))?;
                writeln!(out, "  + current:  {}", show(&c["current"]))?;
            }
            Ok(())
        }
        ToolsCommand::Filter {
            name,
            allow,
            deny,
            clear,
            json,
        } => {
            let filter = if clear || !allow.is_empty() || !deny.is_empty() {
                app.set_tool_filter(
                    &name,
                    ToolFilter {
                        allow,
                        deny,
                        ..Default::default()
                    },
                )
                .await?
            } else {
                app.tool_filter(&name)?
            };
            if json {
                return print_json(&serde_json::to_value(&filter)?);
            }
            writeln!(out, "allow: {}", filter.allow.join(" "))?;
            writeln!(out, "deny:  {}", filter.deny.join(" "))?;
            Ok(())
        }
        ToolsCommand::Override {
            name,
            tool,
            new_name,
            title,
            description,
            annotations,
            fixed,
            hidden,
            clear,
            profile,
            json,
        } => {
            let profile = profile.as_deref();
            let given = crate::overrides::from_flags(
                new_name,
                title,
                description,
                &annotations,
                &fixed,
                hidden,
            )?;
            let res = if clear {
                app.clear_tool_override_in(profile, &name, &tool).await?
            } else if given.is_empty() {
                app.tool_override_in(profile, &name, &tool)?
            } else {
                let current = app.current_tool_override(profile, &name, &tool)?;
                app.set_tool_override_in(profile, &name, &tool, current.layer(&given))
                    .await?
            };
            if json {
                return print_json(&res);
            }
            if res["cleared"].is_boolean() {
                let what = if res["cleared"] == true {
                    "cleared"
                } else {
                    "had no override"
                };
                writeln!(out, "{name}__{tool}: {what}")?;
                return Ok(());
            }
            print_override(&mut out, &res)?;
            if res["status"] == "pending" {
                eprintln!(
                    "withheld until approved with its override: agent-discover tools approve {name} {tool}"
                );
            }
            Ok(())
        }
        ToolsCommand::Overrides {
            name,
            profile,
            json,
        } => {
            let all = app.tool_overrides_in(profile.as_deref(), name.as_deref())?;
            if json {
                return print_json(&Value::Array(all));
            }
            if all.is_empty() {
                eprintln!("no tool override");
            }
            for o in &all {
                print_override(&mut out, o)?;
            }
            Ok(())
        }
        ToolsCommand::Policy {
            name,
            tool,
            ask,
            allow,
            deny,
            clear,
            annotation,
            json,
        } => {
            let target = crate::approvals::target_of(tool.as_deref(), annotation.as_deref())?;
            let policy = [
                (ask, ApprovalPolicy::Ask),
                (allow, ApprovalPolicy::Allow),
                (deny, ApprovalPolicy::Deny),
            ]
            .into_iter()
            .find_map(|(on, p)| on.then_some(p));
            let view = if policy.is_some() || clear {
                app.set_tool_policy(&name, &target, policy)?
            } else {
                app.tool_policy(&name)?
            };
            if json {
                return print_json(&view);
            }
            let rules = view["rules"].as_array().cloned().unwrap_or_default();
            if rules.is_empty() {
                writeln!(out, "{name}: no rules (every tool: allow)")?;
            }
            for r in &rules {
                let what = match r["scope"].as_str() {
                    Some("tool") => format!("tool {}", r["tool"].as_str().unwrap_or_default()),
                    Some("annotation") => format!(
                        "annotation {}",
                        r["annotation"].as_str().unwrap_or_default()
                    ),
                    _ => "server-wide".to_owned(),
                };
                writeln!(
                    out,
                    "{:<32} {}",
                    what,
                    r["policy"].as_str().unwrap_or_default()
                )?;
            }
            let tools = view["tools"].as_array().cloned().unwrap_or_default();
            if !tools.is_empty() {
                writeln!(out)?;
            }
            for t in tools {
                writeln!(
                    out,
                    "{:<32} {}",
                    t["tool"].as_str().unwrap_or_default(),
                    t["policy"].as_str().unwrap_or_default()
                )?;
            }
            Ok(())
        }
    }
}

/// One override as a line (`server tool -> shown_as status`) and its fields indented.
fn print_override(out: &mut impl Write, o: &Value) -> anyhow::Result<()> {
    writeln!(
        out,
        "{:<24} {:<32} -> {:<32} {}",
        o["server"].as_str().unwrap_or_default(),
        o["tool"].as_str().unwrap_or_default(),
        o["call_as"].as_str().unwrap_or_default(),
        o["status"].as_str().unwrap_or_default()
    )?;
    for (k, v) in o["override"].as_object().into_iter().flatten() {
        let v = match v {
            Value::String(s) => one_line(s, 160),
            other => one_line(&other.to_string(), 160),
        };
        writeln!(out, "    {k}: {v}")?;
    }
    Ok(())
}
