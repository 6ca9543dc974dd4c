//! Issue 15 (seed 003): agents discovered by capability and delegated to over A2A. The agents are real: the
//! official Python SDK (`a2a-sdk`, installed by scripts/test.sh) serving tests/interop/a2a_agent.py on 127.0.0.1 in
//! v1.0 with v0.3 compatibility, v0.3 only, and as a worker agent-discover starts itself. Resolution, affinity and
//! the typed errors are also checked at the library level with an in-process agent.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agent_discover::a2a::TaskState;
use agent_discover::agents::{
    AddAgent, BridgeErrorKind, ExecutorKind, LocalAgent, LocalAgentInfo, PromptRequest,
};
use agent_discover::app::App;
use agent_discover::config::Config;
use futures::future::BoxFuture;
use rmcp::model::*;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::harness::{self, BIN, parse, processes_with_args};

fn cache() -> PathBuf {
    std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/cache"))
}

fn python() -> String {
    let p = cache().join("venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh, which installs a2a-sdk before running cargo test",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn agent_script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop/a2a_agent.py")
        .to_string_lossy()
        .into_owned()
}

/// A test agent served by a2a-sdk; killed when dropped.
struct PyAgent {
    child: tokio::process::Child,
    url: String,
}

impl PyAgent {
    /// Starts the agent and waits for its `READY <url>` line.
    async fn start(args: &[&str]) -> PyAgent {
        let mut child = tokio::process::Command::new(python())
            .arg(agent_script())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start the a2a-sdk test agent");
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the test agent is ready within 60 s")
            .unwrap()
            .expect("the test agent printed READY");
        let url = line.strip_prefix("READY ").expect("READY line").to_owned();
        PyAgent { child, url }
    }

    async fn kill(mut self) {
        self.child.kill().await.unwrap();
    }
}

async fn cli(dir: &Path, args: &[&str]) -> Value {
    let out = harness::command(dir, args).output().await.unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| json!(String::from_utf8_lossy(&out.stdout)))
}

async fn call(agent: &harness::Agent, name: &str, args: Value) -> (bool, Value) {
    let r = agent.call(name, args).await;
    (r.is_error == Some(true), parse(&r))
}

fn with_progress(name: &str, args: Value, token: &str) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    p.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::String(token.to_owned().into()),
    )));
    p
}

async fn call_once(peer: &rmcp::Peer<rmcp::RoleClient>, params: CallToolRequestParams) -> Value {
    match peer.call_tool_once(params).await.expect("call") {
        CallToolResponse::Complete(r) => {
            assert_ne!(r.is_error, Some(true), "{:?}", parse(&r));
            parse(&r)
        }
        other => panic!("{other:?}"),
    }
}

fn ids(discovered: &Value) -> Vec<String> {
    discovered["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect()
}

fn find<'a>(discovered: &'a Value, id: &str) -> &'a Value {
    discovered["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {discovered}"))
}

