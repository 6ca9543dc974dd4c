//! Batch introspection (issue 14): the engine against the fixture server's failure modes (each must map to exactly
//! one category), the second pass with placeholders, teardown of a server that ignores SIGTERM, and local npm
//! packages for the install and pre-flight stages.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agent_discover::introspect::{self, Category, Limits, Options, Record, Target};

use crate::harness::{BIN, processes_with_args};

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
    Target::command(&format!("{BIN} fixture-server {flags}")).expect("command target")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_sigterm_and_leaves_a_child_is_killed_with_its_group() {
    let dir = tmp();
    let t0 = Instant::now();
    let r = introspect::introspect(
        &fixture("--name stubborn --fail stubborn"),
        &options(dir.path(), false),
    )
    .await;
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
}
