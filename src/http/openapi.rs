//! The OpenAPI 3.1 document served at `/api/openapi.json`, generated from the same route list the router is built
//! from ([`super::ops`]), so the two cannot drift; schemas of the bodies are written out here.

use serde_json::{Map, Value, json};

use super::Op;

/// The `/mcp` entry (rmcp's Streamable HTTP service, not an [`Op`]).
fn mcp_path() -> Value {
    let describe = |summary: &str| {
        json!({
            "summary": summary,
            "tags": ["mcp"],
            "responses": {"200": {"description": "JSON-RPC response or an SSE stream"}, "403": {"description": "foreign Host or Origin"}},
        })
    };
    json!({
        "post": describe("MCP over Streamable HTTP: JSON-RPC messages (the same server as `agent-discover mcp` over stdio)"),
        "get": describe("MCP over Streamable HTTP: the session's server-to-client stream (list_changed and other notifications)"),
        "delete": describe("MCP over Streamable HTTP: end the session"),
    })
}

pub fn document(ops: &[Op]) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for op in ops {
        let mut o = Map::new();
        o.insert("summary".into(), Value::String(op.summary.to_owned()));
        let tag = if op.path.starts_with("/api/servers") {
            "servers"
        } else if op.path.starts_with("/api") {
            "api"
        } else {
            "service"
        };
        o.insert("tags".into(), json!([tag]));
        let mut params: Vec<Value> = op
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                let description = match name {
                    "id" => "server id, or the server's name when it is not all digits",
                    "key" => "secret name (an environment variable name)",
                    _ => "",
                };
                json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": description})
            })
            .collect();
        params.extend(op.query.iter().map(|(name, description)| {
            json!({"name": name, "in": "query", "required": false, "schema": {"type": "string"}, "description": description})
        }));
        if !params.is_empty() {
            o.insert("parameters".into(), Value::Array(params));
        }
        if let Some(body) = op.body {
            o.insert(
                "requestBody".into(),
                json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{body}")}}}}),
            );
        }
        let (status, schema) = op.returns;
        let content_type = match schema {
            "PrometheusText" | "TypeScript" => "text/plain",
            "Html" => "text/html",
            "RegistryEvents" => "text/event-stream",
            _ => "application/json",
        };
        let mut responses = Map::new();
        responses.insert(
            status.to_string(),
            json!({"description": "success", "content": {content_type: {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}}),
        );
        responses.insert(
            "default".into(),
            json!({"description": "an error: 400 bad input, 401 token missing, 403 foreign Host/Origin, 404 not found, 409 conflict, 413 body too large, 502 upstream server failed, 503 unavailable (e.g. server not active), 504 timeout",
                   "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}),
        );
        o.insert("responses".into(), Value::Object(responses));
        let entry = paths
            .entry(op.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[op.method.as_str().to_ascii_lowercase()] = Value::Object(o);
    }
    paths.insert("/mcp".into(), mcp_path());
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "agent-discover",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "REST API of the agent-discover dashboard server. Loopback only by default; bound to any other \
                            address every request needs `Authorization: Bearer <token>` (the token is in the data dir's \
                            dashboard.token). Requests with a foreign Host or Origin are refused.",
        },
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": schemas(),
        },
    })
}

fn schemas() -> Value {
    // Split in parts: one `json!` this size exceeds the macro recursion limit.
    let mut all = Map::new();
    for part in [
        core_schemas(),
        market_schemas_and_service(),
        lifecycle_schemas(),
        super::pins::schemas(),
        super::overrides::schemas(),
        super::sandbox::schemas(),
        super::guards::schemas(),
        super::limits::schemas(),
        super::approvals::schemas(),
        super::scripts::schemas(),
        super::saved_scripts::schemas(),
        super::introspect::schemas(),
        super::agents::schemas(),
        super::policy::schemas(),
        super::profiles::schemas(),
    ] {
        if let Value::Object(m) = part {
            all.extend(m);
        }
    }
    Value::Object(all)
}