#[tokio::test]
async fn a2a_agents_are_discovered_and_delegated_to_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let coder = PyAgent::start(&["--name", "coder", "--providers"]).await;
    let legacy = PyAgent::start(&[
        "--name",
        "legacy",
        "--v03-only",
        "--skills",
        "translate:language",
    ])
    .await;
    // A v1.0 card (with v0.3 compatibility fields) at /.well-known/agent-card.json, from the base URL.
    let added = cli(dir.path(), &["agents", "add", &coder.url, "--json"]).await;
    assert_eq!(
        (added["id"].as_str(), added["protocolVersion"].as_str()),
        (Some("coder"), Some("1.0"))
    );
    // A v0.3-only card at the older /.well-known/agent.json; at most one task at a time.
    let added = cli(
        dir.path(),
        &[
            "agents",
            "add",
            &legacy.url,
            "--max-concurrent",
            "1",
            "--json",
        ],
    )
    .await;
    assert_eq!(
        (added["id"].as_str(), added["protocolVersion"].as_str()),
        (Some("legacy"), Some("0.3"))
    );
    // A worker agent-discover starts on a loopback port of its choosing (AGENT_DISCOVER_A2A_PORT).
    let script = agent_script();
    let py = python();
    let worker_args = [
        py.as_str(),
        script.as_str(),
        "--name",
        "w-15",
        "--skills",
        "summarize:text",
    ];
    let mut add = vec!["agents", "add", "--name", "worker", "--json", "--"];
    add.extend_from_slice(&worker_args);
    let added = cli(dir.path(), &add).await;
    assert_eq!(added["capabilities"], json!(["summarize", "text"]));
    // The CLI stopped the worker it started to read its card.
    harness::wait_for(Duration::from_secs(10), || {
        processes_with_args(&["--name", "w-15"]).is_empty()
    })
    .await;
    let listed = cli(dir.path(), &["agents", "list", "--json"]).await;
    assert_eq!(ids(&listed), ["coder", "legacy", "worker"]);

    // defaultAgentId from the environment: a session opened without agentId goes to it, not to the first agent.
    let agent = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[("AGENT_DISCOVER_DEFAULT_AGENT", "legacy".to_owned())],
    )
    .await;
    let (err, s) = call(&agent, "sessions_create", json!({})).await;
    assert!(!err, "{s}");
    assert_eq!(s["agentId"], "legacy", "{s}");
    let (err, _) = call(
        &agent,
        "sessions_close",
        json!({"sessionId": s["sessionId"]}),
    )
    .await;
    assert!(!err);
    agent.stop().await;
    let agent = harness::spawn(dir.path(), &[], None).await;
    let (err, s) = call(&agent, "sessions_create", json!({})).await;
    assert!(!err, "{s}");
    assert_eq!(s["agentId"], "coder", "{s}");
    let (err, _) = call(
        &agent,
        "sessions_close",
        json!({"sessionId": s["sessionId"]}),
    )
    .await;
    assert!(!err);
    let names = agent.tool_names().await;
    for t in [
        "bridge_health",
        "agents_discover",
        "sessions_create",
        "sessions_prompt",
        "sessions_status",
        "sessions_close",
        "sessions_cancel",
        "tasks_delegate",
    ] {
        assert!(names.iter().any(|n| n == t), "{t} in {names:?}");
    }
    let (err, health) = call(&agent, "bridge_health", json!({})).await;
    assert!(!err && health["status"] == "ok", "{health}");
    assert_eq!(health["executors"]["worker"]["agents"], 3);

    // Discovery, with and without a capability filter.
    let (_, all) = call(&agent, "agents_discover", json!({})).await;
    assert_eq!(ids(&all), ["coder", "legacy", "worker"]);
    let c = find(&all, "coder");
    assert_eq!(c["status"], "ready");
    assert_eq!(
        c["capabilities"],
        json!(["code-analysis", "code", "analysis", "debugging", "debug"])
    );
    assert_eq!(c["providers"][1]["id"], "anthropic");
    assert_eq!(c["providers"][1]["kind"], "llm", "kind defaults to llm");
    assert!(
        find(&all, "legacy").get("providers").is_none(),
        "no providers field without the extension"
    );
    let (_, some) = call(&agent, "agents_discover", json!({"capability": "language"})).await;
    assert_eq!(ids(&some), ["legacy"]);
    let (_, none) = call(&agent, "agents_discover", json!({"capability": "cooking"})).await;
    assert_eq!(ids(&none), Vec::<String>::new());

    // One index: find_tool answers with an agent whose skill fits, and says which call opens a session.
    let found = agent
        .registry(
            json!({"action": "find_tool", "query": "translate this text into another language"}),
        )
        .await;
    assert_eq!(
        (found["kind"].as_str(), found["agent"].as_str()),
        (Some("agent"), Some("legacy")),
        "{found}"
    );
    assert_eq!(
        found["call"],
        json!({"tool": "sessions_create", "arguments": {"agentId": "legacy"}})
    );

    // Provider selection: the provider reaches the agent in the message metadata; an unknown one is a config error.
    let (err, bad) = call(
        &agent,
        "sessions_create",
        json!({"agentId": "coder", "metadata": {"provider": "mistral"}}),
    )
    .await;
    assert!(err);
    assert_eq!(bad["type"], "config");
    assert_eq!(
        bad["error"],
        "Provider \"mistral\" is not registered in the ProviderRegistry"
    );
    let (err, s) = call(
        &agent,
        "sessions_create",
        json!({"agentId": "coder", "metadata": {"provider": "anthropic"}}),
    )
    .await;
    assert!(!err, "{s}");
    assert_eq!(
        (s["agentId"].as_str(), s["status"].as_str()),
        (Some("coder"), Some("active"))
    );
    let sid = s["sessionId"].as_str().unwrap().to_owned();
    // A streamed answer (v1.0 SendStreamingMessage): each working update is relayed as progress, in order.
    let peer = agent.client.peer().clone();
    let answer = call_once(
        &peer,
        with_progress(
            "sessions_prompt",
            json!({"sessionId": sid, "prompt": "review this"}),
            "p-1",
        ),
    )
    .await;
    assert_eq!(answer["state"], "completed");
    assert_eq!(answer["status"], "active");
    assert_eq!(answer["text"], "echo: review this [provider=anthropic]");
    assert_eq!(
        agent.seen.progress_messages.lock().unwrap().clone(),
        ["chunk 1/3", "chunk 2/3", "chunk 3/3"]
    );
    let (_, st) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
    assert_eq!(
        (st["status"].as_str(), st["taskState"].as_str()),
        (Some("active"), Some("completed"))
    );
    // A task that asks for input: the session waits, and the next prompt continues the same task.
    let (_, asked) = call(
        &agent,
        "sessions_prompt",
        json!({"sessionId": sid, "prompt": "ask me"}),
    )
    .await;
    assert_eq!(
        (
            asked["state"].as_str(),
            asked["status"].as_str(),
            asked["text"].as_str()
        ),
        (
            Some("input-required"),
            Some("input-required"),
            Some("which language?")
        )
    );
    let (_, replied) = call(
        &agent,
        "sessions_prompt",
        json!({"sessionId": sid, "prompt": "french"}),
    )
    .await;
    assert_eq!(
        (replied["state"].as_str(), replied["text"].as_str()),
        (Some("completed"), Some("answer: french"))
    );
    assert_eq!(
        replied["taskId"], asked["taskId"],
        "the reply continued the task"
    );
    let (_, closed) = call(&agent, "sessions_close", json!({"sessionId": sid})).await;
    assert_eq!(closed["status"], "closed");
    let (err, gone) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
    assert!(err);
    assert_eq!(
        (gone["type"].as_str(), gone["error"].as_str()),
        (
            Some("upstream"),
            Some(&*format!("Session not found: {sid}"))
        )
    );

    // v0.3 (message/stream) in one call.
    let (err, d) = call(
        &agent,
        "tasks_delegate",
        json!({"agentId": "legacy", "prompt": "bonjour"}),
    )
    .await;
    assert!(!err, "{d}");
    assert_eq!(
        (d["state"].as_str(), d["text"].as_str()),
        (Some("completed"), Some("echo: bonjour [provider=default]"))
    );
    // The worker is started on first use, under agent-discover's child guard.
    let (err, d) = call(
        &agent,
        "tasks_delegate",
        json!({"agentId": "worker", "prompt": "sum up"}),
    )
    .await;
    assert!(!err, "{d}");
    assert_eq!(d["text"], "echo: sum up [provider=default]");
    assert!(
        !processes_with_args(&["--name", "w-15"]).is_empty(),
        "the worker runs"
    );

    // Cancel mid-task (v0.3 tasks/cancel): the prompt answers `canceled`; meanwhile the agent is busy (limit 1).
    let (_, s) = call(&agent, "sessions_create", json!({"agentId": "legacy"})).await;
    let sid = s["sessionId"].as_str().unwrap().to_owned();
    agent.seen.progress_messages.lock().unwrap().clear();
    let slow = tokio::spawn({
        let peer = peer.clone();
        let sid = sid.clone();
        async move {
            call_once(
                &peer,
                with_progress(
                    "sessions_prompt",
                    json!({"sessionId": sid, "prompt": "slow job"}),
                    "p-2",
                ),
            )
            .await
        }
    });
    let seen = agent.seen.clone();
    harness::wait_for(Duration::from_secs(30), || {
        seen.progress_messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "started")
    })
    .await;
    let (_, st) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
    assert_eq!(
        (st["status"].as_str(), st["taskState"].as_str()),
        (Some("working"), Some("working")),
        "{st}"
    );
    let (_, busy) = call(&agent, "agents_discover", json!({"capability": "language"})).await;
    assert_eq!(find(&busy, "legacy")["status"], "busy");
    let (err, again) = call(
        &agent,
        "sessions_prompt",
        json!({"sessionId": sid, "prompt": "more"}),
    )
    .await;
    assert!(err && again["type"] == "upstream", "{again}");
    let (err, c) = call(&agent, "sessions_cancel", json!({"sessionId": sid})).await;
    assert!(!err, "{c}");
    let done = tokio::time::timeout(Duration::from_secs(30), slow)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(done["state"], "canceled", "{done}");
    let (_, st) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
    assert_eq!(
        (st["status"].as_str(), st["taskState"].as_str()),
        (Some("active"), Some("canceled"))
    );
    let (_, ready) = call(&agent, "agents_discover", json!({"capability": "language"})).await;
    assert_eq!(find(&ready, "legacy")["status"], "ready");
    // A client that gives up on its call (notifications/cancelled) cancels the agent's task as well.
    agent.seen.progress_messages.lock().unwrap().clear();
    let dropped = tokio::spawn({
        let peer = peer.clone();
        let sid = sid.clone();
        async move {
            let _ = peer
                .call_tool_once(with_progress(
                    "sessions_prompt",
                    json!({"sessionId": sid, "prompt": "slow again"}),
                    "p-3",
                ))
                .await;
        }
    });
    harness::wait_for(Duration::from_secs(30), || {
        seen.progress_messages
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "started")
    })
    .await;
    let (_, st) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
    assert_eq!(st["status"], "working", "{st}");
    let task = st["taskId"].clone();
    dropped.abort();
    let mut last = Value::Null;
    for _ in 0..1500 {
        let (_, st) = call(&agent, "sessions_status", json!({"sessionId": sid})).await;
        last = st;
        if last["taskId"] == task && last["taskState"] == "canceled" && last["status"] == "active" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        (
            last["taskId"].clone(),
            last["taskState"].as_str(),
            last["status"].as_str()
        ),
        (task, Some("canceled"), Some("active")),
        "the agent's task was not canceled with the call"
    );

    // Typed errors and argument errors (SEP-1303: isError results naming the field).
    let (err, e) = call(&agent, "sessions_create", json!({"agentId": "ghost"})).await;
    assert!(err);
    assert_eq!(
        (e["type"].as_str(), e["error"].as_str()),
        (Some("upstream"), Some("Agent not found: ghost"))
    );
    let (err, e) = call(
        &agent,
        "sessions_prompt",
        json!({"sessionId": "nope", "prompt": "x"}),
    )
    .await;
    assert!(err);
    assert_eq!(e["error"], "Session not found: nope");
    let (err, e) = call(&agent, "sessions_prompt", json!({"prompt": "x"})).await;
    assert!(err);
    assert_eq!(
        (e["code"].as_str(), e["field"].as_str()),
        (Some("invalid_input"), Some("sessionId"))
    );
    let (err, e) = call(&agent, "sessions_create", json!({"metadata": "anthropic"})).await;
    assert!(err);
    assert_eq!(e["field"], "metadata");

    // An agent that goes down is unavailable, and a session is refused with the reason.
    coder.kill().await;
    let (_, all) = call(&agent, "agents_discover", json!({})).await;
    assert_eq!(find(&all, "coder")["status"], "unavailable");
    assert!(find(&all, "coder")["lastError"].as_str().is_some());
    let (err, e) = call(&agent, "sessions_create", json!({"agentId": "coder"})).await;
    assert!(err);
    assert_eq!(e["type"], "upstream");
    assert!(
        e["error"]
            .as_str()
            .unwrap()
            .starts_with("Agent coder is unavailable"),
        "{e}"
    );
    let listed = cli(dir.path(), &["agents", "list", "--json"]).await;
    assert_eq!(
        find(&listed, "coder")["status"],
        "unavailable",
        "the probed status is stored"
    );

    // No worker outlives agent-discover.
    agent.stop().await;
    harness::wait_for(Duration::from_secs(10), || {
        processes_with_args(&["--name", "w-15"]).is_empty()
    })
    .await;
    let removed = cli(dir.path(), &["agents", "remove", "coder"]).await;
    assert_eq!(removed, json!("removed agent coder\n"));
    legacy.kill().await;
}

