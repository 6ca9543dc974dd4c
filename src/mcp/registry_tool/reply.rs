//! What an action comes to: a JSON reply, a proxied tool's own result, or a failure (bad arguments with the field to
//! blame, or the domain's refusal), each rendered as a tool result.

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::error::Error;
use crate::mcp::actions::ArgError;

/// Why an action did not succeed: its arguments (with the field to blame) or the domain's refusal.
pub(super) enum Failure {
    Arg(ArgError),
    Domain(Error),
}

impl From<ArgError> for Failure {
    fn from(e: ArgError) -> Self {
        Failure::Arg(e)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Domain(e)
    }
}

pub(super) type Outcome = Result<Value, Failure>;

/// The argument a domain validation error is about, when it is one of this action's arguments.
fn blamed_field(e: &Error) -> Option<String> {
    match e {
        Error::Invalid { what, .. } => Some(match *what {
            "server name" => "name".to_owned(),
            "secret key" => "key".to_owned(),
            w if !w.contains(' ') => w.to_owned(),
            _ => return None,
        }),
        _ => None,
    }
}

pub(super) fn error_result(body: Value) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

/// Renders a failure: `{error, code, field}` for bad input, `{error, code}` for anything else.
pub(super) fn failure_result(f: Failure) -> CallToolResult {
    match f {
        Failure::Arg(e) => error_result(e.body()),
        Failure::Domain(e) if e.code() == crate::error::ErrorCode::InvalidInput => error_result(
            json!({"error": e.to_string(), "code": e.code().as_str(), "field": blamed_field(&e)}),
        ),
        Failure::Domain(e) => {
            let mut body = json!({"error": e.to_string(), "code": e.code().as_str()});
            // A server waiting for OAuth: where a person authorizes it.
            if let Error::AuthRequired { auth_url, .. } = &e {
                body["kind"] = json!("auth_unavailable");
                body["authUrl"] = json!(auth_url);
            }
            error_result(body)
        }
    }
}

/// What an action produced: a JSON value to render, or a proxied tool's own result.
pub(super) enum Reply {
    Json(Value),
    Relayed(Result<CallToolResponse, McpError>),
}

impl From<Value> for Reply {
    fn from(v: Value) -> Self {
        Reply::Json(v)
    }
}

/// An `AddServerResult` (activate, enable), `isError` when its state is `error`.
pub(super) fn lifecycle_reply(r: &crate::lifecycle::AddServerResult) -> Reply {
    let value = serde_json::to_value(r).unwrap_or_default();
    if matches!(r.state, crate::lifecycle::ServerState::Error { .. }) {
        Reply::Relayed(Ok(error_result(value).into()))
    } else {
        Reply::Json(value)
    }
}
