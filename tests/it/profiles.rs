//! Profiles end to end: three fixture servers, a profile of one server plus a glob of another's tools, served over
//! stdio (`mcp --profile`) and Streamable HTTP (`/mcp/profiles/NAME`, both protocol eras) to rmcp's client and the
//! official Python SDK: only the profile's tools, resources and prompts are seen, `find_tool` never answers a tool
//! outside it, a call of one outside is refused with `outside_profile` (direct, `proxy_call`, a script's call); the
//! CLI's export and import round trip (JSON and TOML), REST changes, and `connect --profile`.

use std::path::Path;
use std::process::Output;

use rmcp::model::*;
use serde_json::{Value, json};

use crate::eras::{client_2026, client_legacy};
use crate::harness::{self, BIN, parse};

/// The profile every test uses: all of `alpha`, and `beta`'s tools matching `beta__ec*` (its `echo`); `gamma` is
/// outside.
const GLOB: &str = "beta__ec*";

fn inside(name: &str) -> bool {
    name.starts_with("alpha__") || name == "beta__echo"
}

/// A registry in `dir` with `alpha`, `beta` and `gamma` (each with a resource and a prompt) active, so their tools are
/// known, and the profile `dev`; answers what the aggregated `find_tool` said for "add two numbers".
async fn setup(dir: &Path) -> Value {
    let agent = harness::spawn(dir, &[], None).await;
    for name in ["alpha", "beta", "gamma"] {
        agent
            .install_fixture(name, &["--resources", "1", "--prompts", "1"], json!({}))
            .await;
        agent
            .registry(json!({"action": "activate", "name": name}))
            .await;
    }
    let all = agent
        .registry(
            json!({"action": "find_tool", "query": "add two numbers", "auto_activate": false}),
        )
        .await;
    let created = agent
        .registry(
            json!({"action": "create_profile", "name": "dev", "description": "coding",
                         "servers": ["alpha"], "tools": [GLOB]}),
        )
        .await;
    assert_eq!(created["status"], "created", "{created}");
    let known: Vec<&str> = created["known_tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        known.contains(&"alpha__add") && known.contains(&"beta__echo"),
        "{created}"
    );
    assert!(known.iter().all(|t| inside(t)), "{created}");
    agent.stop().await;
    all
}

/// Every `call_as` a `find_tool` answer names (best and other matches).
fn named(answer: &Value) -> Vec<String> {
    let mut out: Vec<String> = answer["call_as"]
        .as_str()
        .map(str::to_owned)
        .into_iter()
        .collect();
    for m in answer["other_matches"].as_array().into_iter().flatten() {
        out.extend(m["call_as"].as_str().map(str::to_owned));
    }
    out
}

/// A tool error's JSON body.
fn error_body(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(true), "{r:?}");
    parse(r)
}