/// An in-process agent: answers `<id>: <text> [provider=..]`, with one progress update.
struct Local {
    id: &'static str,
    capabilities: Vec<String>,
    providers: Option<Vec<Value>>,
}

impl LocalAgent for Local {
    fn info(&self) -> LocalAgentInfo {
        LocalAgentInfo {
            id: self.id.into(),
            capabilities: self.capabilities.clone(),
            description: "in-process test agent".into(),
            providers: self.providers.clone(),
            max_concurrent: 0,
        }
    }

    fn prompt(
        &self,
        r: PromptRequest,
    ) -> BoxFuture<'static, agent_discover::agents::BridgeResult<(TaskState, String)>> {
        let id = self.id;
        Box::pin(async move {
            (r.progress)("thinking");
            Ok((
                TaskState::Completed,
                format!(
                    "{id}: {} [provider={}]",
                    r.text,
                    r.provider.as_deref().unwrap_or("default")
                ),
            ))
        })
    }
}

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

fn no_progress() -> agent_discover::agents::Progress {
    Arc::new(|_: &str| {})
}

#[tokio::test]
async fn resolution_order_session_affinity_and_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let agents = &app.agents;
    let err = agents.discover(None).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (BridgeErrorKind::Internal, "Executor not started")
    );
    agents.start().unwrap();
    let err = agents.create_session(None, None).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (BridgeErrorKind::Config, "No agents registered")
    );

    // Only a worker agent: it is the default.
    let remote = PyAgent::start(&["--name", "echo"]).await;
    let info = agents
        .add(AddAgent {
            url: Some(format!("{}/.well-known/agent-card.json", remote.url)),
            ..AddAgent::default()
        })
        .await
        .unwrap();
    assert_eq!(info.id, "echo");
    let s1 = agents.create_session(None, None).await.unwrap();
    assert_eq!(
        (s1.executor, s1.agent_id.as_str()),
        (ExecutorKind::Worker, "echo")
    );

    // Resolved (and cached) as a worker; registering clears the cache.
    assert_eq!(
        agents.resolve(Some("echo")).unwrap().0,
        ExecutorKind::Worker
    );
    // An in-process agent with the same id: it takes new sessions, the open one stays with its executor.
    agents
        .register(Arc::new(Local {
            id: "echo",
            capabilities: vec!["local-echo".into()],
            providers: None,
        }))
        .unwrap();
    let s2 = agents.create_session(Some("echo"), None).await.unwrap();
    assert_eq!(s2.executor, ExecutorKind::InProcess);
    let a1 = agents
        .prompt(&s1.session_id, "hi", no_progress())
        .await
        .unwrap();
    assert_eq!(
        a1.text, "echo: hi [provider=default]",
        "the A2A agent answered the old session"
    );
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let a2 = agents
        .prompt(
            &s2.session_id,
            "hi",
            Arc::new(move |t: &str| sink.lock().unwrap().push(t.to_owned())),
        )
        .await
        .unwrap();
    assert_eq!(
        (a2.text.as_str(), a2.state),
        ("echo: hi [provider=default]", TaskState::Completed)
    );
    assert_eq!(
        *seen.lock().unwrap(),
        ["thinking"],
        "the in-process agent answered the new one"
    );
    assert_eq!(
        agents
            .session_status(&s1.session_id)
            .await
            .unwrap()
            .executor,
        ExecutorKind::Worker
    );
    // Discovery shows the id once, as resolution sees it (in-process first).
    let found = agents.discover(None).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].id.as_str(), found[0].executor),
        ("echo", ExecutorKind::InProcess)
    );

    // Without agentId: the first in-process agent, unless defaultAgentId names another.
    agents
        .register(Arc::new(Local {
            id: "multi",
            capabilities: vec!["general".into()],
            providers: Some(vec![
                json!({"id": "openai", "models": ["gpt-4o"], "kind": "llm"}),
            ]),
        }))
        .unwrap();
    let s = agents.create_session(None, None).await.unwrap();
    assert_eq!(s.agent_id, "echo");
    agents.set_default_agent_id(Some("multi".into()));
    let s = agents.create_session(None, Some("openai")).await.unwrap();
    assert_eq!(
        (s.agent_id.as_str(), s.provider.as_deref()),
        ("multi", Some("openai"))
    );
    let a = agents
        .prompt(&s.session_id, "go", no_progress())
        .await
        .unwrap();
    assert_eq!(a.text, "multi: go [provider=openai]");
    let err = agents
        .create_session(None, Some("anthropic"))
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (
            BridgeErrorKind::Config,
            "Provider \"anthropic\" is not registered in the ProviderRegistry"
        )
    );
    let only = agents.discover(Some("general")).await.unwrap();
    assert_eq!(
        only.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        ["multi"]
    );

    let err = agents
        .create_session(Some("ghost"), None)
        .await
        .unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (BridgeErrorKind::Upstream, "Agent not found: ghost")
    );
    let err = agents.prompt("nope", "x", no_progress()).await.unwrap_err();
    assert_eq!(
        (err.kind, err.message.as_str()),
        (BridgeErrorKind::Upstream, "Session not found: nope")
    );
    remote.kill().await;
}

