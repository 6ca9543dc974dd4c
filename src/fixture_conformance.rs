//! The conformance fixture (`agent-discover fixture-server --conformance`): the tools, resources and prompts the
//! official MCP conformance suite's server scenarios call (`test_simple_text`, `test://static-text`,
//! `test_simple_prompt`, ...), behaving as the suite's scenario descriptions define them, plus logging, completions
//! and subscriptions. Served over stdio, or over Streamable HTTP with `--http`.

// Logging, sampling and resources/subscribe are deprecated by SEP-2577 / 2026-07-28; the 2025-11-25 scenarios use them.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::fixture_conformance_2026 as v2026;

/// A 1x1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=";

#[derive(Clone)]
pub struct Conformance {
    pub name: String,
    /// The 2026-07-28 scenarios' state shared by every session (`fixture_conformance_2026`).
    shared: std::sync::Arc<v2026::Shared>,
    /// Speak only the legacy eras (`server/discover` is -32601).
    legacy: bool,
    /// The tasks extension's tools and tasks (`fixture_tasks`), 2026-07-28 only.
    tasks: crate::fixture_tasks::Tasks,
}

impl Conformance {
    /// `notify_tasks`: send task status notifications (over stdio, where the connection outlives the request).
    pub fn new(name: impl Into<String>, legacy: bool, notify_tasks: bool) -> Conformance {
        Conformance {
            name: name.into(),
            shared: v2026::Shared::new(),
            legacy,
            tasks: crate::fixture_tasks::Tasks::new(notify_tasks),
        }
    }
}

fn tool(
    name: &'static str,
    description: &'static str,
    properties: Value,
    required: &[&str],
) -> Tool {
    let schema = json!({"type": "object", "properties": properties, "required": required});
    let Value::Object(schema) = schema else {
        unreachable!("a JSON object literal")
    };
    Tool::new(name, description, std::sync::Arc::new(schema))
}

fn tools() -> Vec<Tool> {
    let none = || json!({});
    vec![
        tool(
            "test_simple_text",
            "Returns simple text content",
            none(),
            &[],
        ),
        tool("test_image_content", "Returns image content", none(), &[]),
        tool("test_audio_content", "Returns audio content", none(), &[]),
        tool(
            "test_embedded_resource",
            "Returns an embedded resource",
            none(),
            &[],
        ),
        tool(
            "test_multiple_content_types",
            "Returns text, image and resource content",
            none(),
            &[],
        ),
        tool(
            "test_tool_with_logging",
            "Sends three log messages while it runs",
            none(),
            &[],
        ),
        tool(
            "test_logging_tool",
            "Logs at info while it runs, in 2026-07-28 only when the request's _meta sets a logLevel (SEP-2575)",
            none(),
            &[],
        ),
        tool(
            "test_tool_with_progress",
            "Sends three progress notifications while it runs",
            none(),
            &[],
        ),
        tool(
            "test_error_handling",
            "Always returns a tool error",
            none(),
            &[],
        ),
        tool(
            "test_sampling",
            "Asks the client to sample an LLM completion",
            json!({"prompt": {"type": "string", "description": "The prompt to send to the LLM"}}),
            &["prompt"],
        ),
        tool(
            "test_elicitation",
            "Asks the user for a username and an email",
            json!({"message": {"type": "string", "description": "The message to show the user"}}),
            &["message"],
        ),
        tool(
            "test_elicitation_sep1034_defaults",
            "Elicitation with defaults for every primitive type",
            none(),
            &[],
        ),
        tool(
            "test_elicitation_sep1330_enums",
            "Elicitation with every enum variant",
            none(),
            &[],
        ),
    ]
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

fn bad(message: impl Into<String>) -> McpError {
    McpError::invalid_params(message.into(), None)
}

/// Whether the request is of the 2026-07-28 revision, where a server asks the client with an input-required result
/// instead of a request of its own.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| !v.has_initialize())
}

