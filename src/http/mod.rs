//! The dashboard server: REST API, live WebSocket stream, the embedded web dashboard, MCP over Streamable HTTP at
//! `/mcp`, and Prometheus metrics, on one axum router.
//!
//! A thin adapter: handlers parse, call a domain service on `App`, and render; the rules live below `app`.
//! Every route is listed in [`ops`] (one line each; the OpenAPI document is generated from the same list) plus the
//! `/mcp` service and the static files in [`router_with`].
//!
//! Leader election: every `agent-discover mcp` process tries to bind the dashboard port; the first one serves it, the
//! others see the port taken ([`bind`] answers `None`) and stay stdio-only.

mod agents;
mod answer;
mod api;
mod approvals;
mod assets;
mod error;
mod guards;
mod introspect;
mod lane;
mod limits;
mod oauth;
mod openapi;
mod overrides;
mod personal;
mod pins;
mod policy;
mod profiles;
pub mod protect;
mod registry_events;
mod sandbox;
mod saved_scripts;
mod scripts;
pub mod security;
mod servers;
mod ws;
mod ws_view;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, get, on};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use error::{ApiError, status_of};
pub use oauth::serve_callback;
pub use security::Security;

use crate::app::App;
use crate::mcp::{McpServer, ToolsMode};

/// Milliseconds between the SSE comments an open `/mcp` answer stream gets (rmcp's and the lane's alike): 15 s unless
/// set (tests use a short one).
pub(crate) const ENV_KEEPALIVE: &str = "AGENT_DISCOVER_SSE_KEEPALIVE_MS";

/// The interval of [`ENV_KEEPALIVE`], read once.
pub(crate) fn sse_keep_alive() -> Duration {
    static EVERY: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| {
        let ms = std::env::var(ENV_KEEPALIVE)
            .ok()
            .and_then(|v| v.parse().ok());
        Duration::from_millis(ms.filter(|ms| *ms > 0).unwrap_or(15_000))
    })
}

/// The default dashboard port (seed 000).
pub use ad_registry::config::DEFAULT_PORT;
/// Largest JSON request body the REST API reads.
pub const BODY_LIMIT: usize = 1024 * 1024;
/// Largest JSON-RPC message `/mcp` reads (tool arguments can be large).
pub const MCP_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// How long open connections (WebSockets, MCP streams) get to close after shutdown starts.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

#[derive(Clone)]
pub(crate) struct AppState {
    app: Arc<App>,
    hub: Arc<ws::Hub>,
    started: Instant,
    token_required: bool,
    openapi: Arc<serde_json::Value>,
}

/// One REST route: what the router serves and what the OpenAPI document says about it, from one line.
pub(crate) struct Op {
    pub method: Method,
    pub path: &'static str,
    pub summary: &'static str,
    /// Query parameters: (name, description).
    pub query: &'static [(&'static str, &'static str)],
    /// Request body schema (a name in the document's components).
    pub body: Option<&'static str>,
    /// Success status and response schema.
    pub returns: (u16, &'static str),
    handler: MethodRouter<AppState>,
}

fn op<H, T>(method: Method, path: &'static str, summary: &'static str, handler: H) -> Op
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("a standard method");
    Op {
        method,
        path,
        summary,
        query: &[],
        body: None,
        returns: (200, "Object"),
        handler: on(filter, handler),
    }
}

impl Op {
    fn query(mut self, q: &'static [(&'static str, &'static str)]) -> Op {
        self.query = q;
        self
    }
    fn body(mut self, schema: &'static str) -> Op {
        self.body = Some(schema);
        self
    }
    fn returns(mut self, status: u16, schema: &'static str) -> Op {
        self.returns = (status, schema);
        self
    }
}

