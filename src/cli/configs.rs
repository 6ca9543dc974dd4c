//! CLI over client config files: `import`, `export`, `clients` and `connect` (thin over `crate::clientconfig` and `App`).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Value, json};
use std::time::Duration;

use crate::app::App;
use crate::clientconfig::{self, Env, ExportServer, Format, Imported};
use crate::configimport::Origin;
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
    /// Keep running and apply the file again after every save (debounced); a file that fails to parse is
    /// reported and the last good set stays. Prints one line per outcome on stdout.
    #[arg(long, conflicts_with = "dry_run")]
    pub watch: bool,
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
    let origin =
        std::fs::canonicalize(file).with_context(|| format!("cannot read {}", file.display()))?;
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
        let secret_keys = app
            .secrets
            .list(&s.name)?
            .into_iter()
            .map(|m| m.key)
            .collect();
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
            eprintln!(
                "wrote {} servers to {}",
                servers.len() - rendered.skipped.len(),
                path.display()
            );
        }
    }
    Ok(())
}

/// Writes next to `path`, then renames over it, so a reader never sees half a file.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut tmp_name = path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
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
            clientconfig::parse(
                k.format,
                &k.path.display().to_string(),
                &text,
                &Env::process(&k.path),
            )
        });
        let (servers, error) = match parsed {
            Ok(i) => (Some(i.servers.len()), None),
            Err(e) => (None, Some(e.to_string())),
        };
        rows.push(
            json!({"client": k.client, "format": k.format, "scope": k.scope, "path": k.path,
            "servers": servers, "error": error}),
        );
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
    writeln!(
        out,
        "{:<16} {:<8} {:>7}  PATH",
        "CLIENT", "SCOPE", "SERVERS"
    )?;
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

/// Applies through the domain layer under the file's origin (its canonical path); one `{name, action, state, ...}`
/// per server.
pub async fn apply(app: &App, imported: &Imported) -> anyhow::Result<Vec<Value>> {
    Ok(app
        .import_client_config(imported, Origin::File(&imported.file))
        .await?
        .into_iter()
        .map(|r| json!(r))
        .collect())
}

pub async fn import(app: &App, args: ImportArgs) -> anyhow::Result<()> {
    if args.dry_run {
        return import_dry_run(&args);
    }
    let (origin, imported) = load(&args.file, args.format.as_deref())?;
    let results = apply(app, &imported).await?;
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(
            &mut out,
            &json!({"file": origin, "format": imported.format, "results": results,
                "renamed": imported.renamed, "needs_input": imported.needs_input, "warnings": imported.warnings}),
        )?;
        writeln!(out)?;
    } else {
        print_import(&imported, false)?;
        let added = results.iter().filter(|r| r["action"] == "added").count();
        let updated = results.iter().filter(|r| r["action"] == "updated").count();
        let refused: Vec<&Value> = results
            .iter()
            .filter(|r| r["action"] == "refused")
            .collect();
        eprintln!(
            "imported {} servers from {origin}: {added} added, {updated} updated, {} unchanged, {} refused",
            results.len(),
            results.len() - added - updated - refused.len(),
            refused.len()
        );
        for r in refused {
            eprintln!(
                "refused {}: {}",
                r["name"].as_str().unwrap_or(""),
                r["error"]["message"].as_str().unwrap_or("")
            );
        }
    }
    if !args.json {
        let stored = prompt_missing(app, &imported)?;
        if stored > 0 {
            eprintln!("stored {stored} secrets");
        }
    }
    if args.watch {
        let format = imported.format;
        return watch(app, Path::new(&origin), format).await;
    }
    Ok(())
}

/// How long a file must stay quiet after a change before it is read: editors write twice and rename.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

