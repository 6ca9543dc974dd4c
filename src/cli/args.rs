//! The command line's grammar: the clap types of `agent-discover` and its subcommands (a family's own argument
//! types live in its file: `configs`, `tools`, `approvals`, `sandbox`, `introspect`, `model`, `auth`, `agents`,
//! `dashboard`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use super::common::parse_kv;
use super::dashboard::DashboardArgs;
use super::{
    agents, approvals, auth, configs, introspect, limits, model, policy, profiles, sandbox, saved,
    scripts, skills, tools,
};

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
        #[arg(long, value_name = "NAME", conflicts_with = "profile")]
        server: Option<String>,
        /// Expose only this profile's servers and tools (`profiles create`), `find_tool` searching only them.
        #[arg(long, value_name = "NAME")]
        profile: Option<String>,
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
        /// The bearer token to read the dashboard's call log with, when it asks for one (an access token of an
        /// admin when identity is on: a user's shows only their own calls). Not needed in team mode, where the
        /// shared call log is read from the database.
        #[arg(long, env = "AGENT_DISCOVER_TOKEN", hide_env_values = true)]
        token: Option<String>,
    },
    /// Ask a running `serve` whether it is alive (GET /health): exits 0 when it answers 200, else 2. For container
    /// and Kubernetes health checks, where no curl exists; opens no registry.
    Health {
        /// The address to ask (default: http://127.0.0.1:PORT/health).
        #[arg(long, value_name = "URL")]
        url: Option<String>,
        #[arg(long, env = "AGENT_DISCOVER_PORT", default_value_t = crate::http::DEFAULT_PORT)]
        port: u16,
        /// The bearer token, when the server asks for one (default: the data dir's dashboard.token, if present).
        #[arg(long, env = "AGENT_DISCOVER_TOKEN", hide_env_values = true)]
        token: Option<String>,
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
    /// Tool pinning, filters and approval policies: review and approve tools whose definition changed, set allow/deny
    /// patterns, set which tools ask a person before each call (`tools policy`).
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Calls waiting for a person's approval (tools whose policy is `ask`): list them, approve one (once or for the
    /// session) or deny it.
    #[command(subcommand)]
    Approvals(approvals::ApprovalsCommand),
    /// Stdio servers run confined (Landlock, namespaces): show a server's sandbox, grant it paths, set its network,
    /// or turn it off for one server.
    #[command(subcommand)]
    Sandbox(sandbox::SandboxCommand),
    /// Guards on calls: credentials in arguments refused, credentials in results masked, instructions to the agent
    /// in results marked; show them, or set a server's own (`off`, `warn`, `block`, `default`).
    Guards(super::guards::GuardsArgs),
    /// Rate limits, concurrency caps and circuit breakers per server: show them with the breaker's state, change
    /// them (`limits set NAME --rate 10/s --burst 20 --concurrency 1`), close an open breaker.
    #[command(subcommand)]
    Limits(limits::LimitsCommand),
    /// Policies for calls (Cedar files): who may call which tool with which arguments, and whether it is allowed,
    /// denied or asked. List them, try a call against them (`policy test`), check a file.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Profiles: named sets of servers and tools (globs) one client sees, each with its own search scope, served at
    /// /mcp/profiles/NAME and by `mcp --profile NAME`; exported and imported as a file.
    #[command(subcommand)]
    Profiles(profiles::ProfilesCommand),
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
    /// Code mode: run a JavaScript file whose calls go to the tools here; prints {result, logs, calls} as JSON.
    Run(scripts::RunArgs),
    /// Saved scripts: code-mode scripts served as tools `scripts__NAME` (save, list, show, remove).
    #[command(subcommand)]
    Scripts(saved::ScriptsCommand),
    /// Show or set a server's paging limit: results with more text reach agents as their head and a link.
    Paging(saved::PagingArgs),
    /// A server's skills (SEP-2640): list them, or load one with every file verified against its manifest.
    #[command(subcommand)]
    Skills(skills::SkillsCommand),
    /// A2A agents to discover and delegate to: add (a card URL, or `-- COMMAND` for a local worker), list, remove.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Set a secret; without VALUE it is read from stdin (so it stays out of shell history). With `--mine`, a user's
    /// own value (team mode with identity): that user's calls run the server with it.
    Set {
        name: String,
        key: String,
        value: Option<String>,
        #[command(flatten)]
        mine: Mine,
    },
    /// Delete a secret (with `--mine`, a user's own value).
    Rm {
        name: String,
        key: String,
        #[command(flatten)]
        mine: Mine,
    },
    /// List a server's secrets, masked (with `--mine`, a user's own values).
    Ls {
        name: String,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        mine: Mine,
    },
    /// Which users have their own values of a server's secrets (names, never values), and whether users without
    /// them use the shared ones.
    Users {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Whether users without their own values use the server's shared ones (`on`, the default) or are refused
    /// with an error saying how to add theirs (`off`).
    Shared {
        name: String,
        #[arg(value_parser = ["on", "off"])]
        allow: String,
    },
}

/// A user's own values instead of the server's shared ones.
#[derive(Debug, Clone, clap::Args)]
pub struct Mine {
    /// A user's own value, not the shared one.
    #[arg(long)]
    pub mine: bool,
    /// Whose (with `--mine`): the user as `ISSUER#SUB`, as the call log names them.
    #[arg(long, env = "AGENT_DISCOVER_USER")]
    pub user: Option<String>,
}
