//! The tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) of the conformance fixture: the tools the suite's
//! `tasks-*` scenarios call (`greet`, `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`,
//! `multi_input`, `test_tool_with_task`) as their descriptions define them, run on rmcp's `TaskManager`
//! (`tasks/get`, `tasks/update`, `tasks/cancel`), and `notifications/tasks` on connections that outlive a request.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use serde_json::{Value, json};

/// The fixture's tasks, shared by every session.
#[derive(Clone)]
pub struct Tasks {
    manager: TaskManager,
    /// Whether status changes are sent as `notifications/tasks` to the peer that created the task (stdio, where the
    /// connection outlives the request; a stateless HTTP request has no stream left to carry them).
    notify: bool,
}

/// The tools that create tasks.
const TASK_TOOLS: &[&str] = &[
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
];

/// Tools that never run without a task: a client that did not declare the extension gets -32021.
const REQUIRED: &[&str] = &[
    "failing_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
];

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let Value::Object(schema) = json!({"type": "object", "properties": properties}) else {
        unreachable!("a JSON object literal")
    };
    Tool::new(name, description, Arc::new(schema))
}

/// The tasks scenarios' tools.
pub fn tools() -> Vec<Tool> {
    vec![
        tool(
            "greet",
            "Says hello (synchronous; never a task)",
            json!({"name": {"type": "string"}}),
        ),
        tool(
            "slow_compute",
            "Sleeps `seconds` then answers; a task when the client declared the tasks extension",
            json!({"seconds": {"type": "number"}, "label": {"type": "string"}}),
        ),
        tool(
            "failing_job",
            "A task (required) that ends with a tool error after about a second",
            json!({}),
        ),
        tool(
            "protocol_error_job",
            "A task that fails with a protocol error",
            json!({}),
        ),
        tool(
            "confirm_delete",
            "A task (required) that asks for confirmation, then completes",
            json!({"filename": {"type": "string"}}),
        ),
        tool(
            "multi_input",
            "A task (required) that asks two questions at once",
            json!({}),
        ),
        tool(
            "test_tool_with_task",
            "Asks for a name (input-required), then completes as a task (required) greeting it",
            json!({}),
        ),
    ]
}

/// Whether `name` is one of this module's tools.
pub fn has(name: &str) -> bool {
    name == "greet" || TASK_TOOLS.contains(&name)
}

fn text(s: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(s)])
}

