//! Code mode on the MCP fronts (issue 28): the top-level `run_script` tool, listed on the aggregated front so clients
//! that rank top-level tools see it, and the run shared with the `registry` action of the same name. A run paused for
//! an approval or a child's question answers a 2026-07-28 client with an input-required result; its retry (same
//! arguments, with `inputResponses` and `requestState`) goes on with the run.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::codemode::{CODE_BYTES, MAX_CPU, Step};
use crate::error::Error;
use crate::proxy::Caller;
use crate::scripts::{RunRequest, answer_result};

pub const NAME: &str = "run_script";

pub fn definition() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "minLength": 1,
                "maxLength": CODE_BYTES,
                "description": "JavaScript, the body of an async function; `return` gives the result",
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_CPU.as_millis() as u64,
                "description": "The script's CPU time limit in ms (default 5000); waiting for tools does not count",
            },
        },
        "required": ["code"],
    });
    let Value::Object(schema) = schema else {
        unreachable!("an object literal")
    };
    Tool::new(
        NAME,
        "Code mode: runs a short JavaScript program inside agent-discover that calls tools and returns only what it \
         `return`s, so intermediate results never reach your context. `code` is the body of an async function. \
         `await call(\"server__tool\", args)` or `await tools.server.tool(args)` (names with characters outside \
         [A-Za-z0-9_$] turned into _) resolve with the tool's structuredContent, else its text parsed as JSON, else \
         the text; a failed call throws an Error with `kind`, `message` and `details`. `await find_tool(query)` and \
         `await find_tools([...])` find tools (and start their servers). Calls may run at once (Promise.all); \
         console.log is captured. Answer: {result, logs, calls}. Limits: 5 s of CPU (timeout_ms), 64 MB, 100 calls, \
         64 KB of result. No require, import, fetch, process, files or timers. The registry's `script_api` action \
         gives TypeScript declarations of the tools. Example: `const [a, b] = await Promise.all([tools.fs.read_file({path: \
         \"a.txt\"}), tools.fs.read_file({path: \"b.txt\"})]); return a.length + b.length;`",
        Arc::new(schema),
    )
}

/// The `run_script` tool's call.
pub(crate) async fn call(
    app: &Arc<App>,
    args: Map<String, Value>,
    caller: Caller,
) -> Result<CallToolResponse, McpError> {
    match request(args) {
        Ok(req) => run(app, req, caller).await,
        Err((field, message)) => Ok(invalid(&field, message).into()),
    }
}

/// A run for the MCP fronts: its answer, the questions of a paused run, or why it could not run.
pub(crate) async fn run(
    app: &Arc<App>,
    req: RunRequest,
    caller: Caller,
) -> Result<CallToolResponse, McpError> {
    let takes_input = caller.takes_input_required();
    match Box::pin(app.run_script(req, caller)).await {
        Ok(Step::Done(outcome)) => Ok(answer_result(&outcome).into()),
        Ok(Step::Asked(asked)) if takes_input => Ok(CallToolResponse::InputRequired(asked)),
        Ok(Step::Asked(_)) => Ok(failure(Error::InputRequired {
            server: "agent-discover".into(),
            what: "an answer this client cannot give".into(),
        })
        .into()),
        Err(e) => Ok(failure(e).into()),
    }
}

/// `{error, code, field}` for bad input (SEP-1303), `{error, code}` otherwise.
fn failure(e: Error) -> CallToolResult {
    let mut body = json!({"error": e.to_string(), "code": e.code().as_str()});
    if let Error::Invalid { what, .. } = &e {
        body["field"] = json!(what);
    }
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

fn invalid(field: &str, message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(
        json!({"error": message, "code": "invalid_input", "field": field}).to_string(),
    )])
}

/// The tool's arguments: `code` (a non-empty string), `timeout_ms` (a positive whole number, optional).
fn request(args: Map<String, Value>) -> Result<RunRequest, (String, String)> {
    let mut req = RunRequest::default();
    for (k, v) in args {
        match k.as_str() {
            "code" => match v {
                Value::String(s) if !s.trim().is_empty() => req.code = s,
                Value::String(_) => return Err(("code".into(), "argument `code` is empty".into())),
                _ => return Err(("code".into(), "argument `code` must be a string".into())),
            },
            "timeout_ms" => match v.as_u64() {
                Some(ms) if ms >= 1 => req.timeout_ms = Some(ms),
                _ if v.is_null() => {}
                _ => {
                    return Err((
                        "timeout_ms".into(),
                        "argument `timeout_ms` must be a positive whole number".into(),
                    ));
                }
            },
            other => {
                return Err((
                    other.to_owned(),
                    format!("unknown argument `{other}`; run_script takes code and timeout_ms"),
                ));
            }
        }
    }
    if req.code.is_empty() {
        return Err(("code".into(), "argument `code` is required".into()));
    }
    Ok(req)
}
