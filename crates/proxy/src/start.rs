//! Connecting to a child: a stdio process under the child guard, a Streamable HTTP server or a legacy SSE server;
//! the handshake and the first `tools/list` within the activation timeout; and what happens when the process ends.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use tokio::sync::watch;

use ad_core::error::{Error, Result, StartFailure};
use ad_core::model::{Server, Transport};

use crate::failure::with_stderr;
use crate::relay::ChildLane;
use crate::spawn::{self, StderrRing};
use crate::sse;
use crate::state::{Child, ChildClient, Inner, LegacyConnector, ProgressSeen};
use crate::typed::TypedChildTransport;

mod streamable;

use streamable::{connect_http, connect_legacy};

impl Inner {
    /// Connects to a server and lists its tools, within the activation timeout.
    pub(super) async fn start(
        self: &Arc<Self>,
        server: &Server,
        failures: u32,
    ) -> Result<Arc<Child>> {
        let first = self.start_with_esm(server, failures, false).await;
        // A Node server that failed the way an old Node fails is started once more with a newer Node (`runtime.rs`).
        match first {
            Err(e)
                if server.transport == Transport::Stdio
                    && server
                        .command
                        .as_deref()
                        .is_some_and(crate::runtime::is_node_command)
                    && crate::runtime::fetch_enabled() =>
            {
                let text = e.to_string();
                match crate::runtime::too_old_signature(text.lines()) {
                    Some(sign) => {
                        tracing::warn!(server = %server.name, sign = %sign, "the server needs a newer Node; starting it again with one");
                        self.start_with_esm(server, failures, true).await
                    }
                    None => Err(e),
                }
            }
            other => other,
        }
    }

    /// A start that failed on an ES module import named without its `.js` is made once more with a resolver that
    /// adds it (`esm.rs`; the same rule introspection applies), for this start only.
    async fn start_with_esm(
        self: &Arc<Self>,
        server: &Server,
        failures: u32,
        newer_node: bool,
    ) -> Result<Arc<Child>> {
        let first = self.start_with(server, failures, newer_node).await;
        let Err(e) = &first else {
            return first;
        };
        let text = e.to_string();
        let Some(module) = crate::esm::extensionless_import(text.lines()) else {
            return first;
        };
        if server.transport != Transport::Stdio {
            return first;
        }
        tracing::warn!(server = %server.name, module = %module, "an ES module import without its extension; starting it again with a resolver that adds it");
        let mut again = server.clone();
        let existing = again.env.get("NODE_OPTIONS").cloned();
        again.env.insert(
            "NODE_OPTIONS".into(),
            crate::esm::node_options(existing.as_deref()),
        );
        self.start_with(&again, failures, newer_node).await
    }

