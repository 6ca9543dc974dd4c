//! The crate's one error type: variants chosen by what the caller decides (bad input, not found, conflict, upstream, internal).

use std::fmt;

/// What kind of failure an [`Error`] is, as a stable machine-readable code.
///
/// Every transport maps this once: REST to a status, MCP to invalid-params or an `isError` result, CLI to exit 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidInput,
    NotFound,
    Conflict,
    Upstream,
    Timeout,
    Unavailable,
    Internal,
    /// A person or a policy refused the call (approval policies, issue 27).
    Denied,
    /// A rate limit refused the call; it may be retried after a while.
    RateLimited,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::Upstream => "upstream_error",
            ErrorCode::Timeout => "timeout",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::Denied => "denied",
            ErrorCode::RateLimited => "rate_limited",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller sent something we refuse; the message says what and how to fix it.
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("{what} `{name}` not found")]
    NotFound { what: &'static str, name: String },
    #[error("{what} `{name}` already exists")]
    Conflict { what: &'static str, name: String },
    /// A child server or remote source failed; `message` names the cause.
    #[error("server `{server}`: {message}")]
    Upstream { server: String, message: String },
    #[error("server `{server}`: {what} timed out after {ms} ms")]
    Timeout {
        server: String,
        what: &'static str,
        ms: u64,
    },
    /// Something this machine lacks (a tool, a model file, a port).
    #[error("{0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Store(StoreError),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("internal error: {0}")]
    Internal(String),
    /// A tool whose definition changed since it was approved (tool pinning); withheld until approved again.
    #[error(
        "tool `{tool}` of server `{server}` changed since it was approved and is withheld until approved again (`agent-discover tools diff {server} {tool}`, then `tools approve {server} {tool}`)"
    )]
    ToolChanged { server: String, tool: String },
    /// A definition the scanner flagged as poisoned; withheld until a person approves it. `reasons` are the findings'
    /// one-line summaries (`rule (severity) at field: excerpt`).
    #[error(
        "{kind} `{tool}` of server `{server}` is withheld: the scanner flagged it ({}); review with `agent-discover tools pending {server}`, then `tools approve {server} {tool}`",
        reasons.join("; ")
    )]
    ToolFlagged {
        server: String,
        tool: String,
        kind: &'static str,
        reasons: Vec<String>,
    },
    /// A stdio child did not start, and `why` says which way: its program is not installed (and could not be
    /// fetched), the handshake timed out, it exited by itself, or agent-discover stopped it after the handshake failed.
    /// `message` has the details (how long, the exit status, the last lines it wrote on stderr, the fix).
    #[error("server `{server}`: {message}")]
    StartFailed {
        server: String,
        why: StartFailure,
        message: String,
    },
    /// The sandbox refused to start a child, or the kernel cannot confine it; the message says why and how to opt out.
    #[error("server `{server}`: sandbox: {message}")]
    SandboxDenied { server: String, message: String },
    /// The child answered a forwarded request with a JSON-RPC error; kept as it is so fronts can pass it on.
    #[error("server `{server}` answered with error {}: {}", error.code.0, error.message)]
    Child {
        server: String,
        /// Boxed: a `Result` of this error is returned everywhere, and an `ErrorData` (with its JSON `data`) is large.
        error: Box<rmcp::ErrorData>,
    },
    /// A remote server needs a person to authorize agent-discover (OAuth): `auth_url` is where.
    #[error(
        "server `{server}` needs authorization: open {auth_url} (or run `agent-discover auth {server}`)"
    )]
    AuthRequired { server: String, auth_url: String },
    /// A child asked the caller for `what` (elicitation, sampling, roots) during a call, and the caller cannot answer:
    /// it has no MCP client (REST, CLI) or its client did not declare that capability. The call is ended.
    #[error(
        "server `{server}` asks the client for {what} (input_required), which this caller cannot answer: it has no MCP client, or one that did not declare the {what} capability"
    )]
    InputRequired { server: String, what: String },
    /// SEP-2640: a skill file a child served does not match the manifest entry agent-discover holds for it, so it is
    /// not handed on. `check` names the failed check: `size`, `digest` or `frontmatter`.
    #[error("skill_unverified: {uri} of server `{server}` failed the {check} check: {detail}")]
    SkillUnverified {
        server: String,
        uri: String,
        check: &'static str,
        detail: String,
    },
    /// #27 (approvals): a call the tool's approval policy refused (`deny`), or one a person denied when asked (`by`
    /// says who: `policy`, `elicitation`, `input`, `cli:USER`, `rest`, `dashboard`). `approval` is the approval's id
    /// when one was recorded.
    #[error(
        "approval_denied: the call of tool `{tool}` of server `{server}` was denied by {by} (its approval policy is ask or deny: `agent-discover tools policy {server}`)"
    )]
    ApprovalDenied {
        server: String,
        tool: String,
        by: String,
        approval: Option<String>,
    },
    /// A call whose arguments carry credentials that are not the server's own (the argument guard): refused before
    /// it reaches the server. `secrets` names each one's argument, format and masked value.
    #[error(
        "secret_in_arguments: the call of tool `{tool}` of server `{server}` was refused: its arguments carry {} ({}); pass no credentials to a tool, or configure them as the server's own secrets (`agent-discover guards {server}` shows or changes this guard)",
        if secrets.len() == 1 { "a credential".to_owned() } else { format!("{} credentials", secrets.len()) },
        secrets.iter().map(|s| format!("{} at `{}`: {}", s.format, s.argument, s.masked)).collect::<Vec<_>>().join("; ")
    )]
    SecretInArguments {
        server: String,
        tool: String,
        secrets: Vec<SecretFound>,
    },
    /// #27 (approvals): a call that needed a person's approval and got no answer before its deadline.
    #[error(
        "approval_timeout: nobody approved the call of tool `{tool}` of server `{server}` within {ms} ms (`agent-discover approvals list` shows waiting calls)"
    )]
    ApprovalTimeout {
        server: String,
        tool: String,
        ms: u64,
        approval: Option<String>,
    },
    /// A rate limit of the server (`scope`: `server`, `tool`, `caller`) refused the call; a token is there again in
    /// `retry_after_ms`.
    #[error(
        "rate_limited: the {scope} rate limit of server `{server}` refused the call of `{tool}`; retry after {retry_after_ms} ms (`agent-discover limits show {server}`)"
    )]
    RateLimited {
        server: String,
        tool: String,
        scope: &'static str,
        retry_after_ms: u64,
    },
    /// The server's concurrency cap is reached and its queue is full, or the call waited in the queue its whole wait
    /// limit.
    #[error(
        "server_busy: server `{server}` is at its concurrency cap and {why}; retry after {retry_after_ms} ms (`agent-discover limits show {server}`)"
    )]
    ServerBusy {
        server: String,
        why: &'static str,
        retry_after_ms: u64,
    },
    /// The server's circuit breaker is open (it failed or timed out too often): refused at once until the cool-down
    /// ends, when one trial call is let through.
    #[error(
        "server_unavailable: server `{server}` failed {failures} times in a row recently, so its calls are refused for {retry_after_ms} ms more before one trial call (`agent-discover limits show {server}`; `limits reset {server}` closes it)"
    )]
    ServerUnavailable {
        server: String,
        failures: u32,
        retry_after_ms: u64,
    },
    /// A call the policies refused (`crates/policy`): `policy` is the id of the policy that decided (`default` when
    /// no policy permits the call), `reason` says why in words.
    #[error(
        "policy_denied: the call of tool `{tool}` of server `{server}` was refused by policy `{policy}`: {reason} (`agent-discover policy test` explains a call)"
    )]
    PolicyDenied {
        server: String,
        tool: String,
        policy: String,
        /// Boxed: the error stays the size it was (a `Result` of it is returned everywhere).
        reason: Box<str>,
    },
    /// A tool outside the profile the caller is connected through (`/mcp/profiles/NAME`, `mcp --profile NAME`):
    /// refused whatever the registry holds, as if the tool were not there for this caller.
    #[error(
        "outside_profile: tool `{tool}` of server `{server}` is not in profile `{profile}` (`agent-discover profiles show {profile}` lists what it holds)"
    )]
    OutsideProfile {
        profile: String,
        server: String,
        tool: String,
    },
    /// A server called with each user's own keys: the caller has none of their own, and the administrator does not
    /// let users without one use the shared values (`personal.rs` of the registry).
    #[error(
        "personal_key_required: server `{server}` needs your own value of {keys}; add it with `agent-discover secrets set {server} KEY --mine --user YOU`, `PUT /api/servers/{server}/my-secrets/KEY` or the dashboard's \"My keys\""
    )]
    PersonalKeyRequired { server: String, keys: Box<str> },
    /// The children started with users' own keys are at their bound (`scope`: `server` or `total`), none idle enough
    /// to be stopped for this one.
    #[error(
        "personal_children_limit: {limit} children with users' own keys already run ({scope} bound) for `{server}` and none is idle; retry when one is (AGENT_DISCOVER_PERSONAL_CHILDREN, AGENT_DISCOVER_PERSONAL_CHILDREN_PER_SERVER)"
    )]
    PersonalChildrenLimit {
        server: String,
        scope: &'static str,
        limit: usize,
    },
}

