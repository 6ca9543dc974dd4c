//! `agent-discover sandbox`: show a server's sandbox (settings, whether it is confined, every path it would be
//! granted, what the kernel offers) and change its settings. Over the same `App` methods as the `registry` tool's
//! `sandbox` action and the REST routes.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Subcommand};
use serde_json::Value;

use super::common::print_json;
use crate::app::App;
use crate::sandbox::SandboxPatch;

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// A server's sandbox: its settings, whether its next start is confined, each path it may use and why, and what
    /// this kernel offers.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Change a server's sandbox settings (applied at its next start). --read/--write replace the list of paths you
    /// granted of that kind; relative paths are taken from the current directory.
    #[command(group(
        ArgGroup::new("change")
            .required(true)
            .multiple(true)
            .args(["network", "read", "write", "clear", "off", "on"])
    ))]
    Set {
        name: String,
        /// `full`: any host; `none`: no network at all; `hosts:HOST,...`: only these hosts, through agent-discover's
        /// filtering proxy (`api.github.com`, `*.slack.com` for its subdomains, `HOST:PORT`, an IP address).
        #[arg(long, value_name = "full|none|hosts:HOST,...")]
        network: Option<String>,
        /// A path the server may read (repeatable; replaces the paths granted for reading).
        #[arg(long, value_name = "PATH")]
        read: Vec<PathBuf>,
        /// A path the server may read and write (repeatable; replaces the paths granted for writing).
        #[arg(long, value_name = "PATH")]
        write: Vec<PathBuf>,
        /// Remove every path you granted (both lists).
        #[arg(long, conflicts_with_all = ["read", "write"])]
        clear: bool,
        /// Run this server unconfined.
        #[arg(long, conflicts_with = "on")]
        off: bool,
        /// Confine this server again (the default).
        #[arg(long)]
        on: bool,
        #[arg(long)]
        json: bool,
    },
    /// Start the server once, confined as its next start will be, list its tools, stop it, and report what the
    /// sandbox refused it with the command that grants each path. Exits 1 when the server did not start.
    Check {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(app: &App, cmd: SandboxCommand) -> anyhow::Result<()> {
    let (view, json) = match cmd {
        SandboxCommand::Show { name, json } => (app.sandbox_view(&name)?, json),
        SandboxCommand::Check { name, json } => {
            let report = app.sandbox_check(&name).await?;
            if json {
                print_json(&report)?;
            } else {
                print_check(&report)?;
            }
            if report["ok"] != true {
                std::process::exit(1);
            }
            return Ok(());
        }
        SandboxCommand::Set {
            name,
            network,
            read,
            write,
            clear,
            off,
            on,
            json,
        } => {
            let cwd = std::env::current_dir()?;
            let absolute = |paths: Vec<PathBuf>| -> Vec<PathBuf> {
                paths.into_iter().map(|p| absolute(&cwd, p)).collect()
            };
            let list = |paths: Vec<PathBuf>| {
                if clear {
                    Some(Vec::new())
                } else if paths.is_empty() {
                    None
                } else {
                    Some(absolute(paths))
                }
            };
            let patch = SandboxPatch {
                enabled: (off || on).then_some(on),
                network,
                read: list(read),
                write: list(write),
            };
            (app.set_sandbox(&name, patch)?, json)
        }
    };
    if json {
        return print_json(&view);
    }
    print_view(&view)
}

/// `p` made absolute against `cwd`, without `.` components and repeated separators (`..` stays, for the validation
/// to refuse: a grant names one place as written).
fn absolute(cwd: &Path, p: PathBuf) -> PathBuf {
    let p = if p.is_absolute() { p } else { cwd.join(p) };
    p.components().collect()
}

fn print_check(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    writeln!(out, "server:   {}", s(&v["server"]))?;
    writeln!(
        out,
        "sandbox:  {}",
        if v["confined"] == true {
            "confined"
        } else {
            "unconfined"
        }
    )?;
    match v["tool_count"].as_u64() {
        Some(n) if v["ok"] == true => writeln!(out, "started:  yes, {n} tools listed")?,
        _ => writeln!(out, "started:  no ({})", s(&v["error_kind"]))?,
    }
    let refused = v["refused"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if refused.is_empty() {
        writeln!(out, "refused:  nothing it reported")?;
    } else {
        writeln!(out, "refused:")?;
        for r in refused {
            let what = match r["credential"].as_str() {
                Some(c) => format!(" (a credential: ~/{c})"),
                None => String::new(),
            };
            writeln!(out, "  {:<5} {}{what}", s(&r["access"]), s(&r["path"]))?;
            writeln!(out, "        seen: {}", s(&r["evidence"]))?;
        }
    }
    writeln!(out, "network:  {}", s(&v["network"]))?;
    print_hosts(&mut out, v)?;
    if let Some(a) = v["advice"].as_str() {
        writeln!(out, "fix:      {a}")?;
    }
    if v["ok"] != true
        && let Some(e) = v["error"].as_str()
    {
        writeln!(out, "error:    {e}")?;
    }
    Ok(())
}

/// The hosts the server's allow-list refused since its last start, if any.
fn print_hosts(out: &mut impl Write, v: &Value) -> anyhow::Result<()> {
    let refused = v["refused_hosts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !refused.is_empty() {
        writeln!(out, "refused hosts:")?;
        for r in refused {
            writeln!(
                out,
                "  {} ({}x): {}",
                r["host"].as_str().unwrap_or_default(),
                r["count"],
                r["reason"].as_str().unwrap_or_default()
            )?;
        }
    }
    Ok(())
}

fn print_view(v: &Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let state = match (v["enabled"] == true, v["effective"] == true) {
        (_, true) => "confined".to_owned(),
        (false, _) => "off for this server (runs unconfined)".to_owned(),
        (true, false) if v["kernel"]["enabled"] == false => {
            "off: AGENT_DISCOVER_SANDBOX=off (runs unconfined)".to_owned()
        }
        (true, false) => "not applicable".to_owned(),
    };
    writeln!(out, "server:   {}", s(&v["server"]))?;
    writeln!(out, "sandbox:  {state}")?;
    writeln!(
        out,
        "network:  {}",
        v["network_setting"]
            .as_str()
            .map_or_else(|| s(&v["network"]), str::to_owned)
    )?;
    print_hosts(&mut out, v)?;
    if let Some(suggested) = v["suggested_hosts"].as_array().filter(|a| !a.is_empty()) {
        writeln!(
            out,
            "suggested hosts (not applied; the package declares them):"
        )?;
        for h in suggested {
            writeln!(out, "  {:<40} {}", s(&h["host"]), s(&h["source"]))?;
        }
    }
    if let Some(note) = v["note"].as_str() {
        writeln!(out, "note:     {note}")?;
    }
    let grants = v["grants"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if !grants.is_empty() {
        writeln!(out, "grants:")?;
        for g in grants {
            writeln!(
                out,
                "  {:<5} {:<9} {}",
                s(&g["access"]),
                s(&g["source"]),
                s(&g["path"])
            )?;
        }
    }
    let k = &v["kernel"];
    writeln!(
        out,
        "kernel:   Landlock ABI {}, user namespaces {}{}",
        k["landlock_abi"]
            .as_u64()
            .map_or("none".to_owned(), |a| a.to_string()),
        if k["user_namespaces"] == true {
            "yes"
        } else {
            "no"
        },
        k["missing"]
            .as_str()
            .map(|m| format!(" — cannot confine: {m}"))
            .unwrap_or_default()
    )?;
    if let Some(applies) = v["applies"].as_str() {
        writeln!(out, "applies {applies}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_taken_from_the_current_directory() {
        let cwd = Path::new("/home/me/work");
        let abs = |p: &str| absolute(cwd, PathBuf::from(p));
        assert_eq!(abs("data"), Path::new("/home/me/work/data"));
        assert_eq!(abs("./data/"), Path::new("/home/me/work/data"));
        assert_eq!(abs("/srv//in"), Path::new("/srv/in"));
        assert_eq!(abs("../up"), Path::new("/home/me/work/../up"));
    }
}
