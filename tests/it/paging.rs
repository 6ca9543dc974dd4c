//! Large results in pages, end to end: a 1 MB tool result of the fixture reaches an rmcp client as its head (at most
//! the limit) and a resource link, on the stdio fast lane and on the normal path; the whole is read back identical
//! through `resources/read` pages and through the registry's `read_result`; a call's own limit (`_meta`, `proxy_call`)
//! and a server's (`agent-discover paging`) apply; the call log notes what was kept back; kept results are bounded
//! in size (least recently read evicted) and in time.

use std::path::Path;

use rmcp::model::*;
use serde_json::{Value, json};

use crate::harness::{self, Agent, text};
use crate::integrity::cli;

const LIMIT: usize = 64 * 1024;
const MB: usize = 1024 * 1024;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

async fn with_fixture(dir: &Path, env: &[(&str, String)]) -> Agent {
    let agent = harness::spawn_env(dir, &[], None, env).await;
    agent.install_fixture("bulk", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "bulk"}))
        .await;
    agent
}

/// A `tools/call` with `_meta` (the call's own paging limit).
async fn call_meta(agent: &Agent, name: &str, args: Value, page_bytes: u64) -> CallToolResult {
    let mut p = CallToolRequestParams::new(name.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    let mut meta = MetaObject::default();
    meta.0
        .insert("agent-discover/page_bytes".into(), json!(page_bytes));
    p.meta = Some(RequestMetaObject(meta));
    agent.client.call_tool(p).await.expect("tools/call")
}

/// The head and the link of a paged result, checked: the head is all the text there is, at most `limit` bytes, and
/// the link says the whole's size.
#[track_caller]
fn head_and_link(r: &CallToolResult, limit: usize, whole: usize) -> (String, String) {
    assert_ne!(r.is_error, Some(true));
    assert_eq!(
        r.content.len(),
        2,
        "{:?}",
        r.content
            .iter()
            .map(|c| format!("{c:?}").chars().take(80).collect::<String>())
            .collect::<Vec<_>>()
    );
    let head = r.content[0]
        .as_text()
        .expect("the head is text")
        .text
        .clone();
    assert!(
        head.len() <= limit && head.len() > limit - 4,
        "head of {} bytes",
        head.len()
    );
    let link = r.content[1].as_resource_link().expect("a resource link");
    assert!(
        link.uri.starts_with("agent-discover://results/r"),
        "{}",
        link.uri
    );
    assert_eq!(link.size, Some(whole as u64));
    // What reaches the agent: the head and the link, nothing else (no structured copy of the whole).
    assert!(r.structured_content.is_none());
    // Its JSON is the head's (as a JSON string: escapes included), the link's, and the envelope's few bytes.
    let sent = serde_json::to_string(&r).unwrap().len();
    let head_json = serde_json::to_string(&head).unwrap().len();
    let link_bytes = serde_json::to_string(&r.content[1]).unwrap().len();
    assert!(sent <= head_json + link_bytes + 100, "{sent} bytes sent");
    (head, link.uri.clone())
}

/// The whole behind `uri`, read with `resources/read` pages of `page` bytes.
async fn read_pages(agent: &Agent, uri: &str, page: usize) -> (String, usize) {
    let mut out = String::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let r = agent
            .client
            .read_resource(ReadResourceRequestParams::new(format!(
                "{uri}?offset={offset}&limit={page}"
            )))
            .await
            .expect("resources/read");
        let ResourceContents::TextResourceContents { text, meta, .. } = &r.contents[0] else {
            panic!("a text page");
        };
        assert!(text.len() <= page);
        out.push_str(text);
        pages += 1;
        let meta = meta.as_ref().expect("the page's _meta");
        match meta.0["next_offset"].as_u64() {
            Some(next) => offset = next as usize,
            None => return (out, pages),
        }
    }
}

/// The whole behind `id`, read with the registry's `read_result` (default page size).
async fn read_registry(agent: &Agent, id: &str) -> String {
    let mut out = String::new();
    let mut offset = 0u64;
    loop {
        let page = agent
            .registry(json!({"action": "read_result", "id": id, "offset": offset}))
            .await;
        let text = page["text"].as_str().unwrap();
        assert!(text.len() <= LIMIT, "a page of {}", text.len());
        out.push_str(text);
        match page["next_offset"].as_u64() {
            Some(next) => offset = next,
            None => return out,
        }
    }
}