/// The McpRegistry lifecycle (seed 001): statuses and `AddServerResult`.
fn lifecycle_schemas() -> Value {
    let kind = json!({"type": "string", "enum": ["auth_unavailable", "transport_error", "timeout", "server_error", "tool_not_found", "sandbox_denied"]});
    json!({
        "ServerStatus": {"type": "string", "enum": ["stopped", "connecting", "authenticating", "ready", "error", "disabled"]},
        "McpToolError": {"type": "object", "required": ["kind", "message"], "properties": {
            "kind": kind, "message": {"type": "string"}, "details": {"description": "e.g. {code}: agent-discover's error code"}}},
        "AddServerResult": {"type": "object", "required": ["state", "id"], "properties": {
            "state": {"type": "string", "enum": ["ready", "authenticating", "error", "stopped", "disabled"]},
            "id": {"type": "string", "description": "the server's name"},
            "toolCount": {"type": "integer", "description": "ready, stopped: tools listed (stopped: as last known)"},
            "authUrl": {"type": "string", "description": "authenticating: where to send the user"},
            "error": {"$ref": "#/components/schemas/McpToolError"},
            "change": {"type": "string", "enum": ["added", "updated", "unchanged"], "description": "add_server / apply_config: what happened to the entry"}}},
        "ListedEntry": {"type": "object", "required": ["name", "status", "toolCount", "transport", "authMode", "tools"], "properties": {
            "name": {"type": "string"}, "status": {"$ref": "#/components/schemas/ServerStatus"}, "toolCount": {"type": "integer"},
            "transport": {"type": "string", "enum": ["stdio", "http"]},
            "authMode": {"type": "string", "enum": ["none", "apiKey", "authorizationCode"]},
            "authUrl": {"type": "string"}, "error": {"$ref": "#/components/schemas/McpToolError"},
            "tools": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "inputSchema": {"type": "object"}}}},
            "capabilities": {"type": ["object", "null"], "description": "declared at initialize, when the server runs in the process answering"},
            "sandbox": {"$ref": "#/components/schemas/SandboxBrief"}}},
        "RegistrySnapshot": {"type": "object", "required": ["seq", "servers"], "properties": {
            "seq": {"type": "integer", "description": "0 on a subscriber's first delivery (bootstrap), then the feed's counter (one per change)"},
            "servers": {"type": "array", "items": {"$ref": "#/components/schemas/ListedEntry"}}}},
        "RegistryEvents": {"type": "string", "description": "text/event-stream; each event `snapshot` with id = seq and data = a RegistrySnapshot"},
    })
}

