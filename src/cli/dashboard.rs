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
    // A team's front as an OAuth-protected resource (issue 30): access tokens from the configured issuer replace
    // the static token.
    if let Some(ident) =
        crate::ident::IdentityConfig::from_env(&config.data_dir).map_err(anyhow::Error::msg)?
    {
        eprintln!(
            "this server takes OAuth access tokens from {} (see docs/identity.md)",
            ident.issuer
        );
        let public_url = std::env::var(crate::oauth::ENV_PUBLIC_URL)
            .ok()
            .filter(|v| !v.trim().is_empty());
        return Ok(crate::http::Security::for_bind(
            addr.ip(),
            &args.allowed_hosts,
            Some(String::new()),
        )
        .map_err(anyhow::Error::msg)?
        .with_identity(crate::ident::Identity::new(ident), public_url));
    }
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

/// Leads the dashboard for an `mcp` process, now or later.
///
/// The processes sharing a data dir elect their dashboard leader with an exclusive `flock` on
/// `<data dir>/dashboard-<port>.lock`: the leader holds it for its lifetime and the kernel releases it when the leader
/// exits, however it exits (kill -9 included). The others each wait for it on a thread of their own, blocked in
/// `flock`, so they use no CPU while they wait; the one the kernel wakes binds the port and serves. The first attempt
/// is synchronous: a process that leads at start serves before it answers `initialize`. Port 0 (a free port each) has
/// nothing to take over: every process serves its own.
pub(super) async fn lead_dashboard(
    app: &std::sync::Arc<App>,
    args: &DashboardArgs,
    mode: crate::mcp::ToolsMode,
) {
    if args.port == 0 {
        if let Some(listener) = bind_now(args).await {
            serve_dashboard(app.clone(), args.clone(), mode, listener, None);
        }
        return;
    }
    let path = app
        .config
        .data_dir
        .join(format!("dashboard-{}.lock", args.port));
    let lock = match leader_lock::LeaderLock::open(&path) {
        Ok(l) => l,
        Err(e) => {
            // Without the lock this process still tries the port once, as before leadership could move.
            tracing::warn!(error = %e, path = %path.display(), "cannot open the dashboard lock; no takeover");
            if let Some(listener) = bind_now(args).await {
                serve_dashboard(app.clone(), args.clone(), mode, listener, None);
            }
            return;
        }
    };
    match lock.try_acquire() {
        Ok(true) => {
            let app = app.clone();
            let args = args.clone();
            // Normally the port is free and this binds at once, before `initialize` is answered.
            match bind_now(&args).await {
                Some(listener) => serve_dashboard(app, args, mode, listener, Some(lock)),
                None => {
                    tokio::spawn(async move {
                        if let Some(listener) = bind_when_free(&args).await {
                            serve_dashboard(app, args, mode, listener, Some(lock));
                        }
                    });
                }
            }
        }
        Ok(false) => {
            tracing::info!(
                port = args.port,
                "another agent-discover serves the dashboard; stdio only, ready to take the port over when it exits"
            );
            let app = app.clone();
            let args = args.clone();
            tokio::spawn(async move {
                let lock = match lock.acquire().await {
                    Ok(l) => l,
                    Err(e) => {
                        return tracing::warn!(error = %e, "waiting for the dashboard lock failed; no takeover");
                    }
                };
                tracing::info!(
                    port = args.port,
                    "the dashboard leader exited; taking the port over"
                );
                if let Some(listener) = bind_when_free(&args).await {
                    serve_dashboard(app, args, mode, listener, Some(lock));
                }
            });
        }
        Err(e) => {
            tracing::warn!(error = %e, path = %path.display(), "cannot lock the dashboard lock; no takeover");
            if let Some(listener) = bind_now(args).await {
                serve_dashboard(app.clone(), args.clone(), mode, listener, None);
            }
        }
    }
}

/// One attempt at the port: `None` (logged) when it is taken or cannot be bound.
async fn bind_now(args: &DashboardArgs) -> Option<tokio::net::TcpListener> {
    match crate::http::bind(args.host, args.port).await {
        Ok(Some(l)) => Some(l),
        Ok(None) => {
            tracing::info!(
                port = args.port,
                "the dashboard port is taken (another agent-discover serves it); stdio only"
            );
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, host = %args.host, port = args.port, "cannot listen for the dashboard; stdio only");
            None
        }
    }
}

