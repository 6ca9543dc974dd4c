//! CLI over client config files: `import`, `export`, `clients` and `connect` (thin over `crate::clientconfig` and `App`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::json;

use crate::app::App;
use crate::clientconfig::{self, Env, ExportServer, Format, Imported};
use crate::model::{ListFilter, ServerSpec};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The client's config file (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Codex or Gemini CLI).
    pub file: PathBuf,
    /// The file's format, when its path does not say (claude-desktop, claude-code, claude-user, cursor, vscode,
    /// windsurf, codex, gemini).
    #[arg(long)]
    pub format: Option<String>,
    /// Show what would be registered, renamed and asked for; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The client format to write.
    #[arg(long)]
    pub format: String,
    /// Write here instead of stdout (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ClientsArgs {
    #[arg(long)]
    pub json: bool,
}

fn home() -> anyhow::Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .context("HOME is not set; cannot look for client config files")
}

/// Reads, detects and parses a client file; the origin is its canonical path.
pub fn load(file: &Path, format: Option<&str>) -> anyhow::Result<(String, Imported)> {
    let origin = std::fs::canonicalize(file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let text = clientconfig::read(&origin)?;
    let format = match format {
        Some(f) => f.parse::<Format>()?,
        None => Format::detect(&origin, &text).with_context(|| {
            format!(
                "cannot tell which client {} belongs to; pass --format (one of {})",
                origin.display(),
                Format::ALL.map(|f| f.as_str()).join(", ")
            )
        })?,
    };
    let shown = origin.display().to_string();
    let imported = clientconfig::parse(format, &shown, &text, &Env::process(&origin))?;
    Ok((shown, imported))
}

/// Prints what a file holds (for `--dry-run`, and before applying).
fn print_import(imported: &Imported, json: bool) -> anyhow::Result<()> {
    if json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, imported)?;
        writeln!(out)?;
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{} ({}): {} servers",
        imported.file,
        imported.format,
        imported.servers.len()
    )?;
    for s in &imported.servers {
        let what = match s.spec.transport {
            crate::model::Transport::Stdio => format!(
                "{} {}",
                s.spec.command.as_deref().unwrap_or(""),
                s.spec.args.join(" ")
            ),
            t => format!("{} {}", t.as_str(), s.spec.url.as_deref().unwrap_or("")),
        };
        writeln!(out, "  {:<24} {}", s.spec.name, what.trim_end())?;
    }
    for r in &imported.renamed {
        writeln!(out, "renamed: {:?} -> {}", r.from, r.to)?;
    }
    for n in &imported.needs_input {
        writeln!(
            out,
            "needs_input: {} {} ({} in {}); set it with `agent-discover secrets set {} {}`",
            n.server, n.key, n.reference, n.field, n.server, n.key
        )?;
    }
    for w in &imported.warnings {
        writeln!(out, "warning: {w}")?;
    }
    Ok(())
}

pub fn import_dry_run(args: &ImportArgs) -> anyhow::Result<()> {
    let (_origin, imported) = load(&args.file, args.format.as_deref())?;
    print_import(&imported, args.json)
}

pub async fn export(app: &App, args: ExportArgs) -> anyhow::Result<()> {
    let format: Format = args.format.parse()?;
    let rows = app.registry.list(&ListFilter::default())?;
    let mut servers = Vec::with_capacity(rows.len());
    for r in rows {
        let s = r.server;
        let secret_keys = app.secrets.list(&s.name)?.into_iter().map(|m| m.key).collect();
        servers.push(ExportServer {
            spec: ServerSpec {
                name: s.name,
                description: s.description,
                source: s.source,
                command: s.command,
                args: s.args,
                env: s.env,
                tags: Vec::new(),
                transport: s.transport,
                url: s.url,
                headers: s.headers,
                ..ServerSpec::default()
            },
            secret_keys,
        });
    }
    let rendered = clientconfig::render(format, &servers)?;
    for s in &rendered.skipped {
        eprintln!("skipped {}: {}", s.server, s.reason);
    }
    match args.out {
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(rendered.text.as_bytes())?;
            out.flush()?;
        }
        Some(path) => {
            write_atomically(&path, rendered.text.as_bytes())?;
            eprintln!("wrote {} servers to {}", servers.len() - rendered.skipped.len(), path.display());
        }
    }
    Ok(())
}

/// Writes next to `path`, then renames over it, so a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp_name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    tmp_name.push(format!(".agent-discover-tmp-{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

pub fn clients(args: ClientsArgs) -> anyhow::Result<()> {
    let home = home()?;
    let cwd = std::env::current_dir()?;
    let mut rows = Vec::new();
    for k in clientconfig::known_files(&home, &cwd) {
        if !k.path.is_file() {
            continue;
        }
        let parsed = clientconfig::read(&k.path).and_then(|text| {
            clientconfig::parse(k.format, &k.path.display().to_string(), &text, &Env::process(&k.path))
        });
        let (servers, error) = match parsed {
            Ok(i) => (Some(i.servers.len()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        rows.push(json!({"client": k.client, "format": k.format, "scope": k.scope, "path": k.path,
            "servers": servers, "error": error}));
    }
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &rows)?;
        writeln!(out)?;
        return Ok(());
    }
    if rows.is_empty() {
        eprintln!("no MCP client config files found under {}", home.display());
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "{:<16} {:<8} {:>7}  PATH", "CLIENT", "SCOPE", "SERVERS")?;
    for r in rows {
        let count = match (&r["servers"], &r["error"]) {
            (serde_json::Value::Number(n), _) => n.to_string(),
            _ => "error".to_owned(),
        };
        writeln!(
            out,
            "{:<16} {:<8} {:>7}  {}",
            r["client"].as_str().unwrap_or(""),
            r["scope"].as_str().unwrap_or(""),
            count,
            r["path"].as_str().unwrap_or("")
        )?;
        if let Some(e) = r["error"].as_str() {
            writeln!(out, "    {e}")?;
        }
    }
    Ok(())
}

pub async fn import(_app: &App, args: ImportArgs) -> anyhow::Result<()> {
    if !args.dry_run {
        anyhow::bail!("importing needs apply_config");
    }
    import_dry_run(&args)
}
