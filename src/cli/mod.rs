//! The command line: clap types and one function per subcommand over the same domain services the MCP tool uses.
//!
//! Data goes to stdout (a table, or JSON with `--json`); everything else goes to stderr.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use crate::app::App;
use crate::config::Config;
use crate::model::{ListFilter, ServerSpec, Source, Transport};

mod agents;
mod auth;
mod configs;
mod dashboard;
mod introspect;
mod model;
mod tools;

pub use dashboard::{DashboardArgs, ENV_DASHBOARD};
use dashboard::{dashboard_calls, dashboard_disabled_by_env, dashboard_security, lead_dashboard};

#[derive(Debug, Parser)]
#[command(
    name = "agent-discover",
    version,
    about = "MCP server registry, marketplace and proxy"
)]
pub struct Cli {
    /// Directory for the database and other state (default: the platform data dir; env AGENT_DISCOVER_DATA_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// A shared PostgreSQL registry for a team's replicas, `postgres://…` (env AGENT_DISCOVER_DATABASE_URL; default:
    /// the embedded SQLite file in the data dir).
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP on stdin/stdout (what an MCP client launches); the first such process also serves the dashboard.
    Mcp {
        /// `dynamic`: active servers' tools appear in tools/list; `static`: only the `registry` tool (use `proxy_call`).
        #[arg(long, value_enum, default_value_t = crate::mcp::ToolsMode::Dynamic)]
        tools_mode: crate::mcp::ToolsMode,
        /// Do not try to serve the dashboard (also AGENT_DISCOVER_DASHBOARD=off).
        #[arg(long)]
        no_dashboard: bool,
        #[command(flatten)]
        dashboard: DashboardArgs,
        /// Expose only this registered server, as itself: its own tool and prompt names and resource URIs
        /// (activated on first use).
        #[arg(long, value_name = "NAME")]
        server: Option<String>,
    },
    /// Serve the dashboard, the REST API and MCP over Streamable HTTP (at /mcp); prints the URL on stdout.
    Serve {
        /// `dynamic`: active servers' tools appear in tools/list; `static`: only the `registry` tool (use `proxy_call`).
        #[arg(long, value_enum, default_value_t = crate::mcp::ToolsMode::Dynamic)]
        tools_mode: crate::mcp::ToolsMode,
        #[command(flatten)]
        dashboard: DashboardArgs,
    },
    /// List registered servers.
    List {
        /// Full-text search over names, descriptions and tags.
        #[arg(long, short)]
        query: Option<String>,
        /// Only servers from this source (manual, local, registry, npm, pypi, smithery).
        #[arg(long)]
        source: Option<String>,
        /// Only installed servers.
        #[arg(long)]
        installed: bool,
        #[arg(long)]
        json: bool,
    },
    /// Register a server: `agent-discover add NAME -- COMMAND [ARGS...]`, or `--url` for a remote one.
    Add {
        name: String,
        #[arg(long, short, default_value = "")]
        description: String,
        /// Tag (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Environment variable KEY=VALUE (repeatable).
        #[arg(long = "env", value_parser = parse_kv)]
        env: Vec<(String, String)>,
        /// stdio (default), streamable-http or sse.
        #[arg(long, default_value = "stdio")]
        transport: String,
        /// URL of a remote server.
        #[arg(long)]
        url: Option<String>,
        /// HTTP header KEY=VALUE for a remote server (repeatable).
        #[arg(long = "header", value_parser = parse_kv)]
        headers: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
        /// The program and its arguments, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Search the marketplace (official MCP registry, npm, PyPI).
    Browse {
        #[arg(default_value = "")]
        query: String,
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        cursor: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Install a server from the marketplace (npx, uvx, docker or remote), asking for required values.
    Install {
        name: String,
        /// A required value KEY=VALUE (repeatable); missing ones are asked for on a terminal.
        #[arg(long = "input", value_parser = parse_kv)]
        inputs: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
    },
    /// Find the tool for a task across every known server (BM25, plus embeddings when available).
    Find {
        query: String,
        #[arg(long, default_value_t = 5)]
        limit: usize,
        /// Also start the owning server (it stays flagged active).
        #[arg(long)]
        activate: bool,
        #[arg(long)]
        json: bool,
    },
    /// Remove a server with its tools, secrets and metrics.
    Remove {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Show one server and its tools.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Start a server once to check it and record its tools, and flag it active so every agent-discover process runs it.
    Activate {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Clear a server's active flag (and stop it if it runs in this process).
    Deactivate {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Start a disabled server again with its last configuration (and check that it comes up).
    Enable {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Stop a server and keep it from being started (by agents, restore or health checks) until enabled; its
    /// entry, secrets and tokens stay.
    Disable {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Per-server secrets, encrypted at rest and shown masked.
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// What is registered, active and failing, with call metrics, the search mode, and the recent calls of the
    /// agent-discover that serves the dashboard on this database (each process keeps its own call log in memory).
    Status {
        #[arg(long)]
        json: bool,
        /// Where to look for the dashboard's call log.
        #[arg(long, env = "AGENT_DISCOVER_PORT", default_value_t = crate::http::DEFAULT_PORT)]
        port: u16,
    },
    /// Import the servers of an MCP client's config file (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf,
    /// Codex, Gemini CLI).
    Import(configs::ImportArgs),
    /// Write the registered servers in a client's config format (secrets as variable references, never values).
    Export(configs::ExportArgs),
    /// Which MCP client config files exist on this machine, with their server counts.
    Clients(configs::ClientsArgs),
    /// Import a client's servers, then rewrite its config file so it launches agent-discover instead (a
    /// timestamped backup is kept; `--undo` restores it).
    Connect(configs::ConnectArgs),
    /// Tool pinning and filters: review and approve tools whose definition changed, set allow/deny patterns.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Install, start and enumerate many MCP packages (npm, PyPI, registry entries, the most downloaded), filing each
    /// under one failure category with evidence and a fix hint; enumerated tools join the searchable catalog.
    Introspect(introspect::IntrospectArgs),
    /// The introspection catalog: stored records, and re-introspection of what changed.
    #[command(subcommand)]
    Catalog(introspect::CatalogCommand),
    /// The local embedding model behind semantic search: status, install (download now), remove.
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Copy a personal registry into a team's: `migrate --from sqlite:PATH --to postgres://…`. Secrets are re-sealed
    /// with the team's key (AGENT_DISCOVER_MASTER_KEY); servers the team already has are skipped (or `--replace`d);
    /// copied servers start inactive. Running it again copies nothing new.
    Migrate {
        /// The personal registry, `sqlite:PATH` (PATH is its agent-discover.db file).
        #[arg(long)]
        from: String,
        /// The team registry, `postgres://…`.
        #[arg(long)]
        to: String,
        /// The personal master key file (default: secrets.key next to the SQLite file).
        #[arg(long, value_name = "FILE")]
        from_key_file: Option<PathBuf>,
        /// Replace servers of the same name in the team registry instead of skipping them.
        #[arg(long)]
        replace: bool,
        #[arg(long)]
        json: bool,
    },
    /// Authorize agent-discover for a remote server (OAuth): prints the URL to open and waits for the callback
    /// (listening on the redirect URI itself when no dashboard runs); `--finish` completes by hand, `--logout` forgets.
    Auth(auth::AuthArgs),
    /// Call any tool through the proxy (`SERVER__TOOL`) and print the result.
    Call(auth::CallArgs),
    /// A2A agents to discover and delegate to: add (a card URL, or `-- COMMAND` for a local worker), list, remove.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Set a secret; without VALUE it is read from stdin (so it stays out of shell history).
    Set {
        name: String,
        key: String,
        value: Option<String>,
    },
    /// Delete a secret.
    Rm { name: String, key: String },
    /// List a server's secrets, masked.
    Ls {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    if let Command::Migrate {
        from,
        to,
        from_key_file,
        replace,
        json,
    } = cli.command
    {
        return migrate(
            crate::migrate::MigrateRequest {
                from,
                to,
                from_key_file,
                replace,
            },
            json,
        )
        .await;
    }
    let config = Config::resolve(cli.data_dir.as_deref(), cli.database_url.as_deref())?;
    let app = App::open(config.clone())
        .with_context(|| format!("cannot open the registry at {}", config.db_path.display()))?;
    match cli.command {
        Command::Mcp {
            tools_mode,
            no_dashboard,
            dashboard,
            server,
        } => {
            app.search.start_model_download();
            if !no_dashboard && !dashboard_disabled_by_env() {
                lead_dashboard(&app, &dashboard, tools_mode).await;
            }
            match server {
                Some(name) => crate::mcp::serve_stdio_server(app, name).await,
                None => crate::mcp::serve_stdio(app, tools_mode).await,
            }
        }
        Command::Serve {
            tools_mode,
            dashboard,
        } => {
            let listener = tokio::net::TcpListener::bind((dashboard.host, dashboard.port))
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {}:{} (is another agent-discover serving it? try --port)",
                        dashboard.host, dashboard.port
                    )
                })?;
            let addr = listener.local_addr()?;
            let security = dashboard_security(&dashboard, addr, &config)?;
            // Signal handlers first: once the URL is out, a SIGTERM must stop the server cleanly.
            let shutdown = crate::mcp::shutdown_signal();
            // The URL is this command's output (tests and scripts read it; --port 0 picks the port).
            {
                let mut out = std::io::stdout().lock();
                writeln!(out, "http://{addr}/")?;
                out.flush()?;
            }
            eprintln!(
                "agent-discover dashboard at http://{addr}/ — REST at /api, MCP over Streamable HTTP at /mcp, metrics at /metrics; Ctrl-C stops"
            );
            app.proxy.restore_in_background(app.config.team);
            app.search.start_model_download();
            let served =
                crate::http::serve(listener, app.clone(), security, tools_mode, shutdown).await;
            app.proxy.shutdown().await;
            served.context("the dashboard server failed")
        }
        Command::List {
            query,
            source,
            installed,
            json,
        } => {
            let source = source.map(|s| s.parse::<Source>()).transpose()?;
            let rows = app.registry.list(&ListFilter {
                query,
                source,
                installed_only: installed,
            })?;
            if json {
                return print_json(&serde_json::to_value(&rows)?);
            }
            let mut out = std::io::stdout().lock();
            if rows.is_empty() {
                eprintln!(
                    "no servers registered; add one with `agent-discover add NAME -- COMMAND [ARGS...]`"
                );
                return Ok(());
            }
            writeln!(
                out,
                "{:<24} {:<16} {:<7} {:<14} {:>5}  {:<9} DESCRIPTION",
                "NAME", "TRANSPORT", "ACTIVE", "STATUS", "TOOLS", "SOURCE"
            )?;
            for r in rows {
                let s = r.server;
                writeln!(
                    out,
                    "{:<24} {:<16} {:<7} {:<14} {:>5}  {:<9} {}",
                    s.name,
                    s.transport.as_str(),
                    if s.active { "yes" } else { "no" },
                    s.status.as_str(),
                    r.tool_count,
                    s.source.as_str(),
                    one_line(&s.description, 60)
                )?;
            }
            Ok(())
        }
        Command::Add {
            name,
            description,
            tags,
            env,
            transport,
            url,
            headers,
            json,
            command,
        } => {
            let transport: Transport = transport.parse()?;
            let mut command = command.into_iter();
            let spec = ServerSpec {
                name,
                description,
                source: Source::Manual,
                command: command.next(),
                args: command.collect(),
                env: env.into_iter().collect::<BTreeMap<_, _>>(),
                tags,
                transport,
                url,
                headers: headers.into_iter().collect(),
                ..Default::default()
            };
            let server = app.registry.register(spec)?;
            if json {
                return print_json(&serde_json::to_value(&server)?);
            }
            println!("{}", server.name);
            eprintln!("registered `{}` (id {})", server.name, server.id);
            Ok(())
        }
        Command::Remove { name, json } => {
            app.uninstall(&name).await?;
            if json {
                return print_json(&json!({"status": "removed", "name": name}));
            }
            eprintln!("removed `{name}`");
            Ok(())
        }
        Command::Show { name, json } => {
            let server = app.registry.get(&name)?;
            let tools = app.registry.tools(server.id)?;
            if json {
                let mut v = serde_json::to_value(&server)?;
                v["tools"] = serde_json::to_value(&tools)?;
                return print_json(&v);
            }
            let mut out = std::io::stdout().lock();
            writeln!(out, "name:        {}", server.name)?;
            writeln!(out, "description: {}", server.description)?;
            writeln!(out, "transport:   {}", server.transport.as_str())?;
            if let Some(c) = &server.command {
                writeln!(out, "command:     {} {}", c, server.args.join(" "))?;
            }
            if let Some(u) = &server.url {
                writeln!(out, "url:         {u}")?;
            }
            writeln!(out, "source:      {}", server.source.as_str())?;
            writeln!(out, "active:      {}", server.active)?;
            writeln!(out, "health:      {}", server.health_status.as_str())?;
            if !server.tags.is_empty() {
                writeln!(out, "tags:        {}", server.tags.join(", "))?;
            }
            writeln!(out, "tools:       {}", tools.len())?;
            for t in tools {
                writeln!(out, "  {:<30} {}", t.name, one_line(&t.description, 70))?;
            }
            Ok(())
        }
        Command::Browse {
            query,
            limit,
            cursor,
            json,
        } => {
            let market = app.marketplace()?;
            let progress =
                (!json).then(|| spinner("asking the official MCP registry, npm and PyPI"));
            let res = market
                .browse(&query, limit.clamp(1, 100), cursor.as_deref())
                .await;
            if let Some(p) = progress {
                p.abort();
                eprint!("\r\x1b[2K");
            }
            if json {
                return print_json(&serde_json::to_value(&res)?);
            }
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:<45} {:<12} {:<8} {:<8} DESCRIPTION",
                "NAME", "VERSION", "SOURCE", "INSTALL"
            )?;
            for e in &res.servers {
                let method = e
                    .install_method
                    .map(|m| {
                        serde_json::to_value(m)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default()
                    })
                    .unwrap_or_else(|| "-".into());
                writeln!(
                    out,
                    "{:<45} {:<12} {:<8} {:<8} {}",
                    e.name,
                    e.version.as_deref().unwrap_or("-"),
                    e.source.as_str(),
                    method,
                    one_line(&e.description, 60)
                )?;
            }
            for s in res.sources.iter().filter(|s| !s.ok) {
                eprintln!(
                    "warning: {} failed: {}",
                    s.source.as_str(),
                    s.error.as_deref().unwrap_or("unknown error")
                );
            }
            if let Some(c) = res.next_cursor {
                eprintln!("more: agent-discover browse {query:?} --cursor {c}");
            }
            Ok(())
        }
        Command::Install { name, inputs, json } => {
            let mut inputs: BTreeMap<String, String> = inputs.into_iter().collect();
            let mut outcome = crate::install::install(&app, &name, &inputs).await?;
            if let crate::install::InstallOutcome::NeedsInput { missing, .. } = &outcome {
                use std::io::IsTerminal;
                if !json && std::io::stdin().is_terminal() {
                    for m in missing {
                        eprint!(
                            "{}{} ({}): ",
                            m.name,
                            if m.is_secret { " [secret]" } else { "" },
                            m.description
                        );
                        let mut v = String::new();
                        std::io::stdin().read_line(&mut v)?;
                        inputs.insert(m.name.clone(), v.trim_end_matches(['\r', '\n']).to_owned());
                    }
                    outcome = crate::install::install(&app, &name, &inputs).await?;
                }
            }
            if json {
                return print_json(&serde_json::to_value(&outcome)?);
            }
            match outcome {
                crate::install::InstallOutcome::Installed {
                    server,
                    command,
                    args,
                    url,
                    warming,
                    ..
                } => {
                    println!("{server}");
                    eprintln!(
                        "installed `{server}`: {}",
                        url.unwrap_or_else(|| format!(
                            "{} {}",
                            command.unwrap_or_default(),
                            args.join(" ")
                        ))
                    );
                    if let Some(w) = warming {
                        eprintln!("warming the package cache in the background: {w}");
                    }
                    Ok(())
                }
                crate::install::InstallOutcome::NeedsInput { missing, .. } => {
                    let names: Vec<String> = missing
                        .iter()
                        .map(|m| format!("--input {}=...", m.name))
                        .collect();
                    anyhow::bail!("`{name}` needs values: {}", names.join(" "))
                }
            }
        }
        Command::Find {
            query,
            limit,
            activate,
            json,
        } => {
            let outcome = app.find_tool(&query, limit, activate).await;
            app.proxy.shutdown().await;
            let v = serde_json::to_value(outcome?)?;
            if json {
                return print_json(&v);
            }
            let mut out = std::io::stdout().lock();
            if v["found"] != true {
                anyhow::bail!(
                    "no good match (top score {}): {}",
                    v["top_score"],
                    v["hint"].as_str().unwrap_or_default()
                );
            }
            writeln!(
                out,
                "{}  (score {}, {} confidence)",
                v["call_as"].as_str().unwrap_or_default(),
                v["score"],
                v["confidence"].as_str().unwrap_or_default()
            )?;
            writeln!(
                out,
                "  {}",
                one_line(v["description"].as_str().unwrap_or_default(), 100)
            )?;
            for a in v["required_args"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "  required: {} ({})",
                    a["name"].as_str().unwrap_or_default(),
                    a["type"]
                )?;
            }
            for m in v["other_matches"].as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "also: {}  (score {})",
                    m["call_as"].as_str().unwrap_or_default(),
                    m["score"]
                )?;
            }
            Ok(())
        }
        Command::Activate { name, json } => {
            let act = app.proxy.activate(&name).await;
            // The flag stays set: every agent-discover process restores the server; this one stops its copy now.
            app.proxy.shutdown().await;
            let act = act?;
            if json {
                return print_json(&serde_json::to_value(&act)?);
            }
            eprintln!(
                "activated `{}` ({} tools); agent-discover processes start it from now on",
                act.name,
                act.tools.len()
            );
            let mut out = std::io::stdout().lock();
            for t in act.tools {
                writeln!(
                    out,
                    "{:<40} {}",
                    crate::proxy::names::expose(&name, &t.name),
                    one_line(&t.description, 70)
                )?;
            }
            Ok(())
        }
        Command::Deactivate { name, json } => {
            let server = app.registry.get(&name)?;
            let was = app.proxy.deactivate(&name).await? || server.active;
            app.registry.set_active(server.id, false, None)?;
            if json {
                return print_json(
                    &json!({"status": if was { "deactivated" } else { "not_active" }, "name": name}),
                );
            }
            eprintln!(
                "{} `{name}`",
                if was {
                    "deactivated"
                } else {
                    "was not active:"
                }
            );
            Ok(())
        }
        Command::Secrets(cmd) => match cmd {
            SecretsCommand::Set { name, key, value } => {
                let value = match value {
                    Some(v) => v,
                    None => {
                        let mut v = String::new();
                        std::io::stdin().read_line(&mut v)?;
                        v.trim_end_matches(['\r', '\n']).to_owned()
                    }
                };
                app.secrets.set(&name, &key, &value)?;
                eprintln!(
                    "set `{key}` for `{name}` ({})",
                    crate::secrets::mask(&value)
                );
                Ok(())
            }
            SecretsCommand::Rm { name, key } => {
                if !app.secrets.delete(&name, &key)? {
                    anyhow::bail!("server `{name}` has no secret `{key}`");
                }
                eprintln!("removed `{key}` from `{name}`");
                Ok(())
            }
            SecretsCommand::Ls { name, json } => {
                let list = app.secrets.list(&name)?;
                if json {
                    return print_json(&serde_json::to_value(&list)?);
                }
                let mut out = std::io::stdout().lock();
                for s in list {
                    writeln!(out, "{:<32} {:<12} {}", s.key, s.masked_value, s.updated_at)?;
                }
                Ok(())
            }
        },
        Command::Enable { name, json } => {
            let r = app.enable(&name).await;
            // Like `activate`: the flag stays set for the agent-discover processes; this one stops its copy now.
            app.proxy.shutdown().await;
            let r = r?;
            if json {
                return print_json(&serde_json::to_value(&r)?);
            }
            match &r.state {
                crate::lifecycle::ServerState::Ready { tool_count } => {
                    eprintln!("enabled `{name}` ({tool_count} tools)");
                    Ok(())
                }
                crate::lifecycle::ServerState::Authenticating { auth_url } => {
                    eprintln!("enabled `{name}`; it needs authorization: open {auth_url}");
                    Ok(())
                }
                crate::lifecycle::ServerState::Error { error } => Err(anyhow::anyhow!(
                    "enabled `{name}`, but it failed to start ({}): {}",
                    error.kind.as_str(),
                    error.message
                )),
                _ => Ok(()),
            }
        }
        Command::Disable { name, json } => {
            let changed = app.disable(&name).await?;
            let status = if changed {
                "disabled"
            } else {
                "already_disabled"
            };
            if json {
                return print_json(&json!({"status": status, "name": name}));
            }
            eprintln!("{status}: `{name}`");
            Ok(())
        }
        Command::Import(args) => configs::import(&app, args).await,
        Command::Export(args) => configs::export(&app, args).await,
        Command::Clients(args) => configs::clients(args),
        Command::Connect(args) => configs::connect(&app, args).await,
        Command::Status { json, port } => {
            let rows = app.registry.list(&ListFilter::default())?;
            let metrics = app.registry.store().metrics_overview()?;
            let calls = dashboard_calls(&app, port).await;
            if json {
                return print_json(&json!({
                    "version": env!("CARGO_PKG_VERSION"),
                    "db_path": app.config.db_path,
                    "servers": rows.iter().map(|r| json!({"name": r.server.name, "active": r.server.active, "status": r.server.status, "origin": r.server.origin, "tool_count": r.tool_count,
                        "health_status": r.server.health_status, "last_error": r.server.last_error, "authUrl": r.auth_url})).collect::<Vec<_>>(),
                    "metrics": metrics,
                    "search": app.search.status(),
                    "calls": calls,
                }));
            }
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "agent-discover {} — {}",
                env!("CARGO_PKG_VERSION"),
                app.config.db_path.display()
            )?;
            writeln!(
                out,
                "{} servers, {} active",
                rows.len(),
                rows.iter().filter(|r| r.server.active).count()
            )?;
            for r in rows.iter().filter(|r| r.auth_url.is_some()) {
                writeln!(
                    out,
                    "  {:<24} authenticating: open {} (or `agent-discover auth {}`)",
                    r.server.name,
                    r.auth_url.as_deref().unwrap_or_default(),
                    r.server.name
                )?;
            }
            for r in rows.iter().filter(|r| {
                r.server.active
                    || r.server.last_error.is_some()
                    || r.server.status != crate::model::ServerStatus::Stopped
            }) {
                writeln!(
                    out,
                    "  {:<24} {:<14} {:>4} tools  {}",
                    r.server.name,
                    r.server.status.as_str(),
                    r.tool_count,
                    r.server
                        .last_error
                        .as_deref()
                        .map(|e| one_line(e, 60))
                        .unwrap_or_default()
                )?;
            }
            for m in metrics {
                writeln!(
                    out,
                    "  calls {:<18} {:>6} calls {:>4} errors {:>8.1} ms avg",
                    m.server_name, m.total_calls, m.total_errors, m.avg_latency_ms
                )?;
            }
            let search = app.search.status();
            writeln!(
                out,
                "search: {}{}",
                if search["hybrid"] == true {
                    "hybrid (BM25 + embeddings)"
                } else {
                    "BM25"
                },
                search["fallback_reason"]
                    .as_str()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            )?;
            match calls {
                Value::Object(c) if c.contains_key("entries") => {
                    writeln!(
                        out,
                        "recent calls (the agent-discover serving {}):",
                        c["from"].as_str().unwrap_or_default()
                    )?;
                    for e in c["entries"].as_array().into_iter().flatten() {
                        writeln!(
                            out,
                            "  {} {}__{} {} ms {}",
                            e["timestamp"].as_str().unwrap_or_default(),
                            e["server"].as_str().unwrap_or_default(),
                            e["tool"].as_str().unwrap_or_default(),
                            e["latency_ms"],
                            if e["success"] == true { "ok" } else { "error" }
                        )?;
                    }
                }
                other => writeln!(
                    out,
                    "recent calls: {}",
                    other["unavailable"].as_str().unwrap_or_default()
                )?,
            }
            Ok(())
        }
        Command::Migrate { .. } => unreachable!("handled above"),
        Command::Tools(cmd) => tools::run(&app, cmd).await,
        Command::Introspect(args) => introspect::run(&app, args).await,
        Command::Catalog(cmd) => introspect::catalog_cmd(&app, cmd).await,
        Command::Model(cmd) => model::run(cmd).await,
        Command::Auth(args) => auth::auth(&app, args).await,
        Command::Call(args) => auth::call(&app, args).await,
        Command::Agents(cmd) => agents::run(&app, cmd).await,
    }
}

async fn migrate(req: crate::migrate::MigrateRequest, json: bool) -> anyhow::Result<()> {
    let report = tokio::task::spawn_blocking(move || crate::migrate::migrate(&req)).await??;
    if json {
        return print_json(&serde_json::to_value(&report)?);
    }
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "copied {} server(s): {}",
        report.copied.len(),
        report.copied.join(", ")
    )?;
    writeln!(
        out,
        "skipped {} server(s) the team registry already has: {}",
        report.skipped.len(),
        report.skipped.join(", ")
    )?;
    if !report.replaced.is_empty() {
        writeln!(out, "replaced: {}", report.replaced.join(", "))?;
    }
    writeln!(
        out,
        "agents copied: {}, skipped: {}",
        report.agents_copied.len(),
        report.agents_skipped.len()
    )?;
    for (table, n) in &report.rows {
        writeln!(out, "  {table}: {n} row(s)")?;
    }
    Ok(())
}

/// A progress indicator on stderr (only when stderr is a terminal); abort the handle to stop it.
fn spinner(what: &'static str) -> tokio::task::JoinHandle<()> {
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

fn print_json(v: &serde_json::Value) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

fn one_line(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        format!("{}…", flat.chars().take(max - 1).collect::<String>())
    }
}