#[tokio::test]
async fn a_large_result_arrives_as_head_and_link_and_reads_back_identical() {
    let dir = tmp();
    let agent = with_fixture(dir.path(), &[]).await;
    // The whole, as the child sends it (this call's own limit: 0, off).
    let whole = text(&call_meta(&agent, "bulk__lines", json!({"bytes": MB}), 0).await);
    assert!(whole.len() > MB - 4 && whole.len() <= MB);
    assert!(whole.contains('😀'));

    // The stdio fast lane (a plain call of a stdio child).
    let r = agent.call("bulk__lines", json!({"bytes": MB})).await;
    let (head, uri) = head_and_link(&r, LIMIT, whole.len());
    assert!(whole.starts_with(&head));
    // Pages of an odd size, so that some would end inside a character: still identical end to end.
    let (read, pages) = read_pages(&agent, &uri, 100_003).await;
    assert!(pages >= 10, "{pages} pages");
    assert!(read == whole, "the pages differ from the whole");
    let id = uri.rsplit('/').next().unwrap();
    assert!(read_registry(&agent, id).await == whole);

    // The normal path: a call with its own limit, and proxy_call's page_bytes.
    let r = call_meta(&agent, "bulk__lines", json!({"bytes": MB}), 4096).await;
    let (head, uri) = head_and_link(&r, 4096, whole.len());
    assert!(whole.starts_with(&head));
    assert!(read_pages(&agent, &uri, 512 * 1024).await.0 == whole);
    let (is_error, v) = agent
        .try_registry(json!({"action": "proxy_call", "call_as": "bulk__lines", "arguments": {"bytes": 200_000}, "page_bytes": 2048}))
        .await
        .unwrap();
    assert!(!is_error);
    let Value::String(s) = v else {
        panic!("the head is not JSON")
    };
    assert!(s.len() <= 2048 && whole.starts_with(&s), "{}", s.len());

    // A small result passes as it is; a page past the end or inside a character is refused.
    assert_eq!(
        text(&agent.call("bulk__echo", json!({"text": "hi"})).await),
        "hi"
    );
    let (is_error, v) = agent
        .try_registry(json!({"action": "read_result", "id": id, "offset": 14}))
        .await
        .unwrap();
    assert!(is_error && v["field"] == "offset", "{v}");
    let (is_error, v) = agent
        .try_registry(json!({"action": "read_result", "id": "r0123456789abcdef0123456789abcdef"}))
        .await
        .unwrap();
    assert!(is_error && v["code"] == "not_found", "{v}");

    // The call log says what was kept back.
    let status = agent.registry(json!({"action": "status"})).await;
    let noted = status["calls"]["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tool"] == "lines")
        .filter_map(|c| c["response"].as_str())
        .filter(|n| n.starts_with("[paged: "))
        .count();
    assert_eq!(noted, 3, "{status}");
    agent.stop().await;
}

#[tokio::test]
async fn a_servers_own_limit_applies_and_zero_turns_paging_off() {
    let dir = tmp();
    let agent = with_fixture(dir.path(), &[]).await;
    let (ok, out, err) = cli(dir.path(), &["paging", "bulk", "4096"]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("4096"), "{out}");
    let r = agent.call("bulk__lines", json!({"bytes": 10_000})).await;
    head_and_link(&r, 4096, 10_000);
    let (ok, _, err) = cli(dir.path(), &["paging", "bulk", "0"]);
    assert!(ok, "{err}");
    let r = agent.call("bulk__lines", json!({"bytes": 200_000})).await;
    assert_eq!(r.content.len(), 1);
    assert!((200_000 - 3..=200_000).contains(&text(&r).len()));
    let (ok, _, err) = cli(dir.path(), &["paging", "bulk", "10"]);
    assert!(!ok && err.contains("at least 1024"), "{err}");
    agent.stop().await;
}

#[tokio::test]
async fn kept_results_are_bounded_in_size_and_time() {
    let dir = tmp();
    let agent = with_fixture(
        dir.path(),
        &[
            ("AGENT_DISCOVER_PAGE_STORE_BYTES", (MB + MB / 2).to_string()),
            ("AGENT_DISCOVER_PAGE_KEEP_SECS", "2".into()),
        ],
    )
    .await;
    let id = |r: &CallToolResult| {
        r.content[1]
            .as_resource_link()
            .unwrap()
            .uri
            .rsplit('/')
            .next()
            .unwrap()
            .to_owned()
    };
    let first = id(&agent.call("bulk__lines", json!({"bytes": MB})).await);
    let second = id(&agent.call("bulk__lines", json!({"bytes": MB})).await);
    // Two 1 MB results do not fit in 1.5 MB: the first went.
    let (is_error, v) = agent
        .try_registry(json!({"action": "read_result", "id": first}))
        .await
        .unwrap();
    assert!(is_error && v["code"] == "not_found", "{v}");
    let page = agent
        .registry(json!({"action": "read_result", "id": second, "limit": 10}))
        .await;
    assert_eq!(page["text"].as_str().unwrap().len(), 10);
    // Two seconds later the second has expired too (the bound under test is time itself).
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (is_error, v) = agent
        .try_registry(json!({"action": "read_result", "id": second}))
        .await
        .unwrap();
    assert!(is_error && v["code"] == "not_found", "{v}");
    agent.stop().await;
}

// ---------- REST and /metrics, in process ----------

fn app_in(dir: &Path) -> std::sync::Arc<agent_discover::app::App> {
    let mut config = agent_discover::config::Config::in_dir(dir);
    config.guard_exe = Some(std::path::PathBuf::from(harness::BIN));
    agent_discover::app::App::open(config).expect("open the app")
}

