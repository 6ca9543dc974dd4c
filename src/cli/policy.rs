//! `agent-discover policy`: the policies for calls (Cedar files in `<data dir>/policies`, or `AGENT_DISCOVER_POLICIES`):
//! list what is in force, try a call against them (a dry run saying which policy decided), check a file before putting
//! it in place. Over the `App` methods REST and the `registry` tool use (`src/policy.rs`).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::{Value, json};

use super::common::{one_line, print_json};
use crate::app::App;
use crate::policy::PolicyTest;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// The policies in force: where they come from, each policy's id, effect and scope, and the last load's failure
    /// while an older set stays in force.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A dry run: what the policies say about a call of TOOL on SERVER, and which policy decided.
    Test {
        server: String,
        tool: String,
        /// The user making the call (default: `local`, the user of a call without identity).
        #[arg(long)]
        user: Option<String>,
        /// A group of the user (repeat for several).
        #[arg(long = "group", value_name = "GROUP")]
        groups: Vec<String>,
        /// The calling client's name (its MCP clientInfo.name).
        #[arg(long)]
        client: Option<String>,
        /// The call is made by a code-mode script.
        #[arg(long)]
        script: bool,
        /// The call's arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Validate a policy file (or a directory of *.cedar files) without putting it in force.
    Check {
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

pub fn run(app: &App, cmd: PolicyCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match cmd {
        PolicyCommand::List { json } => {
            let v = app.policy_list()?;
            if json {
                return print_json(&v);
            }
            writeln!(
                out,
                "{} polic{} from {} (generation {})",
                v["policies"],
                if v["policies"] == 1 { "y" } else { "ies" },
                v["source"].as_str().unwrap_or("-"),
                v["generation"]
            )?;
            if let Some(e) = v["error"].as_object() {
                writeln!(
                    out,
                    "the last load failed, the policies above stay in force: {}{}",
                    e.get("file")
                        .and_then(Value::as_str)
                        .map(|f| format!("{f}: "))
                        .unwrap_or_default(),
                    e.get("message").and_then(Value::as_str).unwrap_or_default()
                )?;
            }
            for p in v["list"].as_array().into_iter().flatten() {
                let s = |k: &str| p[k].as_str().unwrap_or_default().to_owned();
                writeln!(
                    out,
                    "{}  {}{}  {}  ({})",
                    s("id"),
                    s("effect"),
                    if p["ask"] == true { " (ask)" } else { "" },
                    s("scope"),
                    s("file")
                )?;
            }
            Ok(())
        }
        PolicyCommand::Test {
            server,
            tool,
            user,
            groups,
            client,
            script,
            args,
            json,
        } => {
            let arguments = match args {
                Some(a) => match serde_json::from_str::<Value>(&a) {
                    Ok(Value::Object(m)) => Some(m),
                    Ok(_) => anyhow::bail!("--args must be a JSON object"),
                    Err(e) => anyhow::bail!("--args is not JSON: {e}"),
                },
                None => None,
            };
            let v = app.policy_test(&PolicyTest {
                user,
                groups,
                client,
                script,
                server,
                tool,
                arguments,
            })?;
            if json {
                return print_json(&v);
            }
            let by: Vec<&str> = v["decided_by"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            writeln!(
                out,
                "{}{}",
                v["outcome"].as_str().unwrap_or_default(),
                if by.is_empty() {
                    String::new()
                } else {
                    format!(" by {}", by.join(", "))
                }
            )?;
            writeln!(out, "{}", v["reason"].as_str().unwrap_or_default())?;
            Ok(())
        }
        PolicyCommand::Check { file, json } => match crate::policy::check(&file) {
            Ok(list) => {
                if json {
                    return print_json(&json!({"ok": true, "policies": list}));
                }
                writeln!(
                    out,
                    "ok: {} polic{}",
                    list.len(),
                    if list.len() == 1 { "y" } else { "ies" }
                )?;
                for p in &list {
                    writeln!(out, "{}  {}  {}", p.id, p.effect, one_line(&p.scope, 200))?;
                }
                Ok(())
            }
            Err(e) => {
                if json {
                    print_json(&json!({"ok": false, "error": e}))?;
                }
                anyhow::bail!("{e}")
            }
        },
    }
}
