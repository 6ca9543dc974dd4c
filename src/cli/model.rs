//! `agent-discover model status|install|remove`: the local embedding model behind semantic search, over
//! `embed::fetch` (the same download the MCP and dashboard modes start in the background).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::common::print_json;
use crate::embed::fetch::{self, State};

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Whether the model is installed, being downloaded (by any process), or absent, and where it comes from.
    Status {
        #[arg(long)]
        json: bool,
    },
    /// Download the model now (verified, resumable; waits for a download another process is running).
    Install {
        #[arg(long)]
        json: bool,
    },
    /// Delete the downloaded model files (and any partial download); search falls back to BM25.
    Remove,
}

/// Where the model is (found anywhere agent-discover looks) or would be downloaded to.
fn locate() -> anyhow::Result<(PathBuf, bool)> {
    if let Some(dir) = crate::embed::find_model_dir(None) {
        return Ok((dir, true));
    }
    let dir = crate::search::provider::local_model_target().ok_or_else(|| {
        anyhow::anyhow!(
            "no model directory: set {} or HOME",
            crate::embed::ENV_MODEL_DIR
        )
    })?;
    Ok((dir, false))
}

fn sources() -> Vec<String> {
    match fetch::sources_from_env() {
        Ok(s) if s.is_empty() => vec!["off".into()],
        Ok(s) => s.iter().map(fetch::Source::label).collect(),
        Err(e) => vec![format!("invalid: {e}")],
    }
}

pub async fn run(cmd: ModelCommand) -> anyhow::Result<()> {
    match cmd {
        ModelCommand::Status { json } => {
            let (dir, found) = locate()?;
            let state = if found {
                State::Ready { dir: dir.clone() }
            } else {
                fetch::inspect(&dir)
            };
            let mut v = serde_json::to_value(&state)?;
            v["model"] = json!(crate::embed::MODEL_ID);
            v["sources"] = json!(sources());
            if json {
                return print_json(&v);
            }
            let mut out = std::io::stdout().lock();
            writeln!(out, "model:   {}", crate::embed::MODEL_ID)?;
            writeln!(out, "state:   {}", describe(&state))?;
            writeln!(out, "dir:     {}", dir.display())?;
            writeln!(out, "sources: {}", sources().join(", "))?;
            Ok(())
        }
        ModelCommand::Install { json } => {
            let (dir, found) = locate()?;
            if !found {
                let sources = fetch::sources_from_env().map_err(|e| anyhow::anyhow!(e))?;
                let fetcher = fetch::Fetcher::new(dir.clone(), sources);
                let install = fetcher.install();
                tokio::pin!(install);
                let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
                let mut last = String::new();
                let res = loop {
                    tokio::select! {
                        r = &mut install => break r,
                        _ = tick.tick() => {
                            let now = describe(&fetcher.state());
                            if now != last {
                                eprintln!("{now}");
                                last = now;
                            }
                        }
                    }
                };
                res.map_err(|e| anyhow::anyhow!("the model could not be installed: {e}"))?;
            }
            if json {
                return print_json(&serde_json::to_value(State::Ready { dir })?);
            }
            println!("{} installed in {}", crate::embed::MODEL_ID, dir.display());
            Ok(())
        }
        ModelCommand::Remove => {
            let dir = crate::search::provider::local_model_target().ok_or_else(|| {
                anyhow::anyhow!(
                    "no model directory: set {} or HOME",
                    crate::embed::ENV_MODEL_DIR
                )
            })?;
            let removed = fetch::remove(&dir).map_err(|e| anyhow::anyhow!(e))?;
            if removed {
                println!("removed the model files in {}", dir.display());
            } else {
                println!("no downloaded model in {}", dir.display());
            }
            if let Some(other) = crate::embed::find_model_dir(None) {
                eprintln!(
                    "note: a model is still found in {} (not downloaded by agent-discover; left alone)",
                    other.display()
                );
            }
            Ok(())
        }
    }
}

/// One line for humans.
pub fn describe(state: &State) -> String {
    match state {
        State::Ready { dir } => format!("installed ({})", dir.display()),
        State::Absent { reason, .. } => format!("absent: {reason}"),
        State::Waiting { .. } => {
            "waiting for another agent-discover process that is downloading the model".into()
        }
        State::Downloading {
            source,
            file,
            bytes,
            total,
            ..
        } => match total {
            Some(t) if *t > 0 => format!(
                "downloading {file} ({source}): {} / {} MB ({}%)",
                bytes / 1_000_000,
                t / 1_000_000,
                bytes * 100 / t
            ),
            _ => format!("downloading {file} ({source}): {} MB", bytes / 1_000_000),
        },
        State::Verifying { source, .. } => format!("verifying the files from {source}"),
        State::Failed { error, .. } => format!("failed: {error}"),
    }
}
