//! Issue 18: the tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`) through the aggregated front, with
//! rmcp's client in a handshake-era session that declares the extension. The conformance fixture, a 2026-07-28
//! child over stdio, makes the tasks; the front shows them as `server__id`: created by `tools/call`, polled with
//! `tasks/get`, answered with `tasks/update`, stopped with `tasks/cancel`, and followed by the child's
//! `notifications/tasks`, which reach the session that created the task under the front's id.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::harness::{self, fixture};

/// The status notifications a client received, in order: (task id, status).
#[derive(Default)]
pub(crate) struct Statuses {
    seen: Mutex<Vec<(String, TaskStatus)>>,
    arrived: tokio::sync::Notify,
}

#[derive(Clone)]
pub(crate) struct TaskClient {
    pub(crate) statuses: Arc<Statuses>,
}

impl ClientHandler for TaskClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_tasks()
                .build(),
            Implementation::new("tasks-it", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_task_status(
        &self,
        params: TaskStatusNotificationParams,
        _c: NotificationContext<RoleClient>,
    ) {
        self.statuses
            .seen
            .lock()
            .unwrap()
            .push((params.task.task.task_id.clone(), params.status()));
        self.statuses.arrived.notify_waiters();
    }
}

impl Statuses {
    /// Waits (bounded) for a notification saying `id` has `status`.
    pub(crate) async fn wait(&self, id: &str, status: TaskStatus) {
        let found = || {
            self.seen
                .lock()
                .unwrap()
                .iter()
                .any(|(i, s)| i == id && *s == status)
        };
        tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let arrived = self.arrived.notified();
                if found() {
                    return;
                }
                arrived.await;
            }
        })
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no notifications/tasks saying {id} is {status:?}; got {:?}",
                self.seen.lock().unwrap()
            )
        });
    }
}

pub(crate) fn args(v: Value) -> JsonObject {
    match v {
        Value::Object(m) => m,
        _ => panic!("arguments must be an object"),
    }
}

pub(crate) async fn create(
    client: &RunningService<RoleClient, TaskClient>,
    tool: &str,
    a: Value,
) -> Task {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args(a));
    match client
        .peer()
        .call_tool_once(params)
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(created) => {
            assert_eq!(created.result_type, ResultType::TASK);
            created.task
        }
        other => panic!("{tool} made no task: {other:?}"),
    }
}

pub(crate) async fn get(client: &RunningService<RoleClient, TaskClient>, id: &str) -> DetailedTask {
    let got = client
        .peer()
        .get_task(GetTaskParams::new(id))
        .await
        .expect("tasks/get");
    assert_eq!(
        got.task.task.task_id, id,
        "tasks/get answers for the id asked"
    );
    got.task
}

#[tokio::test]
async fn a_childs_task_through_the_aggregated_front() {
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "fx", "command": fixture(),
            "args": ["--conformance", "--name", "fx"]}),
        )
        .await;
    setup.stop().await;

    let (transport, _stderr) = TokioChildProcess::builder(harness::command(dir.path(), &["mcp"]))
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("spawn agent-discover mcp");
    let statuses = Arc::new(Statuses::default());
    let client = TaskClient {
        statuses: statuses.clone(),
    }
    .serve(transport)
    .await
    .expect("initialize");
    // Nothing runs yet (active servers are restored after initialize): no child to serve tasks, none declared.
    let declared = client
        .peer_info()
        .expect("server info")
        .capabilities
        .clone();
    assert!(!declared.supports_tasks(), "{declared:?}");
    let activated = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(args(json!({"action": "activate", "name": "fx"}))),
        )
        .await
        .expect("activate");
    assert_ne!(activated.is_error, Some(true), "{activated:?}");

    // Created: the front's id names the child, and the task is there at once (durable create).
    let slow = create(
        &client,
        "fx__slow_compute",
        json!({"seconds": 60, "label": "it"}),
    )
    .await;
    assert!(slow.task_id.starts_with("fx__"), "{}", slow.task_id);
    assert_eq!(slow.status, TaskStatus::Working);
    assert!(slow.ttl_ms.is_some_and(|t| t > 0));
    assert_eq!(
        get(&client, &slow.task_id).await.status(),
        TaskStatus::Working
    );

    // Cancelled: an empty ack, then the child's notification under the front's id, and tasks/get agrees.
    client
        .peer()
        .cancel_task(CancelTaskParams::new(slow.task_id.clone()))
        .await
        .expect("tasks/cancel");
    statuses.wait(&slow.task_id, TaskStatus::Cancelled).await;
    assert_eq!(
        get(&client, &slow.task_id).await.status(),
        TaskStatus::Cancelled
    );
    // Cancelling a terminal task is the same ack (idempotent).
    client
        .peer()
        .cancel_task(CancelTaskParams::new(slow.task_id.clone()))
        .await
        .expect("tasks/cancel of a cancelled task");

    // Completed: the result is inlined on tasks/get.
    let quick = create(
        &client,
        "fx__slow_compute",
        json!({"seconds": 0, "label": "quick"}),
    )
    .await;
    statuses.wait(&quick.task_id, TaskStatus::Completed).await;
    match get(&client, &quick.task_id).await.payload {
        TaskPayload::Completed { result } => {
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains("computed quick"), "{result:?}");
        }
        other => panic!("a finished slow_compute is not completed: {other:?}"),
    }

    // Input required: the question is on tasks/get, the answer goes back with tasks/update.
    let confirm = create(&client, "fx__confirm_delete", json!({"filename": "a.txt"})).await;
    statuses
        .wait(&confirm.task_id, TaskStatus::InputRequired)
        .await;
    let key = match get(&client, &confirm.task_id).await.payload {
        TaskPayload::InputRequired { input_requests } => {
            input_requests.keys().next().cloned().expect("a question")
        }
        other => panic!("confirm_delete does not ask: {other:?}"),
    };
    let answers = InputResponses::from_iter([(
        key,
        json!({"action": "accept", "content": {"confirm": true}}),
    )]);
    client
        .peer()
        .update_task(UpdateTaskParams::new(confirm.task_id.clone(), answers))
        .await
        .expect("tasks/update");
    statuses.wait(&confirm.task_id, TaskStatus::Completed).await;
    match get(&client, &confirm.task_id).await.payload {
        TaskPayload::Completed { result } => {
            assert_eq!(result["content"][0]["text"], "deleted a.txt", "{result:?}")
        }
        other => panic!("{other:?}"),
    }

    // Unknown ids are invalid params, whether no server or the child does not know them.
    for id in ["nosuchserver__1", "fx__no-such-task"] {
        match client.peer().get_task(GetTaskParams::new(id)).await {
            Err(rmcp::ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{id}: {e:?}")
            }
            other => panic!("tasks/get {id}: {other:?}"),
        }
    }
    // Every notification named a task by the front's id.
    assert!(
        statuses
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|(id, _)| id.starts_with("fx__")),
        "{:?}",
        statuses.seen.lock().unwrap()
    );
    let _ = client.cancel().await;
}