async fn send(
    router: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    use tower::ServiceExt as _;
    let b = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header(axum::http::header::HOST, "127.0.0.1:3424");
    let req = match body {
        Some(v) => b
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .body(axum::body::Body::from(v.to_string()))
            .unwrap(),
        None => b.body(axum::body::Body::empty()).unwrap(),
    };
    let resp = router.clone().oneshot(req).await.expect("infallible");
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 16 * MB)
        .await
        .unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, body)
}

#[tokio::test]
async fn rest_pages_results_saves_scripts_and_metrics_count_the_bytes_kept_back() {
    let dir = tmp();
    let app = app_in(dir.path());
    let router =
        agent_discover::http::router(app.clone(), agent_discover::http::Security::loopback());
    let spec = json!({"name": "fx", "command": harness::fixture(), "args": ["--name", "fx"]});
    let (status, body) = send(&router, "POST", "/api/servers", Some(spec)).await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = send(&router, "POST", "/api/servers/fx/activate", None).await;
    assert_eq!(status, 200, "{body}");

    // A REST call's large result: head and link; the pages read back over REST are the whole.
    let (status, whole) = send(
        &router,
        "POST",
        "/api/servers/fx/call",
        Some(json!({"tool": "lines", "args": {"bytes": 300_000}})),
    )
    .await;
    assert_eq!(status, 200, "{whole}");
    let head = whole["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(head.len() <= LIMIT);
    let uri = whole["content"][1]["uri"].as_str().unwrap();
    let id = uri.rsplit('/').next().unwrap();
    let mut read = String::new();
    let mut offset = 0;
    loop {
        let (status, page) = send(
            &router,
            "GET",
            &format!("/api/results/{id}?offset={offset}&limit=70000"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{page}");
        read.push_str(page["text"].as_str().unwrap());
        match page["next_offset"].as_u64() {
            Some(n) => offset = n,
            None => break,
        }
    }
    assert_eq!(
        read.len(),
        whole["content"][1]["size"].as_u64().unwrap() as usize
    );
    assert!(read.starts_with(&head) && read.starts_with("line 0000000 é€😀"));
    let (status, body) = send(
        &router,
        "GET",
        "/api/results/r0123456789abcdef0123456789abcdef",
        None,
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // A server's own limit over REST.
    let (status, body) = send(
        &router,
        "PUT",
        "/api/servers/fx/paging",
        Some(json!({"page_bytes": 2048})),
    )
    .await;
    assert_eq!((status, &body["page_bytes"]), (200, &json!(2048)), "{body}");
    let (_, r) = send(
        &router,
        "POST",
        "/api/servers/fx/call",
        Some(json!({"tool": "lines", "args": {"bytes": 5000}})),
    )
    .await;
    assert!(
        r["content"][0]["text"].as_str().unwrap().len() <= 2048,
        "{r}"
    );
    let (status, body) = send(
        &router,
        "PUT",
        "/api/servers/fx/paging",
        Some(json!({"page_bytes": 5})),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // /metrics counts the paged results and the bytes kept back.
    let (status, Value::String(metrics)) = send(&router, "GET", "/metrics", None).await else {
        panic!("metrics are text")
    };
    assert_eq!(status, 200);
    let value = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing:\n{metrics}"))
            .parse()
            .unwrap()
    };
    assert_eq!(value("agent_discover_paged_results_total"), 2);
    assert!(
        value("agent_discover_paged_bytes_saved_total")
            >= (300_000 - LIMIT + 5000 - 2048) as u64 - 8
    );

    // Saved scripts over REST: saved, listed, shown, called as a tool of `scripts`, removed.
    let (status, body) = send(
        &router,
        "POST",
        "/api/scripts/saved",
        Some(json!({"name": "twice", "code": "return (await call(\"fx__add\", {a: args.n, b: args.n}));",
            "description": "Adds a number to itself", "input_schema": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tool"], "scripts__twice");
    let (_, list) = send(&router, "GET", "/api/scripts/saved", None).await;
    assert_eq!(list["scripts"][0]["name"], "twice", "{list}");
    assert!(list["scripts"][0].get("code").is_none());
    let (_, shown) = send(&router, "GET", "/api/scripts/saved/twice", None).await;
    assert!(
        shown["code"].as_str().unwrap().contains("fx__add"),
        "{shown}"
    );
    let (status, r) = send(
        &router,
        "POST",
        "/api/servers/scripts/call",
        Some(json!({"tool": "twice", "args": {"n": 21}})),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let answer: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answer["result"], 42, "{answer}");
    let (status, _) = send(&router, "DELETE", "/api/scripts/saved/twice", None).await;
    assert_eq!(status, 200);
    let (status, _) = send(&router, "GET", "/api/scripts/saved/twice", None).await;
    assert_eq!(status, 404);
    app.proxy.shutdown().await;
}

#[tokio::test]
async fn the_python_sdk_reads_a_paged_result_and_calls_a_saved_script_in_both_eras() {
    for mode in ["auto", "legacy"] {
        let stdout = crate::interop::python_check("python_paging_check.py", mode).await;
        assert!(stdout.contains("paged and saved scripts ok"), "{stdout}");
    }
}
