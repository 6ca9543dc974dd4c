//! A real MCP server built into the binary for tests (`agent-discover fixture-server`), with misbehaviours switched by flags.
//!
//! Tests of this and later issues spawn it as a child: slow or hanging initialize, exit before initialize, crash after
//! N calls, garbage on stdout, a 10 MB result, `tools/list_changed` on demand, resources, prompts, and sampling,
//! elicitation and roots requests sent to its client.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

#[derive(Debug, Clone, clap::Args)]
pub struct FixtureArgs {
    /// serverInfo name.
    #[arg(long, default_value = "fixture")]
    pub name: String,
    /// Extra tool `NAME` or `NAME=DESCRIPTION` (repeatable); it echoes its arguments.
    #[arg(long = "tool")]
    pub tools: Vec<String>,
    /// More extra tools, `NAME=DESCRIPTION` per line, read from this file at every tools/list (a server whose tools
    /// change between starts, or at run time).
    #[arg(long)]
    pub tool_file: Option<std::path::PathBuf>,
    /// Also generate N tools `tool_1..tool_N`.
    #[arg(long, default_value_t = 0)]
    pub tool_count: usize,
    /// Delay the initialize response.
    #[arg(long, default_value_t = 0)]
    pub init_delay_ms: u64,
    /// Never answer initialize.
    #[arg(long)]
    pub init_hang: bool,
    /// Exit with "API key required" on stderr before initialize, unless this variable is set.
    #[arg(long)]
    pub require_env: Option<String>,
    /// Exit with "API key required" on stderr before initialize, always.
    #[arg(long)]
    pub exit_before_init: bool,
    /// Serve N tool calls, then exit in the middle of the next one.
    #[arg(long)]
    pub crash_after: Option<u64>,
    /// Print non-JSON lines on stdout before serving.
    #[arg(long)]
    pub garbage_stdout: bool,
    /// Number of resources (`fixture://resource/1..N`) and one template.
    #[arg(long, default_value_t = 0)]
    pub resources: usize,
    /// Number of prompts (`prompt_1..N`).
    #[arg(long, default_value_t = 0)]
    pub prompts: usize,
    /// Lines to print on stderr at start.
    #[arg(long, default_value_t = 0)]
    pub stderr_lines: usize,
    /// Serve tools/list in pages of this many tools (0: one page).
    #[arg(long, default_value_t = 0)]
    pub page_size: usize,
    /// Serve the conformance suite's scenarios (`test_simple_text`, `test://static-text`, ...) instead.
    #[arg(long)]
    pub conformance: bool,
    /// Serve Streamable HTTP at `http://127.0.0.1:PORT/mcp` (0: any free port; the URL is printed on stdout)
    /// instead of stdio.
    #[arg(long, value_name = "PORT")]
    pub http: Option<u16>,
    /// Declare logging, honour `logging/setLevel` (every level until one is set) and offer the tool `log`, which
    /// sends one message at each of debug, info, warning and error that the level lets through.
    #[arg(long)]
    pub logging: bool,
    /// Extra tool `NAME` whose every call is answered with a JSON-RPC error (code -32042, data `{"tool": NAME}`).
    #[arg(long = "error-tool")]
    pub error_tools: Vec<String>,
    /// Misbehave the way one kind of real server does (introspection's failure taxonomy, issue 14).
    #[arg(long, value_enum)]
    pub fail: Option<FailMode>,
    /// Which protocol eras to speak: `legacy` answers `server/discover` (2026-07-28) with -32601, as servers of the
    /// older revisions do, so clients fall back to `initialize`; `both` speaks 2026-07-28 too. Default: `legacy`,
    /// `both` with `--conformance`.
    #[arg(long, value_enum)]
    pub era: Option<Era>,
    /// Positional arguments (`--fail usage` wants at least one).
    pub positional: Vec<String>,
    /// `--fail options` wants it (with `--root` and `--stdio`).
    #[arg(long)]
    pub api_key: Option<String>,
    /// `--fail options` wants an existing directory here.
    #[arg(long)]
    pub root: Option<std::path::PathBuf>,
    /// `--fail options` wants this switch.
    #[arg(long)]
    pub stdio: bool,
    /// `--fail help-only` wants a database file path here.
    #[arg(long)]
    pub db_path: Option<std::path::PathBuf>,
    /// Print the fixture's own usage text and exit (what `--fail help-only` documents only there).
    #[arg(long)]
    pub help: bool,
}