/// A 2026-07-28 client (`server/discover`, per-request `_meta`) of `endpoint` with `handler`'s capabilities.
async fn client_2026<H: ClientHandler>(
    endpoint: &str,
    handler: H,
) -> RunningService<RoleClient, H> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(endpoint.to_owned()),
    );
    handler
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("server/discover")
}

#[tokio::test]
async fn a_2026_client_follows_a_childs_task_on_the_aggregated_http_front() {
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "fx", "command": fixture(),
            "args": ["--conformance", "--name", "fx"]}),
        )
        .await;
    setup.stop().await;
    let mut served = crate::replicas::replica(dir.path(), &[]).await;
    let endpoint = format!("{}/mcp", served.url.trim_end_matches('/'));
    let client = client_2026(
        &endpoint,
        TaskClient {
            statuses: Arc::default(),
        },
    )
    .await;
    let activated = client
        .call_tool(
            CallToolRequestParams::new("registry")
                .with_arguments(args(json!({"action": "activate", "name": "fx"}))),
        )
        .await
        .expect("activate");
    assert_ne!(activated.is_error, Some(true), "{activated:?}");

    // Over stateless HTTP each request carries the client's capabilities; rmcp's client sets `Mcp-Name` to the
    // front's task id, which the front checks against the body.
    let slow = create(
        &client,
        "fx__slow_compute",
        json!({"seconds": 60, "label": "h"}),
    )
    .await;
    assert!(slow.task_id.starts_with("fx__"), "{}", slow.task_id);
    assert_eq!(
        get(&client, &slow.task_id).await.status(),
        TaskStatus::Working
    );
    client
        .peer()
        .cancel_task(CancelTaskParams::new(slow.task_id.clone()))
        .await
        .expect("tasks/cancel");
    // Such a client has no stream to be told on: it polls, at the interval the task suggests (the protocol's way).
    let interval = Duration::from_millis(slow.poll_interval_ms.unwrap_or(200).min(1000));
    let mut status = TaskStatus::Working;
    for _ in 0..50 {
        status = get(&client, &slow.task_id).await.status();
        if status.is_terminal() {
            break;
        }
        tokio::time::sleep(interval).await;
    }
    assert_eq!(status, TaskStatus::Cancelled);

    // A client that did not declare the extension: no tasks/get (-32021), and no task from a tool that needs one.
    let plain = client_2026(
        &endpoint,
        harness::TestClient {
            seen: Arc::default(),
            sampling_reply: None,
        },
    )
    .await;
    match plain
        .peer()
        .get_task(GetTaskParams::new(slow.task_id.clone()))
        .await
    {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(
                e.code,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "{e:?}"
            )
        }
        other => panic!("tasks/get without the extension: {other:?}"),
    }
    let params = CallToolRequestParams::new("fx__failing_job");
    match plain.peer().call_tool_once(params).await {
        Err(rmcp::ServiceError::McpError(e)) => {
            assert_eq!(
                e.code,
                ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                "{e:?}"
            )
        }
        other => panic!("a task-only tool without the extension: {other:?}"),
    }
    let _ = plain.cancel().await;
    let _ = client.cancel().await;
    let _ = served.child.kill().await;
}