/// Applies `file` again after every change until Ctrl-C. One stdout line per outcome:
/// `applied N servers: a, b`, `error: ...` (the last good set stays), `deleted: FILE`.
async fn watch(app: &App, file: &Path, format: Format) -> anyhow::Result<()> {
    use notify::Watcher;
    let dir = file
        .parent()
        .context("the file has no directory")?
        .to_path_buf();
    let name = file
        .file_name()
        .context("the file has no name")?
        .to_os_string();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let _ = tx.send(res);
    })
    .context("cannot watch files on this system")?;
    // The directory, not the file: a save by rename replaces the file's inode.
    watcher
        .watch(&dir, notify::RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", dir.display()))?;
    let mut last_text = std::fs::read_to_string(file).ok();
    let shown = file.display().to_string();
    // Signal handlers before the announcement: once it is out, a SIGTERM must stop the watch cleanly.
    let shutdown = crate::mcp::shutdown_signal();
    say(&format!("watching {shown}"));
    let concerns = |res: &notify::Result<notify::Event>| match res {
        Ok(ev) => ev
            .paths
            .iter()
            .any(|p| p.file_name() == Some(name.as_os_str())),
        Err(_) => true,
    };
    tokio::pin!(shutdown);
    loop {
        let first = tokio::select! {
            ev = rx.recv() => ev,
            _ = &mut shutdown => return Ok(()),
        };
        let Some(first) = first else {
            anyhow::bail!("the file watcher stopped");
        };
        if !concerns(&first) {
            continue;
        }
        // Debounce: wait until no event has arrived for DEBOUNCE.
        while let Ok(Some(_)) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if last_text.take().is_some() {
                    say(&format!("deleted: {shown}; the servers it registered stay"));
                }
                continue;
            }
            Err(e) => {
                say(&format!(
                    "error: {shown}: cannot read: {e}; the last good set stays"
                ));
                continue;
            }
        };
        if last_text.as_deref() == Some(text.as_str()) {
            continue;
        }
        let parsed = if text.len() as u64 > clientconfig::MAX_FILE_BYTES {
            clientconfig::read(file)
                .and_then(|t| clientconfig::parse(format, &shown, &t, &Env::process(file)))
        } else {
            clientconfig::parse(format, &shown, &text, &Env::process(file))
        };
        last_text = Some(text);
        let applied = match parsed {
            Ok(i) => apply(app, &i).await.map(|r| (i, r)),
            Err(e) => Err(e.into()),
        };
        match applied {
            Ok((imported, results)) => {
                let names: Vec<&str> = imported
                    .servers
                    .iter()
                    .map(|s| s.spec.name.as_str())
                    .collect();
                say(&format!(
                    "applied {} servers: {}",
                    results.len(),
                    names.join(", ")
                ));
                for n in &imported.needs_input {
                    say(&format!(
                        "needs_input: {} {} ({})",
                        n.server, n.key, n.reference
                    ));
                }
            }
            Err(e) => say(&format!("error: {e:#}; the last good set stays")),
        }
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[derive(Debug, clap::Args)]
pub struct ConnectArgs {
    /// The client: claude-desktop, claude-code, cursor, vscode, windsurf, codex or gemini.
    #[arg(long)]
    pub client: String,
    /// Put the client's file back as it was before `connect` (from the newest backup).
    #[arg(long)]
    pub undo: bool,
    /// Launch agent-discover serving only this profile (`mcp --profile NAME`). On a file that already launches
    /// agent-discover, only the launch line changes.
    #[arg(long, value_name = "NAME", conflicts_with = "undo")]
    pub profile: Option<String>,
}

/// The client's config file: the first that exists, user scope before project scope.
fn client_file(client: &str) -> anyhow::Result<clientconfig::KnownFile> {
    if !clientconfig::CLIENTS.contains(&client) {
        anyhow::bail!(
            "unknown client {client:?}; expected one of {}",
            clientconfig::CLIENTS.join(", ")
        );
    }
    let home = home()?;
    let cwd = std::env::current_dir()?;
    let candidates: Vec<_> = clientconfig::known_files(&home, &cwd)
        .into_iter()
        .filter(|k| k.client == client)
        .collect();
    let looked: Vec<String> = candidates
        .iter()
        .map(|k| k.path.display().to_string())
        .collect();
    candidates
        .into_iter()
        .find(|k| k.path.is_file())
        .with_context(|| {
            format!(
                "no {client} config file found (looked at {})",
                looked.join(", ")
            )
        })
}

pub async fn connect(app: &App, args: ConnectArgs) -> anyhow::Result<()> {
    let known = client_file(&args.client)?;
    let path = known.path.canonicalize()?;
    if args.undo {
        let backup = clientconfig::latest_backup(&path)?.with_context(|| {
            format!("no agent-discover backup of {} to restore", path.display())
        })?;
        let bytes = std::fs::read(&backup)?;
        write_atomically(&path, &bytes)?;
        std::fs::remove_file(&backup)?;
        say(&format!(
            "restored {} from {}",
            path.display(),
            backup.display()
        ));
        return Ok(());
    }
    // The profile must exist before the file changes.
    if let Some(p) = &args.profile {
        app.profile(p)?;
    }
    let (origin, imported) = load(&path, Some(known.format.as_str()))?;
    let connected =
        imported.servers.len() == 1 && imported.servers[0].spec.name == clientconfig::SELF_NAME;
    if let (true, Some(profile)) = (connected, &args.profile) {
        return connect_profile(&path, known.format, profile, &args.client);
    }
    if connected {
        anyhow::bail!(
            "{origin} already launches agent-discover (undo with `agent-discover connect --client {} --undo`)",
            args.client
        );
    }
    let results = apply(app, &imported).await?;
    print_import(&imported, false)?;
    prompt_missing(app, &imported)?;
    let original = std::fs::read(&path)?;
    let text = String::from_utf8(original.clone()).context("the file is not UTF-8")?;
    let exe = std::env::current_exe()?.display().to_string();
    let launch = launch_args(args.profile.as_deref());
    let rewritten = clientconfig::connect_rewrite_args(known.format, &text, &exe, &launch)?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let backup = clientconfig::backup_path(&path, now_ms);
    std::fs::write(&backup, &original)
        .with_context(|| format!("cannot write the backup {}", backup.display()))?;
    write_atomically(&path, rewritten.as_bytes())?;
    say(&format!(
        "imported {} servers; {} now launches agent-discover; backup at {} (undo: agent-discover connect --client {} --undo)",
        results.len(),
        path.display(),
        backup.display(),
        args.client
    ));
    Ok(())
}

