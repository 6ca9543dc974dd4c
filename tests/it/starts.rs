//! How a stdio server's start ends, from outside, with real children: a server slower to start than rmcp's discover
//! probe still starts within its activation timeout; one that never answers gets "handshake timed out after N"; one
//! that exits gets its exit status and stderr; one that answers the handshake wrongly and stays up is stopped and
//! says so; a program that is not installed is named as missing (not a sandbox refusal); and `uvx` missing from the
//! PATH is fetched (PyPI's `uv` wheel, from a package index on 127.0.0.1) into the data directory's runtimes, once, and the
//! server starts confined and answers; so do Node.js and npm on a machine with neither (their tarballs from an npm
//! registry on 127.0.0.1), for a `node script.js` server and an `npx -y` one.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{Value, json};

use crate::harness;

async fn failed_start(a: &harness::Agent, name: &str) -> Value {
    let (is_error, v) = a
        .try_registry(json!({"action": "activate", "name": name}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert_eq!(v["state"], "error", "{v}");
    v["error"].clone()
}

#[tokio::test]
async fn a_server_slower_to_start_than_the_discover_probe_gets_the_whole_activation_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let a = harness::spawn(dir.path(), &[], None).await;
    // It reads nothing for 11 s: past the 10 s after which rmcp gives up on `server/discover` and sends `initialize`
    // (both then wait unread in its stdin), and well within its activation timeout of 20 s.
    a.install_fixture(
        "sleepy",
        &["--start-delay-ms", "11000"],
        json!({"activate_timeout_ms": 20000}),
    )
    .await;
    let started = Instant::now();
    let act = a
        .registry(json!({"action": "activate", "name": "sleepy"}))
        .await;
    assert_eq!(act["status"], "activated", "{act}");
    assert!(
        started.elapsed() >= Duration::from_secs(11),
        "the server slept 11 s before answering: {:?}",
        started.elapsed()
    );
    assert_eq!(
        harness::text(&a.call("sleepy__echo", json!({"text": "awake"})).await),
        "awake"
    );
    a.stop().await;
}

#[tokio::test]
async fn each_way_a_start_fails_says_which_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let a = harness::spawn(dir.path(), &[], None).await;

    // Never answers initialize: the handshake timed out, after the timeout it was given.
    a.install_fixture(
        "mute",
        &["--init-hang", "--stderr-lines", "1"],
        json!({"activate_timeout_ms": 1500}),
    )
    .await;
    let started = Instant::now();
    let e = failed_start(&a, "mute").await;
    assert!(started.elapsed() >= Duration::from_millis(1500));
    assert_eq!(e["kind"], "timeout", "{e}");
    assert_eq!(e["details"]["start_failure"], "handshake_timeout", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("handshake timed out after 1500 ms")
            && msg.contains("did not answer initialize")
            && msg.contains("fixture stderr line 1"),
        "{msg}"
    );
    assert!(
        !msg.contains("signal 9"),
        "our own SIGKILL is not the cause: {msg}"
    );

    // Still starting when its time is up (it has not read its input): said as such, and it is stopped.
    a.install_fixture(
        "glacial",
        &["--start-delay-ms", "60000"],
        json!({"activate_timeout_ms": 1500}),
    )
    .await;
    let e = failed_start(&a, "glacial").await;
    assert_eq!(e["details"]["start_failure"], "handshake_timeout", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("handshake timed out after 1500 ms")
            && msg.contains("still starting")
            && msg.contains("fixture: starting in 60000 ms"),
        "{msg}"
    );
    harness::wait_for(Duration::from_secs(5), || {
        harness::processes_with_args(&["--name", "glacial"]).is_empty()
    })
    .await;

    // Exits by itself: its exit status and what it wrote on stderr.
    a.install_fixture("quits", &["--exit-before-init"], json!({}))
        .await;
    let e = failed_start(&a, "quits").await;
    assert_eq!(e["kind"], "transport_error", "{e}");
    assert_eq!(e["details"]["start_failure"], "exited", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("exited before completing initialize (exit code 1)")
            && msg.contains("API key required"),
        "{msg}"
    );

    // Answers initialize with an error, then exits: its exit, with the handshake's error as it wrote it.
    a.install_fixture("refuses", &["--fail", "init-error"], json!({}))
        .await;
    let e = failed_start(&a, "refuses").await;
    assert_eq!(e["details"]["start_failure"], "exited", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("exited before completing initialize (exit code 2)")
            && msg.contains("storage backend not ready"),
        "{msg}"
    );
    assert!(
        !msg.contains("signal 9"),
        "our own SIGKILL is not the cause: {msg}"
    );

    // Answers `initialize` with something that is no initialize result, and stays up: the handshake's error, and
    // that agent-discover stopped it (not the SIGKILL that did).
    let python = Path::new("/usr/bin/python3");
    assert!(
        python.is_file(),
        "this test needs Debian's python3 at /usr/bin/python3"
    );
    let scripts = tempfile::tempdir().unwrap();
    let script = scripts.path().join("odd_server.py");
    std::fs::write(
        &script,
        r#"import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m.get("method") == "initialize":
        answer = {"result": {"unexpected": "shape"}}
    elif m.get("method") == "ping":
        answer = {"result": {}}
    else:
        answer = {"error": {"code": -32601, "message": "Method not found"}}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], **answer}), flush=True)
