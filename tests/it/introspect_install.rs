//! Issue 14: installing a catalog entry that find_tool found (introspected, not installed) only with the user's
//! consent, asked by MCP elicitation through rmcp's client (accept and decline), or by an explicit `install` when the
//! client cannot be asked; then activating it. And option-style arguments (`--stdio`, `--api-key <key>`,
//! `--root <dir>`) filled by the second pass from a usage text, kept or asked for when installing.

use std::sync::{Arc, Mutex};

use rmcp::model::*;
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

use crate::harness::{BIN, command, fixture, parse};

/// The messages and requested field names of the elicitations a client received.
type Asked = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// A client that declares elicitation and answers every request with `answer` (`None`: decline).
#[derive(Clone)]
struct Consent {
    answer: Option<serde_json::Map<String, Value>>,
    /// The messages and requested field names of the elicitations received.
    asked: Asked,
}

impl ClientHandler for Consent {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("consent", "0"),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _c: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = &request
        {
            let fields = requested_schema.properties.keys().cloned().collect();
            self.asked.lock().unwrap().push((message.clone(), fields));
        }
        Ok(match &self.answer {
            Some(a) => {
                ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(a.clone()))
            }
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }
}

async fn connect(dir: &std::path::Path, client: Consent) -> RunningService<RoleClient, Consent> {
    let transport =
        TokioChildProcess::new(command(dir, &["mcp"])).expect("spawn agent-discover mcp");
    client.serve(transport).await.expect("initialize")
}

async fn registry(client: &RunningService<RoleClient, Consent>, args: Value) -> Value {
    let Value::Object(arguments) = args else {
        panic!("object")
    };
    let r = client
        .call_tool(CallToolRequestParams::new("registry").with_arguments(arguments))
        .await
        .expect("registry call");
    parse(&r)
}

/// Introspects the fixture as a weather server that needs FORECAST_API_KEY: a catalog entry with that need.
async fn catalog_with_forecaster(dir: &std::path::Path) {
    let line = format!(
        "{} --name forecaster --require-env FORECAST_API_KEY --tool summon_weather_forecast=Forecast_the_weather_for_a_city",
        fixture()
    );
    let out = command(
        dir,
        &[
            "introspect",
            "--command",
            &line,
            "--json",
            "--init-timeout",
            "5",
            "--list-timeout",
            "5",
        ],
    )
    .output()
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let record: Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(record["category"], "ok", "{record}");
}

