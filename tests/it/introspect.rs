//! Batch introspection (issue 14): the engine against the fixture server's failure modes (each must map to exactly
//! one category), the second pass with placeholders, teardown of a server that ignores SIGTERM, and local npm
//! packages for the install and pre-flight stages.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agent_discover::introspect::{self, Category, Limits, Options, Record, Target};

use crate::harness::{self, BIN, processes_with_args};

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// Options for tests: short protocol limits (the fixture answers at once when it answers at all).
fn options(cache: &std::path::Path, second_pass: bool) -> Options {
    let mut o = Options::new(cache.to_path_buf(), BIN.into());
    o.limits = Limits {
        install: Duration::from_secs(120),
        initialize: Duration::from_secs(4),
        list: Duration::from_secs(4),
        term_grace: Duration::from_secs(2),
        hard: Duration::from_secs(30),
    };
    o.concurrency = 4;
    o.second_pass = second_pass;
    o
}

fn fixture(flags: &str) -> Target {
    Target::command(&format!("{} {flags}", harness::fixture())).expect("command target")
}

fn by_key(records: Vec<Record>) -> BTreeMap<String, Record> {
    records.into_iter().map(|r| (r.key.clone(), r)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fixture_failure_mode_maps_to_exactly_one_category() {
    let dir = tmp();
    let pkgs = tmp();
    // A local npm package with no `bin` (pre-flight: no_entry_point) and a folder that does not exist (install).
    let lib = pkgs.path().join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::write(
        lib.join("package.json"),
        r#"{"name": "fixture-library-only", "version": "1.0.0", "main": "index.js"}"#,
    )
    .unwrap();
    let missing = pkgs.path().join("missing");
    let cases: Vec<(Target, Category)> = vec![
        (fixture("--name ok"), Category::Ok),
        (fixture("--fail no-tools"), Category::OkZeroTools),
        (
            fixture("--require-env FIXTURE_API_KEY"),
            Category::NeedsCredentials,
        ),
        (fixture("--fail usage"), Category::NeedsArgs),
        (fixture("--fail options"), Category::NeedsArgs),
        (fixture("--fail help-only"), Category::NeedsArgs),
        (fixture("--fail missing-config"), Category::NeedsConfig),
        (fixture("--fail crash"), Category::CrashedOnStart),
        (fixture("--init-hang"), Category::InitTimeout),
        (fixture("--fail init-error"), Category::InitError),
        (fixture("--fail bad-protocol"), Category::ProtocolMismatch),
        (fixture("--fail text-only"), Category::NonJsonStdout),
        (fixture("--fail list-hang"), Category::ToolsListTimeout),
        (fixture("--fail list-error"), Category::ToolsListError),
        (fixture("--fail network"), Category::NetworkRequired),
        (
            Target::command("/nonexistent/agent-discover-no-such-program").unwrap(),
            Category::NoEntryPoint,
        ),
        (
            Target::npm(&lib.display().to_string()).unwrap(),
            Category::NoEntryPoint,
        ),
        (
            Target::npm(&missing.display().to_string()).unwrap(),
            Category::InstallFailed,
        ),
    ];
    let expected: BTreeMap<String, Category> = cases.iter().map(|(t, c)| (t.key(), *c)).collect();
    assert_eq!(expected.len(), cases.len(), "keys must be distinct");
    let targets: Vec<Target> = cases.into_iter().map(|(t, _)| t).collect();
    let mut started = 0;
    let mut finished = 0;
    let records = introspect::run_batch(targets, &options(dir.path(), false), |p| match p {
        introspect::Progress::Started { .. } => started += 1,
        introspect::Progress::Finished { .. } => finished += 1,
    })
    .await;
    assert_eq!((started, finished), (expected.len(), expected.len()));
    let records = by_key(records);
    let mut wrong = Vec::new();
    for (key, want) in &expected {
        let r = records
            .get(key)
            .unwrap_or_else(|| panic!("no record for {key}"));
        if r.category != *want {
            wrong.push(format!(
                "{key}: {} (want {want}) evidence: {}",
                r.category, r.evidence
            ));
        }
        assert!(!r.evidence.is_empty(), "{key}: evidence missing");
        assert!(!r.hint.is_empty(), "{key}: hint missing");
        assert_eq!(r.left_behind, 0, "{key}: processes left behind");
        assert_eq!(r.pass, 1);
        assert!(!r.stages.is_empty(), "{key}: no stage recorded");
    }
    assert!(wrong.is_empty(), "misfiled:\n{}", wrong.join("\n"));
    // Details that make each category useful.
    let ok = &records[&fixture("--name ok").key()];
    assert!(ok.tools.iter().any(|t| t.name == "echo"), "{:?}", ok.tools);
    assert_eq!(ok.server.as_ref().map(|s| s.name.as_str()), Some("ok"));
    let stages: Vec<&str> = ok.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(stages, ["spawn", "initialize", "tools/list", "teardown"]);
    let creds = &records[&fixture("--require-env FIXTURE_API_KEY").key()];
    assert_eq!(creds.needs.env, ["FIXTURE_API_KEY"]);
    assert!(
        creds.evidence.contains("API key required"),
        "{}",
        creds.evidence
    );
    let args = &records[&fixture("--fail usage").key()];
    assert_eq!(args.needs.args, ["allowed-directory"]);
    let hang = &records[&fixture("--init-hang").key()];
    let init = hang
        .stages
        .iter()
        .find(|s| s.stage == "initialize")
        .unwrap();
    assert_eq!(init.outcome, "timeout");
    assert!(
        (3900..8000).contains(&init.ms),
        "initialize took {} ms",
        init.ms
    );
    let library = &records[&Target::npm(&lib.display().to_string()).unwrap().key()];
    assert!(library.library, "a package with no bin is a library");
    assert!(!ok.library);
    let install = &records[&Target::npm(&missing.display().to_string()).unwrap().key()];
    assert!(
        install.evidence.contains("ENOENT") || install.evidence.contains("enoent"),
        "{}",
        install.evidence
    );
    let crashed = &records[&fixture("--fail crash").key()];
    assert!(
        crashed.evidence.contains("TypeError"),
        "{}",
        crashed.evidence
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_pass_fills_placeholders_and_records_what_unlocked_the_server() {
    let dir = tmp();
    let targets = vec![
        fixture("--name creds --require-env FIXTURE_API_KEY"),
        fixture("--name args --fail usage"),
        fixture("--name crash --fail crash"),
    ];
    let records =
        by_key(introspect::run_batch(targets.clone(), &options(dir.path(), true), |_| {}).await);
    let creds = &records[&targets[0].key()];
    assert_eq!(creds.category, Category::Ok, "{}", creds.evidence);
    assert_eq!(creds.pass, 2);
    assert_eq!(
        creds.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsCredentials)
    );
    let p = creds
        .placeholders
        .iter()
        .find(|p| p.name == "FIXTURE_API_KEY")
        .expect("placeholder");
    assert_eq!(p.source, "stderr");
    assert!(!p.value.is_empty());
    assert!(creds.tools.iter().all(|t| t.under_placeholders) && !creds.tools.is_empty());
    assert_eq!(creds.needs.env, ["FIXTURE_API_KEY"]);
    let args = &records[&targets[1].key()];
    assert_eq!(args.category, Category::Ok, "{}", args.evidence);
    assert_eq!(
        args.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsArgs)
    );
    let a = args
        .placeholders
        .iter()
        .find(|p| p.name == "allowed-directory")
        .expect("arg placeholder");
    assert!(
        a.value.starts_with(dir.path().to_str().unwrap()),
        "a path in the scratch dir: {}",
        a.value
    );
    // A plain crash names no variable or argument: retried with nothing to fill, it stays what it was.
    let crash = &records[&targets[2].key()];
    assert_eq!(crash.category, Category::CrashedOnStart);
    assert!(crash.placeholders.is_empty());
    for r in records.values() {
        assert_eq!(r.left_behind, 0);
    }
}

/// A server whose failure names nothing ("Run `x --help` to see available commands") is asked for its `--help`; the
/// subcommand, positional argument and required option read there unlock it, and the record says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_pass_reads_the_help_text_of_a_server_that_wants_arguments() {
    let dir = tmp();
    let target = fixture("--name helped --fail help-only");
    let r = introspect::introspect(&target, &options(dir.path(), true)).await;
    assert_eq!(r.category, Category::Ok, "{} {:?}", r.evidence, r.flags);
    assert_eq!(r.pass, 2);
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsArgs)
    );
    assert_eq!(r.rescued_by, ["help"]);
    let help = r
        .stages
        .iter()
        .find(|s| s.stage == "help")
        .expect("help stage");
    assert_eq!(help.outcome, "ok");
    let by_name = |n: &str| {
        r.placeholders
            .iter()
            .find(|p| p.name == n)
            .unwrap_or_else(|| panic!("no placeholder {n}: {:?}", r.placeholders))
    };
    let cmd = by_name("command");
    assert_eq!((cmd.value.as_str(), cmd.source.as_str()), ("serve", "help"));
    assert!(cmd.is_literal(), "a subcommand is kept as is, never asked");
    // A directory in the attempt's scratch folder (the fixture refuses anything but an existing directory; the
    // folder is removed with the attempt).
    let root = by_name("root");
    assert!(
        root.value.starts_with(dir.path().to_str().unwrap()),
        "{}",
        root.value
    );
    let db = by_name("--db-path");
    assert_eq!(db.source, "help");
    assert!(
        db.value.starts_with(dir.path().to_str().unwrap()),
        "{}",
        db.value
    );
    // The launch puts the subcommand first, then the argument and the option.
    let launch = r.launch.as_ref().unwrap();
    let at = launch
        .iter()
        .position(|a| a == "serve")
        .expect("serve in launch");
    assert_eq!(launch[at + 1], root.value);
    assert_eq!(
        launch[at + 2..at + 4],
        ["--db-path".to_owned(), db.value.clone()]
    );
    assert_eq!(
        r.needs.args,
        ["root", "--db-path"],
        "asked when installing; the subcommand is not"
    );
    assert!(r.tools.iter().all(|t| t.under_placeholders) && !r.tools.is_empty());
    assert!(
        r.flags
            .iter()
            .any(|f| f.starts_with("help: Usage: fixture-server <command> <root>")),
        "{:?}",
        r.flags
    );
    assert_eq!(r.left_behind, 0);
    // Without a help text there is nothing to fill: a server that wants no arguments is never asked for it.
    let plain = introspect::introspect(&fixture("--name plain"), &options(dir.path(), true)).await;
    assert_eq!(plain.category, Category::Ok);
    assert!(plain.stages.iter().all(|s| s.stage != "help"));
    assert!(plain.rescued_by.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_sigterm_and_leaves_a_child_is_killed_with_its_group() {
    let dir = tmp();
    let t0 = Instant::now();
    // Unconfined (the sandbox off): the process group is all that holds the server's child, and SIGKILL ends it.
    let mut unconfined = options(dir.path(), false);
    unconfined.sandbox.enabled = false;
    let r = introspect::introspect(&fixture("--name stubborn --fail stubborn"), &unconfined).await;
    assert_eq!(r.category, Category::Ok, "{}", r.evidence);
    let teardown = r
        .stages
        .iter()
        .find(|s| s.stage == "teardown")
        .expect("teardown stage");
    assert_eq!(
        teardown.outcome, "killed",
        "SIGTERM was ignored, so SIGKILL ended it"
    );
    assert!(
        teardown.ms >= 1900,
        "the grace was waited: {} ms",
        teardown.ms
    );
    assert_eq!(r.left_behind, 0);
    assert!(
        processes_with_args(&["sleep", "599.25"]).is_empty(),
        "the server's child outlived teardown"
    );
    assert!(t0.elapsed() < Duration::from_secs(20));

    // Confined (the default): the server is its PID namespace's only way in, so when it ends on the closed stdin its
    // stubborn child ends with it, without waiting out the grace.
    let r = introspect::introspect(
        &fixture("--name stubborn --fail stubborn"),
        &options(dir.path(), false),
    )
    .await;
    assert_eq!(r.category, Category::Ok, "{}", r.evidence);
    assert_eq!(r.left_behind, 0);
    assert!(
        processes_with_args(&["sleep", "599.25"]).is_empty(),
        "the confined server's child outlived teardown"
    );
}

/// Where scripts/test.sh installs test dependencies. Missing pieces fail the test with a fix, never skip it.
fn cache() -> std::path::PathBuf {
    std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".ci/cache"))
}

