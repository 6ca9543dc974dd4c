//! Installing servers from the marketplace: look the entry up, plan its launch (npx, uvx, docker, or a remote URL),
//! register it, store its secret values, and warm the package cache in the background.
//!
//! Required values that are missing are returned to the caller (CLI prompt, MCP elicitation, REST field) instead of
//! registering a server that would fail at activation.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::app::App;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::marketplace::{
    self, InstallError, MarketEntry, MarketError, MarketSource, MissingInput,
};
use crate::model::{Server, ServerSpec, Source, Transport};

/// What an install from the marketplace did.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum InstallOutcome {
    Installed {
        server: String,
        source: &'static str,
        method: marketplace::InstallMethod,
        transport: Transport,
        command: Option<String>,
        args: Vec<String>,
        url: Option<String>,
        /// Secret values stored encrypted (names only).
        secrets: Vec<String>,
        /// The package cache is being filled in the background (`server:warmup` events report the outcome).
        warming: Option<String>,
    },
    /// Nothing was registered: these values are required. Pass them as `inputs` and install again.
    NeedsInput {
        name: String,
        missing: Vec<MissingInput>,
    },
}

fn market_error(e: MarketError) -> Error {
    Error::Upstream {
        server: "marketplace".into(),
        message: e.to_string(),
    }
}

fn install_error(e: InstallError) -> Error {
    Error::invalid("install", e.to_string())
}

/// Finds `name` in the marketplace: a direct lookup, then a search whose results name it.
pub async fn find_entry(app: &App, name: &str) -> Result<MarketEntry> {
    let market = app.marketplace()?;
    if let Some(entry) = market.lookup(name).await.map_err(market_error)? {
        return Ok(entry);
    }
    let found = market.browse(name, 10, None).await;
    let short = |n: &str| n.rsplit('/').next().unwrap_or(n).to_ascii_lowercase();
    found
        .servers
        .into_iter()
        .find(|e| e.name == name || short(&e.name) == name.to_ascii_lowercase())
        .ok_or_else(|| {
            Error::not_found(
                "marketplace entry",
                format!("{name} (try `browse` to see what the marketplace has)"),
            )
        })
}

/// Installs `name` from the marketplace with `inputs` for its required values.
pub async fn install(
    app: &App,
    name: &str,
    inputs: &BTreeMap<String, String>,
) -> Result<InstallOutcome> {
    let entry = find_entry(app, name).await?;
    let plan = marketplace::plan_install(&entry, inputs).map_err(install_error)?;
    if !plan.missing.is_empty() {
        return Ok(InstallOutcome::NeedsInput {
            name: plan.name,
            missing: plan.missing,
        });
    }
    let launch = plan.launch;
    let transport = match launch.transport {
        marketplace::Transport::Stdio => Transport::Stdio,
        marketplace::Transport::StreamableHttp => Transport::StreamableHttp,
        marketplace::Transport::Sse => Transport::Sse,
    };
    if transport.is_remote() && launch.command.is_some() {
        return Err(Error::Unavailable(format!(
            "`{}` is a package that serves MCP over HTTP once started; agent-discover does not start-then-connect such packages yet. \
             Start it yourself and install its URL with transport `{}`",
            entry.name,
            transport.as_str()
        )));
    }
    let spec = ServerSpec {
        name: plan.name.clone(),
        description: plan.description,
        source: match entry.source {
            MarketSource::Registry => Source::Registry,
            MarketSource::Npm => Source::Npm,
            MarketSource::Pypi => Source::Pypi,
        },
        command: launch.command,
        args: launch.args,
        env: launch.env,
        tags: vec![entry.source.as_str().to_owned()],
        transport,
        url: launch.url,
        headers: launch.headers,
        package_name: plan.package_name,
        package_version: plan.package_version,
        repository: plan.repository,
        homepage: entry.website_url.clone(),
    };
    let server: Server = app.registry.register(spec)?;
    let mut secret_names = Vec::new();
    for (k, v) in &plan.secrets {
        app.secrets.set(&server.name, k, v)?;
        secret_names.push(k.clone());
    }
    let runtimes = ad_proxy::runtime::root_in(&app.config.data_dir);
    let launch_of = (server.command.clone(), server.args.clone());
    let package = server
        .package_name
        .clone()
        .map(|n| (n, server.package_version.clone()));
    let warming = plan.warm.map(|cmd| {
        let shown = format!("{} {}", cmd.0, cmd.1.join(" "));
        let events = app.events.clone();
        let name = server.name.clone();
        tokio::spawn(async move {
            // A Node package whose `engines.node` the system's Node does not satisfy gets its runtime now, so its
            // first start does not wait for it (`ad_proxy::runtime`).
            if let (Some(command), args) = &launch_of
                && let Some(c) = ad_proxy::runtime::for_command(
                    &runtimes,
                    command,
                    args,
                    package.as_ref().map(|(n, v)| (n.as_str(), v.as_deref())),
                    false,
                )
                .await
            {
                tracing::info!(server = %name, node = %c.info.version, source = %c.info.source, "node runtime");
            }
            let res = marketplace::warm_cache(&cmd).await;
            if let Err(e) = &res {
                tracing::warn!(server = %name, error = %e, "warming the package cache failed");
            }
            events.emit(Event::Warmup {
                name,
                ok: res.is_ok(),
                message: res.err().map(|e| e.to_string()),
            });
        });
        shown
    });
    Ok(InstallOutcome::Installed {
        server: server.name,
        source: entry.source.as_str(),
        method: plan.method,
        transport: server.transport,
        command: server.command,
        args: server.args,
        url: server.url,
        secrets: secret_names,
        warming,
    })
}