/// Binds the port once it is free, for the lock holder. A leader that just died may hold its socket for a few more
/// milliseconds while the kernel closes its files (tokio sets SO_REUSEADDR, so TIME_WAIT connections do not matter):
/// quick retries first. A port still taken after that belongs to a process outside this election (`serve`, another
/// data dir, another program): retried once a second until it is released.
async fn bind_when_free(args: &DashboardArgs) -> Option<tokio::net::TcpListener> {
    let started = std::time::Instant::now();
    let mut said = false;
    loop {
        match crate::http::bind(args.host, args.port).await {
            Ok(Some(l)) => return Some(l),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, host = %args.host, port = args.port, "cannot listen for the dashboard; stdio only");
                return None;
            }
        }
        let pause = if started.elapsed() < std::time::Duration::from_secs(2) {
            std::time::Duration::from_millis(25)
        } else {
            if !said {
                said = true;
                tracing::info!(
                    port = args.port,
                    "the dashboard port is held by a process outside this data dir's election; serving once it is free"
                );
            }
            std::time::Duration::from_secs(1)
        };
        tokio::time::sleep(pause).await;
    }
}

/// Serves the dashboard in the background; `lock` (the leadership) is held as long as the server runs.
fn serve_dashboard(
    app: std::sync::Arc<App>,
    args: DashboardArgs,
    mode: crate::mcp::ToolsMode,
    listener: tokio::net::TcpListener,
    lock: Option<leader_lock::LeaderLock>,
) {
    let addr = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            return tracing::warn!(error = %e, "dashboard listener has no address; stdio only");
        }
    };
    let security = match dashboard_security(&args, addr, &app.config) {
        Ok(s) => s,
        Err(e) => return tracing::warn!(error = %e, "dashboard not started"),
    };
    tracing::info!("dashboard at http://{addr}/ (MCP over HTTP at /mcp)");
    tokio::spawn(async move {
        let _leadership = lock;
        if let Err(e) =
            crate::http::serve(listener, app, security, mode, std::future::pending()).await
        {
            tracing::warn!(error = %e, "the dashboard server stopped");
        }
    });
}

/// The dashboard leader's lock: an exclusive `flock` on a file in the data dir.
mod leader_lock {
    use std::fs::File;
    use std::path::Path;

    pub struct LeaderLock(File);

    impl LeaderLock {
        pub fn open(path: &Path) -> std::io::Result<LeaderLock> {
            // Rust opens files close-on-exec: child servers never inherit (and so never keep) the lock.
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(path)?;
            Ok(LeaderLock(f))
        }

        /// Takes the lock if it is free; `Ok(false)` when another process holds it.
        pub fn try_acquire(&self) -> std::io::Result<bool> {
            flock(&self.0, true)
        }

        /// Waits for the lock on a thread of its own, blocked in the kernel (a detached thread: the process may exit
        /// while it waits, which a `spawn_blocking` task would prevent).
        pub async fn acquire(self) -> std::io::Result<LeaderLock> {
            let (tx, rx) = tokio::sync::oneshot::channel();
            std::thread::Builder::new()
                .name("dashboard-lock".into())
                .spawn(move || {
                    let r = flock(&self.0, false).map(|_| self);
                    let _ = tx.send(r);
                })?;
            rx.await
                .map_err(|_| std::io::Error::other("the lock thread ended without an answer"))?
        }
    }

    /// The whole-file advisory lock (flock on Unix, LockFileEx on Windows); `Ok(false)` when another process holds
    /// it and `nonblocking`.
    fn flock(f: &File, nonblocking: bool) -> std::io::Result<bool> {
        if !nonblocking {
            return f.lock().map(|()| true);
        }
        match f.try_lock() {
            Ok(()) => Ok(true),
            Err(std::fs::TryLockError::WouldBlock) => Ok(false),
            Err(std::fs::TryLockError::Error(e)) => Err(e),
        }
    }
}

/// The call log of the agent-discover serving the dashboard on 127.0.0.1:`port`, if it uses this database: call logs
/// live in each process's memory, and that process is the one other tools (the dashboard, REST) talk to. `token`
/// (`--token`, `AGENT_DISCOVER_TOKEN`) is sent as the bearer token when given: the static token, or with identity on
/// an access token (whose user sees only their own calls unless an admin).
pub(super) async fn dashboard_calls(app: &App, port: u16, token: Option<&str>) -> Value {
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
            let mut req = client?.get(url);
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let resp = req.send().await.map_err(|e| error_chain(&e))?;
            if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
                return Err(format!(
                    "HTTP {}: give a token with --token or AGENT_DISCOVER_TOKEN",
                    resp.status()
                ));
            }
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
            logs["from"] = json!(format!(
                "the agent-discover serving {base}/ (pid {})",
                status["pid"]
            ));
            // The guards' decisions are counted by the process that made the calls.
            logs["guards"] = status["guards"].clone();
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
