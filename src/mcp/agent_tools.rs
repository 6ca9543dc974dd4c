//! Seed 003's agent tools on the aggregated front, next to `registry`: `bridge_health`, `agents_discover`,
//! `sessions_create`, `sessions_prompt`, `sessions_status`, `sessions_close`, `sessions_cancel`, `tasks_delegate`.
//! A thin adapter over `App::agents`: argument problems are `isError` results naming the field (SEP-1303), routing
//! failures are `isError` results with the seed's `BridgeError` type and message, and an agent's streamed answer
//! is relayed as progress notifications when the call has a progress token.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, Tool};
use serde_json::{Map, Value, json};

use super::shape::json_result;
use crate::agents::{BridgeError, Progress};
use crate::app::App;
use crate::proxy::Caller;

pub const NAMES: [&str; 8] = [
    "bridge_health",
    "agents_discover",
    "sessions_create",
    "sessions_prompt",
    "sessions_status",
    "sessions_close",
    "sessions_cancel",
    "tasks_delegate",
];

pub fn is_agent_tool(name: &str) -> bool {
    NAMES.contains(&name)
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

fn session_id_schema() -> Value {
    json!({"type": "object", "properties": {"sessionId": {"type": "string", "minLength": 1,
        "description": "A session id from sessions_create"}}, "required": ["sessionId"]})
}

fn metadata_schema() -> Value {
    json!({"type": "object", "description": "Session metadata", "properties": {"provider": {"type": "string",
        "description": "One of the agent's providers (agents_discover shows them); default: the agent's own"}}})
}

pub fn definitions() -> Vec<Tool> {
    vec![
        Tool::new(
            "bridge_health",
            "Checks that the agent bridge is operational: its executors (in-process, workers), agents and sessions.",
            schema(json!({"type": "object", "properties": {}})),
        ),
        Tool::new(
            "agents_discover",
            "Lists the agents you can delegate to: id, capabilities (skill ids and tags), status (ready, busy, \
             unavailable) and providers when the agent has several. Discover before delegating when the agent is not \
             known; filter with `capability`.",
            schema(
                json!({"type": "object", "properties": {"capability": {"type": "string",
                "description": "Only agents whose capabilities include this one"}}}),
            ),
        ),
        Tool::new(
            "sessions_create",
            "Opens a session with an agent (by `agentId`, else the default agent). The session stays bound to the \
             executor that created it. `metadata.provider` picks one of the agent's providers.",
            schema(json!({"type": "object", "properties": {
                "agentId": {"type": "string", "description": "An id from agents_discover"},
                "metadata": metadata_schema()}})),
        ),
        Tool::new(
            "sessions_prompt",
            "Sends a prompt to the session's agent and waits for its answer (streamed updates arrive as progress \
             notifications when you pass a progress token). Returns the task state and the answer's text.",
            schema(json!({"type": "object", "properties": {
                "sessionId": {"type": "string", "minLength": 1, "description": "A session id from sessions_create"},
                "prompt": {"type": "string", "minLength": 1, "description": "What to ask the agent"}},
                "required": ["sessionId", "prompt"]})),
        ),
        Tool::new(
            "sessions_status",
            "A session's status (active, working, input-required, auth-required) and its last task's state.",
            schema(session_id_schema()),
        ),
        Tool::new(
            "sessions_close",
            "Closes a session (a running task is canceled first).",
            schema(session_id_schema()),
        ),
        Tool::new(
            "sessions_cancel",
            "Cancels the task running in a session; the session stays open.",
            schema(session_id_schema()),
        ),
        Tool::new(
            "tasks_delegate",
            "Delegates one task to an agent in a session of its own (created, prompted, closed): the one-call form \
             of sessions_create + sessions_prompt.",
            schema(json!({"type": "object", "properties": {
                "agentId": {"type": "string", "description": "An id from agents_discover (default: the default agent)"},
                "prompt": {"type": "string", "minLength": 1, "description": "The task, in words"},
                "metadata": metadata_schema()},
                "required": ["prompt"]})),
        ),
    ]
}

fn error_result(body: Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

fn arg_error(field: &str, message: String) -> CallToolResult {
    error_result(json!({"error": message, "code": "invalid_input", "field": field}))
}

fn bridge_error(e: BridgeError) -> CallToolResult {
    let mut body = json!({"error": e.message, "type": e.kind_str(), "code": e.kind_str()});
    if e.message.starts_with("Agent not found") || e.message == "No agents registered" {
        body["hint"] = json!("call agents_discover to see the agents available");
    }
    error_result(body)
}

/// An optional non-empty string argument.
// The error is the tool's answer itself, returned at once (rare, and small beside a call).
#[allow(clippy::result_large_err)]
fn opt_str<'a>(
    args: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, CallToolResult> {
    match args.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(s)),
        Some(Value::String(_)) => Err(arg_error(field, format!("argument `{field}` is empty"))),
        Some(_) => Err(arg_error(
            field,
            format!("argument `{field}` must be a string"),
        )),
    }
}

