//! `agent-discover introspect` (install, start and enumerate many MCP packages, filing each under one category of the
//! failure taxonomy) and `agent-discover catalog` (the stored results; re-introspect what changed). Over
//! [`crate::introspect`]; records are stored as they finish.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};

use super::common::one_line;
use crate::app::App;
use crate::catalog;
use crate::introspect::{self, Category, Ecosystem, Progress, Record, Target};

#[derive(Debug, Args)]
pub struct IntrospectArgs {
    /// npm packages, `NAME[@VERSION]` (repeatable; several after one flag).
    #[arg(long, num_args = 1.., value_name = "PKG")]
    pub npm: Vec<String>,
    /// PyPI projects, `NAME[==VERSION]` (repeatable; several after one flag).
    #[arg(long, num_args = 1.., value_name = "PKG")]
    pub pypi: Vec<String>,
    /// Programs already on this machine, `PROGRAM [ARGS...]` as one argument (repeatable; no install stage).
    #[arg(long = "command", value_name = "LINE")]
    pub commands: Vec<String>,
    /// Entries of the official MCP registry matching this query, launched from their server.json.
    #[arg(long, value_name = "QUERY")]
    pub registry: Option<String>,
    /// At most this many registry entries.
    #[arg(long, default_value_t = 50, requires = "registry")]
    pub registry_max: usize,
    /// A list file: one `npm:SPEC`, `pypi:SPEC`, `command:LINE` or bare npm spec per line; `#` comments.
    #[arg(long, value_name = "LIST")]
    pub file: Option<PathBuf>,
    /// The N most downloaded MCP servers (found through the registries' search).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// Which ecosystems `--top` takes from.
    #[arg(long, value_enum, default_value_t = TopFrom::Both, requires = "top")]
    pub top_from: TopFrom,
    /// Packages introspected at once (default: cores + 1).
    #[arg(long, short = 'j')]
    pub concurrency: Option<usize>,
    /// Do not retry failed packages with placeholder values.
    #[arg(long)]
    pub no_second_pass: bool,
    #[command(flatten)]
    pub limits: LimitArgs,
    /// JSON lines (one record per package, in completion order) instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Seconds allowed for installing one package (not counted against the protocol).
    #[arg(long, default_value_t = 180)]
    pub install_timeout: u64,
    /// Seconds allowed for `initialize`.
    #[arg(long, default_value_t = 15)]
    pub init_timeout: u64,
    /// Seconds allowed for `tools/list` (every page), and each of `prompts/list` and `resources/list`.
    #[arg(long, default_value_t = 15)]
    pub list_timeout: u64,
    /// Seconds after which one attempt (spawn to teardown) is killed whatever it is doing.
    #[arg(long, default_value_t = 120)]
    pub hard_timeout: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TopFrom {
    Npm,
    Pypi,
    Both,
}

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// The stored introspection records (the latest per package).
    List {
        /// Only this category (ok, ok_zero_tools, install_failed, needs_credentials, ...).
        #[arg(long)]
        category: Option<String>,
        /// JSON lines (full records).
        #[arg(long)]
        json: bool,
    },
    /// Re-introspect the stored packages whose latest version differs from the one introspected.
    Refresh {
        #[arg(long, short = 'j')]
        concurrency: Option<usize>,
        #[command(flatten)]
        limits: LimitArgs,
        #[arg(long)]
        json: bool,
    },
}

fn options(
    app: &App,
    limits: &LimitArgs,
    concurrency: Option<usize>,
) -> anyhow::Result<introspect::Options> {
    let mut o = catalog::options_for(app)?;
    o.limits = introspect::Limits {
        install: Duration::from_secs(limits.install_timeout.max(1)),
        initialize: Duration::from_secs(limits.init_timeout.max(1)),
        list: Duration::from_secs(limits.list_timeout.max(1)),
        term_grace: Duration::from_secs(2),
        hard: Duration::from_secs(limits.hard_timeout.max(1)),
    };
    if let Some(c) = concurrency {
        anyhow::ensure!(c >= 1, "--concurrency must be at least 1");
        o.concurrency = c;
    }
    Ok(o)
}