/// In 2026-07-28: the client's answer under `key` decoded as `T`, or the input-required result asking for it.
fn input<T: serde::de::DeserializeOwned>(
    request: &CallToolRequestParams,
    key: &str,
    method: &str,
    params: Value,
) -> Result<Result<T, CallToolResponse>, McpError> {
    match request.input_responses.as_ref().and_then(|r| r.get(key)) {
        Some(answer) => serde_json::from_value(answer.clone())
            .map(Ok)
            .map_err(|e| McpError::invalid_params(format!("inputResponses.{key}: {e}"), None)),
        None => {
            let requests: InputRequests =
                serde_json::from_value(json!({ key: {"method": method, "params": params} }))
                    .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            Ok(Err(InputRequiredResult::new(Some(requests), None).into()))
        }
    }
}

impl Conformance {
    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
        params: Value,
    ) -> Result<CallToolResponse, McpError> {
        let answer = if modern(context) {
            match input::<ElicitResult>(request, "elicitation", "elicitation/create", params)? {
                Ok(r) => Ok(r),
                Err(ask) => return Ok(ask),
            }
        } else {
            let params: ElicitRequestParams = serde_json::from_value(params)
                .map_err(|e| McpError::internal_error(e.to_string(), None))?;
            context.peer.create_elicitation(params).await
        };
        let done: Result<CallToolResult, McpError> = match answer {
            Ok(r) => Ok(text(format!(
                "Elicitation completed: action={}, content={}",
                serde_json::to_value(r.action)
                    .unwrap_or_default()
                    .as_str()
                    .unwrap_or_default(),
                r.content.unwrap_or_default()
            ))),
            Err(e) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "elicitation failed: {e}"
            ))])),
        };
        done.map(Into::into)
    }
}

/// A legacy session takes no input-required result: the fixture asks the client with requests of its own, as a
/// handshake-era server does. A request the client refuses is left unanswered (the tool may ask again).
async fn ask_legacy(
    context: &RequestContext<RoleServer>,
    asked: InputRequiredResult,
) -> (InputResponses, Option<String>) {
    // All at once, as a legacy server may: each is a request of its own to the client.
    let asks =
        asked
            .input_requests
            .unwrap_or_default()
            .into_iter()
            .map(|(key, request)| async move {
                let answer = match request {
                    InputRequest::Elicitation(r) => context
                        .peer
                        .create_elicitation(r.params)
                        .await
                        .map(|a| serde_json::to_value(a).unwrap_or_default()),
                    InputRequest::CreateMessage(r) => context
                        .peer
                        .create_message(r.params)
                        .await
                        .map(|a| serde_json::to_value(a).unwrap_or_default()),
                    InputRequest::ListRoots(_) => context
                        .peer
                        .list_roots()
                        .await
                        .map(|a| serde_json::to_value(a).unwrap_or_default()),
                    _ => return None,
                };
                answer.ok().map(|a| (key, a))
            });
    let answers = futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect();
    (answers, asked.request_state)
}

impl Conformance {
    /// A 2026-07-28 input-required tool called in a legacy session: its rounds are asked of the client as requests.
    async fn legacy_rounds(
        &self,
        mut request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caps = context.client_capabilities();
        for _ in 0..DEFAULT_MRTR_MAX_ROUNDS {
            let name = request.name.to_string();
            match v2026::call(&self.shared, &name, &request, caps.clone()) {
                None => return Err(bad(format!("unknown tool `{name}`"))),
                Some(Ok(CallToolResponse::InputRequired(asked))) => {
                    let (answers, state) = ask_legacy(context, asked).await;
                    request.input_responses = Some(answers);
                    request.request_state = state;
                }
                Some(other) => return other,
            }
        }
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "the client did not give the input this tool needs",
        )])
        .into())
    }
}