// The error is the tool's answer itself, returned at once (rare, and small beside a call).
#[allow(clippy::result_large_err)]
fn req_str<'a>(
    args: &'a Map<String, Value>,
    tool: &str,
    field: &str,
) -> Result<&'a str, CallToolResult> {
    opt_str(args, field)?.ok_or_else(|| {
        arg_error(
            field,
            format!("`{tool}` needs the argument `{field}` (a non-empty string)"),
        )
    })
}

// The error is the tool's answer itself, returned at once (rare, and small beside a call).
#[allow(clippy::result_large_err)]
fn provider_of(args: &Map<String, Value>) -> Result<Option<&str>, CallToolResult> {
    match args.get("metadata") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => opt_str(m, "provider").map_err(|_| {
            arg_error(
                "metadata",
                "argument `metadata.provider` must be a non-empty string".into(),
            )
        }),
        Some(_) => Err(arg_error(
            "metadata",
            "argument `metadata` must be an object".into(),
        )),
    }
}

/// Relays each text to the caller as a progress notification, in order; `finish` waits until all were sent.
struct Relay {
    progress: Progress,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Relay {
    fn new(caller: &Caller) -> Relay {
        let (Some(peer), Some(token)) = (caller.peer.clone(), caller.progress_token.clone()) else {
            return Relay {
                progress: Arc::new(|_: &str| {}),
                task: None,
            };
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let task = tokio::spawn(async move {
            let mut n = 0.0;
            while let Some(text) = rx.recv().await {
                n += 1.0;
                let _ = peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), n).with_message(text),
                    )
                    .await;
            }
        });
        Relay {
            progress: Arc::new(move |t: &str| {
                let _ = tx.send(t.to_owned());
            }),
            task: Some(task),
        }
    }

    async fn finish(self) {
        drop(self.progress);
        if let Some(t) = self.task {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), t).await;
        }
    }
}

fn render<T: serde::Serialize>(r: Result<T, BridgeError>) -> CallToolResult {
    match r {
        Ok(v) => json_result(&serde_json::to_value(v).unwrap_or(Value::Null)),
        Err(e) => bridge_error(e),
    }
}

pub async fn call(
    app: &Arc<App>,
    name: &str,
    args: Map<String, Value>,
    caller: Caller,
) -> Result<CallToolResult, McpError> {
    Ok(match run(app, name, &args, caller).await {
        Ok(r) | Err(r) => r,
    })
}

async fn run(
    app: &Arc<App>,
    name: &str,
    args: &Map<String, Value>,
    caller: Caller,
) -> Result<CallToolResult, CallToolResult> {
    let agents = &app.agents;
    // The front starts the executors on first use (the seed's `start()`); this fills the executor cache.
    if !agents.is_started() {
        agents.start().map_err(bridge_error)?;
    }
    Ok(match name {
        "bridge_health" => json_result(&agents.health()),
        "agents_discover" => {
            let capability = opt_str(args, "capability")?;
            render(
                agents
                    .discover(capability)
                    .await
                    .map(|a| json!({"agents": a})),
            )
        }
        "sessions_create" => {
            let provider = provider_of(args)?;
            render(
                agents
                    .create_session(opt_str(args, "agentId")?, provider)
                    .await,
            )
        }
        "sessions_prompt" => {
            let sid = req_str(args, name, "sessionId")?;
            let prompt = req_str(args, name, "prompt")?;
            let relay = Relay::new(&caller);
            let r = agents
                .prompt_or_cancel(sid, prompt, relay.progress.clone(), caller.cancel.clone())
                .await;
            relay.finish().await;
            render(r)
        }
        "sessions_status" => render(
            agents
                .session_status(req_str(args, name, "sessionId")?)
                .await,
        ),
        "sessions_close" => render(agents.close(req_str(args, name, "sessionId")?).await),
        "sessions_cancel" => render(agents.cancel(req_str(args, name, "sessionId")?).await),
        "tasks_delegate" => {
            let prompt = req_str(args, name, "prompt")?;
            let provider = provider_of(args)?;
            let relay = Relay::new(&caller);
            let r = agents
                .delegate(
                    opt_str(args, "agentId")?,
                    provider,
                    prompt,
                    relay.progress.clone(),
                    caller.cancel.clone(),
                )
                .await;
            relay.finish().await;
            render(r)
        }
        other => arg_error("name", format!("unknown agent tool `{other}`")),
    })
}