/// Every route but `/mcp` and the dashboard's static files.
pub(crate) fn ops() -> Vec<Op> {
    use Method as M;
    use api::*;
    const S: &str = "/api/servers/{id}";
    vec![
        op(M::GET, "/health", "Liveness: status, version, uptime, pid", health).returns(200, "Health"),
        op(M::GET, "/api/servers", "List registered servers (full-text query, source, installed)", list_servers)
            .query(&[("query", "full-text search over name, description and tags"), ("source", "manual, local, registry, npm, pypi or smithery"), ("installed", "true: installed servers only")])
            .returns(200, "ServerList"),
        op(M::POST, "/api/servers", "Register a server", create_server).body("ServerCreate").returns(201, "Server"),
        op(M::GET, S, "One server with its tools and, when it runs here, its child status", get_server).returns(200, "ServerDetail"),
        op(M::PUT, S, "Change a server's configuration", update_server).body("ServerPatch").returns(200, "Server"),
        op(M::DELETE, S, "Stop and remove a server with its tools, secrets and metrics", delete_server).returns(200, "Status"),
        op(M::POST, "/api/servers/{id}/activate", "Start a server; its tools appear to MCP clients", activate).returns(200, "Activation"),
        op(M::POST, "/api/servers/{id}/deactivate", "Stop a server and clear its active flag", deactivate).returns(200, "Status"),
        op(M::POST, "/api/servers/{id}/enable", "Enable a disabled server with its last configuration and start it", enable_server).returns(200, "AddServerResult"),
        op(M::POST, "/api/servers/{id}/disable", "Stop a server and keep it from starting (entry, secrets and tokens kept)", disable_server).returns(200, "Status"),
        op(M::GET, "/api/servers/{id}/secrets", "A server's secrets, masked", list_secrets).returns(200, "SecretList"),
        op(M::PUT, "/api/servers/{id}/secrets/{key}", "Set a secret (encrypted at rest; used at the next activation)", set_secret).body("SecretValue").returns(200, "SecretSet"),
        op(M::DELETE, "/api/servers/{id}/secrets/{key}", "Delete a secret", delete_secret).returns(200, "Status"),
        op(M::GET, "/api/servers/{id}/my-secrets", "Your own values of a server's secrets, masked (identity on)", personal::list_mine).returns(200, "Object"),
        op(M::PUT, "/api/servers/{id}/my-secrets/{key}", "Set your own value of a secret: your calls then run with it (identity on)", personal::set_mine).body("SecretValue").returns(200, "Object"),
        op(M::DELETE, "/api/servers/{id}/my-secrets/{key}", "Delete your own value of a secret", personal::delete_mine).returns(200, "Status"),
        op(M::GET, "/api/servers/{id}/personal-keys", "Which users have their own keys (never the values), the rule for the others, their running children", personal::view).returns(200, "Object"),
        op(M::PUT, "/api/servers/{id}/personal-keys", "Whether users without their own values use the shared ones ({\"allow_shared\": bool})", personal::set).body("Object").returns(200, "Object"),
        op(M::POST, "/api/servers/{id}/health", "Check that a server answers; records the result", check_health).returns(200, "HealthReport"),
        op(M::GET, "/api/servers/{id}/metrics", "Per-tool call metrics of a server", server_metrics).returns(200, "ToolMetricsList"),
        op(M::POST, "/api/servers/{id}/call", "Call a tool of an active server (logged like any proxied call)", call_tool).body("CallRequest").returns(200, "CallToolResult"),
        op(M::GET, "/api/metrics", "Call metrics per server", metrics_overview).returns(200, "ServerMetricsList"),
        op(M::GET, "/api/browse", "Search the marketplace: official MCP registry, npm and PyPI, merged", browse)
            .query(&[("query", "search words"), ("limit", "results per source (default 20, at most 100)"), ("cursor", "the official registry's next page")])
            .returns(200, "BrowseResult"),
        op(M::POST, "/api/install", "Install a server from the marketplace (or learn which values it needs)", install)
            .body("InstallRequest")
            .returns(201, "InstallOutcome"),
        op(M::GET, "/api/prereqs", "Which install tools (npx, uvx, uv, docker) this machine has", prereqs).returns(200, "Prereqs"),
        op(M::GET, "/api/logs", "Recent proxied calls, newest first", logs)
            .query(&[("limit", "at most this many entries (default 100, at most 500)"), ("offset", "skip this many")])
            .returns(200, "LogPage"),
        op(M::DELETE, "/api/logs", "Clear the call log", clear_logs).returns(200, "Status"),
        op(M::GET, "/api/status", "Running children, call counts, registry figures", status).returns(200, "Object"),
        op(M::GET, "/api/openapi.json", "This document", openapi).returns(200, "Object"),
        op(M::GET, "/metrics", "Prometheus text metrics: calls, errors, latency per server and tool, active servers, children", prometheus).returns(200, "PrometheusText"),
        op(M::GET, "/api/registry/events", "Server-Sent Events: registry snapshots {seq, servers}, seq 0 first, then one per change", registry_events::stream).returns(200, "RegistryEvents"),
        op(M::POST, "/api/config/apply", "Import an MCP client's config file (inline `config` + `format`, or `path`)", apply_config).body("ConfigApply").returns(200, "ConfigApplied"),
        op(M::GET, "/ws", "WebSocket: state snapshots with a sequence number, and call-log entries as they happen", ws::upgrade).returns(101, "WebSocketStream"),
        op(M::GET, "/api/tools/pending", "Tools withheld until approved (changed since approval, or new while held)", pins::pending)
            .query(&[("server", "only this server's")])
            .returns(200, "PendingTools"),
        op(M::GET, "/api/servers/{id}/tools/{tool}/diff", "A pinned tool's approved and current definition and what differs", pins::diff).returns(200, "ToolDiff"),
        op(M::POST, "/api/servers/{id}/tools/approve", "Approve one tool as it is now, or every pending tool of the server", pins::approve)
            .body("ToolApproval")
            .returns(200, "ToolApproved"),
        op(M::GET, "/api/servers/{id}/tool-filter", "A server's allow/deny patterns on tool names", pins::get_filter).returns(200, "ToolFilter"),
        op(M::PUT, "/api/servers/{id}/tool-filter", "Replace a server's allow/deny patterns (a filtered tool is hidden everywhere)", pins::set_filter)
            .body("ToolFilter")
            .returns(200, "ToolFilter"),
        op(M::GET, "/api/tools/overrides", "Tool overrides (what the agent sees instead of a tool's own definition), of every server or one", overrides::list)
            .query(&[("server", "only this server's"), ("profile", "this profile's overrides instead of the servers' own")])
            .returns(200, "ToolOverrideList"),
        op(M::GET, "/api/servers/{id}/tools/{tool}/override", "One tool's override, the name it is shown as and whether it is served", overrides::get)
            .query(&[("profile", "this profile's override of the tool instead of the server's own")])
            .returns(200, "ToolOverride"),
        op(M::PUT, "/api/servers/{id}/tools/{tool}/override", "Replace a tool's override (the tool is withheld until approved with it)", overrides::set)
            .query(&[("profile", "set this profile's override (what its clients see, over the server's own)")])
            .body("ToolOverrideBody")
            .returns(200, "ToolOverride"),
        op(M::DELETE, "/api/servers/{id}/tools/{tool}/override", "Remove a tool's override", overrides::clear)
            .query(&[("profile", "remove this profile's override instead of the server's own")])
            .returns(200, "ToolOverrideCleared"),
        op(M::GET, "/api/servers/{id}/tool-policy", "A server's approval policy rules (allow, ask, deny per server, tool or annotation) and what each tool resolves to", approvals::get_policy)
            .returns(200, "ToolPolicy"),
        op(M::PUT, "/api/servers/{id}/tool-policy", "Set or remove one approval policy rule (`tool`, `annotation` or neither: server-wide; `policy` null removes it)", approvals::set_policy)
            .body("ToolPolicyRule")
            .returns(200, "ToolPolicy"),
        op(M::GET, "/api/approvals", "Calls waiting for a person's approval, newest first", approvals::list)
            .query(&[("all", "true: recent approvals of every kind and status")])
            .returns(200, "ApprovalList"),
        op(M::POST, "/api/approvals/{id}/approve", "Approve a waiting call, once or for the rest of its caller's session", approvals::approve)
            .body("ApprovalDecision")
            .returns(200, "Approval"),
        op(M::POST, "/api/approvals/{id}/deny", "Deny a waiting call (it ends with kind approval_denied)", approvals::deny).returns(200, "Approval"),
        op(M::GET, "/api/servers/{id}/sandbox", "A server's sandbox: settings, whether it is confined, the paths it may use, what the kernel offers", sandbox::get)
            .returns(200, "SandboxView"),
        op(M::PUT, "/api/servers/{id}/sandbox", "Change a server's sandbox settings (network, granted paths, on/off); applied at its next start", sandbox::set)
            .body("SandboxPatch")
            .returns(200, "SandboxView"),
        op(M::GET, "/api/guards", "The guards on calls: the global settings and every server's decisions since start", guards::all)
            .returns(200, "GuardsView"),
        op(M::GET, "/api/servers/{id}/guards", "A server's guards on calls: its own settings, what applies to its calls, its decisions since start", guards::get)
            .returns(200, "GuardsView"),
        op(M::PUT, "/api/servers/{id}/guards", "Change a server's own guard settings (off, warn, block, or default to follow the global)", guards::set)
            .body("GuardsPatch")
            .returns(200, "GuardsView"),
        op(M::GET, "/api/limits", "Every server's rate limits, concurrency cap and circuit breaker, with their state in this process", limits::list)
            .returns(200, "LimitsList"),
        op(M::GET, "/api/servers/{id}/limits", "A server's rate limits, concurrency cap and circuit breaker, with their state (tokens, calls in flight and queued, the breaker)", limits::get)
            .returns(200, "LimitsView"),
        op(M::PUT, "/api/servers/{id}/limits", "Change a server's limits (rate, burst, per-tool and per-caller rates, concurrency, queue, wait, breaker, cool-down); applies to its next call", limits::set)
            .body("LimitsPatch")
            .returns(200, "LimitsView"),
        op(M::POST, "/api/servers/{id}/limits/reset", "Close a server's open circuit breaker now", limits::reset)
            .returns(200, "LimitsView"),
        op(M::POST, "/api/servers/{id}/sandbox/check", "Start a stdio server once, confined as its next start will be, and report what the sandbox refused it, with the command that grants each path", sandbox::check)
            .returns(200, "SandboxCheck"),
        op(M::GET, "/api/introspections", "Batch introspection results: the latest record per package and the count per category", introspect::list)
            .query(&[("category", "only this category (ok, ok_zero_tools, install_failed, needs_credentials, ...)")])
            .returns(200, "Introspections"),
        op(M::GET, "/api/servers/{id}/auth", "A remote server's OAuth authorization (tokens masked)", oauth::status).returns(200, "Object"),
        op(M::POST, "/api/servers/{id}/auth", "Connect a remote server, authorizing first when it asks (answers authUrl)", oauth::start).returns(200, "Object"),
        op(M::POST, "/api/servers/{id}/auth/finish", "Complete a waiting authorization with the callback URL or code", oauth::finish).body("AuthFinish").returns(200, "Object"),
        op(M::POST, "/api/servers/{id}/reauthorize", "Start a new authorization; the old tokens serve until it completes", oauth::reauthorize).returns(200, "Object"),
        op(M::GET, "/oauth/callback/{server}", "OAuth redirect target: completes the authorization and shows a page", oauth::callback).returns(200, "Html"),
        op(M::POST, "/api/scripts/run", "Code mode: run a JavaScript program that calls tools here; only its result, logs and calls come back", scripts::run)
            .body("ScriptRun")
            .returns(200, "ScriptAnswer"),
        op(M::GET, "/api/scripts/api", "Code mode: TypeScript declarations of the tools a script can call", scripts::api)
            .query(&[("servers", "only these servers' tools (comma-separated)"), ("query", "only the tools this finds")])
            .returns(200, "TypeScript"),
        op(M::GET, "/api/scripts/saved", "Saved scripts: code-mode scripts served as tools scripts__NAME", saved_scripts::list).returns(200, "Object"),
        op(M::POST, "/api/scripts/saved", "Save (or replace) a script as the tool scripts__NAME", saved_scripts::save).body("ScriptSave").returns(200, "SavedScript"),
        op(M::GET, "/api/scripts/saved/{name}", "One saved script, with its body", saved_scripts::show).returns(200, "SavedScript"),
        op(M::DELETE, "/api/scripts/saved/{name}", "Remove a saved script (and its tool)", saved_scripts::remove).returns(200, "Status"),
        op(M::GET, "/api/results/{id}", "A page of a large tool result kept behind its link", saved_scripts::read_result)
            .query(&[("offset", "where the page starts, in bytes (0 or a page's next_offset)"), ("limit", "the page's length in bytes (default 65536)")])
            .returns(200, "ResultPage"),
        op(M::GET, "/api/servers/{id}/paging", "A server's paging limit for large results", saved_scripts::get_paging).returns(200, "Paging"),
        op(M::PUT, "/api/servers/{id}/paging", "Set a server's paging limit (bytes; 0 never pages; null: the default)", saved_scripts::set_paging).body("Paging").returns(200, "Paging"),
        op(M::GET, "/api/profiles", "Profiles: named sets of servers and tool globs, each served at /mcp/profiles/NAME", profiles::list).returns(200, "ProfileList"),
        op(M::POST, "/api/profiles", "Create a profile (its servers must be registered)", profiles::create).body("Profile").returns(201, "ProfileView"),
        op(M::GET, "/api/profiles/export", "The export file of profiles (every one without names)", profiles::export)
            .query(&[("names", "only these profiles (comma-separated)")])
            .returns(200, "ProfileFile"),
        op(M::POST, "/api/profiles/import", "Import an export file: every profile checked before any is stored", profiles::import)
            .query(&[("replace", "true: replace profiles of the same name")])
            .body("ProfileFile")
            .returns(200, "ProfileImport"),
        op(M::GET, "/api/profiles/{name}", "A profile, the tools it holds now and its endpoints", profiles::show).returns(200, "ProfileView"),
        op(M::PATCH, "/api/profiles/{name}", "Change a profile: replace its lists or add and remove entries", profiles::change).body("ProfileChange").returns(200, "ProfileView"),
        op(M::DELETE, "/api/profiles/{name}", "Remove a profile (its endpoint answers 404 from then on)", profiles::remove).returns(200, "Status"),
        op(M::GET, "/api/agents", "A2A agents with capabilities and last known status", agents::list).returns(200, "AgentList"),
        op(M::POST, "/api/agents", "Add an A2A agent from its card URL, or a worker command", agents::add).body("AgentCreate").returns(201, "Agent"),
        op(M::DELETE, "/api/agents/{id}", "Remove an agent (its worker is stopped)", agents::remove).returns(200, "Status"),
        op(M::GET, "/api/policy", "The policies for calls in force, where they come from, and the last load's failure", policy::list).returns(200, "PolicyList"),
        op(M::POST, "/api/policy/test", "A dry run of a call against the policies: the outcome and which policy decided", policy::test)
            .body("PolicyTest").returns(200, "PolicyDecision"),
        op(M::POST, "/api/policy/check", "Validate Cedar policy text without putting it in force", policy::check)
            .body("PolicyCheck").returns(200, "PolicyChecked"),
        op(M::POST, "/api/policy/reload", "Read the policy files again now (they are also watched)", policy::reload).returns(200, "PolicyList"),
    ]
}