impl ServerHandler for Conformance {
    fn get_info(&self) -> ServerConfig {
        let caps = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_logging()
            .enable_completions()
            .build();
        // The tasks extension is a 2026-07-28 one: the legacy-era fixture does not declare it.
        let mut caps = caps;
        if !self.legacy {
            caps.extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        }
        ServerConfig::new(caps).with_server_info(Implementation::new(
            self.name.clone(),
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn discover(&self, _c: RequestContext<RoleServer>) -> Result<DiscoverResult, McpError> {
        if self.legacy {
            return Err(crate::fixture::discover_unknown());
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    /// rmcp's HTTP front validates a tools/call's `Mcp-Param-*` headers against the tool found here (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools()
            .into_iter()
            .chain(
                crate::fixture_tasks::tools()
                    .into_iter()
                    .filter(|_| !self.legacy),
            )
            .find(|t| t.name == name)
            .or_else(|| v2026::tool(&self.shared, name))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let mut all = tools();
        all.extend(v2026::tools());
        if !self.legacy {
            all.extend(crate::fixture_tasks::tools());
        }
        if self
            .shared
            .extra_tool
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            all.push(v2026::extra_tool());
        }
        Ok(ListToolsResult::with_all_items(all))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !modern(&context)
            && (request.name.starts_with("test_input_required_result_")
                || request.name == "test_streaming_elicitation")
        {
            return self.legacy_rounds(request, &context).await;
        }
        if !self.legacy
            && let Some(res) = self.tasks.call(&request, &context).await
        {
            return res;
        }
        // A legacy session's client declared its capabilities at initialize: a tool that needs sampling asks for it
        // and fails when refused, as legacy servers do.
        if !modern(&context) && request.name == "test_missing_capability" {
            let params =
                CreateMessageRequestParams::new(vec![SamplingMessage::user_text("Say hello")], 10);
            return match context.peer.create_message(params).await {
                Ok(_) => Ok(text("the client declared sampling").into()),
                Err(e) => Err(McpError::internal_error(
                    format!("sampling failed: {e}"),
                    None,
                )),
            };
        }
        if let Some(res) = v2026::call(
            &self.shared,
            &request.name,
            &request,
            context.client_capabilities(),
        ) {
            // A legacy session has no listen stream: it is told of the change directly.
            if request.name.starts_with("test_trigger_")
                && context
                    .protocol_version()
                    .is_some_and(|v| v.has_initialize())
            {
                let _ = context.peer.notify_tool_list_changed().await;
                let _ = context.peer.notify_prompt_list_changed().await;
            }
            return res;
        }
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let pause = || tokio::time::sleep(Duration::from_millis(50));
        let res = match request.name.as_ref() {
            "test_simple_text" => text("This is a simple text response for testing."),
            "test_image_content" => {
                CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")])
            }
            "test_audio_content" => {
                CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")])
            }
            "test_embedded_resource" => {
                CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
                    "This is an embedded resource content.",
                    "test://embedded-resource",
                ))])
            }
            "test_multiple_content_types" => CallToolResult::success(vec![
                ContentBlock::text("Multiple content types test:"),
                ContentBlock::image(PNG, "image/png"),
                ContentBlock::resource(
                    ResourceContents::text(
                        r#"{"test":"data","value":123}"#,
                        "test://mixed-content-resource",
                    )
                    .with_mime_type("application/json"),
                ),
            ]),
            "test_logging_tool" => {
                // 2026-07-28: a request without `_meta.logLevel` gets no log messages; one with it gets those at or
                // above its level. A legacy session's level is the one `logging/setLevel` chose (all here).
                let level = request
                    .meta
                    .as_ref()
                    .and_then(|m| m.log_level())
                    .or_else(|| context.meta.log_level());
                let wanted = match level {
                    Some(l) => matches!(l, LoggingLevel::Debug | LoggingLevel::Info),
                    None => !modern(&context),
                };
                if wanted {
                    let _ = context
                        .peer
                        .notify_logging_message(LoggingMessageNotificationParam::new(
                            LoggingLevel::Info,
                            json!("test_logging_tool ran"),
                        ))
                        .await;
                }
                text(format!("logged: {wanted}"))
            }
            "test_tool_with_logging" => {
                for (i, msg) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if i > 0 {
                        pause().await;
                    }
                    let _ = context
                        .peer
                        .notify_logging_message(LoggingMessageNotificationParam::new(
                            LoggingLevel::Info,
                            json!(msg),
                        ))
                        .await;
                }
                text("Tool with logging executed successfully")
            }
            "test_tool_with_progress" => {
                let token = request
                    .meta
                    .as_ref()
                    .and_then(|m| m.get_progress_token())
                    .or_else(|| context.meta.get_progress_token());
                for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        pause().await;
                    }
                    if let Some(t) = &token {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(t.clone(), p).with_total(100.0),
                            )
                            .await;
                    }
                }
                text("Tool with progress executed successfully")
            }
            "test_error_handling" => CallToolResult::error(vec![ContentBlock::text(
                "This tool intentionally returns an error for testing",
            )]),
            "test_sampling" => {
                let params = CreateMessageRequestParams::new(
                    vec![SamplingMessage::user_text(arg("prompt"))],
                    100,
                );
                let answer = if modern(&context) {
                    let params = serde_json::to_value(&params)
                        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
                    match input::<CreateMessageResult>(
                        &request,
                        "sampling",
                        "sampling/createMessage",
                        params,
                    )? {
                        Ok(r) => Ok(r),
                        Err(ask) => return Ok(ask),
                    }
                } else {
                    context.peer.create_message(params).await
                };
                match answer {
                    Ok(r) => {
                        let answer = r
                            .message
                            .content
                            .first()
                            .and_then(|c| c.as_text())
                            .map(|t| t.text.clone());
                        text(format!("LLM response: {}", answer.unwrap_or_default()))
                    }
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "sampling failed: {e}"
                    ))]),
                }
            }
            "test_elicitation" => {
                return self
                    .elicit(
                        &context,
                        &request,
                        json!({"message": arg("message"), "requestedSchema": {"type": "object", "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}},
                            "required": ["username", "email"]}}),
                    )
                    .await;
            }
            "test_elicitation_sep1034_defaults" => {
                return self
                    .elicit(
                        &context,
                        &request,
                        json!({"message": "Please review and update the form fields with defaults",
                            "requestedSchema": {"type": "object", "properties": {
                            "name": {"type": "string", "description": "User name", "default": "John Doe"},
                            "age": {"type": "integer", "description": "User age", "default": 30},
                            "score": {"type": "number", "description": "User score", "default": 95.5},
                            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                            "verified": {"type": "boolean", "description": "Verification status", "default": true}},
                            "required": []}}),
                    )
                    .await;
            }
            "test_elicitation_sep1330_enums" => {
                return self
                    .elicit(
                        &context,
                        &request,
                        json!({"message": "Please select options from the enum fields",
                            "requestedSchema": {"type": "object", "properties": {
                            "untitledSingle": {"type": "string", "description": "Select one option", "enum": ["option1", "option2", "option3"]},
                            "titledSingle": {"type": "string", "description": "Select one option with titles", "oneOf": [
                                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                            "legacyEnum": {"type": "string", "description": "Select one option (legacy)", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                            "untitledMulti": {"type": "array", "description": "Select multiple options", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                            "titledMulti": {"type": "array", "description": "Select multiple options with titles", "items": {"anyOf": [
                                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}},
                            "required": []}}),
                    )
                    .await;
            }
            other => return Err(bad(format!("unknown tool `{other}`"))),
        };
        Ok(res.into())
    }

    async fn list_resources(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let r = |uri: &str, name: &str, description: &str, mime: &str| {
            Resource::new(uri, name)
                .with_description(description)
                .with_mime_type(mime)
        };
        Ok(ListResourcesResult::with_all_items(vec![
            r(
                "test://static-text",
                "Static Text Resource",
                "A static text resource for testing",
                "text/plain",
            ),
            r(
                "test://static-binary",
                "Static Binary Resource",
                "A static binary resource (image) for testing",
                "image/png",
            ),
            r(
                "test://watched-resource",
                "Watched Resource",
                "A resource that can be subscribed to",
                "text/plain",
            ),
            r(
                v2026::APP_URI,
                "App",
                "The UI of test_app_tool (MCP Apps)",
                v2026::APP_MIME,
            ),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://template/{id}/data", "Resource Template")
                .with_description("A resource template with parameter substitution")
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let uri = request.uri;
        let contents = match uri.as_str() {
            "test://static-text" => {
                ResourceContents::text("This is the content of the static text resource.", &uri)
            }
            "test://static-binary" => ResourceContents::blob(PNG, &uri).with_mime_type("image/png"),
            "test://watched-resource" => ResourceContents::text("Watched resource content.", &uri),
            v2026::APP_URI => ResourceContents::text(
                "<!doctype html><title>fixture app</title><p>test_app_tool</p>",
                &uri,
            )
            .with_mime_type(v2026::APP_MIME),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => ResourceContents::text(
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                        .to_string(),
                    &uri,
                )
                .with_mime_type("application/json"),
                // SEP-2164: invalid params naming the URI.
                _ => {
                    return Err(McpError::invalid_params(
                        format!("Resource not found: {uri}"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn subscribe(
        &self,
        _r: SubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn unsubscribe(
        &self,
        _r: UnsubscribeRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn set_level(
        &self,
        _r: SetLevelRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let prefix = request.argument.value.clone();
        let values: Vec<String> = ["paris", "park", "party"]
            .into_iter()
            .filter(|v| v.starts_with(&prefix))
            .map(str::to_owned)
            .collect();
        let info = CompletionInfo::new(values).map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(info))
    }

    /// SEP-2663 (rmcp answers -32021 before these when the request did not declare the extension).
    async fn get_task(
        &self,
        request: GetTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&request)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update(request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&request)
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.supported_by(&self.get_info().capabilities))
    }

    /// 2026-07-28 clients hear of the triggers' list changes on `subscriptions/listen` streams.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let mut changes = self.shared.changes.subscribe();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                change = changes.recv() => {
                    let sink = context.sink();
                    // The sink refuses what the client did not ask for; the stream ends with `cancelled`.
                    let _ = match change {
                        Ok("tools") => sink.notify_tool_list_changed().await,
                        Ok(_) => sink.notify_prompt_list_changed().await,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(_) => return Ok(()),
                    };
                }
            }
        }
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let arg = |name: &str, description: &str| {
            PromptArgument::new(name)
                .with_description(description)
                .with_required(true)
        };
        let mut all = vec![
            Prompt::new(
                "test_simple_prompt",
                Some("A simple prompt without arguments"),
                None,
            ),
            Prompt::new(
                "test_prompt_with_arguments",
                Some("A prompt with required arguments"),
                Some(vec![
                    arg("arg1", "First test argument"),
                    arg("arg2", "Second test argument"),
                ]),
            ),
            Prompt::new(
                "test_prompt_with_embedded_resource",
                Some("A prompt that includes an embedded resource"),
                Some(vec![arg("resourceUri", "URI of the resource to embed")]),
            ),
            Prompt::new(
                "test_prompt_with_image",
                Some("A prompt that includes an image"),
                None,
            ),
        ];
        all.extend(v2026::prompts(&self.shared));
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let mut request = request;
        for _ in 0..DEFAULT_MRTR_MAX_ROUNDS {
            match v2026::get_prompt(&self.shared, &request) {
                // A legacy session: the prompt's question is asked of the client as a request.
                Some(Ok(GetPromptResponse::InputRequired(asked))) if !modern(&context) => {
                    let (answers, state) = ask_legacy(&context, asked).await;
                    request.input_responses = Some(answers);
                    request.request_state = state;
                }
                Some(res) => return res,
                None => break,
            }
        }
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| {
            args.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let messages = match request.name.as_str() {
            "test_simple_prompt" => vec![PromptMessage::new_text(
                Role::User,
                "This is a simple prompt for testing.",
            )],
            "test_prompt_with_arguments" => vec![PromptMessage::new_text(
                Role::User,
                format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg("arg1"),
                    arg("arg2")
                ),
            )],
            "test_prompt_with_embedded_resource" => vec![
                PromptMessage::new(
                    Role::User,
                    ContentBlock::resource(ResourceContents::text(
                        "Embedded resource content for testing.",
                        arg("resourceUri"),
                    )),
                ),
                PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
            ],
            "test_prompt_with_image" => vec![
                PromptMessage::new(Role::User, ContentBlock::image(PNG, "image/png")),
                PromptMessage::new_text(Role::User, "Please analyze the image above."),
            ],
            other => return Err(bad(format!("unknown prompt `{other}`"))),
        };
        Ok(GetPromptResult::new(messages).into())
    }
}
