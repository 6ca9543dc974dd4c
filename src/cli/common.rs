//! Helpers every subcommand shares: `KEY=VALUE` arguments, JSON and one-line output, a progress spinner on stderr.

use std::io::Write;

pub(super) fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

/// A progress indicator on stderr (only when stderr is a terminal); abort the handle to stop it.
pub(super) fn spinner(what: &'static str) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return;
        }
        for frame in ['|', '/', '-', '\\'].iter().cycle() {
            eprint!("\r{frame} {what}…");
            tokio::time::sleep(std::time::Duration::from_millis(120)).await;
        }
    })
}

pub(super) fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

pub(super) fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    }
}

/// Who is at the command line, for approvals: `cli:` and the login name (`USER`, else `LOGNAME`, else `unknown`).
pub fn cli_user() -> String {
    let name = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "cli:{}",
        name.chars()
            .filter(|c| !c.is_control())
            .take(64)
            .collect::<String>()
    )
}
