//! `agent-discover scripts`: saved scripts, each a tool `scripts__NAME` (save from a file with its input schema,
//! list, show, remove), and `agent-discover paging`: a server's own paging limit for large results. Over the same
//! `App` methods as the `registry` actions and the REST routes.

use std::sync::Arc;

use anyhow::Context;
use clap::Subcommand;

use super::common::{one_line, print_json};
use crate::app::App;
use crate::saved_scripts::SaveRequest;

#[derive(Debug, Subcommand)]
pub enum ScriptsCommand {
    /// Save (or replace) a code-mode script as the tool `scripts__NAME`; its arguments are `args` in the script.
    Save {
        name: String,
        /// The script: a JavaScript file holding the body of an async function (`-`: read it from stdin).
        #[arg(long, value_name = "F.js")]
        file: String,
        /// The arguments' JSON Schema (`"type": "object"`); default: no arguments.
        #[arg(long, value_name = "S.json")]
        schema: Option<String>,
        /// What the tool does, for agents.
        #[arg(long)]
        description: Option<String>,
        /// The script's CPU time limit in ms (default 5000, at most 60000).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// The saved scripts.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One saved script, with its body.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Remove a saved script (and its tool).
    Remove { name: String },
}

fn read(path: &str) -> anyhow::Result<String> {
    if path == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).context("reading stdin")?;
        return Ok(s);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {path}"))
}

pub async fn run(app: &Arc<App>, cmd: ScriptsCommand) -> anyhow::Result<()> {
    match cmd {
        ScriptsCommand::Save {
            name,
            file,
            schema,
            description,
            timeout_ms,
            json,
        } => {
            let code = read(&file)?;
            let input_schema = schema
                .map(|p| -> anyhow::Result<serde_json::Value> {
                    serde_json::from_str(&read(&p)?).with_context(|| format!("{p} is not JSON"))
                })
                .transpose()?;
            let saved = app.save_script(SaveRequest {
                name,
                code,
                description,
                input_schema,
                timeout_ms,
            })?;
            if json {
                return print_json(&serde_json::to_value(&saved)?);
            }
            println!("saved {} (sha256 {})", saved.tool, &saved.sha256[..16]);
            if saved.withheld {
                println!(
                    "withheld until approved: agent-discover tools approve scripts {}",
                    saved.name
                );
            }
        }
        ScriptsCommand::List { json } => {
            let all = app.list_scripts()?;
            if json {
                return print_json(&serde_json::to_value(&all)?);
            }
            if all.is_empty() {
                println!("no saved scripts (agent-discover scripts save NAME --file F.js)");
            }
            for s in all {
                let held = if s.withheld { " [withheld]" } else { "" };
                println!("{}{held}  {}", s.tool, one_line(&s.description, 80));
            }
        }
        ScriptsCommand::Show { name, json } => {
            let s = app.show_script(&name)?;
            if json {
                return print_json(&serde_json::to_value(&s)?);
            }
            println!("{} ({})", s.tool, s.updated_at);
            println!("{}", s.description);
            println!("schema: {}", s.input_schema);
            println!("---\n{}", s.code.unwrap_or_default());
        }
        ScriptsCommand::Remove { name } => {
            app.remove_script(&name)?;
            println!("removed scripts__{name}");
        }
    }
    Ok(())
}

/// `agent-discover paging NAME [BYTES | --clear]`: show or set a server's paging limit.
#[derive(Debug, clap::Args)]
pub struct PagingArgs {
    pub name: String,
    /// Bytes of text a result may have before it is paged (0: never page this server's results).
    pub bytes: Option<u64>,
    /// Go back to the default.
    #[arg(long, conflicts_with = "bytes")]
    pub clear: bool,
}

pub fn paging(app: &App, args: PagingArgs) -> anyhow::Result<()> {
    if args.clear || args.bytes.is_some() {
        app.proxy.set_server_page_bytes(&args.name, args.bytes)?;
    }
    match app.proxy.server_page_bytes(&args.name)? {
        Some(0) => println!("{}: never paged", args.name),
        Some(b) => println!("{}: paged past {b} bytes", args.name),
        None => println!(
            "{}: the default ({} bytes)",
            args.name,
            app.proxy.paging().page_bytes
        ),
    }
    Ok(())
}