/// The router for `app` under `security`, for tests and embedders; its background tasks end when it is dropped.
/// Must be called inside a Tokio runtime.
pub fn router(app: Arc<App>, security: Security) -> Router {
    router_with(app, security, ToolsMode::Dynamic, &CancellationToken::new())
}

fn router_with(
    app: Arc<App>,
    security: Security,
    mode: ToolsMode,
    shutdown: &CancellationToken,
) -> Router {
    let ops = ops();
    // The protected front's visibility rules (issue 30), applied by the proxy to every caller with a principal.
    if let Some(identity) = security.identity() {
        app.proxy.set_visibility(identity.clone());
        // Its settings file's rules are read again when it changes (`ident::reload`); then every server's lists may
        // differ for someone: clients are sent list_changed and the dashboard's snapshots are rebuilt.
        let weak = Arc::downgrade(&app);
        identity.watch_rules(shutdown.child_token(), move || {
            let Some(app) = weak.upgrade() else { return };
            match app.registry.list(&crate::model::ListFilter::default()) {
                Ok(rows) => {
                    for r in rows {
                        app.events.emit(crate::events::Event::ToolsChanged {
                            name: r.server.name,
                        });
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the servers after the rules changed")
                }
            }
        });
    }
    // Registry snapshots (`/api/registry/events`, `/ws`) and reconciliation with other processes.
    app.feed();
    let state = AppState {
        hub: ws::Hub::start(app.clone(), shutdown),
        started: Instant::now(),
        token_required: security.token_required(),
        openapi: Arc::new(openapi::document(&ops)),
        app: app.clone(),
    };
    let mut api = Router::new();
    for o in ops {
        api = api.route(o.path, o.handler);
    }
    let mcp_config = StreamableHttpServerConfig::default()
        .with_sse_keep_alive(Some(sse_keep_alive()))
        .with_allowed_hosts(security.allowed_hosts().iter().cloned())
        .with_max_request_body_bytes(MCP_BODY_LIMIT)
        .with_cancellation_token(shutdown.child_token());
    let per_server = servers::PerServer::new(app.clone(), mcp_config.clone());
    let per_profile = servers::PerServer::profiles(app.clone(), mcp_config.clone(), mode);
    let sessions = Arc::new(LocalSessionManager::default());
    // The proxied calls the fast lane carries go from `/mcp` straight to the child (`lane.rs`).
    let lane = lane::HttpLane::new(app.clone(), sessions.clone(), security.identity().is_some());
    let mcp = StreamableHttpService::new(
        move || {
            Ok(crate::mcp::Traced(McpServer::for_http(
                app.clone(),
                crate::mcp::View::All(mode),
            )))
        },
        sessions,
        mcp_config,
    );
    let security = Arc::new(security);
    let mut mcp_routes = Router::new().route_service("/mcp", mcp);
    if let Some(lane) = lane {
        mcp_routes =
            mcp_routes.route_layer(axum::middleware::from_fn_with_state(lane, lane::relay));
    }
    // Every JSON-RPC request with an id is answered with it, even one rmcp cannot type (`answer.rs`).
    let mcp_routes = mcp_routes
        .route(
            "/mcp/servers/{name}",
            axum::routing::any(
                move |axum::extract::Path(name): axum::extract::Path<String>,
                      request: axum::extract::Request| {
                    per_server.handle(name, request)
                },
            ),
        )
        .route(
            "/mcp/profiles/{name}",
            axum::routing::any(
                move |axum::extract::Path(name): axum::extract::Path<String>,
                      request: axum::extract::Request| {
                    per_profile.handle(name, request)
                },
            ),
        )
        .route_layer(axum::middleware::from_fn(answer::every_id_answered));
    api.merge(mcp_routes)
        .route("/", get(assets::index))
        .route("/{file}", get(assets::file))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        // Outermost: nothing runs for a request with a foreign Host or Origin, or without the token.
        .layer(axum::middleware::from_fn_with_state(
            security,
            security::guard,
        ))
        .with_state(state)
}

/// Binds `host:port`. A port already in use is `Ok(None)`: another process leads the dashboard.
pub async fn bind(host: IpAddr, port: u16) -> std::io::Result<Option<TcpListener>> {
    match TcpListener::bind(SocketAddr::new(host, port)).await {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Ok(None),
        Err(e) => Err(e),
    }
}

/// Serves the dashboard on `listener` until `shutdown` resolves, then gives open connections a moment to close.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    security: Security,
    mode: ToolsMode,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let cancel = CancellationToken::new();
    // Redirect URIs point at this listener (unless a public URL is configured).
    if let Ok(addr) = listener.local_addr() {
        app.oauth.set_listener(addr);
    }
    // Every route made a service once, here: served as the router itself, axum does that (a copy of the route
    // table) for every connection, 140k instructions each (BENCHMARKS.md, "Every relay path, second pass").
    let router = router_with(app, security, mode, &cancel).with_state(());
    let stop = cancel.clone();
    // Nagle off: an answer's chunks (headers, the SSE event, the end) go out at once instead of waiting for the
    // client's delayed ACK, which cost 44 ms per MCP request (BENCHMARKS.md, "Identity").
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let server = axum::serve(listener, router.into_make_service())
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Ends WebSocket streams and MCP sessions, which graceful shutdown would otherwise wait for forever.
            stop.cancel();
        })
        .into_future();
    tokio::select! {
        r = server => r,
        _ = async { cancel.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::warn!("connections still open {SHUTDOWN_GRACE:?} after shutdown; closing them");
            Ok(())
        }
    }
}