const QUERY: &str = "weather forecast for a city";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catalog_entry_is_installed_and_activated_only_with_the_users_consent() {
    let dir = tempfile::tempdir().unwrap();
    catalog_with_forecaster(dir.path()).await;

    // Declined: nothing is installed or started, and the agent is told not to insist.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let client = connect(
        dir.path(),
        Consent {
            answer: None,
            asked: asked.clone(),
        },
    )
    .await;
    let found = registry(&client, json!({"action": "find_tool", "query": QUERY})).await;
    assert_eq!(found["tool"], "summon_weather_forecast", "{found}");
    assert_eq!(found["install_consent"], "declined", "{found}");
    assert_eq!(found["installed"], false, "{found}");
    let server = found["server"].as_str().unwrap().to_owned();
    {
        let asked = asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert!(
            asked[0].0.contains(&server) && asked[0].0.contains("not installed"),
            "{:?}",
            asked[0]
        );
        assert_eq!(
            asked[0].1,
            ["FORECAST_API_KEY"],
            "the form asks for the secret the server needs"
        );
    }
    let listed = registry(&client, json!({"action": "list"})).await;
    let entry = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .cloned();
    assert_eq!(
        entry.as_ref().map(|e| e["installed"].clone()),
        Some(json!(false)),
        "{listed}"
    );
    client.cancel().await.unwrap();

    // Accepted with a value: installed as introspected, the secret stored, the server started, its tool callable.
    let answer = json!({"FORECAST_API_KEY": "k-123"}).as_object().cloned();
    let client = connect(
        dir.path(),
        Consent {
            answer,
            asked: asked.clone(),
        },
    )
    .await;
    let found = registry(&client, json!({"action": "find_tool", "query": QUERY})).await;
    assert_eq!(found["install_consent"], "accepted", "{found}");
    assert_eq!(found["installed"], true, "{found}");
    assert_eq!(found["server_status"], "active", "{found}");
    assert!(found.get("activation_error").is_none(), "{found}");
    let call_as = found["call_as"].as_str().unwrap().to_owned();
    let r = registry(
        &client,
        json!({"action": "proxy_call", "call_as": call_as, "arguments": {"city": "Oslo"}}),
    )
    .await;
    assert!(
        r.to_string()
            .contains("called summon_weather_forecast with"),
        "{r}"
    );
    let listed = registry(&client, json!({"action": "list", "installed_only": true})).await;
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == server),
        "{listed}"
    );
    // Installed now: find_tool no longer asks.
    let before = asked.lock().unwrap().len();
    let again = registry(&client, json!({"action": "find_tool", "query": QUERY})).await;
    assert_eq!(again["installed"], true, "{again}");
    assert!(again.get("install_consent").is_none(), "{again}");
    assert_eq!(asked.lock().unwrap().len(), before);
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_elicitation_the_agent_is_told_to_install_explicitly_and_auto_activate_never_installs()
 {
    let dir = tempfile::tempdir().unwrap();
    catalog_with_forecaster(dir.path()).await;
    let agent = crate::harness::spawn(dir.path(), &[], None).await;
    let found = agent
        .registry(json!({"action": "find_tool", "query": QUERY, "auto_activate": true}))
        .await;
    assert_eq!(found["install_consent"], "not_asked", "{found}");
    assert_eq!(found["installed"], false);
    let server = found["server"].as_str().unwrap().to_owned();
    let step = found["next_step"].as_str().unwrap();
    assert!(step.contains("install") && step.contains(&server), "{step}");
    assert_eq!(
        found["install"]["install"],
        json!({"action": "install", "name": server, "inputs": ["FORECAST_API_KEY"]})
    );
    // Activation of the entry is still refused.
    let (is_error, _) = agent
        .try_registry(json!({"action": "activate", "name": server}))
        .await
        .unwrap();
    assert!(is_error);
    // The explicit install: without the value it says what is missing and changes nothing; with it, installs.
    let missing = agent
        .registry(json!({"action": "install", "name": server}))
        .await;
    assert_eq!(missing["status"], "needs_input", "{missing}");
    assert_eq!(missing["missing"][0]["name"], "FORECAST_API_KEY");
    let done = agent
        .registry(
            json!({"action": "install", "name": server, "inputs": {"FORECAST_API_KEY": "k-9"}}),
        )
        .await;
    assert_eq!(done["status"], "installed", "{done}");
    assert_eq!(done["secrets"], json!(["FORECAST_API_KEY"]));
    let act = agent
        .registry(json!({"action": "activate", "name": server}))
        .await;
    assert_eq!(act["state"], "ready", "{act}");
    let tools = agent.tool_names().await;
    assert!(
        tools.iter().any(|t| t.ends_with("summon_weather_forecast")),
        "{tools:?}"
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_pass_fills_required_options_and_installing_asks_only_for_their_values() {
    use agent_discover::introspect::{self, Category, Limits, Options, Target};
    let dir = tempfile::tempdir().unwrap();
    let target = Target::command(&format!("{} --name opts --fail options", fixture())).unwrap();
    let mut o = Options::new(dir.path().join("cache"), BIN.into());
    o.limits = Limits {
        initialize: std::time::Duration::from_secs(4),
        list: std::time::Duration::from_secs(4),
        hard: std::time::Duration::from_secs(30),
        ..Limits::default()
    };
    let r = introspect::introspect(&target, &o).await;
    assert_eq!(r.category, Category::Ok, "{}", r.evidence);
    assert_eq!(r.pass, 2);
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsArgs)
    );
    let by_name = |n: &str| {
        r.placeholders
            .iter()
            .find(|p| p.name == n)
            .unwrap_or_else(|| panic!("{n}: {:?}", r.placeholders))
    };
    assert_eq!(by_name("--stdio").value, "", "a bare switch");
    assert!(
        by_name("--api-key").value.starts_with("placeholder"),
        "{:?}",
        by_name("--api-key")
    );
    assert!(
        by_name("--root")
            .value
            .starts_with(&*dir.path().to_string_lossy()),
        "a scratch dir"
    );
    assert!(by_name("--api-key").source == "usage" && by_name("--stdio").source == "usage");
    assert!(
        !r.placeholders
            .iter()
            .any(|p| p.name == "verbose" || p.name == "--verbose"),
        "optional ones are left out"
    );
    assert_eq!(
        r.needs.args,
        ["--api-key", "--root"],
        "only options with a value are asked"
    );
    let launch = r.launch.clone().unwrap();
    assert!(
        launch
            .windows(2)
            .any(|w| w[0] == "--api-key" && w[1] == by_name("--api-key").value),
        "{launch:?}"
    );
    assert_eq!(r.left_behind, 0);

    // The catalog entry keeps `--stdio`, asks for the two values, and starts with them.
    let out = command(
        dir.path(),
        &[
            "introspect",
            "--command",
            &format!("{} --name opts --fail options", fixture()),
            "--json",
            "--init-timeout",
            "5",
            "--list-timeout",
            "5",
        ],
    )
    .output()
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let agent = crate::harness::spawn(dir.path(), &[], None).await;
    let listed = agent.registry(json!({"action": "list"})).await;
    let server = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["installed"] == false)
        .expect("a catalog entry")["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let missing = agent
        .registry(json!({"action": "install", "name": server}))
        .await;
    assert_eq!(missing["status"], "needs_input", "{missing}");
    let names: Vec<&str> = missing["missing"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str())
        .collect();
    assert_eq!(names, ["--api-key", "--root"]);
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let done = agent
        .registry(json!({"action": "install", "name": server, "inputs": {"--api-key": "k", "--root": root.display().to_string()}}))
        .await;
    assert_eq!(done["status"], "installed", "{done}");
    let args: Vec<&str> = done["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.contains(&"--stdio") && args.windows(2).any(|w| w == ["--api-key", "k"]),
        "{args:?}"
    );
    assert!(
        !args.iter().any(|a| a.starts_with("placeholder")),
        "no placeholder survives: {args:?}"
    );
    let act = agent
        .registry(json!({"action": "activate", "name": server}))
        .await;
    assert_eq!(act["state"], "ready", "{act}");
    agent.stop().await;
}