/// The protocol eras a fixture speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Era {
    /// 2025-11-25 and older only (`initialize`).
    Legacy,
    /// 2026-07-28 (`server/discover`, per-request `_meta`) as well.
    Both,
}

/// The answer of a legacy-only server to `server/discover`.
pub fn discover_unknown() -> McpError {
    McpError::method_not_found::<DiscoverRequestMethod>()
}

/// How the fixture imitates a failing server; each maps to one introspection category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailMode {
    /// Print a usage text and exit 1 unless a positional argument is given (`needs_args`).
    Usage,
    /// Print a usage text naming required options and exit 1 unless `--stdio`, `--api-key <key>` and `--root <dir>`
    /// (an existing directory) are given (`needs_args`).
    Options,
    /// Say only "Run `fixture-server --help` to see available commands" and exit 1 unless started as
    /// `serve <root> --db-path <file>` (`<root>` an existing directory); `--help` documents that (`needs_args`,
    /// rescued by the second pass only through the help text).
    HelpOnly,
    /// Exit 1 because a configuration file is missing (`needs_config`).
    MissingConfig,
    /// Exit 1 with a JavaScript-style TypeError (`crashed_on_start`).
    Crash,
    /// Exit 1 after a refused connection to an upstream service (`network_required`).
    Network,
    /// Answer initialize with a JSON-RPC error (`init_error`).
    InitError,
    /// Answer initialize with protocol version 1999-01-01 (`protocol_mismatch`).
    BadProtocol,
    /// Write log lines on stdout and never speak MCP (`non_json_stdout`).
    TextOnly,
    /// Never answer tools/list (`tools_list_timeout`).
    ListHang,
    /// Answer tools/list with a JSON-RPC error (`tools_list_error`).
    ListError,
    /// List no tools (`ok_zero_tools`).
    NoTools,
    /// Ignore SIGTERM and leave a `sleep 599.25` child in the process group, printing its pid on stderr (teardown).
    Stubborn,
}

struct Fixture {
    args: FixtureArgs,
    calls: AtomicU64,
    extra: Mutex<Vec<Tool>>,
    /// The level `logging/setLevel` chose (`--logging`).
    #[allow(deprecated)]
    log_level: std::sync::Mutex<Option<LoggingLevel>>,
}

/// The usage text `--help` prints.
fn help_text(mode: Option<FailMode>) -> &'static str {
    match mode {
        Some(FailMode::HelpOnly) => {
            "Usage: fixture-server <command> <root> [options]\n\nCommands:\n  fixture-server serve <root>  Start the MCP server on stdio\n  fixture-server inspect       Print the configuration\n\nOptions:\n  --db-path <file>  Path of the database file (required)\n  --verbose         More logs\n  --help            Show this help\n"
        }
        _ => {
            "Usage: fixture-server [options]\n\nOptions:\n  --name <name>  serverInfo name\n  --help         Show this help\n"
        }
    }
}

