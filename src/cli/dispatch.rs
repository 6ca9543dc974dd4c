//! Running a parsed command line: opens the registry, serves MCP (`mcp`, `serve`) or hands the command to its
//! family's function; `migrate` runs before any registry is opened.

use std::io::Write;

use anyhow::Context;

use super::args::{Cli, Command};
use super::common::print_json;
use super::dashboard::{dashboard_disabled_by_env, dashboard_security, lead_dashboard};
use super::{
    agents, approvals, auth, configs, introspect, limits, market, model, policy, profiles, sandbox,
    scripts, servers, status, tools,
};
use crate::app::App;
use crate::config::Config;

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
    if let Command::Health { url, port, token } = &cli.command {
        let url = url
            .clone()
            .unwrap_or_else(|| format!("http://127.0.0.1:{port}/health"));
        // A server beyond loopback wants its token even for /health: the one in this data dir, when not given.
        let token = match token {
            Some(t) => Some(t.clone()),
            None => {
                let config = Config::resolve(cli.data_dir.as_deref(), cli.database_url.as_deref())?;
                std::fs::read_to_string(config.data_dir.join(crate::http::security::TOKEN_FILE))
                    .ok()
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
            }
        };
        return health(&url, token.as_deref()).await;
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
            profile,
        } => {
            app.search.start_model_download();
            if !no_dashboard && !dashboard_disabled_by_env() {
                lead_dashboard(&app, &dashboard, tools_mode).await;
            }
            match (server, profile) {
                (Some(name), _) => crate::mcp::serve_stdio_server(app, name).await,
                (None, Some(name)) => crate::mcp::serve_stdio_profile(app, name, tools_mode).await,
                (None, None) => crate::mcp::serve_stdio(app, tools_mode).await,
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
            crate::footprint::release_startup_code_soon();
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
        } => servers::list(&app, query, source, installed, json),
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
        } => servers::add(
            &app,
            name,
            description,
            tags,
            env,
            transport,
            url,
            headers,
            json,
            command,
        ),
        Command::Remove { name, json } => servers::remove(&app, name, json).await,
        Command::Show { name, json } => servers::show(&app, name, json),
        Command::Browse {
            query,
            limit,
            cursor,
            json,
        } => market::browse(&app, query, limit, cursor, json).await,
        Command::Install { name, inputs, json } => market::install(&app, name, inputs, json).await,
        Command::Find {
            query,
            limit,
            activate,
            json,
        } => market::find(&app, query, limit, activate, json).await,
        Command::Activate { name, json } => servers::activate(&app, name, json).await,
        Command::Deactivate { name, json } => servers::deactivate(&app, name, json).await,
        Command::Secrets(cmd) => servers::secrets(&app, cmd),
        Command::Enable { name, json } => servers::enable(&app, name, json).await,
        Command::Disable { name, json } => servers::disable(&app, name, json).await,
        Command::Import(args) => configs::import(&app, args).await,
        Command::Export(args) => configs::export(&app, args).await,
        Command::Clients(args) => configs::clients(args),
        Command::Connect(args) => configs::connect(&app, args).await,
        Command::Status { json, port, token } => {
            status::status(&app, json, port, token.as_deref()).await
        }
        Command::Migrate { .. } | Command::Health { .. } => unreachable!("handled above"),
        Command::Tools(cmd) => tools::run(&app, cmd).await,
        Command::Approvals(cmd) => approvals::run(&app, cmd),
        Command::Policy(cmd) => policy::run(&app, cmd),
        Command::Sandbox(cmd) => sandbox::run(&app, cmd).await,
        Command::Guards(args) => super::guards::run(&app, args),
        Command::Limits(cmd) => limits::run(&app, cmd).await,
        Command::Profiles(cmd) => profiles::run(&app, cmd).await,
        Command::Introspect(args) => introspect::run(&app, args).await,
        Command::Catalog(cmd) => introspect::catalog_cmd(&app, cmd).await,
        Command::Model(cmd) => model::run(cmd).await,
        Command::Auth(args) => auth::auth(&app, args).await,
        Command::Call(args) => auth::call(&app, args).await,
        Command::Skills(cmd) => super::skills::run(&app, cmd).await,
        Command::Run(args) => scripts::run(&app, args).await,
        Command::Scripts(cmd) => super::saved::run(&app, cmd).await,
        Command::Paging(args) => super::saved::paging(&app, args),
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
    writeln!(
        out,
        "profiles copied: {}, skipped: {}; saved scripts copied: {}, skipped: {}",
        report.profiles_copied.len(),
        report.profiles_skipped.len(),
        report.scripts_copied.len(),
        report.scripts_skipped.len()
    )?;
    for (table, n) in &report.rows {
        writeln!(out, "  {table}: {n} row(s)")?;
    }
    Ok(())
}

/// `health`: GET the address (with the token, when there is one), print the answer, fail unless it is 200.
async fn health(url: &str, token: Option<&str>) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()
        .context("cannot build an HTTP client")?;
    let mut request = client.get(url);
    if let Some(t) = token {
        request = request.bearer_auth(t);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("no answer from {url}"))?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    anyhow::ensure!(status.is_success(), "{url} answered {status}: {body}");
    println!("{body}");
    Ok(())
}
