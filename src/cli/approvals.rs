//! `agent-discover approvals`: the calls waiting for a person's approval (#27) and the person's answer, from any
//! terminal: the waiting call may run in another agent-discover process (an MCP client's, `serve`, `call`), which
//! notices the decision committed here. Over the `App` methods REST and the dashboard use.

use std::io::Write;

use clap::Subcommand;
use serde_json::Value;

use super::common::{one_line, print_json};
use crate::app::App;
use crate::approval::Scope;

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Calls waiting for approval, newest first: id, server, tool, the exact arguments, and until when.
    List {
        /// Recent approvals of every kind and status, not only those waiting.
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Approve a waiting call: once, or with --session for the same call (same arguments) for the rest of its
    /// caller's session.
    Approve {
        id: String,
        #[arg(long)]
        session: bool,
        #[arg(long)]
        json: bool,
    },
    /// Deny a waiting call (it ends with kind approval_denied).
    Deny {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

/// Who decides from this terminal: `cli:USER`.
fn by() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!("cli:{user}")
}

pub fn run(app: &App, cmd: ApprovalsCommand) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match cmd {
        ApprovalsCommand::List { all, json } => {
            let list = app.approvals(all)?;
            if json {
                return print_json(&Value::Array(list));
            }
            if list.is_empty() {
                eprintln!("no call is waiting for approval");
            }
            for a in &list {
                let text = |k: &str| a[k].as_str().unwrap_or_default().to_owned();
                writeln!(
                    out,
                    "{}  {}__{}  {}  until {}{}",
                    text("id"),
                    text("server"),
                    text("tool"),
                    text("status"),
                    text("deadline"),
                    a["decided_by"]
                        .as_str()
                        .map(|b| format!("  by {b}"))
                        .unwrap_or_default()
                )?;
                writeln!(
                    out,
                    "    arguments: {}",
                    one_line(&a["arguments"].to_string(), 2000)
                )?;
            }
            Ok(())
        }
        ApprovalsCommand::Approve { id, session, json } => {
            let scope = if session { Scope::Session } else { Scope::Once };
            let a = app.decide_approval(&id, Some(scope), &by())?;
            if json {
                return print_json(&a);
            }
            writeln!(
                out,
                "approved {}__{} ({})",
                a["server"].as_str().unwrap_or_default(),
                a["tool"].as_str().unwrap_or_default(),
                a["scope"].as_str().unwrap_or("once")
            )?;
            if session && a["scope"] != "session" {
                eprintln!("hint: that call has no session, so the approval holds for it once");
            }
            Ok(())
        }
        ApprovalsCommand::Deny { id, json } => {
            let a = app.decide_approval(&id, None, &by())?;
            if json {
                return print_json(&a);
            }
            writeln!(
                out,
                "denied {}__{}",
                a["server"].as_str().unwrap_or_default(),
                a["tool"].as_str().unwrap_or_default()
            )?;
            Ok(())
        }
    }
}