#[tokio::test]
async fn a_profile_over_stdio_lists_finds_and_calls_only_its_tools() {
    let dir = tempfile::tempdir().unwrap();
    let all = setup(dir.path()).await;
    // The aggregated front finds the other servers' `add` too: what the profile must not.
    assert!(named(&all).iter().any(|n| n == "beta__add"), "{all}");

    let p = harness::spawn(dir.path(), &["--profile", "dev"], None).await;
    let tools = p.tool_names().await;
    assert!(
        tools.contains(&"registry".to_owned()) && tools.contains(&"run_script".to_owned()),
        "{tools:?}"
    );
    assert!(
        tools.contains(&"alpha__add".to_owned()) && tools.contains(&"beta__echo".to_owned()),
        "{tools:?}"
    );
    let proxied: Vec<&String> = tools.iter().filter(|t| t.contains("__")).collect();
    assert!(proxied.iter().all(|t| inside(t)), "{tools:?}");

    let found = p
        .registry(
            json!({"action": "find_tool", "query": "add two numbers", "auto_activate": false}),
        )
        .await;
    assert_eq!(found["call_as"], "alpha__add", "{found}");
    assert!(named(&found).iter().all(|n| inside(n)), "{found}");
    let many = p
        .registry(json!({"action": "find_tools", "intents": ["sleep for a while", "return an environment variable"],
                         "auto_activate": false}))
        .await;
    for r in many["results"].as_array().unwrap() {
        assert!(named(r).iter().all(|n| inside(n)), "{r}");
    }

    // Outside: refused with its own kind, whichever way it is called; suggestions stay inside.
    let direct = error_body(&p.call("beta__add", json!({"a": 1, "b": 2})).await);
    assert_eq!(direct["kind"], "outside_profile", "{direct}");
    assert_eq!(direct["code"], "denied", "{direct}");
    let (is_error, via) = p
        .try_registry(
            json!({"action": "proxy_call", "call_as": "gamma__echo", "arguments": {"text": "x"}}),
        )
        .await
        .unwrap();
    assert!(is_error, "{via}");
    assert_eq!(via["kind"], "outside_profile", "{via}");
    for s in via["did_you_mean"].as_array().into_iter().flatten() {
        assert!(inside(s["call_as"].as_str().unwrap()), "{via}");
    }
    let script = p
        .call(
            "run_script",
            json!({"code": "try { await call(\"gamma__add\", {a: 1, b: 2}); return \"called\"; } \
                catch (e) { return [e.kind, await call(\"alpha__add\", {a: 1, b: 2})]; }"}),
        )
        .await;
    let ran = parse(&script);
    assert_eq!(ran["result"], json!(["outside_profile", 3]), "{ran}");
    // Inside: the glob's tool and the server's.
    assert_eq!(
        harness::text(&p.call("beta__echo", json!({"text": "hi"})).await),
        "hi"
    );
    let (is_error, schema) = p
        .try_registry(json!({"action": "get_schema", "call_as": "gamma__add"}))
        .await
        .unwrap();
    assert!(is_error, "{schema}");

    // Resources and prompts: alpha's and beta's (a glob names it), never gamma's.
    let resources = p.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    assert!(
        uris.iter()
            .any(|u| u.starts_with("agent-discover://alpha/")),
        "{uris:?}"
    );
    assert!(
        !uris
            .iter()
            .any(|u| u.starts_with("agent-discover://gamma/")),
        "{uris:?}"
    );
    let gone = p
        .client
        .read_resource(ReadResourceRequestParams::new(
            "agent-discover://gamma/fixture://resource/1",
        ))
        .await;
    assert!(gone.is_err(), "{gone:?}");
    let prompts: Vec<String> = p
        .client
        .list_all_prompts()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert!(
        prompts.contains(&"alpha__prompt_1".to_owned()),
        "{prompts:?}"
    );
    assert!(
        !prompts.iter().any(|n| n.starts_with("gamma__")),
        "{prompts:?}"
    );

    // An agent on a profile may read profiles, never widen its own.
    let (is_error, refused) = p
        .try_registry(json!({"action": "set_profile", "name": "dev", "add_servers": ["gamma"]}))
        .await
        .unwrap();
    assert!(is_error, "{refused}");
    let shown = p
        .registry(json!({"action": "show_profile", "name": "dev"}))
        .await;
    assert_eq!(shown["servers"], json!(["alpha"]), "{shown}");
    p.stop().await;

    // An unknown profile is refused before the handshake.
    let o = cli(dir.path(), &["mcp", "--profile", "nope"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("profile `nope"),
        "{o:?}"
    );
}

#[tokio::test]
async fn a_profile_over_http_in_both_eras_follows_changes() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path()).await;
    let served = crate::replicas::replica(dir.path(), &[]).await;
    let endpoint = format!("{}/mcp/profiles/dev", served.url);
    let legacy = client_legacy(&endpoint, None).await;
    let modern = client_2026(&endpoint).await;
    for client in [&legacy, &modern] {
        let tools: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        assert!(tools.contains(&"alpha__echo".to_owned()), "{tools:?}");
        assert!(
            tools.iter().filter(|t| t.contains("__")).all(|t| inside(t)),
            "{tools:?}"
        );
        let r = client
            .call_tool(
                CallToolRequestParams::new("gamma__echo")
                    .with_arguments(json!({"text": "x"}).as_object().unwrap().clone()),
            )
            .await
            .unwrap();
        assert_eq!(error_body(&r)["kind"], "outside_profile");
        let found = client
            .call_tool(CallToolRequestParams::new("registry").with_arguments(
                json!({"action": "find_tool", "query": "echo the given text back", "auto_activate": false})
                    .as_object()
                    .unwrap()
                    .clone(),
            ))
            .await
            .unwrap();
        let found = parse(&found);
        assert!(
            !named(&found).is_empty() && named(&found).iter().all(|n| inside(n)),
            "{found}"
        );
    }
    let http = reqwest::Client::new();
    // A change through REST applies to the next request of an open session.
    let changed: Value = http
        .patch(format!("{}/api/profiles/dev", served.url))
        .json(&json!({"add_tools": ["gamma__add"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        changed["known_tools"]
            .as_array()
            .unwrap()
            .contains(&json!("gamma__add")),
        "{changed}"
    );
    let tools: Vec<String> = modern
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(tools.contains(&"gamma__add".to_owned()), "{tools:?}");
    let listed: Value = http
        .get(format!("{}/api/profiles", served.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["profiles"][0]["name"], "dev", "{listed}");
    // Unknown profiles, and bad ones, are typed errors.
    let missing = http
        .get(format!("{}/mcp/profiles/nope", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let bad = http
        .post(format!("{}/api/profiles", served.url))
        .json(&json!({"name": "x y", "servers": ["alpha"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let unknown = http
        .post(format!("{}/api/profiles", served.url))
        .json(&json!({"name": "ops", "servers": ["nosuch"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let removed = http
        .delete(format!("{}/api/profiles/dev", served.url))
        .send()
        .await
        .unwrap();
    assert!(removed.status().is_success());
    let gone = http.get(&endpoint).send().await.unwrap();
    assert_eq!(gone.status(), 404);
    let _ = legacy.cancel().await;
    let _ = modern.cancel().await;
}

fn cli(dir: &Path, args: &[&str]) -> Output {
    std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(dir)
        .args(args)
        .env("AGENT_DISCOVER_DASHBOARD", "off")
        .env_remove("AGENT_DISCOVER_DB")
        .output()
        .unwrap()
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Registers the fixture as each of `names` through the CLI (not started).
fn register(dir: &Path, names: &[&str]) {
    for n in names {
        ok(&cli(
            dir,
            &["add", n, "--", harness::fixture(), "--name", n],
        ));
    }
}

#[test]
fn export_and_import_round_trip_in_json_and_toml() {
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    register(dir.path(), &["alpha", "beta"]);
    ok(&cli(
        dir.path(),
        &[
            "profiles",
            "create",
            "dev",
            "--server",
            "alpha",
            "--tool",
            GLOB,
            "--description",
            "coding",
        ],
    ));
    // A profile's own overrides (`{SERVER: {TOOL: override}}`) are carried: given through an imported file.
    let with_overrides = files.path().join("in.json");
    std::fs::write(
        &with_overrides,
        json!({"version": 1, "profiles": [{"name": "ops", "servers": ["beta"],
               "overrides": {"beta": {"echo": {"description": "Say it again"}}}}]})
        .to_string(),
    )
    .unwrap();
    ok(&cli(
        dir.path(),
        &["profiles", "import", with_overrides.to_str().unwrap()],
    ));
    let before: Value =
        serde_json::from_str(&ok(&cli(dir.path(), &["profiles", "export"]))).unwrap();
    assert_eq!(before["profiles"].as_array().unwrap().len(), 2, "{before}");
    for ext in ["json", "toml"] {
        let file = files.path().join(format!("profiles.{ext}"));
        ok(&cli(
            dir.path(),
            &["profiles", "export", "--output", file.to_str().unwrap()],
        ));
        let text = std::fs::read_to_string(&file).unwrap();
        if ext == "toml" {
            assert!(text.contains("[[profiles]]"), "{text}");
        }
        ok(&cli(dir.path(), &["profiles", "remove", "dev"]));
        ok(&cli(dir.path(), &["profiles", "remove", "ops"]));
        assert!(
            !cli(dir.path(), &["profiles", "show", "dev"])
                .status
                .success()
        );
        ok(&cli(
            dir.path(),
            &["profiles", "import", file.to_str().unwrap()],
        ));
        let after: Value =
            serde_json::from_str(&ok(&cli(dir.path(), &["profiles", "export"]))).unwrap();
        assert_eq!(after, before, "{ext}");
        // Again without --replace: refused, nothing changed; with it: accepted.
        let again = cli(dir.path(), &["profiles", "import", file.to_str().unwrap()]);
        assert!(!again.status.success());
        assert!(
            String::from_utf8_lossy(&again.stderr).contains("replace"),
            "{again:?}"
        );
        ok(&cli(
            dir.path(),
            &["profiles", "import", "--replace", file.to_str().unwrap()],
        ));
    }
    // A file naming a server this registry lacks is refused whole.
    let foreign = files.path().join("foreign.json");
    std::fs::write(
        &foreign,
        json!({"version": 1, "profiles": [{"name": "a", "servers": ["alpha"]}, {"name": "b", "servers": ["nosuch"]}]})
            .to_string(),
    )
    .unwrap();
    let o = cli(
        dir.path(),
        &["profiles", "import", foreign.to_str().unwrap()],
    );
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nosuch"),
        "{o:?}"
    );
    assert!(
        !cli(dir.path(), &["profiles", "show", "a"]).status.success(),
        "nothing stored"
    );
    // `set` changes entry by entry.
    let shown: Value = serde_json::from_str(&ok(&cli(
        dir.path(),
        &[
            "profiles",
            "set",
            "dev",
            "--add-server",
            "beta",
            "--remove-tool",
            GLOB,
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(shown["servers"], json!(["alpha", "beta"]), "{shown}");
    assert_eq!(shown["tools"], json!([]), "{shown}");
}

#[test]
fn connect_writes_the_profile_into_the_clients_config() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join(".cursor/mcp.json");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let original = json!({"mcpServers": {"alpha": {"command": harness::fixture(), "args": ["--name", "alpha"]}}});
    std::fs::write(&file, original.to_string()).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env_remove("AGENT_DISCOVER_DB")
            .env_remove("CODEX_HOME")
            .env("HOME", home.path())
            .current_dir(home.path())
            .output()
            .unwrap()
    };
    // No such profile: the file is left alone.
    let o = run(&["connect", "--client", "cursor", "--profile", "dev"]);
    assert!(!o.status.success());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        original.to_string()
    );
    ok(&run(&["connect", "--client", "cursor"]));
    ok(&run(&["profiles", "create", "dev", "--server", "alpha"]));
    ok(&run(&["connect", "--client", "cursor", "--profile", "dev"]));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        v["mcpServers"]["agent-discover"]["args"],
        json!(["mcp", "--profile", "dev"]),
        "{v}"
    );
}

/// The official Python SDK as the client of `mcp --profile dev`, in both protocol eras.
#[tokio::test]
async fn python_sdk_sees_only_the_profile() {
    for mode in ["auto", "legacy"] {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path()).await;
        let python = harness::cache_path("venv/bin/python");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/python_profile_check.py");
        let out = tokio::process::Command::new(&python)
            .arg(&script)
            .arg(BIN)
            .arg(dir.path())
            .arg(mode)
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{mode}:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("ok: profile dev"), "{stdout}");
    }
}