/// How a connected client launches agent-discover: `mcp`, or `mcp --profile NAME`.
fn launch_args(profile: Option<&str>) -> Vec<&str> {
    match profile {
        Some(p) => vec!["mcp", "--profile", p],
        None => vec!["mcp"],
    }
}

/// A file that already launches agent-discover, made to launch it with a profile (a backup first, as `connect`).
fn connect_profile(
    path: &std::path::Path,
    format: clientconfig::Format,
    profile: &str,
    client: &str,
) -> anyhow::Result<()> {
    let original = std::fs::read(path)?;
    let text = String::from_utf8(original.clone()).context("the file is not UTF-8")?;
    let exe = std::env::current_exe()?.display().to_string();
    let rewritten =
        clientconfig::connect_rewrite_args(format, &text, &exe, &launch_args(Some(profile)))?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let backup = clientconfig::backup_path(path, now_ms);
    std::fs::write(&backup, &original)
        .with_context(|| format!("cannot write the backup {}", backup.display()))?;
    write_atomically(path, rewritten.as_bytes())?;
    say(&format!(
        "{} now launches agent-discover with the profile {profile}; backup at {} (undo: agent-discover connect --client {client} --undo)",
        path.display(),
        backup.display(),
    ));
    Ok(())
}

/// On a terminal, asks for each value the file references but the environment lacks (input hidden); an empty
/// answer skips it. Elsewhere asks nothing (the values stay reported as `needs_input`). Returns how many were stored.
fn prompt_missing(app: &App, imported: &Imported) -> anyhow::Result<usize> {
    use std::io::{BufRead, IsTerminal};
    let stdin = std::io::stdin();
    if imported.needs_input.is_empty() || !stdin.is_terminal() {
        return Ok(0);
    }
    let mut asked = std::collections::BTreeSet::new();
    let mut stored = 0;
    for n in &imported.needs_input {
        if !asked.insert((n.server.clone(), n.key.clone())) {
            continue;
        }
        let about = n
            .description
            .as_deref()
            .map(|d| format!(", {d}"))
            .unwrap_or_default();
        eprint!(
            "{} {} ({}{about}); empty to skip: ",
            n.server, n.key, n.reference
        );
        let _ = std::io::stderr().flush();
        let echo = EchoOff::new();
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        drop(echo);
        eprintln!();
        let value = line.trim_end_matches(['\r', '\n']);
        if value.is_empty() {
            continue;
        }
        app.secrets.set(&n.server, &n.key, value)?;
        stored += 1;
    }
    Ok(stored)
}

/// Turns terminal echo off on stdin for as long as it lives.
#[cfg(unix)]
struct EchoOff(Option<libc::termios>);

#[cfg(unix)]
impl EchoOff {
    fn new() -> EchoOff {
        // SAFETY: tcgetattr/tcsetattr on fd 0 with a zeroed termios they fill in; failures leave echo as it was.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return EchoOff(None);
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
                return EchoOff(None);
            }
            EchoOff(Some(saved))
        }
    }
}

#[cfg(unix)]
impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(saved) = self.0 {
            // SAFETY: restores the attributes read in `new`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, &saved);
            }
        }
    }
}

/// Turns console echo off on stdin for as long as it lives (the console mode's `ENABLE_ECHO_INPUT`).
#[cfg(windows)]
struct EchoOff(Option<u32>);

#[cfg(windows)]
impl EchoOff {
    fn new() -> EchoOff {
        use windows_sys::Win32::System::Console::{
            ENABLE_ECHO_INPUT, GetConsoleMode, GetStdHandle, STD_INPUT_HANDLE, SetConsoleMode,
        };
        // SAFETY: the standard input handle and a mode word we own; failures leave echo as it was.
        unsafe {
            let h = GetStdHandle(STD_INPUT_HANDLE);
            let mut mode = 0u32;
            if GetConsoleMode(h, &mut mode) == 0
                || SetConsoleMode(h, mode & !ENABLE_ECHO_INPUT) == 0
            {
                return EchoOff(None);
            }
            EchoOff(Some(mode))
        }
    }
}

#[cfg(windows)]
impl Drop for EchoOff {
    fn drop(&mut self) {
        use windows_sys::Win32::System::Console::{GetStdHandle, STD_INPUT_HANDLE, SetConsoleMode};
        if let Some(mode) = self.0 {
            // SAFETY: restores the mode read in `new`.
            unsafe {
                SetConsoleMode(GetStdHandle(STD_INPUT_HANDLE), mode);
            }
        }
    }
}
