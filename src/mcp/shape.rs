//! How agent-discover's MCP answers are shaped: tool results as JSON text, the revision-dependent error forms
//! (SEP-2164's invalid params for a missing resource), errors of forwarded requests, and requests rmcp could not type.
//! A leaf of the `mcp` module: it knows rmcp's types and the domain's errors, nothing of the servers around it.

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::json;

use crate::error::Error;

/// Whether the calling request is of the 2026-07-28 revision (or later).
pub(crate) fn takes_2026_errors(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

/// SEP-2164, for 2026-07-28 clients: a child's "resource not found" to `resources/read` (the older -32002) is passed
/// on as invalid params (-32602) with the URI in `data.uri`; any other error is left as it is.
pub(crate) fn resource_not_found_2164(mut error: McpError, uri: &str) -> McpError {
    if error.code == rmcp::model::ErrorCode::RESOURCE_NOT_FOUND {
        error.code = rmcp::model::ErrorCode::INVALID_PARAMS;
    }
    if error.code == rmcp::model::ErrorCode::INVALID_PARAMS {
        match &mut error.data {
            Some(serde_json::Value::Object(data)) => {
                data.entry("uri").or_insert_with(|| json!(uri));
            }
            None => error.data = Some(json!({ "uri": uri })),
            Some(_) => {}
        }
    }
    error
}

/// A forwarded request's failure: unknown names and unsupported features are invalid params, the rest internal.
pub(crate) fn forwarded_error(e: Error) -> McpError {
    match e {
        // The child's own JSON-RPC error, passed on as it sent it.
        Error::Child { error, .. } => *error,
        Error::NotFound { .. } | Error::Unavailable(_) | Error::Invalid { .. } => {
            McpError::invalid_params(e.to_string(), None)
        }
        e => McpError::internal_error(e.to_string(), None),
    }
}

/// Whether a listen stream's send failed because the stream is gone (not because the client's filter refused it).
pub(crate) fn stream_gone(r: &Result<(), rmcp::service::SubscriptionSendError>) -> bool {
    matches!(
        r,
        Err(rmcp::service::SubscriptionSendError::SubscriptionClosed
            | rmcp::service::SubscriptionSendError::Service(_))
    )
}

/// Request methods this server answers; one of them only arrives as a custom request when its params are malformed.
const SERVED_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "subscriptions/listen",
    "logging/setLevel",
    "completion/complete",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The error for a request rmcp could not type: invalid params (saying what is wrong) for a method we serve,
/// method not found (naming it) for any other.
pub(crate) fn unserved_request(method: &str, params: Option<&serde_json::Value>) -> McpError {
    use serde_json::Value;
    let method = crate::model::truncate_for_message(method);
    if !SERVED_METHODS.contains(&method.as_str()) {
        return McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method not found: `{method}`"),
            None,
        );
    }
    let problem = match (method.as_str(), params) {
        (_, Some(p)) if !p.is_object() => "`params` must be an object",
        ("tools/call", Some(Value::Object(p))) if !p.get("name").is_some_and(Value::is_string) => {
            "`name` must be a string"
        }
        ("tools/call", Some(Value::Object(p)))
            if p.get("arguments")
                .is_some_and(|a| !a.is_object() && !a.is_null()) =>
        {
            "`arguments` must be an object"
        }
        _ => "they do not match the MCP schema of this method",
    };
    McpError::invalid_params(format!("malformed params for `{method}`: {problem}"), None)
}

/// Renders a domain value as the JSON text block agent-discover's tools return: compact, as agents read it (an
/// indented `find_tool` answer was about a fifth whitespace, tokens the agent pays for; issue 31).
pub(crate) fn json_result(value: &serde_json::Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}