fn core_schemas() -> Value {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let transport = json!({"type": "string", "enum": ["stdio", "streamable-http", "sse"]});
    let source = json!({"type": "string", "enum": ["manual", "local", "registry", "npm", "pypi", "smithery"]});
    json!({
        "Object": {"type": "object"},
        "Error": {"type": "object", "required": ["error", "code"], "properties": {
            "error": {"type": "string", "description": "what went wrong and what to do"},
            "code": {"type": "string", "enum": ["invalid_input", "not_found", "conflict", "upstream_error", "timeout", "unavailable", "internal",
                                                "unauthorized", "forbidden", "payload_too_large", "unsupported_media_type", "method_not_allowed"]}}},
        "Health": {"type": "object", "properties": {"status": {"const": "ok"}, "version": {"type": "string"}, "uptime": {"type": "integer"}, "pid": {"type": "integer"}}},
        "Status": {"type": "object", "properties": {"status": {"type": "string"}, "name": {"type": "string"}}},
        "ServerCreate": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$"},
            "description": {"type": "string"}, "source": source, "command": {"type": "string", "description": "program, run without a shell"},
            "args": strings, "env": string_map, "tags": strings, "transport": transport, "url": {"type": "string"}, "headers": string_map,
            "package_name": {"type": "string"}, "package_version": {"type": "string"}, "repository": {"type": "string"}, "homepage": {"type": "string"},
            "activate_timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000}, "call_timeout_ms": {"type": "integer", "minimum": 1, "maximum": 3600000}}},
        "ServerPatch": {"type": "object", "additionalProperties": false, "properties": {
            "description": {"type": "string"}, "command": {"type": "string"}, "args": strings, "env": string_map, "tags": strings,
            "transport": transport, "url": {"type": "string"}, "headers": string_map,
            "activate_timeout_ms": {"type": "integer"}, "call_timeout_ms": {"type": "integer"}}},
        "Server": {"type": "object", "properties": {
            "id": {"type": "integer"}, "name": {"type": "string"}, "description": {"type": "string"}, "source": source,
            "command": {"type": ["string", "null"]}, "args": strings, "env": string_map, "tags": strings, "transport": transport,
            "url": {"type": ["string", "null"]}, "headers": string_map, "installed": {"type": "boolean"},
            "active": {"type": "boolean", "description": "the cross-process active flag"},
            "health_status": {"type": "string", "enum": ["unknown", "healthy", "unhealthy"]}, "last_health_check": {"type": ["string", "null"]},
            "error_count": {"type": "integer"}, "last_error": {"type": ["string", "null"]},
            "activate_timeout_ms": {"type": ["integer", "null"]}, "call_timeout_ms": {"type": ["integer", "null"]},
            "created_at": {"type": "string"}, "updated_at": {"type": "string"},
            "origin": {"type": "string", "description": "`manual` or the client config file the server was applied from"},
            "status": {"$ref": "#/components/schemas/ServerStatus"},
            "auth_url": {"type": ["string", "null"], "description": "where to authorize, while authenticating"},
            "error_kind": {"type": ["string", "null"], "description": "the kind of last_error, while in error"}}},
        "ServerList": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/Server"}, {"type": "object", "properties": {
            "tool_count": {"type": "integer"}, "running": {"type": "boolean", "description": "runs in this process"},
            "sandbox": {"$ref": "#/components/schemas/SandboxBrief"}}}]}},
        "Tool": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "input_schema": {"type": "object"}}},
        "ServerDetail": {"allOf": [{"$ref": "#/components/schemas/Server"}, {"type": "object", "properties": {
            "tool_count": {"type": "integer"}, "running": {"type": "boolean"},
            "sandbox": {"$ref": "#/components/schemas/SandboxBrief"},
            "tools": {"type": "array", "items": {"$ref": "#/components/schemas/Tool"}},
            "child": {"type": ["object", "null"], "description": "pid, status, stderr tail, last error, restarts when it runs here"}}}]},
        "Activation": {"type": "object", "properties": {"status": {"type": "string", "enum": ["activated", "already_active"]}, "name": {"type": "string"},
            "tool_count": {"type": "integer"}, "tools": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "call_as": {"type": "string"}, "description": {"type": "string"}}}}}},
        "SecretList": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}, "masked_value": {"type": "string"}, "updated_at": {"type": "string"}}}},
        "ConfigApply": {"type": "object", "additionalProperties": false, "properties": {"config": {"type": "object"},
            "format": {"type": "string", "enum": ["claude-desktop", "claude-code", "claude-user", "cursor", "vscode", "windsurf", "codex", "gemini"]},
            "path": {"type": "string"}}},
        "ConfigApplied": {"type": "object", "properties": {"file": {"type": "string"}, "format": {"type": "string"},
            "results": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/AddServerResult"}, {"type": "object", "properties": {"name": {"type": "string"}, "action": {"type": "string", "enum": ["added", "updated", "unchanged", "refused"], "description": "refused: the name belongs to another origin"}}}]}},
            "renamed": {"type": "array"}, "needs_input": {"type": "array"}, "warnings": {"type": "array", "items": {"type": "string"}}}},
        "SecretValue": {"type": "object", "required": ["value"], "additionalProperties": false, "properties": {"value": {"type": "string", "minLength": 1}}},
        "SecretSet": {"type": "object", "properties": {"status": {"const": "set"}, "name": {"type": "string"}, "key": {"type": "string"}, "masked_value": {"type": "string"}}},
        "HealthReport": {"type": "object", "properties": {"name": {"type": "string"}, "status": {"type": "string", "enum": ["healthy", "unhealthy"]},
            "latency_ms": {"type": "integer"}, "tool_count": {"type": "integer"}, "error": {"type": "string"}}},
        "ToolMetricsList": {"type": "array", "items": {"type": "object", "properties": {"tool_name": {"type": "string"}, "call_count": {"type": "integer"},
            "error_count": {"type": "integer"}, "total_latency_ms": {"type": "integer"}, "avg_latency_ms": {"type": "number"}, "last_called_at": {"type": ["string", "null"]}}}},
        "ServerMetricsList": {"type": "array", "items": {"type": "object", "properties": {"server_name": {"type": "string"}, "total_calls": {"type": "integer"},
            "total_errors": {"type": "integer"}, "avg_latency_ms": {"type": "number"}}}},
        "CallRequest": {"type": "object", "required": ["tool"], "additionalProperties": false, "properties": {
            "tool": {"type": "string", "description": "the tool's own name (not server__tool)"}, "args": {"type": "object"}}},
        "CallToolResult": {"type": "object", "description": "the MCP tools/call result", "properties": {
            "content": {"type": "array", "items": {"type": "object"}}, "structuredContent": {}, "isError": {"type": "boolean"}}},
        "LogEntry": {"type": "object", "properties": {"id": {"type": "integer"}, "timestamp": {"type": "string"}, "server": {"type": "string"}, "tool": {"type": "string"},
            "args": {}, "response": {"type": "string"}, "latency_ms": {"type": "integer"}, "success": {"type": "boolean"}}},
        "LogPage": {"type": "object", "properties": {"entries": {"type": "array", "items": {"$ref": "#/components/schemas/LogEntry"}}, "total": {"type": "integer"}}},
    })
}