fn need(path: std::path::PathBuf) -> String {
    assert!(
        path.exists(),
        "{} is missing: run scripts/test.sh, which installs the test dependencies before running cargo test",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The CLI over real servers installed by scripts/test.sh: npm's server-everything (its installed folder, so npm links
/// it without the network) and PyPI's mcp-server-time (installed by pip from the wheels test.sh downloaded, with pip's
/// own settings `PIP_NO_INDEX`/`PIP_FIND_LINKS`). Then their tools are in the catalog: find_tool returns them marked
/// `installed: false` with what installing needs, never starts them, and activation refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_npm_and_pypi_servers_are_enumerated_and_their_tools_found_but_not_started() {
    let everything =
        need(cache().join("node/node_modules/@modelcontextprotocol/server-everything"));
    let wheels = need(cache().join("wheels"));
    let dir = tmp();
    let out = crate::harness::command(
        dir.path(),
        &[
            "introspect",
            "--npm",
            &everything,
            "--pypi",
            "mcp-server-time==2026.10.19",
            "--json",
            "-j",
            "2",
        ],
    )
    .env("PIP_NO_INDEX", "1")
    .env("PIP_FIND_LINKS", &wheels)
    .env("UV_OFFLINE", "1")
    .env("UV_FIND_LINKS", &wheels)
    .stdin(std::process::Stdio::null())
    .output()
    .await
    .expect("run introspect");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "introspect failed: {stderr}");
    let records = json_lines(&out.stdout);
    assert_eq!(records.len(), 2, "{stderr}");
    let find = |pkg: &str| {
        records
            .iter()
            .find(|r| r["package"] == pkg)
            .unwrap_or_else(|| panic!("no record of {pkg}: {records:?}"))
    };
    let ev = find("@modelcontextprotocol/server-everything");
    assert_eq!(ev["category"], "ok", "{ev}");
    let names: Vec<&str> = ev["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(
        ev["stages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["stage"] == "resources/list"),
        "{ev}"
    );
    // Which runtime ran each (issue 31): the system's Node (no `engines.node`), the venv's Python.
    assert_eq!(ev["runtime"]["kind"], "node", "{ev}");
    assert_eq!(ev["runtime"]["source"], "system", "{ev}");
    let time = find("mcp-server-time");
    assert_eq!(time["category"], "ok", "{time}");
    assert_eq!(time["version"], "2026.10.19");
    assert_eq!(time["runtime"]["kind"], "python", "{time}");
    assert_eq!(time["runtime"]["source"], "venv", "{time}");
    assert!(
        time["runtime"]["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.")),
        "{time}"
    );
    let install = time["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "install")
        .unwrap();
    assert_eq!(install["outcome"], "ok");
    for r in &records {
        assert_eq!(r["left_behind"], 0);
    }

    // The stored records.
    let listed = crate::harness::command(dir.path(), &["catalog", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert!(listed.status.success());
    assert_eq!(json_lines(&listed.stdout).len(), 2);

    // The catalog feeds search.
    let agent = crate::harness::spawn(dir.path(), &[], None).await;
    let found = agent
        .registry(serde_json::json!({"action": "find_tool", "query": "current time in a timezone", "auto_activate": true}))
        .await;
    assert_eq!(found["found"], true, "{found}");
    assert_eq!(found["tool"], "get_current_time", "{found}");
    assert_eq!(found["installed"], false, "{found}");
    assert_eq!(found["install"]["install"]["action"], "install", "{found}");
    // The harness's client declares no elicitation: it is told to install explicitly, nothing is installed.
    assert_eq!(found["install_consent"], "not_asked", "{found}");
    assert_eq!(
        found["install"]["marketplace_install"]["name"], "pypi:mcp-server-time",
        "{found}"
    );
    // It needs no secret: the answer names none.
    assert!(
        found["install"].get("required_secrets").is_none(),
        "{found}"
    );
    assert!(
        found["install"]["install"].get("inputs").is_none(),
        "{found}"
    );
    assert!(
        found.get("activation_error").is_none(),
        "never started: {found}"
    );
    let server = found["server"].as_str().unwrap().to_owned();
    let list = agent.registry(serde_json::json!({"action": "list"})).await;
    let entry = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server.as_str())
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(
        (entry["installed"].as_bool(), entry["active"].as_bool()),
        (Some(false), Some(false)),
        "{entry}"
    );
    let (is_error, refused) = agent
        .try_registry(serde_json::json!({"action": "activate", "name": server}))
        .await
        .unwrap();
    assert!(is_error, "a catalog entry must not start: {refused}");
    assert!(refused.to_string().contains("catalog entry"), "{refused}");
    let many = agent
        .registry(serde_json::json!({"action": "find_tools", "intents": ["echo a message back", "current time in a timezone"]}))
        .await;
    let results = many["results"].as_array().unwrap();
    assert!(results.iter().all(|r| r["installed"] == false), "{many}");
    agent.stop().await;
}

/// Tools listed under placeholders are marked so, and what installing needs names the variable the server asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalog_entries_listed_under_placeholders_say_which_secrets_installing_needs() {
    let dir = tmp();
    let line = format!(
        "{} --name forecaster --require-env FORECAST_API_KEY --tool summon_weather_forecast=Forecast_the_weather_for_a_city",
        harness::fixture()
    );
    let out = crate::harness::command(
        dir.path(),
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
    let records = json_lines(&out.stdout);
    assert_eq!(records[0]["category"], "ok", "{}", records[0]);
    assert_eq!(records[0]["pass"], 2);
    assert_eq!(records[0]["first_pass"]["category"], "needs_credentials");
    let agent = crate::harness::spawn(dir.path(), &[], None).await;
    let found = agent
        .registry(
            serde_json::json!({"action": "find_tool", "query": "weather forecast for a city"}),
        )
        .await;
    assert_eq!(found["tool"], "summon_weather_forecast", "{found}");
    assert_eq!(found["installed"], false);
    // The secret installing needs is named once, as an input of the install call.
    assert_eq!(
        found["install"]["install"]["inputs"],
        serde_json::json!(["FORECAST_API_KEY"]),
        "{found}"
    );
    assert!(
        found["install"].get("required_secrets").is_none(),
        "{found}"
    );
    assert_eq!(found["install"]["listed_under_placeholders"], true);
    assert!(
        found["next_step"]
            .as_str()
            .unwrap()
            .contains("FORECAST_API_KEY"),
        "{found}"
    );
    agent.stop().await;
}

/// Records are stored as they finish and served at `/api/introspections`; a package that no longer enumerates loses
/// its catalog entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_results_are_stored_and_served_over_rest() {
    use agent_discover::catalog;
    let dir = tmp();
    let mut config = agent_discover::config::Config::in_dir(dir.path());
    config.guard_exe = Some(BIN.into());
    let app = agent_discover::app::App::open(config).expect("open the app");
    let mut o = catalog::options_for(&app).unwrap();
    o.limits = options(dir.path(), false).limits;
    o.second_pass = false;
    let ok = fixture("--name stored-ok");
    let crash = fixture("--name stored-crash --fail crash");
    let records = catalog::run(&app, vec![ok.clone(), crash.clone()], &o, |_| {}).await;
    assert_eq!(records.len(), 2);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let router = agent_discover::http::router(
        app.clone(),
        agent_discover::http::security::Security::loopback(),
    );
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let get = |q: &str| {
        let url = format!("http://127.0.0.1:{port}/api/introspections{q}");
        async move {
            let r = reqwest::get(url).await.expect("GET");
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.expect("JSON"))
        }
    };
    let (status, body) = get("").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"], 2);
    assert_eq!(body["categories"]["ok"], 1, "{body}");
    assert_eq!(body["categories"]["crashed_on_start"], 1, "{body}");
    let row = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["category"] == "ok")
        .unwrap();
    assert!(row["tool_count"].as_i64().unwrap() > 0);
    let entry = row["catalog_entry"]
        .as_str()
        .expect("an enumerated package has a catalog entry")
        .to_owned();
    assert!(!app.registry.get(&entry).unwrap().installed);
    let (status, body) = get("?category=crashed_on_start").await;
    assert_eq!(
        (status, body["records"].as_array().unwrap().len()),
        (200, 1),
        "{body}"
    );
    let (status, body) = get("?category=bogus").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_input")),
        "{body}"
    );
    let doc: serde_json::Value = reqwest::get(format!("http://127.0.0.1:{port}/api/openapi.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(doc["paths"]["/api/introspections"]["get"].is_object());

    // The same package failing next time: its record is replaced and its catalog entry goes.
    let mut r = records.iter().find(|r| r.key == ok.key()).unwrap().clone();
    r.category = Category::InitTimeout;
    r.tools.clear();
    assert_eq!(
        catalog::save(&app, &r).unwrap(),
        None,
        "no catalog entry for a failure"
    );
    assert!(
        app.registry
            .store()
            .server_by_name(&entry)
            .unwrap()
            .is_none(),
        "stale catalog entry kept"
    );
    let (_, body) = get("").await;
    assert_eq!(body["categories"]["init_timeout"], 1, "{body}");
    server.abort();
}

/// `--registry QUERY` launches official registry entries from their server.json (a stub registry on 127.0.0.1 whose
/// entry's npm package is the installed server-everything folder), and `catalog refresh` re-introspects only what has
/// a newer version there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_entries_are_introspected_and_refreshed_when_their_version_changes() {
    use std::sync::{Arc, Mutex};
    let everything =
        need(cache().join("node/node_modules/@modelcontextprotocol/server-everything"));
    let version = Arc::new(Mutex::new("2026.8.31".to_owned()));
    let server_json = {
        let everything = everything.clone();
        move |v: &str| {
            serde_json::json!({
                "server": {
                    "name": "io.github.test/everything",
                    "description": "the reference server",
                    "version": v,
                    "packages": [{"registryType": "npm", "identifier": everything, "version": v,
                                  "transport": {"type": "stdio"},
                                  "environmentVariables": [{"name": "EVERYTHING_MODE", "value": "stdio"}]}]
                },
                "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": true}}
            })
        }
    };
    let app = {
        let (v1, v2) = (version.clone(), version.clone());
        let (j1, j2) = (server_json.clone(), server_json.clone());
        axum::Router::new()
            .route(
                "/v0.1/servers",
                axum::routing::get(move || {
                    let row = j1(&v1.lock().unwrap());
                    async move {
                        axum::Json(serde_json::json!({"servers": [row], "metadata": {"count": 1}}))
                    }
                }),
            )
            .route(
                "/v0.1/servers/{name}/versions/latest",
                axum::routing::get(move || {
                    let row = j2(&v2.lock().unwrap());
                    async move { axum::Json(row) }
                }),
            )
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let stub = tokio::spawn(async move { axum::serve(listener, app).await });
    let dir = tmp();
    let run = |args: &'static [&'static str]| {
        let mut cmd = crate::harness::command(dir.path(), args);
        cmd.env("AGENT_DISCOVER_MCP_REGISTRY_URL", &url)
            .stdin(std::process::Stdio::null());
        async move { cmd.output().await.expect("run the CLI") }
    };
    let out = run(&["introspect", "--registry", "everything", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = json_lines(&out.stdout);
    assert_eq!(records.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(records[0]["category"], "ok", "{}", records[0]);
    assert_eq!(records[0]["registry_name"], "io.github.test/everything");

    // Same version upstream: nothing to do.
    let out = run(&["catalog", "refresh", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(json_lines(&out.stdout).is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("still 2026.8.31"));

    // A newer version: re-introspected.
    *version.lock().unwrap() = "2026.9.1".into();
    let out = run(&["catalog", "refresh", "--json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = json_lines(&out.stdout);
    assert_eq!(again.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(again[0]["key"], records[0]["key"]);
    assert_eq!(again[0]["category"], "ok");
    stub.abort();
}

/// The hard limit of one attempt ends it whatever stage it is in, and the stage that was running decides the category.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hard_limit_ends_an_attempt_in_any_stage() {
    let dir = tmp();
    let mut o = options(dir.path(), false);
    o.limits.initialize = Duration::from_secs(60);
    o.limits.list = Duration::from_secs(60);
    o.limits.hard = Duration::from_secs(2);
    let t0 = Instant::now();
    let records = by_key(
        introspect::run_batch(
            vec![fixture("--init-hang"), fixture("--fail list-hang")],
            &o,
            |_| {},
        )
        .await,
    );
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "took {:?}",
        t0.elapsed()
    );
    let init = &records[&fixture("--init-hang").key()];
    assert_eq!(init.category, Category::InitTimeout, "{}", init.evidence);
    let list = &records[&fixture("--fail list-hang").key()];
    assert_eq!(
        list.category,
        Category::ToolsListTimeout,
        "{}",
        list.evidence
    );
    for r in records.values() {
        assert!(
            r.flags.iter().any(|f| f.starts_with("hard limit of 2 s")),
            "{:?}",
            r.flags
        );
        assert!(
            r.stages
                .iter()
                .any(|s| s.stage == "hard limit" && s.outcome == "timeout")
        );
        assert_eq!(r.left_behind, 0);
    }
}