async fn rest(
    router: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    use tower::ServiceExt as _;
    let b = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "127.0.0.1:3424");
    let req = match body {
        Some(v) => b
            .header("content-type", "application/json")
            .body(axum::body::Body::from(v.to_string()))
            .unwrap(),
        None => b.body(axum::body::Body::empty()).unwrap(),
    };
    let resp = router.clone().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[tokio::test]
async fn rest_adds_lists_and_removes_agents() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let router =
        agent_discover::http::router(app.clone(), agent_discover::http::Security::loopback());
    let remote = PyAgent::start(&["--name", "Old Agent", "--v03-only"]).await;
    // Adding and removing an agent is an event that makes connected MCP clients re-list their tools (the agent tools
    // are listed once there is an agent).
    let mut changes = app.events.subscribe("server:agents_changed");
    // The older /.well-known/agent.json is found from the base URL; the id comes from the card's name.
    let (status, added) = rest(
        &router,
        "POST",
        "/api/agents",
        Some(json!({"url": remote.url, "headers": {"X-Api-Key": "k-1"}, "maxConcurrent": 2})),
    )
    .await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(
        (added["id"].as_str(), added["protocolVersion"].as_str()),
        (Some("Old-Agent"), Some("0.3"))
    );
    assert_eq!(added["maxConcurrent"], 2);
    assert_agents_changed(&mut changes, "Old-Agent").await;
    let (status, listed) = rest(&router, "GET", "/api/agents", None).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&listed), ["Old-Agent"]);
    let (status, bad) = rest(
        &router,
        "POST",
        "/api/agents",
        Some(json!({"url": remote.url, "command": "x"})),
    )
    .await;
    assert_eq!(
        (status, bad["code"].as_str()),
        (400, Some("invalid_input")),
        "{bad}"
    );
    let (status, bad) = rest(
        &router,
        "POST",
        "/api/agents",
        Some(json!({"url": "ftp://127.0.0.1/x"})),
    )
    .await;
    assert_eq!(
        (status, bad["code"].as_str()),
        (400, Some("invalid_input")),
        "{bad}"
    );
    let (status, _) = rest(&router, "DELETE", "/api/agents/Old-Agent", None).await;
    assert_eq!(status, 200);
    assert_agents_changed(&mut changes, "Old-Agent").await;
    let (status, gone) = rest(&router, "DELETE", "/api/agents/Old-Agent", None).await;
    assert_eq!((status, gone["code"].as_str()), (404, Some("not_found")));
    remote.kill().await;
}

