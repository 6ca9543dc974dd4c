//! Installing from the marketplace through the `registry` tool, against a stub registry on 127.0.0.1 serving the
//! official response shapes: browse, install with and without required inputs, secrets stored encrypted.

use serde_json::{Value, json};

use crate::harness;

/// One server.json: an npm package needing a secret API key and a plain setting, and a remote with a URL variable.
fn server_json() -> Value {
    json!({
        "name": "io.github.example/weather",
        "title": "Weather",
        "description": "Forecasts and current conditions",
        "version": "1.2.0",
        "repository": {"url": "https://github.com/example/weather", "source": "github"},
        "packages": [{
            "registryType": "npm", "identifier": "@example/weather-mcp", "version": "1.2.0",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "value": "serve"}],
            "environmentVariables": [
                {"name": "WEATHER_API_KEY", "description": "API key", "isRequired": true, "isSecret": true},
                {"name": "WEATHER_UNITS", "description": "metric or imperial", "default": "metric"}
            ]
        }]
    })
}

pub(crate) async fn stub() -> String {
    use axum::routing::get;
    let entry = json!({"server": server_json(), "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": true}}});
    let list = json!({"servers": [entry.clone()], "metadata": {"nextCursor": null, "count": 1}});
    let json_body = |v: &Value| ([("content-type", "application/json")], v.to_string());
    let (list_body, entry_body) = (json_body(&list), json_body(&entry));
    let app = axum::Router::new()
        .route(
            "/v0.1/servers",
            get(move || std::future::ready(list_body.clone())),
        )
        .route(
            "/v0.1/servers/{name}/versions/latest",
            get(move || std::future::ready(entry_body.clone())),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

#[tokio::test]
async fn browse_and_install_from_the_registry() {
    let base = stub().await;
    let dir = tempfile::tempdir().unwrap();
    // npm and PyPI point at the same stub (no search there: those sources fail, the registry still answers).
    let env = [
        ("AGENT_DISCOVER_MCP_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_NPM_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_PYPI_URL", base.clone()),
        (
            "XDG_CONFIG_HOME",
            dir.path().join("config").display().to_string(),
        ),
    ];
    let agent = harness::spawn_env(dir.path(), &[], None, &env).await;
    let found = agent
        .registry(json!({"action": "browse", "query": "weather"}))
        .await;
    let first = &found["servers"][0];
    assert_eq!(
        (
            first["name"].as_str(),
            first["source"].as_str(),
            first["install_method"].as_str()
        ),
        (
            Some("io.github.example/weather"),
            Some("registry"),
            Some("npx")
        ),
        "{found}"
    );
    assert!(
        found["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["source"] == "registry" && s["ok"] == true),
        "{found}"
    );
    assert!(found["prereqs"].is_object());

    // The secret is required and missing: nothing is registered, the caller learns what to pass.
    let r = agent
        .registry(
            json!({"action": "install", "name": "io.github.example/weather", "source": "registry"}),
        )
        .await;
    assert_eq!(r["status"], "needs_input", "{r}");
    assert_eq!(r["missing"][0]["name"], "WEATHER_API_KEY");
    assert_eq!(agent.registry(json!({"action": "list"})).await, json!([]));

    let r = agent
        .registry(json!({"action": "install", "name": "io.github.example/weather", "source": "registry", "inputs": {"WEATHER_API_KEY": "wk-1234567"}}))
        .await;
    assert_eq!(r["status"], "installed", "{r}");
    assert_eq!(r["command"], "npx");
    assert_eq!(
        r["args"],
        json!(["-y", "@example/weather-mcp@1.2.0", "serve"])
    );
    let name = r["server"].as_str().unwrap().to_owned();
    let listed = agent.registry(json!({"action": "list"})).await;
    assert_eq!(listed[0]["source"], "registry");
    let secrets = agent
        .registry(json!({"action": "list_secrets", "name": name}))
        .await;
    assert_eq!(secrets["secrets"][0]["key"], "WEATHER_API_KEY");
    assert_eq!(secrets["secrets"][0]["masked_value"], "wk-1****");
    // Hostile names never reach a registry request or a command line.
    let err = agent
        .try_registry(json!({"action": "install", "name": "x; rm -rf /", "source": "registry"}))
        .await;
    assert!(err.is_err() || err.as_ref().unwrap().0, "{err:?}");
    agent.stop().await;
}

#[tokio::test]
async fn missing_values_are_elicited_from_clients_that_support_it() {
    let base = stub().await;
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("AGENT_DISCOVER_MCP_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_NPM_REGISTRY_URL", base.clone()),
        ("AGENT_DISCOVER_PYPI_URL", base.clone()),
        (
            "XDG_CONFIG_HOME",
            dir.path().join("config").display().to_string(),
        ),
    ];
    harness::with_elicitation(json!({"WEATHER_API_KEY": "wk-elicited-99"}));
    let agent = harness::spawn_env(dir.path(), &[], None, &env).await;
    let r = agent
        .registry(
            json!({"action": "install", "name": "io.github.example/weather", "source": "registry"}),
        )
        .await;
    assert_eq!(r["status"], "installed", "{r}");
    let asked = agent.seen.elicited.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].contains("io.github.example/weather"), "{asked:?}");
    let secrets = agent
        .registry(json!({"action": "list_secrets", "name": r["server"]}))
        .await;
    assert_eq!(secrets["secrets"][0]["masked_value"], "wk-e****");
    agent.stop().await;
}