pub async fn run(args: FixtureArgs) -> anyhow::Result<()> {
    if args.help {
        print!("{}", help_text(args.fail));
        return Ok(());
    }
    for i in 0..args.stderr_lines {
        eprintln!("fixture stderr line {}", i + 1);
    }
    let missing_key = args
        .require_env
        .as_ref()
        .is_some_and(|k| std::env::var_os(k).is_none());
    if args.exit_before_init || missing_key {
        let key = args
            .require_env
            .clone()
            .unwrap_or_else(|| "FIXTURE_API_KEY".into());
        eprintln!("Error: API key required: set {key}");
        std::process::exit(1);
    }
    if let Some(mode) = args.fail
        && let Some(code) = fail_at_start(mode, &args)?
    {
        std::process::exit(code);
    }
    if args.garbage_stdout {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "this is not json-rpc")?;
        writeln!(out, "{{\"broken\": ")?;
        writeln!(out, "Server starting on stdio...")?;
        out.flush()?;
    }
    let make = {
        let args = args.clone();
        move || Fixture {
            args: args.clone(),
            calls: AtomicU64::new(0),
            extra: Mutex::new(Vec::new()),
            log_level: std::sync::Mutex::new(None),
        }
    };
    match (args.conformance, args.http) {
        (false, None) => serve_stdio(make()).await,
        (false, Some(port)) => serve_http(port, make).await,
        (true, port) => {
            let conformance = crate::fixture_conformance::Conformance::new(
                args.name.clone(),
                args.era == Some(Era::Legacy),
                port.is_none(),
            );
            match port {
                None => serve_stdio(conformance).await,
                Some(port) => serve_http(port, move || conformance.clone()).await,
            }
        }
    }
}

/// The start-up part of a failure mode: `Some(code)` to exit with.
fn fail_at_start(mode: FailMode, args: &FixtureArgs) -> anyhow::Result<Option<i32>> {
    use std::io::{BufRead, Write};
    match mode {
        FailMode::Usage if args.positional.is_empty() => {
            eprintln!("Usage: fixture-server --fail usage <allowed-directory>");
            eprintln!("Error: at least one allowed directory is required");
            Ok(Some(1))
        }
        FailMode::Options
            if !args.stdio
                || args.api_key.is_none()
                || !args.root.as_ref().is_some_and(|r| r.is_dir()) =>
        {
            eprintln!(
                "Usage: fixture-server --fail options --stdio --api-key <key> --root <dir> [--verbose]"
            );
            eprintln!("error: required option '--api-key <key>' not specified");
            Ok(Some(1))
        }
        FailMode::HelpOnly
            if args.positional.first().map(String::as_str) != Some("serve")
                || !args
                    .positional
                    .get(1)
                    .is_some_and(|r| std::path::Path::new(r).is_dir())
                || args.db_path.is_none() =>
        {
            eprintln!("Run `fixture-server --help` to see available commands");
            Ok(Some(1))
        }
        FailMode::MissingConfig => {
            eprintln!("Error: ENOENT: no such file or directory, open 'fixture.config.json'");
            Ok(Some(1))
        }
        FailMode::Crash => {
            eprintln!("TypeError: Cannot read properties of undefined (reading 'tools')");
            eprintln!("    at start (file:///fixture/index.js:12:5)");
            Ok(Some(1))
        }
        FailMode::Network => {
            eprintln!("Error: connect ECONNREFUSED 127.0.0.1:9");
            Ok(Some(1))
        }
        FailMode::TextOnly => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "Server listening on port 3000")?;
            writeln!(out, "Press Ctrl+C to stop")?;
            out.flush()?;
            drop(out);
            // Read until the client gives up and closes stdin.
            for line in std::io::stdin().lock().lines() {
                if line.is_err() {
                    break;
                }
            }
            Ok(Some(0))
        }
        FailMode::Stubborn => {
            #[cfg(unix)]
            // SAFETY: installing SIG_IGN for SIGTERM has no memory-safety preconditions.
            unsafe {
                libc::signal(libc::SIGTERM, libc::SIG_IGN);
            }
            let child = std::process::Command::new("sleep")
                .arg("599.25")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn()?;
            eprintln!("fixture: sleep child pid {}", child.id());
            Ok(None)
        }
        _ => Ok(None),
    }
}

async fn serve_stdio(handler: impl ServerHandler) -> anyhow::Result<()> {
    let service = handler.serve(rmcp::transport::stdio_pipes()).await?;
    service.waiting().await?;
    Ok(())
}