fn market_schemas_and_service() -> Value {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let strings = json!({"type": "array", "items": {"type": "string"}});
    json!({
        "BrowseResult": {"type": "object", "properties": {
            "servers": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string", "description": "<source>:<name>; pass it to /api/install"}, "name": {"type": "string"}, "title": {"type": ["string", "null"]},
                "description": {"type": "string"}, "version": {"type": ["string", "null"]}, "source": {"type": "string", "enum": ["registry", "npm", "pypi"]},
                "runtime": {"type": ["string", "null"], "enum": ["node", "python", "docker", "streamable-http", "sse", null]},
                "install_method": {"type": ["string", "null"], "enum": ["npx", "uvx", "docker", "remote", null]},
                "repository": {"type": ["string", "null"]}, "website_url": {"type": ["string", "null"]}, "packages": strings}}},
            "next_cursor": {"type": ["string", "null"]},
            "sources": {"type": "array", "items": {"type": "object", "properties": {"source": {"type": "string"}, "ok": {"type": "boolean"},
                "stale": {"type": "boolean"}, "error": {"type": ["string", "null"]}, "count": {"type": "integer"}}}}}},
        "InstallRequest": {"type": "object", "required": ["name"], "additionalProperties": false, "properties": {
            "name": {"type": "string", "description": "a marketplace name, or a browse row's key"}, "inputs": string_map}},
        "InstallOutcome": {"type": "object", "description": "201 installed, or 200 needs_input (nothing registered; send `inputs` again)", "properties": {
            "status": {"type": "string", "enum": ["installed", "needs_input"]}, "server": {"type": "string"}, "name": {"type": "string"},
            "missing": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                "is_secret": {"type": "boolean"}, "kind": {"type": "string", "enum": ["env", "header", "variable", "argument"]}}}}}},
        "Prereqs": {"type": "object", "properties": {"npx": {"type": "boolean"}, "uvx": {"type": "boolean"}, "uv": {"type": "boolean"}, "docker": {"type": "boolean"},
            "versions": {"type": "object", "additionalProperties": {"type": ["string", "null"]}}}},
        "PrometheusText": {"type": "string", "description": "Prometheus text exposition format 0.0.4"},
        "Html": {"type": "string", "description": "an HTML page"},
        "AuthFinish": {"type": "object", "required": ["callback"], "properties": {
            "callback": {"type": "string", "description": "the URL the authorization server redirected to, its query, or the code it showed"}}},
        "WebSocketStream": {"type": "object", "description": "server messages: {type:'state', seq, version, servers, active} on connect and after every change \
            (seq grows by one per new snapshot); {type:'registry', seq, servers: [ListedEntry]} (seed 001's snapshot: seq 0 first on each connection, then one per change); {type:'log_entry', entry}; {type:'logs_cleared'}; {type:'error', error}. Client message: {type:'refresh'}."},
    })
}