"#,
    )
    .unwrap();
    a.registry(json!({"action": "install", "name": "odd", "command": python, "args": [script]}))
        .await;
    let e = failed_start(&a, "odd").await;
    assert_eq!(e["details"]["start_failure"], "stopped", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("initialize failed") && msg.contains("agent-discover stopped the server"),
        "{msg}"
    );
    assert!(!msg.contains("signal 9"), "{msg}");
    let script_arg = script.display().to_string();
    harness::wait_for(Duration::from_secs(5), || {
        harness::processes_with_args(&[&script_arg]).is_empty()
    })
    .await;

    // A program that is not installed: named, with the fix; not a sandbox refusal.
    a.registry(json!({"action": "install", "name": "absent", "command": "surely-not-installed-mcp-server"}))
        .await;
    let e = failed_start(&a, "absent").await;
    assert_eq!(e["kind"], "transport_error", "{e}");
    assert_eq!(e["details"]["start_failure"], "program_missing", "{e}");
    let msg = e["message"].as_str().unwrap();
    assert!(
        msg.contains("program `surely-not-installed-mcp-server` is not installed")
            && msg.contains("install it"),
        "{msg}"
    );
    assert!(!msg.contains("sandbox"), "{msg}");

    // A program named by a relative path starts as an unconfined start would find it (against agent-discover's
    // working directory), although a confined child starts in its state directory.
    let cwd = std::env::current_dir().unwrap();
    let relative = Path::new(harness::fixture())
        .strip_prefix(&cwd)
        .unwrap_or_else(|_| {
            panic!(
                "the fixture is under the test's working directory {}",
                cwd.display()
            )
        })
        .display()
        .to_string();
    a.registry(json!({"action": "install", "name": "nearby", "command": relative, "args": ["--name", "nearby"]}))
        .await;
    a.registry(json!({"action": "activate", "name": "nearby"}))
        .await;
    assert_eq!(
        harness::text(&a.call("nearby__echo", json!({"text": "here"})).await),
        "here"
    );
    a.stop().await;
}

/// Where scripts/test.sh installs test dependencies; a missing piece fails the test with the fix.
fn cache_path(rel: &str) -> PathBuf {
    let p =
        PathBuf::from(std::env::var_os("AGENT_DISCOVER_TEST_CACHE").expect(
            "AGENT_DISCOVER_TEST_CACHE is set by scripts/test.sh: run the tests through it",
        ))
        .join(rel);
    assert!(
        p.exists(),
        "{} is missing: run scripts/test.sh",
        p.display()
    );
    p
}

/// uv's wheel for this machine in the test cache (scripts/test.sh downloads the version agent-discover fetches).
fn uv_wheel() -> PathBuf {
    let dir = cache_path("uv-wheel");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .unwrap_or_else(|| panic!("no uv wheel in {}: run scripts/test.sh", dir.display()))
}

/// The wheel's bytes and how often they were downloaded.
type Served = (Arc<Vec<u8>>, Arc<Mutex<usize>>);

