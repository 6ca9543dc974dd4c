//! Connecting to a child: a stdio process under the child guard, a Streamable HTTP server or a legacy SSE server;
//! the handshake and the first `tools/list` within the activation timeout; and what happens when the process ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use tokio::sync::watch;

use super::client::ChildClient;
use super::{Child, Inner, StderrRing, spawn, sse, with_stderr};
use crate::error::{Error, Result};
use crate::model::{Server, Transport};

impl Inner {
    /// Connects to a server and lists its tools, within the activation timeout.
    pub(super) async fn start(
        self: &Arc<Self>,
        server: &Server,
        failures: u32,
    ) -> Result<Arc<Child>> {
        let timeout = server
            .activate_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.timeouts.activate);
        let call_timeout = server
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.timeouts.call);
        let secrets = self.secrets.env_for(server.id)?;
        let handler = ChildClient {
            proxy: Arc::downgrade(self),
            server: server.name.clone(),
        };
        let stderr = Arc::new(StderrRing::default());
        let (exit_tx, exit_rx) = watch::channel(None);
        let started_at = crate::calllog::rfc3339(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        );
        let upstream = |message: String| Error::Upstream {
            server: server.name.clone(),
            message,
        };
        let timed_out = |what: &'static str| Error::Timeout {
            server: server.name.clone(),
            what,
            ms: timeout.as_millis() as u64,
        };

        let (service, pid, pgid, lifeline) = match server.transport {
            Transport::Stdio => {
                let command = server.command.as_deref().ok_or_else(|| {
                    Error::invalid(
                        "command",
                        format!("server `{}` has no command", server.name),
                    )
                })?;
                let mut env = server.env.clone();
                env.extend(secrets);
                let spawned =
                    spawn::spawn(&self.guard_exe, command, &server.args, &env, stderr.clone())?;
                let pid = spawned.child.id();
                let pgid = spawned.pgid;
                let mut child_proc = spawned.child;
                let weak = Arc::downgrade(self);
                let name = server.name.clone();
                let ring = stderr.clone();
                tokio::spawn(async move {
                    let cause = match child_proc.wait().await {
                        Ok(status) => describe_exit(status),
                        Err(e) => format!("wait failed: {e}"),
                    };
                    spawn::kill_group(pgid);
                    let _ = exit_tx.send(Some(cause.clone()));
                    if let Some(inner) = weak.upgrade() {
                        inner.on_child_exit(&name, &cause, &ring);
                    }
                });
                let transport = rmcp::transport::async_rw::AsyncRwTransport::new_client(
                    spawned.stdout,
                    spawned.stdin,
                )
                .with_max_line_length(64 * 1024 * 1024);
                let mut exit_watch = exit_rx.clone();
                let connect = async {
                    tokio::select! {
                        r = handler.serve(transport) => r.map_err(|e| upstream(format!("initialize failed: {e}"))),
                        _ = exit_watch.wait_for(|c| c.is_some()) => Err(upstream(String::new())),
                    }
                };
                let service = match tokio::time::timeout(timeout, connect).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        spawn::kill_group(pgid);
                        // Give the exit watcher a moment to report why the process ended.
                        let mut w = exit_rx.clone();
                        let _ = tokio::time::timeout(
                            Duration::from_millis(500),
                            w.wait_for(|c| c.is_some()),
                        )
                        .await;
                        let cause = exit_rx.borrow().clone();
                        return Err(failure(server, e, cause, &stderr));
                    }
                    Err(_) => {
                        spawn::kill_group(pgid);
                        return Err(with_stderr(timed_out("activation (initialize)"), &stderr));
                    }
                };
                (service, pid, pgid, spawned.lifeline)
            }
            Transport::StreamableHttp => {
                let url = substitute(
                    server.url.as_deref().unwrap_or_default(),
                    &secrets,
                    &server.env,
                );
                let mut headers = HashMap::new();
                for (k, v) in &server.headers {
                    let name = http::HeaderName::try_from(k.as_str())
                        .map_err(|e| Error::invalid("headers", e.to_string()))?;
                    let value = http::HeaderValue::try_from(substitute(v, &secrets, &server.env))
                        .map_err(|e| Error::invalid("headers", e.to_string()))?;
                    headers.insert(name, value);
                }
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
                let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
                    reqwest::Client::new(),
                    config,
                );
                let service = tokio::time::timeout(timeout, handler.serve(transport))
                    .await
                    .map_err(|_| timed_out("activation (initialize)"))?
                    .map_err(|e| upstream(format!("initialize failed: {e}")))?;
                (service, None, 0, None)
            }
            Transport::Sse => {
                let url = substitute(
                    server.url.as_deref().unwrap_or_default(),
                    &secrets,
                    &server.env,
                );
                let headers: HashMap<String, String> = server
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), substitute(v, &secrets, &server.env)))
                    .collect();
                let (sink, stream) =
                    sse::connect(&url, &headers, timeout)
                        .await
                        .map_err(|e| match e {
                            Error::Upstream { message, .. } => upstream(message),
                            other => other,
                        })?;
                let service = tokio::time::timeout(timeout, handler.serve((sink, stream)))
                    .await
                    .map_err(|_| timed_out("activation (initialize)"))?
                    .map_err(|e| upstream(format!("initialize failed: {e}")))?;
                (service, None, 0, None)
            }
        };
        let peer = service.peer().clone();
        let capabilities = peer
            .peer_info()
            .map(|i| i.capabilities.clone())
            .unwrap_or_default();
        let tools = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
            // Only tools that pass the server's filters and pins are kept (`pinning.rs`).
            Ok(Ok(t)) => self.registry.gate_tools(server.id, &server.name, t),
            Ok(Err(e)) => {
                spawn::kill_group(pgid);
                return Err(with_stderr(
                    upstream(format!("tools/list failed: {e}")),
                    &stderr,
                ));
            }
            Err(_) => {
                spawn::kill_group(pgid);
                return Err(with_stderr(timed_out("tools/list"), &stderr));
            }
        };
        let child = Arc::new(Child {
            name: server.name.clone(),
            server_id: server.id,
            transport: server.transport,
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
            tools: Mutex::new(tools),
            capabilities,
            pid,
            pgid,
            lifeline: Mutex::new(lifeline),
            stderr,
            exited: exit_rx,
            stopping: AtomicBool::new(false),
            started_at,
            failures,
            call_timeout,
        });
        // A log level a client set before this child started applies to it too.
        self.apply_log_level(&child).await;
        Ok(child)
    }
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return format!("killed by signal {sig}");
        }
    }
    match status.code() {
        Some(127) => "exit code 127 (command not found)".into(),
        Some(c) => format!("exit code {c}"),
        None => "exited".into(),
    }
}

fn failure(server: &Server, err: Error, exit: Option<String>, stderr: &StderrRing) -> Error {
    let err = match (exit, err) {
        (Some(cause), _) => Error::Upstream {
            server: server.name.clone(),
            message: format!("exited before completing initialize ({cause})"),
        },
        (None, e) => e,
    };
    with_stderr(err, stderr)
}

/// Replaces `${NAME}` in a URL or header with a secret or env value of the server.
fn substitute(
    s: &str,
    secrets: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
) -> String {
    let mut out = s.to_owned();
    for (k, v) in env.iter().chain(secrets.iter()) {
        out = out.replace(&format!("${{{k}}}"), v);
    }
    out
}