/// Streamable HTTP at `/mcp` on 127.0.0.1 (one handler per session); prints the URL on stdout once listening.
async fn serve_http<H: ServerHandler>(
    port: u16,
    make: impl Fn() -> H + Send + Sync + 'static,
) -> anyhow::Result<()> {
    use rmcp::transport::StreamableHttpService;
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let port = listener.local_addr()?.port();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts([format!("127.0.0.1:{port}"), "127.0.0.1".to_owned()]);
    let service = StreamableHttpService::new(
        move || Ok(make()),
        std::sync::Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().route_service("/mcp", service);
    println!("http://127.0.0.1:{port}/mcp");
    axum::serve(listener, router).await?;
    Ok(())
}

fn schema(v: Value) -> Arc<JsonObject> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

impl Fixture {
    fn builtin_tools(&self) -> Vec<Tool> {
        let obj = |props: Value, req: &[&str]| {
            schema(json!({"type": "object", "properties": props, "required": req}))
        };
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echo the given text back",
                obj(
                    json!({"text": {"type": "string", "description": "Text to echo"}}),
                    &["text"],
                ),
            ),
            Tool::new(
                "add",
                "Add two numbers",
                obj(
                    json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
            Tool::new(
                "sleep",
                "Sleep for ms milliseconds, sending progress notifications every step_ms",
                obj(
                    json!({"ms": {"type": "integer"}, "step_ms": {"type": "integer"}}),
                    &["ms"],
                ),
            ),
            Tool::new(
                "big",
                "Return a text result of `bytes` bytes (default 10 MB)",
                obj(json!({"bytes": {"type": "integer"}}), &[]),
            ),
            Tool::new(
                "env",
                "Return the value of an environment variable",
                obj(json!({"key": {"type": "string"}}), &["key"]),
            ),
            Tool::new(
                "add_tool",
                "Add a tool named `name` and send tools/list_changed",
                obj(json!({"name": {"type": "string"}}), &["name"]),
            ),
            Tool::new(
                "fail",
                "Return a tool error with `message`",
                obj(json!({"message": {"type": "string"}}), &[]),
            ),
            Tool::new(
                "exit",
                "Exit the process at once with `code`",
                obj(json!({"code": {"type": "integer"}}), &[]),
            ),
            Tool::new(
                "sample",
                "Ask the client to sample an LLM completion for `prompt`",
                obj(json!({"prompt": {"type": "string"}}), &["prompt"]),
            ),
            Tool::new(
                "elicit",
                "Ask the client's user for an answer to `message`",
                obj(json!({"message": {"type": "string"}}), &["message"]),
            ),
            Tool::new("roots", "List the client's roots", obj(json!({}), &[])),
        ];
        if self.args.logging {
            tools.push(Tool::new(
                "log",
                "Send a log message at debug, info, warning and error, those the level set lets through",
                obj(json!({}), &[]),
            ));
        }
        let from_file: Vec<String> = self
            .args
            .tool_file
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .map(|s| {
                s.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        for spec in self.args.tools.iter().chain(&from_file) {
            let (name, desc) = spec
                .split_once('=')
                .unwrap_or((spec.as_str(), "A fixture tool that echoes its arguments"));
            tools.push(Tool::new(
                name.to_owned(),
                desc.to_owned(),
                obj(json!({"input": {"type": "string"}}), &[]),
            ));
        }
        for name in &self.args.error_tools {
            tools.push(Tool::new(
                name.clone(),
                "A fixture tool that answers every call with a JSON-RPC error",
                obj(json!({}), &[]),
            ));
        }
        for i in 1..=self.args.tool_count {
            tools.push(Tool::new(
                format!("tool_{i}"),
                format!("Generated fixture tool number {i}"),
                obj(json!({"input": {"type": "string"}}), &[]),
            ));
        }
        tools
    }
}

#[allow(deprecated)] // sampling and roots are deprecated by SEP-2577 but still used by legacy-era servers, which is what we imitate.
impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut caps = if self.args.resources > 0 || self.args.prompts > 0 {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_prompts()
                .build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        };
        if self.args.logging {
            caps.logging = Some(Default::default());
        }
        ServerConfig::new(caps).with_server_info(Implementation::new(
            self.args.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.args.fail == Some(FailMode::BadProtocol) {
            let v: ProtocolVersion =
                serde_json::from_value(json!("1999-01-01")).unwrap_or_default();
            return std::borrow::Cow::Owned(vec![v]);
        }
        std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    async fn discover(&self, _c: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        if self.args.era != Some(Era::Both) {
            return Err(discover_unknown());
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        if self.args.init_hang {
            std::future::pending::<()>().await;
        }
        match self.args.fail {
            Some(FailMode::InitError) => {
                return Err(McpError::internal_error(
                    "fixture: storage backend not ready",
                    None,
                ));
            }
            Some(FailMode::BadProtocol) => {
                let mut result = self.negotiate_initialize(&request)?;
                result.protocol_version = serde_json::from_value(json!("1999-01-01"))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                return Ok(result);
            }
            _ => {}
        }
        if self.args.init_delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(self.args.init_delay_ms)).await;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        match self.args.fail {
            Some(FailMode::ListHang) => std::future::pending::<()>().await,
            Some(FailMode::ListError) => {
                return Err(McpError::internal_error(
                    "fixture: tool catalogue unavailable",
                    None,
                ));
            }
            Some(FailMode::NoTools) => return Ok(ListToolsResult::with_all_items(Vec::new())),
            _ => {}
        }
        let mut tools = self.builtin_tools();
        tools.extend(self.extra.lock().await.iter().cloned());
        if self.args.page_size == 0 {
            return Ok(ListToolsResult::with_all_items(tools));
        }
        // The cursor is the index of the page's first tool.
        let start: usize = request
            .and_then(|r| r.cursor)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let end = (start + self.args.page_size).min(tools.len());
        let mut page = ListToolsResult::with_all_items(tools[start.min(end)..end].to_vec());
        page.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if self.args.crash_after.is_some_and(|limit| n > limit) {
            eprintln!("fixture: crashing during call {n}");
            std::process::exit(3);
        }
        let args = request.arguments.clone().unwrap_or_default();
        let s = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let u = |k: &str, d: u64| args.get(k).and_then(Value::as_u64).unwrap_or(d);
        let res = match request.name.as_ref() {
            "echo" => text(s("text")),
            "add" => {
                let f = |k: &str| args.get(k).and_then(Value::as_f64).unwrap_or(0.0);
                text(format!("{}", f("a") + f("b")))
            }
            "sleep" => {
                let (ms, step) = (u("ms", 0), u("step_ms", 100).max(1));
                let token = request
                    .meta
                    .as_ref()
                    .and_then(|m| m.get_progress_token())
                    .or_else(|| context.meta.get_progress_token());
                let mut done = 0;
                while done < ms {
                    let d = step.min(ms - done);
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_millis(d)) => {}
                        _ = context.ct.cancelled() => {
                            eprintln!("fixture: sleep cancelled after {done} ms");
                            return Err(McpError::internal_error("cancelled", None));
                        }
                    }
                    done += d;
                    if let Some(token) = &token {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), done as f64)
                                    .with_total(ms as f64),
                            )
                            .await;
                    }
                }
                text(format!("slept {ms} ms"))
            }
            "big" => text("x".repeat(u("bytes", 10 * 1024 * 1024) as usize)),
            "env" => text(std::env::var(s("key")).unwrap_or_else(|_| "<unset>".into())),
            "add_tool" => {
                let name = s("name");
                self.extra.lock().await.push(Tool::new(
                    name.clone(),
                    "A tool added at run time",
                    schema(json!({"type": "object"})),
                ));
                let _ = context.peer.notify_tool_list_changed().await;
                text(format!("added {name}"))
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text(format!(
                "fixture failure: {}",
                s("message")
            ))]),
            "exit" => {
                eprintln!("fixture: exiting on request");
                std::process::exit(u("code", 0) as i32);
            }
            "sample" => {
                let params = CreateMessageRequestParams::new(
                    vec![SamplingMessage::user_text(s("prompt"))],
                    100,
                );
                match context.peer.create_message(params).await {
                    Ok(r) => text(format!(
                        "sampled: {}",
                        serde_json::to_string(&r.message).unwrap_or_default()
                    )),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "sampling failed: {e}"
                    ))]),
                }
            }
            "elicit" => {
                let schema = serde_json::from_value(json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                let params = ElicitRequestParams::FormElicitationParams {
                    meta: None,
                    message: s("message"),
                    requested_schema: schema,
                };
                match context.peer.create_elicitation(params).await {
                    Ok(r) => text(format!(
                        "elicited: {}",
                        serde_json::to_string(&r).unwrap_or_default()
                    )),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "elicitation failed: {e}"
                    ))]),
                }
            }
            "log" if self.args.logging => {
                let level = *self.log_level.lock().unwrap_or_else(|e| e.into_inner());
                let rank = |l: LoggingLevel| {
                    serde_json::to_value(l)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .and_then(|n| {
                            ["debug", "info", "notice", "warning", "error"]
                                .iter()
                                .position(|x| *x == n)
                        })
                        .unwrap_or(usize::MAX)
                };
                let mut sent = Vec::new();
                for l in [
                    LoggingLevel::Debug,
                    LoggingLevel::Info,
                    LoggingLevel::Warning,
                    LoggingLevel::Error,
                ] {
                    if level.is_some_and(|min| rank(l) < rank(min)) {
                        continue;
                    }
                    let name = serde_json::to_value(l)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let _ = context
                        .peer
                        .notify_logging_message(
                            LoggingMessageNotificationParam::new(
                                l,
                                json!(format!("{name} from log")),
                            )
                            .with_logger("fixture"),
                        )
                        .await;
                    sent.push(name);
                }
                let at = level
                    .and_then(|l| serde_json::to_value(l).ok())
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| "unset".into());
                text(format!("sent {} at level {at}", sent.join(",")))
            }
            "roots" => match context.peer.list_roots().await {
                Ok(r) => text(serde_json::to_string(&r).unwrap_or_default()),
                Err(e) => {
                    CallToolResult::error(vec![ContentBlock::text(format!("roots failed: {e}"))])
                }
            },
            other if self.args.error_tools.iter().any(|t| t == other) => {
                return Err(McpError::new(
                    ErrorCode(-32042),
                    format!("{other} always fails"),
                    Some(json!({"tool": other})),
                ));
            }
            other => {
                let known = self.builtin_tools().iter().any(|t| t.name == other)
                    || self.extra.lock().await.iter().any(|t| t.name == other);
                if !known {
                    return Err(McpError::invalid_params(
                        format!("unknown tool {other}"),
                        None,
                    ));
                }
                text(format!(
                    "called {other} with {}",
                    Value::Object(args.clone())
                ))
            }
        };
        Ok(res.into())
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let items = (1..=self.args.resources)
            .map(|i| Resource::new(format!("fixture://resource/{i}"), format!("resource-{i}")))
            .collect();
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        let items = if self.args.resources > 0 {
            vec![ResourceTemplate::new("fixture://item/{id}", "item")]
        } else {
            vec![]
        };
        Ok(ListResourceTemplatesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri.clone();
        if !uri.starts_with("fixture://") {
            return Err(McpError::resource_not_found(
                format!("no resource {uri}"),
                Some(json!({"uri": uri})),
            ));
        }
        Ok(ReadResourceResult::new(vec![ResourceContents::text(
            format!("contents of {uri}"),
            uri,
        )])
        .into())
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let items = (1..=self.args.prompts)
            .map(|i| {
                Prompt::new(
                    format!("prompt_{i}"),
                    Some(format!("Fixture prompt {i}")),
                    Some(vec![PromptArgument::new("topic")]),
                )
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(items))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let topic = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("topic"))
            .and_then(Value::as_str)
            .unwrap_or("nothing")
            .to_owned();
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(
            Role::User,
            format!("{} about {topic}", request.name),
        )])
        .into())
    }
}
