//! `agent-discover limits`: show a server's rate limits, concurrency cap and circuit breaker (with the breaker's
//! state), change them, or close an open breaker. Over the same `App` methods as REST and the `registry` tool's
//! `limits` action.

use std::io::Write;

use clap::Subcommand;
use serde_json::Value;

use super::common::print_json;
use crate::app::App;
use crate::limits::LimitsPatch;

// Parsed once per run: the size of `Set` does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum LimitsCommand {
    /// A server's limits and its breaker's state; every server's without a name.
    Show {
        name: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change a server's limits (each option given replaces that setting). Rates are COUNT/PERIOD (10/s, 600/min,
    /// 5/30s) or off; durations 500ms, 5s, 1m.
    Set {
        name: String,
        /// The server's rate, all its calls together (with --tool: that tool's).
        #[arg(long)]
        rate: Option<String>,
        /// The bucket size of --rate: calls that may go at once after a quiet spell (default: the rate's count).
        #[arg(long)]
        burst: Option<u32>,
        /// --rate and --burst are this tool's own.
        #[arg(long)]
        tool: Option<String>,
        /// Each tool's rate on its own.
        #[arg(long)]
        tool_rate: Option<String>,
        /// Each caller's rate on its own (the authenticated user, else the client's session).
        #[arg(long)]
        caller_rate: Option<String>,
        /// Calls at once (a server that takes one at a time gets 1), or off.
        #[arg(long)]
        concurrency: Option<String>,
        /// Calls that may wait for a slot beyond the cap (default 16).
        #[arg(long)]
        queue: Option<u32>,
        /// How long a queued call waits before it is refused (default 5s).
        #[arg(long)]
        wait: Option<String>,
        /// The circuit breaker: FAILURES/WINDOW (default 5/30s), or off.
        #[arg(long)]
        breaker: Option<String>,
        /// How long an open breaker refuses calls before one trial call (default 30s).
        #[arg(long)]
        cooldown: Option<String>,
        /// Start from the defaults before the other options.
        #[arg(long)]
        defaults: bool,
        #[arg(long)]
        json: bool,
    },
    /// Close a server's open circuit breaker now.
    Reset {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(app: &App, cmd: LimitsCommand) -> anyhow::Result<()> {
    let (views, json) = match cmd {
        LimitsCommand::Show {
            name: Some(n),
            json,
        } => (vec![app.limits_view(&n)?], json),
        LimitsCommand::Show { name: None, json } => (app.limits_list()?, json),
        LimitsCommand::Reset { name, json } => (vec![app.reset_breaker(&name)?], json),
        LimitsCommand::Set {
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
            defaults,
            json,
        } => {
            let patch = LimitsPatch {
                reset: defaults,
                rate,
                burst,
                tool,
                tool_rate,
                caller_rate,
                concurrency: concurrency.map(ad_core::limits::Cap::Text),
                queue,
                wait,
                breaker,
                cooldown,
            };
            if patch.is_empty() {
                anyhow::bail!(
                    "nothing to change: give at least one option (see `agent-discover limits set --help`)"
                );
            }
            (vec![app.set_limits(&name, patch)?], json)
        }
    };
    if json {
        return print_json(&Value::Array(views));
    }
    let mut out = std::io::stdout().lock();
    for v in &views {
        writeln!(out, "{}", describe(v))?;
    }
    Ok(())
}

/// One server's limits on a few lines.
pub fn describe(v: &Value) -> String {
    let s = &v["settings"];
    let rate = |r: &Value| -> String {
        match r.as_object() {
            None => "none".into(),
            Some(_) => match serde_json::from_value::<ad_core::limits::Rate>(r.clone()) {
                Ok(r) => format!("{r}"),
                Err(_) => r.to_string(),
            },
        }
    };
    let mut lines = vec![format!("{}", v["server"].as_str().unwrap_or_default())];
    lines.push(format!("  rate: {}", rate(&s["rate"])));
    if !s["tool_rate"].is_null() {
        lines.push(format!("  each tool: {}", rate(&s["tool_rate"])));
    }
    if let Some(tools) = s["tools"].as_object() {
        for (t, r) in tools {
            lines.push(format!("  tool {t}: {}", rate(r)));
        }
    }
    if !s["caller_rate"].is_null() {
        lines.push(format!("  each caller: {}", rate(&s["caller_rate"])));
    }
    let wait = ad_core::limits::format_duration(s["wait_ms"].as_u64().unwrap_or_default());
    match s["concurrency"].as_u64() {
        Some(c) => lines.push(format!(
            "  concurrency: {c} (queue {}, wait {wait})",
            s["queue"]
        )),
        None => lines.push("  concurrency: no cap".into()),
    }
    let b = &v["breaker"];
    let state = b["state"].as_str().unwrap_or("off");
    match s["breaker"].as_object() {
        None => lines.push("  breaker: off".into()),
        Some(cfg) => {
            let d = |k: &str| {
                ad_core::limits::format_duration(cfg.get(k).and_then(Value::as_u64).unwrap_or(0))
            };
            let mut line = format!(
                "  breaker: {state} ({} failures in {}, cool-down {})",
                cfg.get("failures").and_then(Value::as_u64).unwrap_or(0),
                d("window_ms"),
                d("cooldown_ms")
            );
            if let Some(ms) = b["retry_after_ms"].as_u64() {
                line.push_str(&format!("; trial call in {ms} ms"));
            }
            lines.push(line);
        }
    }
    lines.join("\n")
}
