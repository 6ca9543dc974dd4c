//! `agent-discover run FILE.js`: code mode from the command line (issue 28). The servers flagged active are started
//! for the run (as an `mcp` process starts them), the script runs with the same limits and call path as from an
//! agent, and its answer (`{result, logs, calls}` or its typed error) is printed as JSON; the exit status is 1 when
//! the script failed. A tool whose policy is `ask` waits for a person (`agent-discover approvals`, the dashboard).

use std::io::{Read, Write};
use std::sync::Arc;

use anyhow::{Context, bail};

use crate::app::App;
use crate::codemode::Step;
use crate::proxy::Caller;
use crate::scripts::RunRequest;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The script: a JavaScript file holding the body of an async function (`-`: read it from stdin).
    pub file: String,
    /// The script's CPU time limit in ms (default 5000, at most 60000); waiting for tools does not count.
    #[arg(long, value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// This run's session, for approvals given "for this session" (#27).
    #[arg(long, env = "AGENT_DISCOVER_SESSION", value_name = "NAME")]
    pub session: Option<String>,
}

pub async fn run(app: &Arc<App>, args: RunArgs) -> anyhow::Result<()> {
    let code = if args.file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading the script from stdin")?;
        s
    } else {
        std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file))?
    };
    let session = args
        .session
        .as_deref()
        .map(crate::approvals::session_name)
        .transpose()?
        .map(|n| format!("cli:{n}"));
    let outcome = async {
        start_active(app).await;
        let caller = Caller {
            session,
            ..Caller::default()
        };
        app.run_script(
            RunRequest {
                code,
                timeout_ms: args.timeout_ms,
            },
            caller,
        )
        .await
    }
    .await;
    app.proxy.shutdown().await;
    let outcome = match outcome? {
        Step::Done(o) => o,
        Step::Asked(_) => bail!("the script needs an answer a command line cannot give"),
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &outcome.to_json())?;
    writeln!(out)?;
    if outcome.failed() {
        bail!(
            "the script failed ({})",
            outcome.to_json()["kind"].as_str().unwrap_or("error")
        );
    }
    Ok(())
}

/// Starts the servers flagged active, as an `mcp` process does (one that cannot start is reported on stderr).
async fn start_active(app: &Arc<App>) {
    let servers = match app.registry.store().servers_to_restore() {
        Ok(s) => s,
        Err(e) => return tracing::warn!(error = %e, "cannot read the active servers"),
    };
    let starts = servers.into_iter().map(|s| async move {
        if let Err(e) = app.proxy.activate(&s.name).await {
            tracing::warn!(server = %s.name, error = %e, "could not start an active server for the script");
        }
    });
    futures::future::join_all(starts).await;
}
