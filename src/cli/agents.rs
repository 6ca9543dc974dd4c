//! `agent-discover agents`: add an A2A agent (a card URL, or `-- COMMAND` for a worker agent-discover starts), list
//! and remove them. Over the same `App::agents` methods as REST and the MCP agent tools.

use std::io::Write;

use clap::Subcommand;
use serde_json::json;

use super::common::{one_line, parse_kv, print_json};
use crate::agents::AddAgent;
use crate::app::App;

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Add an agent: `agents add URL` (its card at URL, or URL/.well-known/agent-card.json, then the older
    /// agent.json), or `agents add -- COMMAND ARGS` for a local worker started with AGENT_DISCOVER_A2A_PORT set to
    /// the loopback port it must serve A2A on.
    Add {
        /// The agent card URL or the agent's base URL.
        #[arg(required_unless_present = "command")]
        url: Option<String>,
        /// The agent's id (default: its card's name).
        #[arg(long)]
        name: Option<String>,
        /// An HTTP header sent with every request to the agent, such as `Authorization=Bearer ...` (repeatable;
        /// stored encrypted like secrets).
        #[arg(long = "header", value_parser = parse_kv)]
        headers: Vec<(String, String)>,
        /// How many tasks may run at once before the agent is `busy` (default 4).
        #[arg(long)]
        max_concurrent: Option<u32>,
        /// The worker command and its arguments (after `--`).
        #[arg(last = true, conflicts_with = "url")]
        command: Vec<String>,
        #[arg(long)]
        json: bool,
    },
    /// List the registered agents with their capabilities and last known status.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove an agent (a worker it runs is stopped).
    Remove { id: String },
}

pub async fn run(app: &App, cmd: AgentsCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match cmd {
        AgentsCommand::Add {
            url,
            name,
            headers,
            max_concurrent,
            command,
            json,
        } => {
            let mut command = command.into_iter();
            let spec = AddAgent {
                id: name,
                url,
                command: command.next().map(|c| (c, command.collect())),
                headers: headers.into_iter().collect(),
                max_concurrent,
            };
            let info = app.agents.add(spec).await?;
            app.agents.shutdown().await;
            if json {
                return print_json(&serde_json::to_value(&info)?);
            }
            writeln!(
                out,
                "added agent {} ({}; capabilities: {})",
                info.id,
                info.protocol_version
                    .map(|v| format!("A2A {v}"))
                    .unwrap_or_default(),
                info.capabilities.join(", ")
            )?;
        }
        AgentsCommand::List { json } => {
            let agents = app.agents.list_stored()?;
            if json {
                return print_json(&json!({ "agents": agents }));
            }
            if agents.is_empty() {
                writeln!(
                    out,
                    "no agents registered (agent-discover agents add URL | -- COMMAND)"
                )?;
            }
            for a in agents {
                writeln!(
                    out,
                    "{:<24} {:<12} {:<40} {}",
                    a.id,
                    a.status.as_str(),
                    one_line(&a.capabilities.join(","), 40),
                    one_line(a.source.as_deref().unwrap_or_default(), 60)
                )?;
            }
        }
        AgentsCommand::Remove { id } => {
            app.agents.remove(&id).await?;
            writeln!(out, "removed agent {id}")?;
        }
    }
    Ok(())
}
