//! The CLI's side of the dashboard: where it listens and who may use it, the `mcp` process's attempt to lead it, and
//! reading the leader's call log for `agent-discover status`.

use anyhow::Context;
use serde_json::{Value, json};

use crate::app::App;
use crate::config::Config;

/// Where the dashboard listens and who may use it.
#[derive(Debug, Clone, clap::Args)]
pub struct DashboardArgs {
    /// Address to listen on. Loopback needs no token; any other address requires a bearer token (created in the
    /// data dir on first use).
    #[arg(long, env = "AGENT_DISCOVER_HOST", default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
    /// Port; 0 picks a free one (the URL printed says which).
    #[arg(long, env = "AGENT_DISCOVER_PORT", default_value_t = crate::http::DEFAULT_PORT)]
    pub port: u16,
    /// Require the bearer token on loopback too.
    #[arg(long)]
    pub require_token: bool,
    /// A further host name clients use to reach this server, accepted in Host and Origin (repeatable), e.g. the
    /// machine's DNS name with --host 0.0.0.0.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
}

/// `AGENT_DISCOVER_DASHBOARD=off` (or 0, false, no) keeps `mcp` from serving the dashboard.
pub const ENV_DASHBOARD: &str = "AGENT_DISCOVER_DASHBOARD";

pub(super) fn dashboard_disabled_by_env() -> bool {
    std::env::var(ENV_DASHBOARD).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

/// The security policy for a listener on `addr`: a token when beyond loopback or asked for, printed when new.
pub(super) fn dashboard_security(
    args: &DashboardArgs,
    addr: std::net::SocketAddr,
    config: &Config,
) -> anyhow::Result<crate::http::Security> {
    let token = if args.require_token || !addr.ip().is_loopback() {
        let (token, created, path) = crate::http::security::load_or_create_token(&config.data_dir)
            .with_context(|| {
                format!(
                    "cannot read or create the dashboard token in {}",
                    config.data_dir.display()
                )
            })?;
        if created {
            eprintln!(
                "dashboard token (shown once; kept in {}): {token}\nopen http://{addr}/?token={token} or send `Authorization: Bearer <token>`",
                path.display()
            );
        } else {
            eprintln!("the dashboard needs the bearer token in {}", path.display());
        }
        Some(token)
    } else {
        None
    };
    crate::http::Security::for_bind(addr.ip(), &args.allowed_hosts, token)
        .map_err(anyhow::Error::msg)
}

/// Tries to become the dashboard leader for an `mcp` process: serves in the background when the port is free, and
/// quietly stays stdio-only when another process has it.
pub(super) async fn lead_dashboard(
    app: &std::sync::Arc<App>,
    args: &DashboardArgs,
    mode: crate::mcp::ToolsMode,
) {
    let listener = match crate::http::bind(args.host, args.port).await {
        Ok(Some(l)) => l,
        Ok(None) => {
            tracing::info!(
                port = args.port,
                "the dashboard port is taken (another agent-discover serves it); stdio only"
            );
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, host = %args.host, port = args.port, "cannot listen for the dashboard; stdio only");
            return;
        }
    };
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            return tracing::warn!(error = %e, "dashboard listener has no address; stdio only");
        }
    };
    let security = match dashboard_security(args, addr, &app.config) {
        Ok(s) => s,
        Err(e) => return tracing::warn!(error = %e, "dashboard not started"),
    };
    tracing::info!("dashboard at http://{addr}/ (MCP over HTTP at /mcp)");
    let app = app.clone();
    tokio::spawn(async move {
        if let Err(e) =
            crate::http::serve(listener, app, security, mode, std::future::pending()).await
        {
            tracing::warn!(error = %e, "the dashboard server stopped");
        }
    });
}

/// The call log of the agent-discover serving the dashboard on 127.0.0.1:`port`, if it uses this database: call logs
/// live in each process's memory, and that process is the one other tools (the dashboard, REST) talk to.
pub(super) async fn dashboard_calls(app: &App, port: u16) -> Value {
    let base = format!("http://127.0.0.1:{port}");
    // Nothing listening fails at once; a busy server gets a few seconds.
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .no_proxy()
        .build()
        .map_err(|e| e.to_string());
    let get = |path: &'static str| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let resp = client?.get(url).send().await.map_err(|e| error_chain(&e))?;
            if !resp.status().is_success() {
                return Err(format!("HTTP {}", resp.status()));
            }
            resp.json::<Value>().await.map_err(|e| error_chain(&e))
        }
    };
    let unavailable = |why: String| json!({"unavailable": format!("{why}; each agent-discover keeps its own call log (registry action `status`, or the dashboard)")});
    let status = match get("/api/status").await {
        Ok(s) => s,
        Err(e) => return unavailable(format!("no dashboard answers at {base} ({e})")),
    };
    if status["registry"]["db_path"] != json!(app.config.db_path) {
        return unavailable(format!("the dashboard at {base} serves another database"));
    }
    match get("/api/logs?limit=10").await {
        Ok(mut logs) => {
            logs["from"] = json!(format!("{base}/ (pid {})", status["pid"]));
            logs
        }
        Err(e) => unavailable(format!(
            "the dashboard at {base} did not give its call log ({e})"
        )),
    }
}

/// An error with its causes (reqwest's own message leaves out why a request failed).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}