/// The next event is `server:agents_changed` for `id`, and it is one that changes what clients list.
async fn assert_agents_changed(sub: &mut agent_discover::events::Subscription, id: &str) {
    use agent_discover::events::{Event, Received};
    let got = tokio::time::timeout(Duration::from_secs(10), sub.recv())
        .await
        .expect("no server:agents_changed event within 10 s");
    match got {
        Some(Received::Event(e @ Event::AgentsChanged { .. })) => {
            assert!(e.changes_tool_list());
            assert_eq!(e, Event::AgentsChanged { id: id.to_owned() });
        }
        other => panic!("expected server:agents_changed for {id}, got {other:?}"),
    }
}

/// An agent added or removed by another process (here the CLI, on the same data directory) makes a connected MCP
/// client re-list its tools: the agent tools appear once there is an agent and go with the last one.
#[tokio::test]
async fn agents_changed_by_another_process_reach_connected_clients() {
    let dir = tempfile::tempdir().unwrap();
    let remote = PyAgent::start(&["--name", "elsewhere"]).await;
    let agent = harness::spawn(dir.path(), &[], None).await;
    let before = agent.tool_names().await;
    assert!(!before.iter().any(|n| n == "sessions_create"), "{before:?}");

    let added = cli(dir.path(), &["agents", "add", &remote.url, "--json"]).await;
    assert_eq!(added["id"], "elsewhere", "{added}");
    agent.wait_list_changed(1).await;
    let after = agent.tool_names().await;
    assert!(after.iter().any(|n| n == "sessions_create"), "{after:?}");

    cli(dir.path(), &["agents", "remove", "elsewhere"]).await;
    agent.wait_list_changed(2).await;
    let gone = agent.tool_names().await;
    assert!(!gone.iter().any(|n| n == "sessions_create"), "{gone:?}");
    agent.stop().await;
    remote.kill().await;
}
