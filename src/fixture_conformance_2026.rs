//! The 2026-07-28 part of the conformance fixture: the tools and the prompt the suite's 2026-07-28 server scenarios
//! call (SEP-2322 input-required results `test_input_required_result_*`, `test_missing_capability`, the list-change
//! triggers, `json_schema_2020_12_tool`), as the scenario descriptions define them. Stateless: what a round needs
//! from the previous one travels in `requestState`, signed (HMAC-SHA-256 with a key of this process) so a tampered
//! state is refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::ErrorData as McpError;
use rmcp::model::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// What the fixture's sessions share: the signing key, and the list changes the triggers make.
pub struct Shared {
    key: [u8; 32],
    /// Whether the trigger tools have added their extra tool / prompt.
    pub extra_tool: AtomicBool,
    pub extra_prompt: AtomicBool,
    /// Told `tools` or `prompts` when a trigger changed that list (for `subscriptions/listen` streams).
    pub changes: tokio::sync::broadcast::Sender<&'static str>,
}

impl Shared {
    pub fn new() -> Arc<Shared> {
        let seed = format!(
            "{}-{:?}-{:?}",
            std::process::id(),
            std::time::SystemTime::now(),
            std::thread::current().id()
        );
        Arc::new(Shared {
            key: Sha256::digest(seed.as_bytes()).into(),
            extra_tool: AtomicBool::new(false),
            extra_prompt: AtomicBool::new(false),
            changes: tokio::sync::broadcast::channel(16).0,
        })
    }

    fn mac(&self, payload: &str) -> String {
        // HMAC (RFC 2104) over SHA-256 with a 32-byte key (shorter than the 64-byte block).
        let mut ipad = [0x36u8; 64];
        let mut opad = [0x5cu8; 64];
        for (i, k) in self.key.iter().enumerate() {
            ipad[i] ^= k;
            opad[i] ^= k;
        }
        let inner = Sha256::new()
            .chain_update(ipad)
            .chain_update(payload.as_bytes())
            .finalize();
        let outer = Sha256::new()
            .chain_update(opad)
            .chain_update(inner)
            .finalize();
        outer.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `payload.mac`.
    fn seal(&self, payload: &str) -> String {
        format!("{payload}.{}", self.mac(payload))
    }

    /// The payload of a sealed state, or invalid params when it was altered.
    fn open(&self, state: &str) -> Result<String, McpError> {
        let tampered = || {
            McpError::invalid_params(
                "requestState failed its integrity check",
                Some(json!({"requestState": "tampered"})),
            )
        };
        let (payload, mac) = state.rsplit_once('.').ok_or_else(tampered)?;
        // Compared in full whatever differs (the length is fixed).
        let expected = self.mac(payload);
        let same = expected.len() == mac.len()
            && expected
                .bytes()
                .zip(mac.bytes())
                .fold(0u8, |d, (a, b)| d | (a ^ b))
                == 0;
        if same {
            Ok(payload.to_owned())
        } else {
            Err(tampered())
        }
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

fn elicit(message: &str, schema: Value) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

fn ask(requests: Value, state: Option<String>) -> Result<InputRequiredResult, McpError> {
    let requests: InputRequests = serde_json::from_value(requests)
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
    Ok(InputRequiredResult::new(Some(requests), state))
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

/// The answer under `key` when it is an object (an elicitation, sampling or roots result); a key that holds
/// something else is invalid params, a missing key `None` (asked again).
fn answer<'a>(
    responses: Option<&'a InputResponses>,
    key: &str,
) -> Result<Option<&'a serde_json::Map<String, Value>>, McpError> {
    match responses.and_then(|r| r.get(key)) {
        None => Ok(None),
        Some(Value::Object(o)) => Ok(Some(o)),
        Some(_) => Err(McpError::invalid_params(
            format!("inputResponses.{key} must be an object (the client's result)"),
            None,
        )),
    }
}

fn content(o: &serde_json::Map<String, Value>, field: &str) -> String {
    o.get("content")
        .and_then(|c| c.get(field))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            v => v.to_string(),
        })
        .unwrap_or_default()
}

