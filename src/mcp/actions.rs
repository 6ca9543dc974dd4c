//! The `registry` tool's actions as one typed description (a serde-tagged enum): the tool's input schema and the
//! argument checks are both derived from it, so they cannot drift. Every argument problem becomes an [`ArgError`]
//! naming the field, which the tool returns as an `isError: true` result (SEP-1303), never as a protocol error.
//!
//! Adding an action: one variant here (its doc comment and its fields' doc comments are the schema's text), one
//! match arm in `registry_tool::call` that calls the domain layer.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use rmcp::schemars::{self, JsonSchema};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::limits;

mod rules;

pub use rules::ArgError;
use rules::{ActionRules, check, describe_type, flat_schema, type_name, variant_rules};

/// Every `registry` action and its arguments. Names are agent-discover's (TypeScript original) and must not change.
// Parsed once per call and consumed at once: the size of `Install` costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "action", rename_all = "snake_case")]
#[schemars(crate = "rmcp::schemars")]
pub enum Action {
    /// Finds the one tool for a need across every known server.
    FindTool {
        /// What you want to do, in plain words
        #[schemars(length(min = 1, max = limits::QUERY))]
        query: String,
        /// How many matches to consider (default 5)
        limit: Option<u64>,
        /// Start the owning server so the tool appears in your tool list (default true); false: use proxy_call
        auto_activate: Option<bool>,
    },
    /// Several find_tool queries in one round trip.
    FindTools {
        /// One plain-words intent per tool you need, answered in one round trip
        #[schemars(length(min = 1, max = 20))]
        intents: Vec<String>,
        /// How many matches to consider (default 5)
        limit: Option<u64>,
        /// Start the owning server so the tool appears in your tool list (default true); false: use proxy_call
        auto_activate: Option<bool>,
    },
    /// Searches the marketplaces.
    Browse {
        /// Search text (empty: popular servers)
        #[schemars(length(max = 1000))]
        query: Option<String>,
        /// Results per source (default 20, at most 100)
        limit: Option<u64>,
        /// The `next_cursor` of a previous browse, for the next page
        cursor: Option<String>,
    },
    /// Lists registered servers.
    List {
        /// Full-text search over server names, descriptions and tags
        #[schemars(length(max = limits::QUERY))]
        query: Option<String>,
        /// Only servers from this source
        #[schemars(extend("enum" = ["manual", "local", "registry", "npm", "pypi", "smithery"]))]
        source: Option<String>,
        /// Only installed servers
        installed_only: Option<bool>,
    },
    /// Registers a server (manual), or installs one from the marketplace (`source` registry, npm or pypi); `name` alone
    /// of a catalog entry (find_tool's `installed: false`) installs that entry as it was introspected, with `inputs`.
    Install {
        /// Server name: 1-64 letters, digits, '.', '_' or '-' (with a marketplace `source`: the package or registry name)
        #[schemars(length(min = 1))]
        name: String,
        /// `registry` (or npm, pypi) installs `name` from the marketplace; `manual` (default) registers it as given
        #[schemars(extend("enum" = ["manual", "local", "registry", "npm", "pypi", "smithery"]))]
        source: Option<String>,
        /// Program to start the server (run directly, never through a shell), e.g. npx
        command: Option<String>,
        /// Command arguments
        args: Option<Vec<String>>,
        /// Environment variables for the server
        env: Option<BTreeMap<String, String>>,
        /// What the server is for
        description: Option<String>,
        /// Tags for search and filtering
        tags: Option<Vec<String>>,
        /// How to reach the server (default stdio)
        #[schemars(extend("enum" = ["stdio", "streamable-http", "sse"]))]
        transport: Option<String>,
        /// URL of a remote (streamable-http or sse) server
        url: Option<String>,
        /// HTTP headers for a remote server
        headers: Option<BTreeMap<String, String>>,
        /// Activation time limit for this server in ms (default 30000)
        #[schemars(range(min = 1, max = 3_600_000))]
        activate_timeout_ms: Option<u64>,
        /// Tool-call time limit for this server in ms, reset by progress (default 60000)
        #[schemars(range(min = 1, max = 3_600_000))]
        call_timeout_ms: Option<u64>,
        /// Values a marketplace install asked for (`needs_input`), by name
        inputs: Option<BTreeMap<String, String>>,
    },
    /// Removes a server.
    Uninstall {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Starts a server; its tools appear as server__tool.
    Activate {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Stops a server.
    Deactivate {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Calls any server's tool.
    ProxyCall {
        /// The tool as `server__tool` (or `mcp__server__tool`); or give `server` and `tool`
        call_as: Option<String>,
        /// Server name (with `tool`)
        server: Option<String>,
        /// Tool name on that server (with `server`)
        tool: Option<String>,
        /// The tool's arguments
        arguments: Option<Map<String, Value>>,
        /// Paging limit for this call's result in bytes of text (0: whole; default 65536): past it, the head and a link to read the rest with read_result
        page_bytes: Option<u64>,
    },
    /// A tool's full input schema.
    GetSchema {
        /// The tool as `server__tool` (or `mcp__server__tool`); or give `server` and `tool`
        call_as: Option<String>,
        /// Server name (with `tool`)
        server: Option<String>,
        /// Tool name on that server (with `server`)
        tool: Option<String>,
    },
    /// Stores a secret for a server (encrypted; passed to it as an environment variable).
    SetSecret {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// Secret name (an environment variable name)
        #[schemars(length(min = 1))]
        key: String,
        /// Secret value
        #[schemars(length(min = 1))]
        value: String,
    },
    /// Deletes a server's secret.
    DeleteSecret {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// Secret name (an environment variable name)
        #[schemars(length(min = 1))]
        key: String,
    },
    /// A server's secrets, masked.
    ListSecrets {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// What is running.
    Status {},
    /// Imports an MCP client's config (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Codex, Gemini CLI).
    ApplyConfig {
        /// A client config file's content (e.g. {"mcpServers": {...}}); needs `format`
        config: Option<Map<String, Value>>,
        /// The client format of `config` (detected from `path` when omitted)
        #[schemars(extend("enum" = ["claude-desktop", "claude-code", "claude-user", "cursor", "vscode", "windsurf", "codex", "gemini"]))]
        format: Option<String>,
        /// A client config file on this machine, instead of `config`
        path: Option<String>,
    },
    /// Tools withheld until approved (changed since approval, or new while held), with what changed.
    ToolsPending {
        /// Only this server's
        name: Option<String>,
    },
    /// Approves a server's tool as it is now (without `tool`: every pending tool of the server).
    ApproveTools {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// The tool's own name on that server (without `tool`: every pending tool)
        tool: Option<String>,
    },
    /// The approved and current definition of a pinned tool and the fields that differ.
    ToolDiff {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// The tool's own name on that server
        #[schemars(length(min = 1))]
        tool: String,
    },
    /// Shows a server's tool filters, or replaces them when `allow` or `deny` is given.
    ToolFilter {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// Glob patterns (`*`, `?`): only matching tools are exposed ([] clears)
        #[schemars(length(max = 64))]
        allow: Option<Vec<String>>,
        /// Glob patterns (`*`, `?`): matching tools are hidden ([] clears)
        #[schemars(length(max = 64))]
        deny: Option<Vec<String>>,
    },
    /// Shows a server's tool overrides (what the agent sees instead of a tool's own definition), or one tool's; sets
    /// one with `set`, removes it with `clear`. A changed override withholds the tool until approved (approve_tools).
    ToolOverride {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// The tool's own name on that server (required with `set` or `clear`)
        tool: Option<String>,
        /// The override: `name`, `title`, `description`, `annotations` ({hint: bool}), `fixed` ({param: value,
        /// hidden and given on every call}), `hidden` ([param], its default given)
        set: Option<Map<String, Value>>,
        /// true: remove the tool's override
        clear: Option<bool>,
        /// A profile: its own override of the tool (what its clients see, over the server's) instead of the server's
        profile: Option<String>,
    },
    /// Shows a server's approval policy (allow, ask or deny, for the server, one tool, or the tools with an annotation)
    /// and what each tool resolves to, or sets one rule when `policy` is given. From here a rule can only be made
    /// stricter; loosening one (to allow, or clearing it) is for a person (CLI, REST, dashboard).
    ToolPolicy {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// One tool of the server, by its own name (without `tool` or `annotation`: the server-wide rule)
        tool: Option<String>,
        /// `ask`: a person approves each call, bound to its exact arguments; `deny`: refused; `allow`; `clear` removes the rule
        #[schemars(extend("enum" = ["allow", "ask", "deny", "clear"]))]
        policy: Option<String>,
        /// The rule is for the server's tools that declare this hint true (destructiveHint, openWorldHint)
        #[schemars(extend("enum" = ["destructive", "open_world"]))]
        annotation: Option<String>,
    },
    /// A dry run of a call against the policies for calls (Cedar files): the outcome (allow, deny, ask) and which
    /// policy decided. Changes nothing.
    PolicyTest {
        /// The tool as `server__tool` (or `mcp__server__tool`); or give `server` and `tool`
        call_as: Option<String>,
        /// Server name (with `tool`)
        server: Option<String>,
        /// Tool name on that server (with `server`)
        tool: Option<String>,
        /// The call's arguments
        arguments: Option<Map<String, Value>>,
        /// The user making the call (default `local`, the user of a call without identity)
        user: Option<String>,
        /// The user's groups
        #[schemars(length(max = 64))]
        groups: Option<Vec<String>>,
        /// The calling client's name (its MCP clientInfo.name)
        client: Option<String>,
    },
    /// Shows a stdio server's sandbox (settings, the paths it may use, what the kernel offers), or changes it when
    /// `network`, `read`, `write` or `enabled` is given (applied at the server's next start).
    Sandbox {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// `full` (any host), `none` (no network at all), or `hosts:HOST,...` (only these hosts, e.g.
        /// `hosts:api.github.com,*.slack.com:443`)
        #[schemars(extend("pattern" = "^(full|none|hosts:.+)$"))]
        network: Option<String>,
        /// Absolute paths the server may read: replaces the ones granted before ([] clears)
        #[schemars(length(max = 256))]
        read: Option<Vec<std::path::PathBuf>>,
        /// Absolute paths the server may read and write: replaces the ones granted before ([] clears)
        #[schemars(length(max = 256))]
        write: Option<Vec<std::path::PathBuf>>,
        /// false: the server runs unconfined; true: confined (the default)
        enabled: Option<bool>,
    },
    /// Shows the guards on calls (credentials in arguments, credentials and instructions to the agent in results)
    /// that apply to a server, or makes one stricter when `arguments`, `result_secrets` or `result_instructions` is
    /// given (an agent may not loosen a guard).
    Guards {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        #[schemars(extend("enum" = ["off", "warn", "block", "default"]))]
        arguments: Option<String>,
        #[schemars(extend("enum" = ["off", "warn", "block", "default"]))]
        result_secrets: Option<String>,
        #[schemars(extend("enum" = ["off", "warn", "block", "default"]))]
        result_instructions: Option<String>,
    },
    /// Shows a server's rate limits, concurrency cap and circuit breaker with their state (a refused call says
    /// `rate_limited`, `server_busy` or `server_unavailable` with `retry_after_ms`), or changes them when another
    /// field is given. From here limits can only be made stricter; loosening one is for a person (CLI, REST,
    /// dashboard).
    Limits {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// The server's rate, all its calls together (with `tool`: that tool's): COUNT/PERIOD (`10/s`, `5/30s`)
        rate: Option<String>,
        /// The bucket size of `rate`
        burst: Option<u32>,
        /// `rate` and `burst` are this tool's own (its own name)
        tool: Option<String>,
        /// Each tool's rate on its own
        tool_rate: Option<String>,
        /// Each caller's rate on its own
        caller_rate: Option<String>,
        /// Calls at once
        concurrency: Option<u32>,
        /// Calls that may wait for a slot
        queue: Option<u32>,
        /// How long a queued call waits (`5s`)
        wait: Option<String>,
        /// The circuit breaker: FAILURES/WINDOW (`5/30s`)
        breaker: Option<String>,
        /// How long an open breaker refuses calls (`30s`)
        cooldown: Option<String>,
    },
    /// Completes a remote server's waiting OAuth authorization with the URL the browser was sent back to (or the
    /// code the authorization server showed), then connects it.
    FinishAuth {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
        /// The callback URL (or its query, or the code)
        #[schemars(length(min = 1))]
        callback: String,
    },
    /// Starts a new OAuth authorization of a remote server (answers `authUrl`); its tokens and tools keep serving
    /// until the new authorization completes.
    Reauthorize {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Restores a disabled server with its last config and starts it; returns its state (ready, authenticating, error).
    Enable {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Pauses a server: stops it and keeps it from being started until enabled (entry, secrets and tokens kept).
    Disable {
        /// Server name
        #[schemars(length(min = 1))]
        name: String,
    },
    /// Code mode: runs a JavaScript program that calls tools inside agent-discover; only what it returns comes back
    /// (as the `run_script` tool).
    RunScript {
        /// JavaScript, the body of an async function: `await call("server__tool", args)` or `await tools.server.tool(args)`, `return` gives the result
        #[schemars(length(min = 1, max = 262144))]
        code: String,
        /// The script's CPU time limit in ms (default 5000, at most 60000); waiting for tools does not count
        #[schemars(range(min = 1, max = 60000))]
        timeout_ms: Option<u64>,
    },
    /// Code mode: TypeScript declarations of the tools a script can call, from their schemas (every running
    /// server's without `servers` or `query`).
    ScriptApi {
        /// Only these servers' tools
        servers: Option<Vec<String>>,
        /// Only the tools this finds (in plain words)
        #[schemars(length(max = limits::QUERY))]
        query: Option<String>,
    },
    /// Code mode: saves a script as the tool `scripts__NAME` (replacing one of that name); `args` holds its arguments.
    SaveScript {
        /// 1-64 letters, digits, '_' or '-', starting with a letter
        #[schemars(length(min = 1, max = 64))]
        name: String,
        /// JavaScript, the body of an async function; its arguments are `args`
        #[schemars(length(min = 1, max = 262144))]
        code: String,
        /// What the tool does, for agents
        description: Option<String>,
        /// JSON Schema of the arguments (`"type": "object"`)
        input_schema: Option<Map<String, Value>>,
        /// CPU time limit in ms (default 5000, at most 60000)
        #[schemars(range(min = 1, max = 60000))]
        timeout_ms: Option<u64>,
    },
    /// Reads a page of a large tool result kept behind a link (agent-discover://results/ID).
    ReadResult {
        /// The result's id (the link's last segment)
        #[schemars(length(min = 1, max = 64))]
        id: String,
        /// Where the page starts, in bytes (0, or a page's next_offset)
        offset: Option<u64>,
        /// The page's length in bytes (default 65536, at most 1048576)
        limit: Option<u64>,
    },
    /// Lists the profiles: named sets of servers and tools, each served at /mcp/profiles/NAME and `mcp --profile NAME`.
    ListProfiles {},
    /// A profile's definition and the tools it holds now.
    ShowProfile {
        /// Profile name
        #[schemars(length(min = 1, max = 64))]
        name: String,
    },
    /// Creates a profile from servers (all their tools) and tool globs over SERVER__TOOL names (`*`, `?`).
    CreateProfile {
        /// Profile name: 1-64 letters, digits, '_' or '-'
        #[schemars(length(min = 1, max = 64))]
        name: String,
        /// What the profile is for
        description: Option<String>,
        /// Servers whose every tool the profile holds
        servers: Option<Vec<String>>,
        /// Tool globs over SERVER__TOOL names, e.g. github__*_issue
        tools: Option<Vec<String>>,
    },
    /// Changes a profile: `servers`/`tools` replace its lists; add_*/remove_* change them entry by entry.
    SetProfile {
        /// Profile name
        #[schemars(length(min = 1, max = 64))]
        name: String,
        /// What the profile is for
        description: Option<String>,
        /// Servers whose every tool the profile holds
        servers: Option<Vec<String>>,
        /// Tool globs over SERVER__TOOL names, e.g. github__*_issue
        tools: Option<Vec<String>>,
        /// Servers to add to the profile
        add_servers: Option<Vec<String>>,
        /// Servers to remove from the profile
        remove_servers: Option<Vec<String>>,
        /// Tool globs to add to the profile
        add_tools: Option<Vec<String>>,
        /// Tool globs to remove from the profile
        remove_tools: Option<Vec<String>>,
    },
    /// Removes a profile (its endpoint answers 404 from then on).
    RemoveProfile {
        /// Profile name
        #[schemars(length(min = 1, max = 64))]
        name: String,
    },
}

struct Described {
    rules: Vec<ActionRules>,
    tool_schema: Map<String, Value>,
}

fn described() -> &'static Described {
    static D: OnceLock<Described> = OnceLock::new();
    D.get_or_init(|| {
        let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
            s.inline_subschemas = true;
        });
        let root = settings.into_generator().into_root_schema_for::<Action>();
        let root = root.as_value();
        let variants = root
            .get("oneOf")
            .and_then(Value::as_array)
            .expect("a tagged enum's schema is a oneOf");
        let rules: Vec<ActionRules> = variants.iter().map(variant_rules).collect();
        let tool_schema = flat_schema(&rules);
        Described { rules, tool_schema }
    })
}

/// The `registry` tool's input schema.
pub fn tool_schema() -> Map<String, Value> {
    described().tool_schema.clone()
}

/// Every action, in declaration order.
pub fn names() -> Vec<&'static str> {
    described().rules.iter().map(|r| r.name.as_str()).collect()
}

/// Checks `args` against the chosen action's rules and types them.
pub fn parse(args: Map<String, Value>) -> Result<Action, ArgError> {
    let d = described();
    let list = || names().join(", ");
    let action = match args.get("action") {
        Some(Value::String(a)) => a,
        None | Some(Value::Null) => {
            return Err(ArgError::new(
                "action",
                format!("argument `action` is required; one of: {}", list()),
            ));
        }
        Some(v) => {
            return Err(ArgError::new(
                "action",
                format!("argument `action` must be a string, got {}", type_name(v)),
            ));
        }
    };
    let Some(rules) = d.rules.iter().find(|r| r.name == *action) else {
        return Err(ArgError::new(
            "action",
            format!(
                "unknown action `{}`; valid actions: {}",
                crate::model::truncate_for_message(action),
                list()
            ),
        ));
    };
    for req in &rules.required {
        if args.get(req).is_none_or(Value::is_null) {
            let want = rules
                .properties
                .get(req)
                .map(describe_type)
                .unwrap_or("a value");
            return Err(ArgError::new(
                req,
                format!(
                    "action `{}` needs the argument `{req}` ({want})",
                    rules.name
                ),
            ));
        }
    }
    for (key, value) in &args {
        if value.is_null() {
            continue;
        }
        if let Some(schema) = rules.properties.get(key) {
            check(key, key, schema, value)?;
        }
    }
    serde_json::from_value(Value::Object(args)).map_err(|e| ArgError {
        field: None,
        message: crate::model::truncate_for_message(&e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn every_variant_is_in_the_schema_with_its_arguments() {
        let schema = tool_schema();
        let actions = &schema["properties"]["action"]["enum"];
        assert_eq!(actions.as_array().unwrap().len(), names().len());
        assert!(names().contains(&"proxy_call"));
        for arg in [
            "query",
            "intents",
            "name",
            "call_as",
            "arguments",
            "key",
            "inputs",
        ] {
            assert!(schema["properties"].get(arg).is_some(), "{arg} missing");
        }
        assert_eq!(schema["properties"]["limit"]["type"], "integer");
        assert_eq!(
            schema["properties"]["env"]["additionalProperties"]["type"],
            "string"
        );
        let q = schema["properties"]["query"]["description"]
            .as_str()
            .unwrap();
        assert!(q.contains("[find_tool]") && q.contains("[list]"), "{q}");
    }

    #[test]
    fn problems_name_the_field() {
        let cases = [
            (json!({}), "action"),
            (json!({"action": 3}), "action"),
            (json!({"action": "nope"}), "action"),
            (json!({"action": "find_tool"}), "query"),
            (json!({"action": "find_tool", "query": ""}), "query"),
            (
                json!({"action": "find_tool", "query": "x".repeat(20_000)}),
                "query",
            ),
            (
                json!({"action": "find_tool", "query": "q", "limit": -1}),
                "limit",
            ),
            (json!({"action": "find_tools", "intents": []}), "intents"),
            (
                json!({"action": "find_tools", "intents": ["a", 2]}),
                "intents",
            ),
            (
                json!({"action": "install", "name": "a", "env": {"K": 1}}),
                "env",
            ),
            (
                json!({"action": "install", "name": "a", "call_timeout_ms": 0}),
                "call_timeout_ms",
            ),
            (
                json!({"action": "list", "installed_only": "yes"}),
                "installed_only",
            ),
            (
                json!({"action": "proxy_call", "arguments": "x"}),
                "arguments",
            ),
        ];
        for (a, field) in cases {
            let e = parse(args(a.clone())).expect_err(&a.to_string());
            assert_eq!(e.field.as_deref(), Some(field), "{a} -> {e:?}");
            // Short enough to read: the longest names every action (there are about forty).
            assert!(e.message.len() < 700, "{a} -> {e:?}");
        }
    }

    #[test]
    fn good_arguments_are_typed() {
        let a = parse(args(
            json!({"action": "find_tool", "query": "q", "limit": 3, "unknown": 1}),
        ))
        .unwrap();
        assert!(
            matches!(a, Action::FindTool { query, limit: Some(3), auto_activate: None } if query == "q")
        );
        let a = parse(args(json!({"action": "status"}))).unwrap();
        assert!(matches!(a, Action::Status {}));
        let a = parse(args(json!({"action": "list", "query": null}))).unwrap();
        assert!(matches!(a, Action::List { query: None, .. }));
    }
}