async fn targets(app: &App, a: &IntrospectArgs) -> anyhow::Result<Vec<Target>> {
    let mut out = Vec::new();
    for s in &a.npm {
        out.push(Target::npm(s)?);
    }
    for s in &a.pypi {
        out.push(Target::pypi(s)?);
    }
    for s in &a.commands {
        out.push(Target::command(s)?);
    }
    if let Some(path) = &a.file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            if let Some(t) = Target::from_line(line) {
                out.push(t.with_context(|| format!("{}:{}", path.display(), i + 1))?);
            }
        }
    }
    if let Some(q) = &a.registry {
        let (found, skipped) =
            introspect::targets::from_registry(app.marketplace()?, q, a.registry_max).await?;
        if skipped > 0 {
            eprintln!("{skipped} registry entr(y/ies) skipped: no npm or PyPI stdio package");
        }
        out.extend(found);
    }
    if let Some(n) = a.top {
        let (npm, pypi) = match a.top_from {
            TopFrom::Npm => (true, false),
            TopFrom::Pypi => (false, true),
            TopFrom::Both => (true, true),
        };
        out.extend(introspect::targets::top(app.marketplace()?, n, npm, pypi).await?);
    }
    // One record per key: the first spec of a package wins.
    let mut seen = std::collections::HashSet::new();
    out.retain(|t| seen.insert(t.key()));
    anyhow::ensure!(
        !out.is_empty(),
        "nothing to introspect: give --npm, --pypi, --command, --file, --registry or --top"
    );
    Ok(out)
}

pub async fn run(app: &App, a: IntrospectArgs) -> anyhow::Result<()> {
    let targets = targets(app, &a).await?;
    let mut o = options(app, &a.limits, a.concurrency)?;
    o.second_pass = !a.no_second_pass;
    batch(app, targets, &o, a.json).await
}

pub async fn catalog_cmd(app: &App, cmd: CatalogCommand) -> anyhow::Result<()> {
    match cmd {
        CatalogCommand::List { category, json } => {
            let category = match category {
                Some(c) => Some(Category::parse(&c).with_context(|| {
                    format!(
                        "unknown category {c:?}; one of: {}",
                        Category::ALL.map(Category::as_str).join(", ")
                    )
                })?),
                None => None,
            };
            let records = catalog::stored(app, category)?;
            print_records(app, &records, json)?;
            if !json {
                summary(&records, None)?;
            }
            Ok(())
        }
        CatalogCommand::Refresh {
            concurrency,
            limits,
            json,
        } => {
            let (targets, unchanged) = catalog::changed_targets(app).await?;
            for (key, why) in &unchanged {
                eprintln!("{key}: not re-introspected ({why})");
            }
            if targets.is_empty() {
                eprintln!("nothing changed since the last introspection");
                return Ok(());
            }
            let o = options(app, &limits, concurrency)?;
            batch(app, targets, &o, json).await
        }
    }
}

async fn batch(
    app: &App,
    targets: Vec<Target>,
    o: &introspect::Options,
    json: bool,
) -> anyhow::Result<()> {
    let total = targets.len();
    let tty = std::io::stderr().is_terminal();
    eprintln!(
        "introspecting {total} package(s), {} at a time; cache {}",
        o.concurrency,
        o.cache_dir.display()
    );
    let started = Instant::now();
    let mut running = 0usize;
    let records = catalog::run(app, targets, o, |p| match p {
        Progress::Started { .. } => {
            running += 1;
            if tty {
                eprint!("\r\x1b[2K[0/{total}] {running} running");
            }
        }
        Progress::Finished {
            record,
            done,
            total,
        } => {
            running = running.saturating_sub(1);
            if json {
                let mut out = std::io::stdout().lock();
                let _ = serde_json::to_writer(&mut out, &record);
                let _ = writeln!(out);
                let _ = out.flush();
            }
            if tty {
                let width = 30;
                let filled = done * width / total.max(1);
                eprint!(
                    "\r\x1b[2K[{}{}] {done}/{total} {running} running, {:.0} s; {} {}",
                    "#".repeat(filled),
                    ".".repeat(width - filled),
                    started.elapsed().as_secs_f64(),
                    one_line(&record.key, 40),
                    record.category
                );
            }
        }
    })
    .await;
    if tty {
        eprintln!();
    }
    if !json {
        let mut sorted = records.clone();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        print_records(app, &sorted, false)?;
        summary(&records, Some(started.elapsed()))?;
    }
    Ok(())
}