impl Error {
    /// How long a refused call should wait before it is tried again (rate limits, busy servers, open breakers).
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            Error::RateLimited { retry_after_ms, .. }
            | Error::ServerBusy { retry_after_ms, .. }
            | Error::ServerUnavailable { retry_after_ms, .. } => Some(*retry_after_ms),
            _ => None,
        }
    }
}

impl Error {
    pub fn invalid(what: &'static str, reason: impl Into<String>) -> Error {
        Error::Invalid {
            what,
            reason: reason.into(),
        }
    }

    pub fn not_found(what: &'static str, name: impl Into<String>) -> Error {
        Error::NotFound {
            what,
            name: name.into(),
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Invalid { .. } => ErrorCode::InvalidInput,
            Error::NotFound { .. } => ErrorCode::NotFound,
            Error::Conflict { .. } | Error::ToolChanged { .. } | Error::ToolFlagged { .. } => {
                ErrorCode::Conflict
            }
            Error::Upstream { .. } | Error::Child { .. } | Error::SkillUnverified { .. } => {
                ErrorCode::Upstream
            }
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::StartFailed { why, .. } => match why {
                StartFailure::ProgramMissing => ErrorCode::Unavailable,
                StartFailure::HandshakeTimeout => ErrorCode::Timeout,
                StartFailure::Exited | StartFailure::Stopped => ErrorCode::Upstream,
            },
            Error::Unavailable(_)
            | Error::AuthRequired { .. }
            | Error::InputRequired { .. }
            | Error::SandboxDenied { .. } => ErrorCode::Unavailable,
            Error::Store(_) | Error::Io(_) | Error::Internal(_) => ErrorCode::Internal,
            Error::ApprovalDenied { .. }
            | Error::SecretInArguments { .. }
            | Error::PolicyDenied { .. }
            | Error::OutsideProfile { .. }
            | Error::PersonalKeyRequired { .. } => ErrorCode::Denied,
            Error::PersonalChildrenLimit { .. } => ErrorCode::Unavailable,
            Error::ApprovalTimeout { .. } => ErrorCode::Timeout,
            Error::RateLimited { .. } => ErrorCode::RateLimited,
            Error::ServerBusy { .. } | Error::ServerUnavailable { .. } => ErrorCode::Unavailable,
        }
    }

