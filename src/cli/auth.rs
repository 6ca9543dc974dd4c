//! `agent-discover auth NAME` (authorize a remote server: print the URL, wait for the callback, listening on the
//! loopback redirect URI itself when no dashboard serves it; `--finish`, `--logout`) and `agent-discover call
//! SERVER__TOOL` (call any tool through the proxy and print the result).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::app::App;
use crate::authflow::AuthOutcome;
use crate::proxy::Caller;

/// How many authorize URLs one `auth` run follows before giving up (a server that keeps asking is not looped on).
const MAX_ROUNDS: usize = 4;

#[derive(Debug, clap::Args)]
pub struct AuthArgs {
    /// The registered remote server.
    pub name: String,
    /// Complete by hand: the URL the browser was sent back to (or its query, or the code the page showed).
    #[arg(long, value_name = "URL_OR_CODE", conflicts_with = "logout")]
    pub finish: Option<String>,
    /// Forget the server's tokens and any waiting authorization.
    #[arg(long)]
    pub logout: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CallArgs {
    /// `SERVER__TOOL`, as agents call it.
    pub name: String,
    /// The tool's arguments, a JSON object.
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// This call's session, for approvals given "for this session" (#27): calls with the same session name (and the
    /// same arguments) pass once a person approved one for the session.
    #[arg(long, env = "AGENT_DISCOVER_SESSION", value_name = "NAME")]
    pub session: Option<String>,
    #[arg(long)]
    pub json: bool,
}

fn print(outcome: &AuthOutcome, json: bool) -> anyhow::Result<()> {
    if json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, outcome)?;
        writeln!(out)?;
    } else {
        eprintln!(
            "`{}` is ready ({} tools)",
            outcome.name,
            outcome.tool_count.unwrap_or(0)
        );
    }
    Ok(())
}

pub async fn auth(app: &Arc<App>, args: AuthArgs) -> anyhow::Result<()> {
    let name = args.name.as_str();
    if args.logout {
        let had = app.logout(name).await?;
        eprintln!(
            "{}",
            if had {
                format!("forgot the tokens of `{name}`")
            } else {
                format!("`{name}` had no tokens")
            }
        );
        return Ok(());
    }
    if let Some(callback) = args.finish {
        let outcome = app.finish_auth(name, &callback).await;
        app.proxy.shutdown().await;
        let outcome = outcome?;
        if outcome.state != "ready" {
            bail!(
                "`{name}` asks for another authorization: {}",
                outcome.auth_url.unwrap_or_default()
            );
        }
        return print(&outcome, args.json);
    }
    let result = authorize(app, name, args.json).await;
    app.proxy.shutdown().await;
    let outcome = result?;
    print(&outcome, args.json)
}

/// Listens on the loopback redirect URI when it is free (else a dashboard serves it), starts the authorization,
/// prints each authorize URL and waits until the server is ready.
async fn authorize(app: &Arc<App>, name: &str, json: bool) -> anyhow::Result<AuthOutcome> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stop = tokio_util::sync::CancellationToken::new();
    let _stop = stop.clone().drop_guard();
    let mut listening = false;
    if let Some(port) = app.oauth.loopback_port() {
        match crate::http::bind(std::net::Ipv4Addr::LOCALHOST.into(), port).await {
            Ok(Some(listener)) => {
                app.oauth.set_listener(listener.local_addr()?);
                tokio::spawn(crate::http::serve_callback(
                    listener,
                    app.clone(),
                    tx,
                    stop.clone(),
                ));
                listening = true;
            }
            Ok(None) => {}
            Err(e) => {
                return Err(e).with_context(|| format!("cannot listen on 127.0.0.1:{port}"));
            }
        }
    }
    let mut outcome = app.start_auth(name).await?;
    for _ in 0..MAX_ROUNDS {
        let Some(url) = outcome.auth_url.clone() else {
            return Ok(outcome);
        };
        {
            let mut out = std::io::stdout().lock();
            if !json {
                writeln!(out, "{url}")?;
                out.flush()?;
            }
        }
        eprintln!(
            "open the URL above to authorize agent-discover for `{name}`; waiting for the callback{}",
            if listening {
                ""
            } else {
                " (the dashboard receives it)"
            }
        );
        // The callback may come here, or to a dashboard that another process serves (or to a public URL).
        outcome = tokio::select! {
            received = rx.recv(), if listening => match received {
                Some(Ok(o)) => o,
                Some(Err(e)) => {
                    eprintln!("callback refused: {e}");
                    // A refused callback (wrong state, denied) leaves the authorization waiting.
                    app.start_auth(name).await?
                }
                None => bail!("the callback listener stopped"),
            },
            done = wait_elsewhere(app, name, &url) => done?,
        };
    }
    bail!("`{name}` still asks for authorization after {MAX_ROUNDS} rounds; giving up")
}

/// The dashboard process receives the callback: wait until the waiting authorization is gone, then connect here.
async fn wait_elsewhere(app: &Arc<App>, name: &str, url: &str) -> anyhow::Result<AuthOutcome> {
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let status = app.auth_status(name)?;
        if status.auth_url.as_deref() != Some(url) {
            return Ok(app.start_auth(name).await?);
        }
    }
}

pub async fn call(app: &Arc<App>, args: CallArgs) -> anyhow::Result<()> {
    let arguments = match &args.args {
        None => None,
        Some(s) => match serde_json::from_str::<serde_json::Value>(s)
            .context("--args must be a JSON object")?
        {
            serde_json::Value::Object(m) => Some(m),
            _ => bail!("--args must be a JSON object"),
        },
    };
    let session = args
        .session
        .as_deref()
        .map(crate::approvals::session_name)
        .transpose()?
        .map(|n| format!("cli:{n}"));
    let Some((server, tool)) = app.proxy.resolve(&args.name) else {
        bail!(
            "`{}` names no tool of a registered server (expected SERVER__TOOL)",
            args.name
        );
    };
    // Start the server here for this call (its active flag is left as it was).
    let result = async {
        if !app.proxy.is_active(&server) {
            let was_active = app.registry.get(&server)?.active;
            app.proxy.activate(&server).await?;
            if !was_active {
                let id = app.registry.get(&server)?.id;
                app.registry.set_active(id, false, None)?;
            }
        }
        let caller = Caller {
            session,
            ..Caller::default()
        };
        app.proxy.call_tool(&server, &tool, arguments, caller).await
    }
    .await;
    app.proxy.shutdown().await;
    let result = result?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &result)?;
        writeln!(out)?;
    } else {
        for c in &result.content {
            match c.as_text() {
                Some(t) => writeln!(out, "{}", t.text)?,
                None => writeln!(out, "{}", serde_json::to_string(c)?)?,
            }
        }
    }
    if result.is_error == Some(true) {
        bail!("the tool answered with an error");
    }
    Ok(())
}