/// The records, one line each (or one JSON object each), with the tool scanner's findings on their tools.
fn print_records(app: &App, records: &[Record], json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        for r in records {
            let mut v = serde_json::to_value(r)?;
            v["findings"] = serde_json::Value::Array(catalog::record_findings(app, r));
            serde_json::to_writer(&mut out, &v)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:<44} {:<12} {:<19} {:>5} {:>4} {:>7}  EVIDENCE / HINT",
        "PACKAGE", "VERSION", "CATEGORY", "TOOLS", "PASS", "SECONDS"
    )?;
    for r in records {
        let name = match r.ecosystem {
            Ecosystem::Npm => r.package.clone(),
            _ => r.key.clone(),
        };
        writeln!(
            out,
            "{:<44} {:<12} {:<19} {:>5} {:>4} {:>7.1}  {}",
            one_line(&name, 44),
            one_line(r.version.as_deref().unwrap_or("-"), 12),
            r.category.as_str(),
            r.tools.len(),
            r.pass,
            r.duration_ms as f64 / 1000.0,
            one_line(&r.evidence, 100)
        )?;
        if !r.category.is_ok() {
            writeln!(out, "{:<93}  hint: {}", "", one_line(&r.hint, 100))?;
        }
        for f in catalog::record_findings(app, r) {
            let rules: Vec<&str> = f["findings"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x["rule"].as_str())
                .collect();
            writeln!(
                out,
                "{:<93}  flagged: {} ({})",
                "",
                f["tool"].as_str().unwrap_or_default(),
                rules.join(", ")
            )?;
        }
    }
    Ok(())
}

/// Category counts for the first pass and the final one, the time taken and processes left behind.
fn summary(records: &[Record], took: Option<Duration>) -> anyhow::Result<()> {
    let mut first: BTreeMap<Category, usize> = BTreeMap::new();
    let mut last: BTreeMap<Category, usize> = BTreeMap::new();
    for r in records {
        *first
            .entry(
                r.first_pass
                    .as_ref()
                    .map(|f| f.category)
                    .unwrap_or(r.category),
            )
            .or_default() += 1;
        *last.entry(r.category).or_default() += 1;
    }
    let mut out = std::io::stdout().lock();
    writeln!(out)?;
    writeln!(out, "{:<19} {:>6} {:>6}", "CATEGORY", "PASS 1", "PASS 2")?;
    for c in Category::ALL {
        let (a, b) = (
            first.get(&c).copied().unwrap_or(0),
            last.get(&c).copied().unwrap_or(0),
        );
        if a + b > 0 {
            writeln!(out, "{:<19} {a:>6} {b:>6}", c.as_str())?;
        }
    }
    let left: usize = records.iter().map(|r| r.left_behind).sum();
    write!(
        out,
        "{} package(s); processes left behind: {left}",
        records.len()
    )?;
    if let Some(t) = took {
        write!(out, "; {:.1} s", t.as_secs_f64())?;
    }
    writeln!(out)?;
    for line in shares(records) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The enumerated share both ways: of the packages that installed, and of those that are programs (libraries with
/// no bin or console script excluded); then the packages the second pass rescued, by where the values came from.
pub(crate) fn shares(records: &[Record]) -> Vec<String> {
    let pct = |a: usize, b: usize| {
        if b == 0 {
            0.0
        } else {
            100.0 * a as f64 / b as f64
        }
    };
    let ok = |r: &&&Record| r.category.is_ok();
    let installed: Vec<&Record> = records
        .iter()
        .filter(|r| r.category != Category::InstallFailed)
        .collect();
    let programs: Vec<&Record> = installed.iter().copied().filter(|r| !r.library).collect();
    let (a, b) = (installed.iter().filter(ok).count(), installed.len());
    let (c, d) = (programs.iter().filter(ok).count(), programs.len());
    let mut out = vec![
        format!("enumerated: {a} of {b} installed ({:.0}%)", pct(a, b)),
        format!(
            "enumerated, libraries excluded: {c} of {d} ({:.0}%); {} librar{} (no bin / console script)",
            pct(c, d),
            b - d,
            if b - d == 1 { "y" } else { "ies" }
        ),
    ];
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.rescued_by.is_empty()) {
        *by.entry(r.rescued_by.join("+")).or_default() += 1;
    }
    if !by.is_empty() {
        out.push(format!(
            "rescued by the second pass: {}",
            by.iter()
                .map(|(k, n)| format!("{n} by {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}