    /// The `kind` a failed proxied call carries where fronts shape it for agents (MCP's tool error results, REST's
    /// error body): the cases a caller acts on have their own (`tool_changed`, `approval_denied`,
    /// `approval_timeout`); everything else is the contract's [`ToolErrorKind`].
    pub fn call_kind(&self) -> &'static str {
        match self {
            Error::ToolChanged { .. } => "tool_changed",
            Error::ToolFlagged { .. } => "tool_flagged",
            Error::ApprovalDenied { .. } => "approval_denied",
            Error::ApprovalTimeout { .. } => "approval_timeout",
            Error::PolicyDenied { .. } => "policy_denied",
            Error::SkillUnverified { .. } => "skill_unverified",
            Error::SecretInArguments { .. } => "secret_in_arguments",
            Error::RateLimited { .. } => "rate_limited",
            Error::ServerBusy { .. } => "server_busy",
            Error::ServerUnavailable { .. } => "server_unavailable",
            Error::OutsideProfile { .. } => "outside_profile",
            Error::PersonalKeyRequired { .. } => "personal_key_required",
            Error::PersonalChildrenLimit { .. } => "personal_children_limit",
            e => e.tool_error_kind().as_str(),
        }
    }
}

/// What kind of failure a server or a proxied call had, as the McpRegistry contract names it (seed 001's
/// `McpToolError.kind`). The same kinds appear on a server's `error` and on failed proxied calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    AuthUnavailable,
    TransportError,
    Timeout,
    ServerError,
    ToolNotFound,
    /// The sandbox refused to start the server (issue 26), or the kernel cannot confine it.
    SandboxDenied,
}