    async fn start_with(
        self: &Arc<Self>,
        server: &Server,
        failures: u32,
        newer_node: bool,
    ) -> Result<Arc<Child>> {
        // The whole activation timeout (longer for a package runner's first start, `launcher.rs`).
        let (timeout, first_download) =
            crate::launcher::start_timeout(server, self.timeouts.activate);
        let call_timeout = server
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(self.timeouts.call);
        let mut secrets = self.secrets.env_for(server.id)?;
        // A child started with a user's own keys: theirs over the shared ones (`personal.rs`).
        let personal = crate::personal::overlay(&mut secrets);
        let handler = ChildClient {
            proxy: Arc::downgrade(self),
            server: server.name.clone(),
            legacy_session: false,
            logs_counted: false,
            personal: personal.clone(),
        };
        let stderr = Arc::new(StderrRing::default());
        let (exit_tx, exit_rx) = watch::channel(None);
        let started_at = ad_registry::calllog::rfc3339(
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

        let mut auth = None;
        let progress_seen = ProgressSeen::default();
        let mut lane = None;
        // The legacy session of a 2026-07-28 HTTP child, to be connected when a legacy client first needs it (`era.rs`).
        let mut legacy_connect: Option<LegacyConnector> = None;
        let mut runtime = None;
        let mut fetched = None;
        let (service, pid, pgid, lifeline) = match server.transport {
            Transport::Stdio => {
                let command = server.command.as_deref().ok_or_else(|| {
                    Error::invalid(
                        "command",
                        format!("server `{}` has no command", server.name),
                    )
                })?;
                let command = &crate::launcher::absolute(command);
                let mut env = server.env.clone();
                env.extend(secrets);
                let choice = crate::runtime::for_command(
                    &crate::runtime::root_in(&self.sandbox.data_dir),
                    command,
                    &server.args,
                    server
                        .package_name
                        .as_deref()
                        .map(|n| (n, server.package_version.as_deref())),
                    newer_node,
                )
                .await;
                let mut node_fetched = None;
                if let Some(c) = &choice {
                    c.apply(&mut env);
                    runtime = Some(c.info.clone());
                    // A Node this start fetched (none installed, or older than the package needs): said once.
                    if c.fetched_now
                        && let Some(bin) = &c.bin_dir
                    {
                        let label = format!("Node.js {}", c.info.version);
                        node_fetched = Some(match crate::runtime::system_node(None).await {
                            None => crate::launcher::fetched_note(command, &label, bin),
                            Some(system) => format!(
                                "the system's Node.js {} is older than `{}` needs: fetched {label} into {} (once; every server that needs it uses it from now on)",
                                system.info.version,
                                server.name,
                                bin.parent().unwrap_or(bin).display()
                            ),
                        });
                    }
                }
                // A program that is not installed: a launcher is fetched, anything else is named as missing.
                fetched = crate::launcher::prepare(
                    &crate::runtime::root_in(&self.sandbox.data_dir),
                    &server.name,
                    command,
                    &mut env,
                )
                .await?
                .or(node_fetched);
                let settings = self.registry.sandbox_settings(server.id)?;
                let spawned = crate::sandbox::spawn(
                    &self.sandbox,
                    &self.guard_exe,
                    &server.name,
                    command,
                    &server.args,
                    &env,
                    &settings,
                    stderr.clone(),
                )?;
                let pid = spawned.child.id();
                let pgid = spawned.pgid;
                // Answers are decoded as the result type of the request they answer (`typed.rs`); the fast lane
                // relays tool calls through the same pipes (`relay.rs`).
                let stdin_fd = crate::typed::pipe_end(&spawned.stdin);
                let transport =
                    TypedChildTransport::new(spawned.stdout, spawned.stdin, 64 * 1024 * 1024)
                        .with_progress_seen(progress_seen.clone());
                let child_lane = Arc::new(ChildLane::new(
                    Arc::downgrade(self),
                    server.name.clone(),
                    server.id,
                    call_timeout,
                    Arc::new(transport.writer()),
                    stderr.clone(),
                    exit_rx.clone(),
                    self.fast_calls.clone(),
                ));
                let transport = transport.with_lane(child_lane.clone());
                lane = Some(child_lane.clone());
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
                    child_lane.close();
                    if let Some(inner) = weak.upgrade() {
                        inner.on_child_exit(&name, &cause, &ring);
                    }
                });
                let transport = transport.with_logs_counted(Arc::downgrade(self));
                let handler = ChildClient {
                    logs_counted: true,
                    ..handler
                };
                let mut exit_watch = exit_rx.clone();
                let mut transport = transport;
                let mut started = None;
                // `Err(None)`: the process exited; `Err(Some(e))`: the handshake failed while it runs (or as it ends).
                // The handshake begins once the server has started (`TypedChildTransport::await_started`).
                let connect = async {
                    tokio::select! {
                        r = async {
                            started = Some(transport.await_started(Some(stdin_fd)).await);
                            handler.serve_with_lifecycle(transport, newest_era()).await
                        } => r.map_err(|e| Some(e.to_string())),
                        _ = exit_watch.wait_for(|c| c.is_some()) => Err(None),
                    }
                };
                let service = match tokio::time::timeout(timeout, connect).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(handshake)) => {
                        // A closed pipe often comes before the exit: give the exit watcher a moment to report an exit
                        // of the server's own, before we stop it (whose SIGKILL is then not the cause to report).
                        let mut w = exit_rx.clone();
                        let _ = tokio::time::timeout(
                            Duration::from_millis(500),
                            w.wait_for(|c| c.is_some()),
                        )
                        .await;
                        let cause = exit_rx.borrow().clone();
                        spawn::kill_group(pgid);
                        let err = failure(server, handshake, cause, &stderr);
                        // A refusal of the sandbox it printed says more than its exit: name the path and the grant.
                        let start = crate::sandbox::explain::Start {
                            config: &self.sandbox,
                            server: &server.name,
                            program: command,
                            args: &server.args,
                            env: &env,
                            settings: &settings,
                        };
                        return Err(start.failure(&stderr.tail(40)).unwrap_or(err));
                    }
                    Err(_) => {
                        spawn::kill_group(pgid);
                        let first = if first_download {
                            " (the first start of a package runner, which downloads its package first, gets this long)"
                        } else {
                            ""
                        };
                        return Err(with_tail(
                            Error::StartFailed {
                                server: server.name.clone(),
                                why: ad_core::error::StartFailure::HandshakeTimeout,
                                message: format!(
                                    "handshake timed out after {}{first}: {}, and agent-discover stopped it (a longer activation timeout: the server's activate_timeout_ms)",
                                    crate::launcher::shown(timeout),
                                    if started.is_some() {
                                        "the server did not answer initialize"
                                    } else {
                                        "the server was still starting (it had not read its input yet)"
                                    }
                                ),
                            },
                            &stderr,
                        ));
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
                let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers.clone());
                // OAuth unless the server is configured with its own Authorization header.
                let plain = headers.contains_key(&http::header::AUTHORIZATION);
                if !plain {
                    auth = Some(ad_oauth::Session::new(self.oauth.clone(), server.clone()));
                }
                let deadline = tokio::time::Instant::now() + timeout;
                let connect = |handler: ChildClient, mode: Option<ClientLifecycleMode>| {
                    connect_http(
                        handler,
                        mode,
                        config.clone(),
                        auth.clone(),
                        progress_seen.clone(),
                        deadline,
                    )
                };
                // The newest era first (`server/discover`, falling back to `initialize` when the server says it
                // does not know the method).
                let mut service = connect(handler.clone(), Some(newest_era())).await;
                // Some legacy servers refuse a request before `initialize` without naming it (HTTP 400, no id):
                // connect again with the legacy handshake alone.
                if let Ok(Err(e)) = &service {
                    tracing::debug!(server = %server.name, error = %e, "server/discover failed; trying initialize");
                    service = connect(handler.clone(), None).await;
                }
                let service = match service {
                    Err(_) => return Err(timed_out("activation (initialize)")),
                    Ok(Err(e)) => {
                        let e = upstream(format!("initialize failed: {e}"));
                        return Err(self.auth_failure(server, auth.as_deref(), e).await);
                    }
                    Ok(Ok(s)) => s,
                };
                // A 2026-07-28 child may serve legacy clients things its 2026-07-28 path does not (its own sampling,
                // elicitation and roots requests, resource subscriptions): a second connection in the legacy era,
                // when it accepts one, is what legacy clients' requests go to (`era.rs`). Whatever versions its
                // discovery listed: a server that lists only 2026-07-28 may serve `initialize` on the same URL.
                if service
                    .peer()
                    .peer_info()
                    .is_some_and(|i| !i.protocol_version.has_initialize())
                {
                    let handler = ChildClient {
                        legacy_session: true,
                        ..handler.clone()
                    };
                    let (config, session, seen) =
                        (config.clone(), auth.clone(), progress_seen.clone());
                    // Opened on a legacy client's first request (`era.rs`), each attempt within the activation
                    // timeout.
                    legacy_connect = Some(Arc::new(move || {
                        let (handler, config, session, seen) = (
                            handler.clone(),
                            config.clone(),
                            session.clone(),
                            seen.clone(),
                        );
                        Box::pin(connect_legacy(handler, config, session, seen, timeout))
                    }));
                }
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
        let protocol = peer
            .peer_info()
            .map(|i| i.protocol_version.clone())
            .unwrap_or_default();
        tracing::debug!(server = %server.name, protocol = %protocol, "connected");
        // Recorded for `list --json`, REST and the dashboard, which read the registry.
        if let Err(e) = self
            .registry
            .store()
            .set_protocol(server.id, protocol.as_str())
        {
            tracing::warn!(server = %server.name, error = %e, "could not record the protocol revision");
        }
        if let Err(e) = self.registry.store().set_server_runtime(
            server.id,
            runtime
                .as_ref()
                .and_then(|r| serde_json::to_string(r).ok())
                .as_deref(),
        ) {
            tracing::warn!(server = %server.name, error = %e, "could not record the runtime");
        }
        let tools = match tokio::time::timeout(timeout, peer.list_all_tools()).await {
            // Only tools that pass the server's filters and pins are kept (`pinning.rs`).
            Ok(Ok(t)) => self.registry.gate_tools(server.id, &server.name, t),
            Ok(Err(e)) => {
                spawn::kill_group(pgid);
                let e = upstream(format!("tools/list failed: {e}"));
                return Err(with_stderr(
                    self.auth_failure(server, auth.as_deref(), e).await,
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
            protocol,
            auth,
            progress_seen,
            log_floor: Mutex::new(None),
            lane,
            gated: Default::default(),
            legacy: Default::default(),
            legacy_connect,
            legacy_retry: Mutex::new(None),
            runtime,
            fetched,
            personal,
        });
        // Which tools ask or refuse (`approval.rs`): the fast lane leaves them to the normal path.
        self.gate_approvals(&child);
        // A 2026-07-28 child tells of list changes only on a `subscriptions/listen` stream.
        if !child.protocol.has_initialize() {
            self.follow_list_changes(&child);
        }
        // A log level a client set before this child started applies to it too.
        self.apply_log_level(&child).await;
        Ok(child)
    }
}

impl Inner {
    /// A request failed: when the server asked for authorization (401) or more scope (403), starts the
    /// authorization and answers with its URL instead of `err`.
    pub(super) async fn auth_failure(
        &self,
        server: &Server,
        session: Option<&ad_oauth::Session>,
        err: Error,
    ) -> Error {
        let Some((status, challenge)) = session.and_then(|s| s.take_challenge()) else {
            return err;
        };
        let step_up = status == 403;
        if step_up && challenge.error.as_deref() != Some("insufficient_scope") {
            return err;
        }
        match self.oauth.begin(server, Some(&challenge), step_up).await {
            Ok(auth_url) => Error::AuthRequired {
                server: server.name.clone(),
                auth_url,
            },
            Err(e) => e,
        }
    }
}

impl Inner {
    /// A refusal of `caller`'s read or prompt get by `child`: on a server each user authorizes for themselves, that
    /// user's own authorization starts and the error carries its URL, as a tool call's does.
    pub(super) async fn user_refusal(
        &self,
        child: &crate::state::Child,
        caller: &crate::Caller,
        err: Error,
    ) -> Error {
        match (&child.auth, &caller.principal) {
            (Some(session), Some(p)) if session.per_user() => {
                match self.registry.get_by_id(child.server_id) {
                    Ok(server) => self.user_auth_failure(&server, session, p, err).await,
                    Err(_) => err,
                }
            }
            _ => err,
        }
    }

    /// [`Inner::auth_failure`] for a user's request on a server each user authorizes for themselves
    /// (`OAUTH_PER_USER=on`): the user's own authorization starts, and only this user is given its URL.
    pub(super) async fn user_auth_failure(
        &self,
        server: &Server,
        session: &ad_oauth::Session,
        principal: &ad_core::identity::Principal,
        err: Error,
    ) -> Error {
        let Some((status, challenge)) = session.take_user_challenge(principal) else {
            return err;
        };
        let step_up = status == 403;
        if step_up && challenge.error.as_deref() != Some("insufficient_scope") {
            return err;
        }
        match self
            .oauth
            .begin_for_user(server, principal, Some(&challenge), step_up)
            .await
        {
            Ok(auth_url) => Error::AuthRequired {
                server: server.name.clone(),
                auth_url,
            },
            Err(e) => e,
        }
    }
}

/// How children are connected: `server/discover` of 2026-07-28 first, the legacy `initialize` handshake (2025-11-25)
/// when the server does not know it.
fn newest_era() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::LATEST],
        legacy_version: Some(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE),
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

/// Why a handshake that failed before the timeout failed: the guard refused to start it (a sandbox refusal), the
/// server exited by itself (`exit`: its status, with its last stderr lines), or it answered something the handshake
/// could not take (`handshake`) and agent-discover stopped it.
fn failure(
    server: &Server,
    handshake: Option<String>,
    exit: Option<String>,
    stderr: &StderrRing,
) -> Error {
    // The guard refused to start it (the sandbox could not be set up, or denied the program): say so as such.
    if exit.is_some()
        && let Some(line) = stderr
            .tail(10)
            .into_iter()
            .find(|l| l.starts_with(ad_core::sandbox::REFUSED_PREFIX))
    {
        return Error::SandboxDenied {
            server: server.name.clone(),
            message: line[ad_core::sandbox::REFUSED_PREFIX.len()..]
                .trim()
                .to_owned(),
        };
    }
    let (why, message) = match (exit, handshake) {
        (Some(cause), _) => (
            StartFailure::Exited,
            format!("exited before completing initialize ({cause})"),
        ),
        (None, Some(e)) => (
            StartFailure::Stopped,
            format!("initialize failed: {e}; agent-discover stopped the server"),
        ),
        (None, None) => (
            StartFailure::Exited,
            "exited before completing initialize".to_owned(),
        ),
    };
    with_tail(
        Error::StartFailed {
            server: server.name.clone(),
            why,
            message,
        },
        stderr,
    )
}

/// A start failure with the last lines the server wrote on stderr.
fn with_tail(err: Error, stderr: &StderrRing) -> Error {
    let tail = stderr.tail(10);
    match err {
        Error::StartFailed {
            server,
            why,
            message,
        } if !tail.is_empty() => Error::StartFailed {
            server,
            why,
            message: format!("{message}; last stderr lines:\n{}", tail.join("\n")),
        },
        other => other,
    }
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