/// A PEP 503 simple index on 127.0.0.1 listing `wheel` as the project `uv` (with its SHA-256), counting downloads.
async fn simple_index(wheel: &Path) -> (String, Arc<Mutex<usize>>) {
    use sha2::Digest;
    let bytes = Arc::new(std::fs::read(wheel).unwrap());
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let sha: String = sha2::Sha256::digest(&bytes[..])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let downloads = Arc::new(Mutex::new(0usize));
    let page = format!(
        "<!DOCTYPE html><html><body><a href=\"../../files/{name}#sha256={sha}\">{name}</a></body></html>"
    );
    let router = Router::new()
        .route(
            "/simple/uv/",
            get(move || {
                let page = page.clone();
                async move { ([(header::CONTENT_TYPE, "text/html")], page).into_response() }
            }),
        )
        .route(
            "/files/{file}",
            get(|State((bytes, n)): State<Served>| async move {
                *n.lock().unwrap() += 1;
                bytes.to_vec().into_response()
            }),
        )
        .with_state((bytes, downloads.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (format!("http://{addr}/simple"), downloads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uvx_missing_from_the_path_is_fetched_once_and_the_server_starts_confined() {
    let wheel = uv_wheel();
    let wheels = cache_path("wheels");
    let python = cache_path("venv/bin/python");
    // The PATH the server gets has no uv: the launcher must be fetched.
    let path = "/usr/bin:/bin";
    for d in std::env::split_paths(path) {
        assert!(
            !d.join("uvx").exists(),
            "{} has a uvx: this test needs a PATH without one",
            d.display()
        );
    }
    let (index, downloads) = simple_index(&wheel).await;
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let a = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[
            ("HOME", home.path().display().to_string()),
            ("PIP_INDEX_URL", index.clone()),
            ("UV_DEFAULT_INDEX", index),
        ],
    )
    .await;
    // The server itself runs offline from the wheels scripts/test.sh downloaded.
    a.registry(json!({"action": "install", "name": "time", "command": "uvx",
        "args": ["--offline", "--no-index", "--find-links", wheels, "--python", python, "mcp-server-time"],
        "env": {"PATH": path}}))
        .await;
    let act = a
        .registry(json!({"action": "activate", "name": "time"}))
        .await;
    let runtimes = dir.path().join("runtimes/uv-");
    let note = act["fetched"]
        .as_str()
        .unwrap_or_else(|| panic!("the answer tells of the fetch: {act}"));
    assert!(
        note.contains("`uvx` was not installed: fetched uv")
            && note.contains(&runtimes.display().to_string()),
        "{note}"
    );
    assert!(act.to_string().contains("time__get_current_time"), "{act}");
    harness::time_server_answers_confined(&a, dir.path()).await;
    let shown = a
        .registry(json!({"action": "sandbox", "name": "time"}))
        .await;
    assert_eq!(shown["effective"], true, "{shown}");
    // Reused: a second start fetches nothing and says nothing of it.
    a.registry(json!({"action": "deactivate", "name": "time"}))
        .await;
    let again = a
        .registry(json!({"action": "activate", "name": "time"}))
        .await;
    assert!(again.get("fetched").is_none(), "{again}");
    assert_eq!(
        *downloads.lock().unwrap(),
        1,
        "the wheel is downloaded once"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_missing_from_the_path_runs_from_the_runtimes_folder_confined() {
    // The runtimes folder already holds Node 22 (the test cache's, as a fetch leaves it): a server whose PATH has no
    // node starts with it, confined, instead of failing as a missing program or a sandbox refusal.
    let node22 = cache_path("node");
    assert!(
        node22.join("node_modules/.bin/node").exists(),
        "Node 22 missing in {}: run scripts/test.sh",
        node22.display()
    );
    let script =
        cache_path("node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("hello.txt"), "hello from node 22").unwrap();
    std::fs::create_dir_all(dir.path().join("runtimes")).unwrap();
    std::os::unix::fs::symlink(&node22, dir.path().join("runtimes/node-22")).unwrap();
    let a = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[("HOME", home.path().display().to_string())],
    )
    .await;
    a.registry(
        json!({"action": "install", "name": "files", "command": "node",
        "args": [script, root.path()], "env": {"PATH": "/nonexistent-bin"}}),
    )
    .await;
    let act = a
        .registry(json!({"action": "activate", "name": "files"}))
        .await;
    assert!(act.get("fetched").is_none(), "nothing was fetched: {act}");
    let file = root.path().join("hello.txt").display().to_string();
    let r = a.call("files__read_text_file", json!({"path": file})).await;
    assert_eq!(harness::text(&r), "hello from node 22");
    let shown = a
        .registry(json!({"action": "sandbox", "name": "files"}))
        .await;
    assert_eq!(shown["effective"], true, "{shown}");
    a.stop().await;
}

/// An npm registry on 127.0.0.1 serving the packages whose tarballs are in `packs` (`NAME-VERSION.tgz`, as `npm pack`
/// names them): each one's packument (abbreviated, with the sha512 integrity) and its tarball, counting downloads.
async fn npm_registry(packs: &Path) -> (String, Arc<Mutex<usize>>) {
    use base64::Engine;
    use sha2::Digest;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mut packuments = serde_json::Map::new();
    let mut files = std::collections::HashMap::new();
    for entry in std::fs::read_dir(packs).unwrap().flatten() {
        let path = entry.path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if !file.ends_with(".tgz") {
            continue;
        }
        let out = std::process::Command::new("tar")
            .args(["-xzOf"])
            .arg(&path)
            .arg("package/package.json")
            .output()
            .unwrap();
        assert!(out.status.success(), "tar {file}: {out:?}");
        let manifest: Value = serde_json::from_slice(&out.stdout).unwrap();
        let (name, version) = (
            manifest["name"].as_str().unwrap().to_owned(),
            manifest["version"].as_str().unwrap().to_owned(),
        );
        let bytes = std::fs::read(&path).unwrap();
        let integrity = format!(
            "sha512-{}",
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha512::digest(&bytes))
        );
        packuments.insert(
            name.clone(),
            json!({"name": name, "dist-tags": {"latest": version}, "versions": {version.clone(): {
                "name": name, "version": version, "bin": manifest["bin"], "engines": manifest["engines"],
                "dist": {"tarball": format!("{base}/tarballs/{file}"), "integrity": integrity}}}}),
        );
        files.insert(file, bytes);
    }
    assert!(
        packuments.len() >= 2,
        "Node.js and npm tarballs missing in {}: run scripts/test.sh",
        packs.display()
    );
    type Docs = (
        Arc<serde_json::Map<String, Value>>,
        Arc<std::collections::HashMap<String, Vec<u8>>>,
        Arc<Mutex<usize>>,
    );
    let downloads = Arc::new(Mutex::new(0usize));
    let router = Router::new()
        .route(
            "/tarballs/{file}",
            get(
                |State((_, files, n)): State<Docs>,
                 axum::extract::Path(file): axum::extract::Path<String>| async move {
                    *n.lock().unwrap() += 1;
                    match files.get(&file) {
                        Some(b) => b.clone().into_response(),
                        None => axum::http::StatusCode::NOT_FOUND.into_response(),
                    }
                },
            ),
        )
        .route(
            "/{name}",
            get(
                |State((docs, _, _)): State<Docs>,
                 axum::extract::Path(name): axum::extract::Path<String>| async move {
                    match docs.get(&name) {
                        Some(d) => axum::Json(d.clone()).into_response(),
                        None => axum::http::StatusCode::NOT_FOUND.into_response(),
                    }
                },
            ),
        )
        .with_state((Arc::new(packuments), Arc::new(files), downloads.clone()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    (base, downloads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_npm_missing_everywhere_are_fetched_from_the_registry_and_servers_start_confined()
{
    // Neither agent-discover's PATH nor the servers' has node, npm or npx (a static binary or a wheel installed on a
    // machine without Node): the platform package and npm come from the registry the user configured (a stub on
    // 127.0.0.1 serving the real tarballs), and both a `node script.js` server and an `npx -y` server start.
    let packs = cache_path("launch/packs");
    let global =
        cache_path("launch/global/lib/node_modules/@modelcontextprotocol/server-everything");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(global.join("package.json")).unwrap())
            .unwrap();
    let pkg = format!(
        "@modelcontextprotocol/server-everything@{}",
        manifest["version"].as_str().unwrap()
    );
    let (registry, downloads) = npm_registry(&packs).await;
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.path().join("sh")).unwrap();
    let path = bin.path().display().to_string();
    for tool in ["node", "npm", "npx"] {
        assert!(!bin.path().join(tool).exists());
    }
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let a = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[
            ("HOME", home.path().display().to_string()),
            ("PATH", path.clone()),
            ("AGENT_DISCOVER_NPM_REGISTRY_URL", registry),
        ],
    )
    .await;
    let npm_cache = cache_path("npm").display().to_string();
    a.registry(
        json!({"action": "install", "name": "evernode", "command": "node",
        "args": [global.join("dist/index.js")], "env": {"PATH": path}}),
    )
    .await;
    // `npx -y` runs the package offline from the test's npm cache, as after a first download.
    a.registry(
        json!({"action": "install", "name": "evernpx", "command": "npx", "args": ["-y", pkg],
        "env": {"PATH": path, "npm_config_cache": npm_cache, "npm_config_offline": "true"}}),
    )
    .await;
    let act = a
        .registry(json!({"action": "activate", "name": "evernode"}))
        .await;
    let note = act["fetched"]
        .as_str()
        .unwrap_or_else(|| panic!("the answer tells of the fetch: {act}"));
    let runtime = dir.path().join("runtimes/node-22");
    assert!(
        note.contains("`node` was not installed: fetched Node.js")
            && note.contains("22.")
            && note.contains(&runtime.display().to_string()),
        "{note}"
    );
    for tool in ["node", "npm", "npx"] {
        assert!(
            runtime.join("node_modules/.bin").join(tool).is_file(),
            "{tool} in the fetched runtime"
        );
    }
    let act = a
        .registry(json!({"action": "activate", "name": "evernpx"}))
        .await;
    assert!(act.get("fetched").is_none(), "fetched once: {act}");
    assert_eq!(act["status"], "activated", "{act}");
    for (server, said) in [("evernode", "by node"), ("evernpx", "by npx")] {
        let r = a
            .call(&format!("{server}__echo"), json!({"message": said}))
            .await;
        assert!(harness::text(&r).contains(said), "{server}: {r:?}");
        let shown = a
            .registry(json!({"action": "sandbox", "name": server}))
            .await;
        assert_eq!(shown["effective"], true, "{server} confined: {shown}");
    }
    assert_eq!(
        *downloads.lock().unwrap(),
        2,
        "Node.js and npm downloaded once each"
    );
    a.stop().await;
}