impl ToolErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::AuthUnavailable => "auth_unavailable",
            ToolErrorKind::TransportError => "transport_error",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::ServerError => "server_error",
            ToolErrorKind::ToolNotFound => "tool_not_found",
            ToolErrorKind::SandboxDenied => "sandbox_denied",
        }
    }

    pub fn parse(s: &str) -> Option<ToolErrorKind> {
        [
            ToolErrorKind::AuthUnavailable,
            ToolErrorKind::TransportError,
            ToolErrorKind::Timeout,
            ToolErrorKind::ServerError,
            ToolErrorKind::ToolNotFound,
            ToolErrorKind::SandboxDenied,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// `{kind, message, details?}`: a failure as subscribers, `AddServerResult` and proxied calls show it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl Error {
    /// The one mapping from our errors to the contract's kinds. A broken or unreachable server (it would not start,
    /// exited, refused the connection, is not running) is `transport_error`; a server that answered with an error,
    /// and failures of agent-discover itself, are `server_error`; `details.code` keeps our finer [`ErrorCode`].
    pub fn tool_error_kind(&self) -> ToolErrorKind {
        self.tool_error_kind_inner()
    }

    /// The scanner's reasons, for a flagged definition.
    pub fn reasons(&self) -> Option<&[String]> {
        match self {
            Error::ToolFlagged { reasons, .. } => Some(reasons),
            _ => None,
        }
    }

    fn tool_error_kind_inner(&self) -> ToolErrorKind {
        match self {
            Error::Timeout { .. }
            | Error::ApprovalTimeout { .. }
            | Error::StartFailed {
                why: StartFailure::HandshakeTimeout,
                ..
            } => ToolErrorKind::Timeout,
            Error::StartFailed { .. } => ToolErrorKind::TransportError,
            Error::AuthRequired { .. } | Error::PersonalKeyRequired { .. } => {
                ToolErrorKind::AuthUnavailable
            }
            Error::NotFound { what: "tool", .. }
            | Error::ToolChanged { .. }
            | Error::ToolFlagged { .. }
            | Error::OutsideProfile { .. } => ToolErrorKind::ToolNotFound,
            Error::Upstream { .. }
            | Error::Unavailable(_)
            | Error::Io(_)
            | Error::ServerBusy { .. }
            | Error::ServerUnavailable { .. }
            | Error::PersonalChildrenLimit { .. } => ToolErrorKind::TransportError,
            Error::SandboxDenied { .. } => ToolErrorKind::SandboxDenied,
            // The contract has no kind for it; MCP's proxy_call says `input_required` (`mcp::proxy_call_response`).
            Error::InputRequired { .. }
            | Error::Child { .. }
            | Error::SkillUnverified { .. }
            | Error::Invalid { .. }
            | Error::NotFound { .. }
            | Error::Conflict { .. }
            | Error::Store(_)
            | Error::Internal(_)
            | Error::ApprovalDenied { .. }
            | Error::SecretInArguments { .. }
            | Error::RateLimited { .. }
            | Error::PolicyDenied { .. } => ToolErrorKind::ServerError,
        }
    }

    pub fn to_tool_error(&self) -> ToolError {
        let mut details = serde_json::json!({ "code": self.code().as_str() });
        if let Error::StartFailed { why, .. } = self {
            details["start_failure"] = why.as_str().into();
        }
        ToolError {
            kind: self.tool_error_kind(),
            message: self.to_string(),
            details: Some(details),
        }
    }
}

/// Which way a stdio child failed to start ([`Error::StartFailed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailure {
    /// Its program is not on the PATH it gets, and is not a launcher agent-discover can fetch (or fetching failed).
    ProgramMissing,
    /// It did not complete the handshake within its activation timeout.
    HandshakeTimeout,
    /// It exited by itself before completing the handshake.
    Exited,
    /// The handshake failed (a broken answer) and agent-discover stopped it.
    Stopped,
}

impl StartFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            StartFailure::ProgramMissing => "program_missing",
            StartFailure::HandshakeTimeout => "handshake_timeout",
            StartFailure::Exited => "exited",
            StartFailure::Stopped => "stopped",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of database failure happened, where callers act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// A UNIQUE or PRIMARY KEY constraint refused the row.
    Unique,
    /// A FOREIGN KEY constraint refused the row.
    ForeignKey,
    /// The engine asks to retry: SQLite busy/locked, PostgreSQL serialization failure or deadlock.
    Retry,
    Other,
}

/// A database failure, whichever backend raised it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub message: String,
}

impl StoreError {
    pub fn other(message: impl Into<String>) -> StoreError {
        StoreError {
            kind: StoreErrorKind::Other,
            message: message.into(),
        }
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Error {
        Error::Store(e)
    }
}

impl Error {
    /// Whether this is a database refusal of a duplicate key.
    pub fn is_unique_violation(&self) -> bool {
        matches!(
            self,
            Error::Store(StoreError {
                kind: StoreErrorKind::Unique,
                ..
            })
        )
    }
}

/// A credential found in a call's arguments, as the `secret_in_arguments` error carries it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecretFound {
    /// The argument's path (`config.token`, `headers[0]`).
    pub argument: String,
    /// The credential's format (`github_token`, `private_key`, `labelled_secret`, ...).
    pub format: String,
    /// Its first characters and its length, never the credential (`ghp_…(40 chars)`).
    pub masked: String,
}
