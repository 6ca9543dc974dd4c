//! `agent-discover guards [SERVER]`: the guards on calls (credentials in arguments, credentials and instructions to
//! the agent in results): show the global settings and a server's own, or change a server's own.

use std::io::Write;

use clap::Args;
use serde_json::Value;

use super::common::print_json;
use crate::app::App;
use crate::guards::GuardsPatch;

const MODES: [&str; 4] = ["off", "warn", "block", "default"];

#[derive(Debug, Args)]
pub struct GuardsArgs {
    /// The server whose own settings to show or change; without it, the global settings and every server's counts.
    pub name: Option<String>,
    /// Credentials in a call's arguments: `block` refuses the call, `warn` reports it, `default` follows the global.
    #[arg(long, value_parser = MODES, requires = "name")]
    pub arguments: Option<String>,
    /// Credentials in a result: `block` masks them, `warn` reports them.
    #[arg(long, value_parser = MODES, requires = "name")]
    pub result_secrets: Option<String>,
    /// Instructions aimed at the agent in a result: `warn` marks them for the agent, `block` withholds them.
    #[arg(long, value_parser = MODES, requires = "name")]
    pub result_instructions: Option<String>,
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(app: &App, args: GuardsArgs) -> anyhow::Result<()> {
    let patch = GuardsPatch {
        arguments: args.arguments,
        result_secrets: args.result_secrets,
        result_instructions: args.result_instructions,
    };
    let view = match (&args.name, patch.is_empty()) {
        (Some(name), false) => app.set_guards(name, patch, false)?,
        (name, _) => app.guards_view(name.as_deref())?,
    };
    if args.json {
        return print_json(&view);
    }
    let mut out = std::io::stdout().lock();
    let line = |v: &Value| {
        format!(
            "arguments {}, result secrets {}, result instructions {}",
            v["arguments"].as_str().unwrap_or("?"),
            v["result_secrets"].as_str().unwrap_or("?"),
            v["result_instructions"].as_str().unwrap_or("?")
        )
    };
    writeln!(out, "global: {}", line(&view["global"]))?;
    if let Some(server) = view["server"].as_str() {
        writeln!(out, "{server}: {}", line(&view["effective"]))?;
        let own = view["own"].as_object().filter(|o| !o.is_empty());
        writeln!(
            out,
            "  its own: {}",
            own.map(|o| o
                .iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", "))
                .unwrap_or_else(|| "none (follows the global settings)".into())
        )?;
        writeln!(out, "  decisions here since start: {}", view["counts"])?;
    }
    Ok(())
}