fn sampled(o: &serde_json::Map<String, Value>) -> String {
    o.get("content")
        .and_then(|c| c.get("text"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The 2026-07-28 tools.
pub fn tools() -> Vec<Tool> {
    let none = || json!({});
    let plain = |name: &'static str, description: &'static str| {
        let Value::Object(schema) = object(none(), &[]) else {
            unreachable!("a JSON object literal")
        };
        Tool::new(name, description, Arc::new(schema))
    };
    // As the json-schema-2020-12 scenario describes it: `$anchor` in `$defs`, `anyOf` nested in `allOf`, and
    // `if`/`then`/`else` choosing which contact field is required.
    let schema_2020 = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
            "street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    });
    let Value::Object(schema_2020) = schema_2020 else {
        unreachable!("a JSON object literal")
    };
    vec![
        plain(
            "test_input_required_result_elicitation",
            "Asks for the user's name (SEP-2322)",
        ),
        plain(
            "test_streaming_elicitation",
            "Asks for the user's name: an input-required result, never a request on the stream (SEP-2575)",
        ),
        plain(
            "test_input_required_result_sampling",
            "Asks the client's model a question (SEP-2322)",
        ),
        plain(
            "test_input_required_result_list_roots",
            "Asks for the client's roots (SEP-2322)",
        ),
        plain(
            "test_input_required_result_request_state",
            "Asks for confirmation, with requestState (SEP-2322)",
        ),
        plain(
            "test_input_required_result_multiple_inputs",
            "Asks for elicitation, sampling and roots at once (SEP-2322)",
        ),
        plain(
            "test_input_required_result_multi_round",
            "Asks twice, with evolving requestState (SEP-2322)",
        ),
        plain(
            "test_input_required_result_tampered_state",
            "Signs its requestState and refuses an altered one (SEP-2322)",
        ),
        plain(
            "test_input_required_result_capabilities",
            "Asks only for what the client declared (SEP-2322)",
        ),
        plain(
            "test_missing_capability",
            "Needs the client's sampling capability (-32021 without it)",
        ),
        plain(
            "test_trigger_tool_change",
            "Adds a tool and tells listen streams the tool list changed",
        ),
        plain(
            "test_trigger_prompt_change",
            "Adds a prompt and tells listen streams the prompt list changed",
        ),
        header_tool(),
        app_tool(),
        Tool::new(
            "json_schema_2020_12_tool",
            "A tool whose input schema uses JSON Schema 2020-12 keywords",
            Arc::new(schema_2020),
        ),
    ]
}

/// SEP-2243: a tool whose `region` argument a 2026-07-28 HTTP client mirrors into the `Mcp-Param-Region` header,
/// which the server checks against the body (-32020 with HTTP 400 when they differ or the header is missing).
fn header_tool() -> Tool {
    let Value::Object(schema) = object(
        json!({"region": {"type": "string", "x-mcp-header": "Region",
            "description": "Where to run; mirrored into Mcp-Param-Region"}}),
        &["region"],
    ) else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        "test_header_param",
        "Echoes its region, which travels in the Mcp-Param-Region header too (SEP-2243)",
        Arc::new(schema),
    )
}

/// The `ui://` resource of the MCP App tool (SEP-1865).
pub const APP_URI: &str = "ui://fixture/app.html";
/// The MIME type of an MCP App's HTML.
pub const APP_MIME: &str = "text/html;profile=mcp-app";

/// An MCP App tool: its `_meta.ui.resourceUri` names the HTML a host renders for it.
fn app_tool() -> Tool {
    let Value::Object(schema) = object(json!({}), &[]) else {
        unreachable!("a JSON object literal")
    };
    let Value::Object(meta) = json!({"ui": {"resourceUri": APP_URI}}) else {
        unreachable!("a JSON object literal")
    };
    let mut tool = Tool::new(
        "test_app_tool",
        "An MCP App: its result is shown in the UI its _meta.ui.resourceUri names (SEP-1865)",
        Arc::new(schema),
    );
    tool.meta = Some(meta.into());
    tool
}

/// A tool of this part by name (for the HTTP front's `Mcp-Param-*` validation).
pub fn tool(shared: &Shared, name: &str) -> Option<Tool> {
    let mut all = tools();
    if shared.extra_tool.load(Ordering::SeqCst) {
        all.push(extra_tool());
    }
    all.into_iter().find(|t| t.name == name)
}

/// The extra tool the trigger adds.
pub fn extra_tool() -> Tool {
    let Value::Object(schema) = object(json!({}), &[]) else {
        unreachable!("a JSON object literal")
    };
    Tool::new(
        "test_added_tool",
        "Added by test_trigger_tool_change",
        Arc::new(schema),
    )
}

/// Answers one of the 2026-07-28 tools; `None` when `name` is none of them.
pub fn call(
    shared: &Shared,
    name: &str,
    request: &CallToolRequestParams,
    caps: Option<ClientCapabilities>,
) -> Option<Result<CallToolResponse, McpError>> {
    call_inner(shared, name, request, caps.unwrap_or_default()).transpose()
}

fn call_inner(
    shared: &Shared,
    name: &str,
    request: &CallToolRequestParams,
    caps: ClientCapabilities,
) -> Result<Option<CallToolResponse>, McpError> {
    let responses = request.input_responses.as_ref();
    let name_schema = || object(json!({"name": {"type": "string"}}), &["name"]);
    let res: CallToolResponse = match name {
        // SEP-2575: in 2026-07-28 the question rides in the result, never as a request on the response stream.
        "test_input_required_result_elicitation" | "test_streaming_elicitation" => {
            match answer(responses, "user_name")? {
                Some(a) => text(format!("Hello, {}!", content(a, "name"))).into(),
                None => ask(
                    json!({"user_name": elicit("What is your name?", name_schema())}),
                    None,
                )?
                .into(),
            }
        }
        "test_input_required_result_sampling" => match answer(responses, "capital_question")? {
            Some(a) => text(format!("The model answered: {}", sampled(a))).into(),
            None => ask(
                json!({"capital_question": sample("What is the capital of France?", 100)}),
                None,
            )?
            .into(),
        },
        "test_input_required_result_list_roots" => match answer(responses, "client_roots")? {
            Some(a) => {
                let uris: Vec<String> = a
                    .get("roots")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.get("uri").and_then(Value::as_str).map(str::to_owned))
                    .collect();
                text(format!("The client's roots: {}", uris.join(", "))).into()
            }
            None => ask(json!({"client_roots": roots()}), None)?.into(),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let state = request
                .request_state
                .as_deref()
                .map(|s| shared.open(s))
                .transpose()?;
            match (answer(responses, "confirm")?, state) {
                (Some(a), Some(payload)) if payload == name => {
                    text(format!("state-ok: confirmed={}", content(a, "ok"))).into()
                }
                _ => ask(
                    json!({"confirm": elicit("Please confirm", object(json!({"ok": {"type": "boolean"}}), &["ok"]))}),
                    Some(shared.seal(name)),
                )?
                .into(),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let state = request
                .request_state
                .as_deref()
                .map(|s| shared.open(s))
                .transpose()?;
            match (
                answer(responses, "user_name")?,
                answer(responses, "greeting")?,
                answer(responses, "client_roots")?,
                state,
            ) {
                (Some(n), Some(g), Some(_), Some(_)) => {
                    text(format!("{} {}", sampled(g), content(n, "name"))).into()
                }
                _ => ask(
                    json!({
                        "user_name": elicit("What is your name?", name_schema()),
                        "greeting": sample("Generate a greeting", 50),
                        "client_roots": roots(),
                    }),
                    Some(shared.seal("multiple")),
                )?
                .into(),
            }
        }
        "test_input_required_result_multi_round" => {
            let state = request
                .request_state
                .as_deref()
                .map(|s| shared.open(s))
                .transpose()?;
            match state.as_deref().and_then(|s| s.strip_prefix("round-")) {
                Some("1") if answer(responses, "step1")?.is_some() => {
                    let who = content(
                        answer(responses, "step1")?.unwrap_or(&Default::default()),
                        "name",
                    );
                    ask(
                        json!({"step2": elicit("Step 2: What is your favorite color?",
                            object(json!({"color": {"type": "string"}}), &["color"]))}),
                        Some(shared.seal(&format!("round-2:{who}"))),
                    )?
                    .into()
                }
                Some(r2) if r2.starts_with("2:") && answer(responses, "step2")?.is_some() => {
                    let color = content(
                        answer(responses, "step2")?.unwrap_or(&Default::default()),
                        "color",
                    );
                    text(format!("{} likes {color}", &r2[2..])).into()
                }
                _ => ask(
                    json!({"step1": elicit("Step 1: What is your name?", name_schema())}),
                    Some(shared.seal("round-1")),
                )?
                .into(),
            }
        }
        "test_input_required_result_capabilities" => {
            let mut requests = serde_json::Map::new();
            if caps.elicitation.is_some() {
                requests.insert(
                    "user_name".into(),
                    elicit("What is your name?", name_schema()),
                );
            }
            #[allow(deprecated)]
            if caps.sampling.is_some() {
                requests.insert("greeting".into(), sample("Generate a greeting", 50));
            }
            #[allow(deprecated)]
            if caps.roots.is_some() {
                requests.insert("client_roots".into(), roots());
            }
            let answered = requests
                .keys()
                .all(|k| responses.is_some_and(|r| r.contains_key(k)));
            if requests.is_empty() || answered {
                text(format!(
                    "answered: {}",
                    requests.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
                .into()
            } else {
                ask(Value::Object(requests), None)?.into()
            }
        }
        "test_missing_capability" => {
            #[allow(deprecated)]
            if caps.sampling.is_none() {
                return Err(McpError::missing_required_client_capability(
                    ClientCapabilities::builder().enable_sampling().build(),
                ));
            }
            text("the client declared sampling").into()
        }
        "test_trigger_tool_change" => {
            shared.extra_tool.store(true, Ordering::SeqCst);
            let _ = shared.changes.send("tools");
            text("tool list changed").into()
        }
        "test_trigger_prompt_change" => {
            shared.extra_prompt.store(true, Ordering::SeqCst);
            let _ = shared.changes.send("prompts");
            text("prompt list changed").into()
        }
        "test_app_tool" => text("the app shows this").into(),
        "test_header_param" => text(format!(
            "region: {}",
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get("region"))
                .and_then(Value::as_str)
                .unwrap_or_default()
        ))
        .into(),
        "json_schema_2020_12_tool" => text(format!(
            "received {}",
            Value::Object(request.arguments.clone().unwrap_or_default())
        ))
        .into(),
        "test_added_tool" if shared.extra_tool.load(Ordering::SeqCst) => text("added").into(),
        _ => return Ok(None),
    };
    Ok(Some(res))
}

/// The prompt of the input-required scenarios, and the one the trigger adds.
pub fn prompts(shared: &Shared) -> Vec<Prompt> {
    let mut out = vec![Prompt::new(
        "test_input_required_result_prompt",
        Some("Asks for context before it is returned (SEP-2322)"),
        None,
    )];
    if shared.extra_prompt.load(Ordering::SeqCst) {
        out.push(Prompt::new(
            "test_added_prompt",
            Some("Added by test_trigger_prompt_change"),
            None,
        ));
    }
    out
}

/// `prompts/get` of the 2026-07-28 prompts; `None` for other names.
pub fn get_prompt(
    shared: &Shared,
    request: &GetPromptRequestParams,
) -> Option<Result<GetPromptResponse, McpError>> {
    match request.name.as_str() {
        "test_input_required_result_prompt" => Some(
            match answer(request.input_responses.as_ref(), "user_context") {
                Err(e) => Err(e),
                Ok(Some(a)) => Ok(GetPromptResult::new(vec![PromptMessage::new_text(
                    Role::User,
                    format!("Use this context: {}", content(a, "context")),
                )])
                .into()),
                Ok(None) => ask(
                    json!({"user_context": elicit("What context should the prompt use?",
                        object(json!({"context": {"type": "string"}}), &["context"]))}),
                    None,
                )
                .map(Into::into),
            },
        ),
        "test_added_prompt" if shared.extra_prompt.load(Ordering::SeqCst) => Some(Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, "added")]).into(),
        )),
        _ => None,
    }
}