fn elicit(message: String, properties: Value) -> Result<InputRequest, McpError> {
    serde_json::from_value(json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": properties}}}))
    .map_err(|e| McpError::internal_error(e.to_string(), None))
}

/// `content.field` of an elicitation answer, as text.
fn field(answer: &Value, field: &str) -> String {
    match answer.get("content").and_then(|c| c.get(field)) {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn missing_tasks() -> McpError {
    McpError::missing_required_client_capability(
        ClientCapabilities::builder().enable_tasks().build(),
    )
}

impl Tasks {
    pub fn new(notify: bool) -> Tasks {
        Tasks {
            manager: TaskManager::new(),
            notify,
        }
    }

    /// Answers one of this module's tools; `None` for other names.
    pub async fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, McpError>> {
        let name = request.name.as_ref();
        if !has(name) {
            return None;
        }
        let args = request.arguments.clone().unwrap_or_default();
        let arg = |k: &str| match args.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        if name == "greet" {
            return Some(Ok(text(format!("Hello, {}!", arg("name"))).into()));
        }
        let declared = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if !declared {
            if REQUIRED.contains(&name) {
                return Some(Err(missing_tasks()));
            }
            // Task-supporting tools run synchronously for a client without the extension.
            return Some(match name {
                "slow_compute" => {
                    let seconds = seconds(&args);
                    tokio::time::sleep(seconds).await;
                    Ok(text(format!(
                        "computed {} in {}s",
                        arg("label"),
                        seconds.as_secs_f64()
                    ))
                    .into())
                }
                _ => Err(McpError::internal_error(
                    "protocol_error_job failed on purpose",
                    None,
                )),
            });
        }
        let options = TaskOptions::new().with_poll_interval_ms(200);
        let task = match name {
            "slow_compute" => {
                let (label, seconds) = (arg("label"), seconds(&args));
                self.spawn(context, options, move |ctx| async move {
                    tokio::select! {
                        _ = tokio::time::sleep(seconds) => Ok(text(format!("computed {label} in {}s", seconds.as_secs_f64()))),
                        _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                    }
                })
            }
            "failing_job" => self.spawn(context, options, |ctx| async move {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => Ok(CallToolResult::error(vec![ContentBlock::text("failing_job failed, as it always does")])),
                    _ = ctx.cancelled() => Err(TaskExit::Cancelled),
                }
            }),
            "protocol_error_job" => self.spawn(context, options, |_| async move {
                Err(TaskExit::Error(McpError::internal_error(
                    "protocol_error_job failed on purpose",
                    None,
                )))
            }),
            "confirm_delete" => {
                let file = arg("filename");
                let ask = match elicit(format!("Delete {file}?"), json!({"confirm": {"type": "boolean"}})) {
                    Ok(a) => a,
                    Err(e) => return Some(Err(e)),
                };
                self.spawn(context, options, move |ctx| async move {
                    let answer = ctx.request_input("confirm", ask).await?;
                    Ok(text(match field(&answer, "confirm").as_str() {
                        "true" => format!("deleted {file}"),
                        _ => format!("kept {file}"),
                    }))
                })
            }
            "multi_input" => {
                let props = json!({"name": {"type": "string"}, "confirm": {"type": "boolean"}});
                let asks = elicit("First question".into(), props.clone())
                    .and_then(|a| Ok((a, elicit("Second question".into(), props)?)));
                let (first, second) = match asks {
                    Ok(a) => a,
                    Err(e) => return Some(Err(e)),
                };
                self.spawn(context, options, move |ctx| async move {
                    let (a, b) = tokio::join!(
                        ctx.request_input("first", first),
                        ctx.request_input("second", second)
                    );
                    Ok(text(format!("answers: {}, {}", field(&a?, "name"), field(&b?, "name"))))
                })
            }
            _ => {
                // test_tool_with_task: an input-required round first, then a task with what it gathered.
                let answer = request.input_responses.as_ref().and_then(|r| r.get("user_name"));
                let Some(answer) = answer.filter(|a| a.is_object()) else {
                    let ask = match elicit("What is your name?".into(), json!({"name": {"type": "string"}})) {
                        Ok(a) => a,
                        Err(e) => return Some(Err(e)),
                    };
                    let requests = InputRequests::from_iter([("user_name".to_owned(), ask)]);
                    return Some(Ok(InputRequiredResult::new(Some(requests), None).into()));
                };
                let who = field(answer, "name");
                self.spawn(context, options, move |_| async move { Ok(text(format!("Hello, {who}!"))) })
            }
        };
        Some(Ok(CreateTaskResult::new(task).into()))
    }

    /// Starts `work` as a task; with `notify`, each later status is sent to the creating peer as `notifications/tasks`.
    fn spawn<F, Fut>(
        &self,
        context: &RequestContext<RoleServer>,
        options: TaskOptions,
        work: F,
    ) -> Task
    where
        F: FnOnce(TaskContext) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<CallToolResult, TaskExit>> + Send + 'static,
    {
        let notify = self
            .notify
            .then(|| (self.manager.clone(), context.peer.clone()));
        self.manager.spawn(options, move |ctx| {
            Box::pin(async move {
                if let Some((manager, peer)) = notify {
                    tokio::spawn(announce(manager, peer, ctx.task_id().to_owned()));
                }
                work(ctx).await
            })
        })
    }

    pub fn get(&self, params: &GetTaskParams) -> Result<GetTaskResult, McpError> {
        self.manager
            .get_task(&params.task_id)
            .map(GetTaskResult::new)
    }

    pub fn update(&self, params: UpdateTaskParams) -> Result<(), McpError> {
        self.manager
            .update_task(&params.task_id, params.input_responses)
    }

    pub fn cancel(&self, params: &CancelTaskParams) -> Result<(), McpError> {
        self.manager.cancel_task(&params.task_id)
    }
}

fn seconds(args: &JsonObject) -> Duration {
    let s = args.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
    Duration::from_secs_f64(s.clamp(0.0, 600.0))
}

/// Sends the task's state as `notifications/tasks` each time its status changes, until it is terminal. The manager
/// has no change hook, so this follows it by yielding to the runtime between looks (the changes it waits for are
/// made by other tasks of the same runtime), and by the poll interval once nothing moved for a while.
async fn announce(manager: TaskManager, peer: Peer<RoleServer>, id: String) {
    let mut last = TaskStatus::Working;
    let mut idle = 0u32;
    loop {
        let Ok(task) = manager.get_task(&id) else {
            return;
        };
        let status = task.status();
        if status != last {
            last = status;
            idle = 0;
            let notification = ServerNotification::TaskStatusNotification(Notification::new(
                TaskStatusNotificationParams::new(task),
            ));
            if peer.send_notification(notification).await.is_err() {
                return;
            }
        }
        if status.is_terminal() || peer.is_transport_closed() {
            return;
        }
        idle += 1;
        if idle < 64 {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
