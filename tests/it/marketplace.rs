//! Marketplace and installer tests: stub registry, npm and PyPI servers on 127.0.0.1 (port 0) serving answers in the real shapes.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_discover::marketplace::{
    InputKind, InstallError, InstallMethod, MarketError, MarketSource, Marketplace,
    MarketplaceConfig, Runtime, Transport, parse_server_json, plan_install, plan_install_with,
    probe_prereqs, warm_cache,
};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

const OFFICIAL: &str = "io.modelcontextprotocol.registry/official";

// ---------------------------------------------------------------------------------------------------------------
// Stub servers.

/// What every stub shares: requests seen, a switch that makes it fail, and how it misbehaves.
#[derive(Default)]
struct Stub {
    requests: Mutex<Vec<String>>,
    hits: AtomicUsize,
    down: AtomicBool,
    hang: bool,
    malformed: bool,
}

type Shared = Arc<Stub>;

impl Stub {
    fn new() -> Shared {
        Arc::new(Stub::default())
    }
    fn hanging() -> Shared {
        Arc::new(Stub {
            hang: true,
            ..Stub::default()
        })
    }
    fn malformed() -> Shared {
        Arc::new(Stub {
            malformed: true,
            ..Stub::default()
        })
    }
    /// Records the request; `Some(response)` when the stub must not answer normally.
    async fn enter(&self, what: String) -> Option<Response> {
        self.hits.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().expect("lock").push(what);
        if self.hang {
            std::future::pending::<()>().await;
        }
        if self.down.load(Ordering::SeqCst) {
            return Some((StatusCode::SERVICE_UNAVAILABLE, "down for maintenance").into_response());
        }
        if self.malformed {
            return Some(
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"servers\": [ {not json",
                )
                    .into_response(),
            );
        }
        None
    }
    fn seen(&self) -> Vec<String> {
        self.requests.lock().expect("lock").clone()
    }
}

/// Binds first, then serves in the background: the address is ready when this returns.
async fn serve(router: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

fn json_response(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"error":"Not found"}"#,
    )
        .into_response()
}

fn row(name: &str, version: &str, is_latest: bool, status: &str) -> Value {
    json!({
        "server": {
            "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
            "name": name,
            "description": format!("{name} at {version}"),
            "version": version,
            "repository": {"url": "https://github.com/acme/servers", "source": "github"},
            "packages": [{
                "registryType": "npm",
                "identifier": format!("@acme/{}-mcp", name.rsplit('/').next().unwrap_or("x")),
                "version": version,
                "transport": {"type": "stdio"}
            }]
        },
        "_meta": {OFFICIAL: {"status": status, "isLatest": is_latest, "publishedAt": "2026-01-01T00:00:00Z"}}
    })
}

fn registry_page(cursor: Option<&str>) -> Value {
    match cursor {
        None => json!({
            "servers": [
                row("io.github.acme/weather", "1.10.0", false, "active"),
                row("io.github.acme/weather", "1.2.0", true, "active"),
                row("io.github.acme/files", "2.0.0", false, "active"),
                row("io.github.acme/files", "10.0.0", false, "active"),
                row("io.github.acme/gone", "1.0.0", true, "deleted"),
                row("io.github.acme/old", "1.0.0", true, "deprecated"),
            ],
            "metadata": {"nextCursor": "c2", "count": 6}
        }),
        Some("c2") => json!({
            "servers": [
                {
                    "server": {
                        "name": "io.github.legacy/snake",
                        "description": "snake_case era",
                        "version_detail": {"version": "0.3.0"},
                        "repository": {"url": "https://github.com/legacy/snake", "source": "github"},
                        "packages": [{
                            "registry_name": "pypi",
                            "name": "snake-mcp",
                            "version": "0.3.0",
                            "runtime_hint": "uvx",
                            "transport": "stdio",
                            "environment_variables": [
                                {"name": "SNAKE_TOKEN", "description": "API token", "is_secret": true, "is_required": true}
                            ],
                            "package_arguments": [{"type": "named", "name": "port", "default": "8080"}]
                        }]
                    },
                    "_meta": {OFFICIAL: {"status": "active", "is_latest": true}},
                    "x-unknown": {"ignored": true}
                },
                {
                    "name": "io.github.legacy/flat",
                    "description": "flat row without the server wrapper",
                    "version": "2.0.0",
                    "status": "active",
                    "packages": [{
                        "registryType": "npm",
                        "identifier": "flat-mcp",
                        "version": "2.0.0",
                        "transport": {"type": "stdio"},
                        "environmentVariables": [{"name": "FLAT_MODE", "isRequired": true, "default": "fast"}]
                    }],
                    "_meta": {OFFICIAL: {"isLatest": true}}
                }
            ],
            "metadata": {"next_cursor": "c3"}
        }),
        Some("c3") => json!({
            "servers": [{
                "server": {
                    "name": "io.github.acme/hosted",
                    "title": "Hosted",
                    "description": "a remote server",
                    "version": "1.0.0",
                    "remotes": [{"type": "sse", "url": "https://sse.example.test/sse"}]
                },
                "_meta": {OFFICIAL: {"status": "active", "isLatest": true}}
            }],
            "metadata": {"count": 1}
        }),
        Some(_) => json!({"servers": [], "metadata": {}}),
    }
}

async fn registry_list(
    State(s): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut keys: Vec<_> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    keys.sort();
    if let Some(r) = s.enter(format!("list?{}", keys.join("&"))).await {
        return r;
    }
    json_response(registry_page(q.get("cursor").map(String::as_str)))
}

async fn registry_latest(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    if let Some(r) = s.enter(format!("latest:{name}")).await {
        return r;
    }
    match name.as_str() {
        "io.github.acme/weather" => {
            json_response(row("io.github.acme/weather", "1.2.0", true, "active"))
        }
        "io.github.acme/broken" => {
            ([(header::CONTENT_TYPE, "application/json")], "{oops").into_response()
        }
        _ => not_found(),
    }
}

async fn registry_stub(s: Shared) -> String {
    serve(
        Router::new()
            .route("/v0.1/servers", get(registry_list))
            .route("/v0.1/servers/{name}/versions/latest", get(registry_latest))
            .with_state(s),
    )
    .await
}

fn npm_object(name: &str, version: &str, description: &str, keywords: &[&str]) -> Value {
    json!({
        "package": {
            "name": name,
            "version": version,
            "description": description,
            "keywords": keywords,
            "date": "2026-01-01T00:00:00.000Z",
            "links": {"npm": "https://npm.example.test/package/x", "repository": format!("git+https://github.com/acme/{}.git", name.trim_start_matches('@').replace('/', "-"))},
            "publisher": {"username": "acme"}
        },
        "score": {"final": 0.5, "detail": {"quality": 0.5, "popularity": 0.5, "maintenance": 0.5}},
        "searchScore": 1.0
    })
}

async fn npm_search(State(s): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let text = q.get("text").cloned().unwrap_or_default();
    if let Some(r) = s.enter(format!("search:{text}")).await {
        return r;
    }
    let objects = if text.ends_with("keywords:mcp") {
        vec![
            npm_object("mcp-weather", "0.4.0", "Weather tools", &["mcp", "weather"]),
            npm_object("left-pad", "1.3.0", "String padding", &["string"]),
        ]
    } else {
        vec![
            npm_object("mcp-weather", "0.4.0", "Weather tools", &["mcp", "weather"]),
            npm_object(
                "@acme/server-files",
                "1.5.0",
                "A Model Context Protocol server for files",
                &[],
            ),
            npm_object(
                "@acme/weather-mcp",
                "1.2.0",
                "the registry row's own package",
                &["mcp"],
            ),
            npm_object("random-lib", "2.0.0", "nothing related", &["misc"]),
        ]
    };
    json_response(json!({"objects": objects, "total": objects.len(), "time": "Thu Jan 01 2026"}))
}

async fn npm_document(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    if let Some(r) = s.enter(format!("doc:{name}")).await {
        return r;
    }
    match name.as_str() {
        "@acme/server-files" => json_response(json!({
            "_id": "@acme/server-files",
            "name": "@acme/server-files",
            "description": "top-level description",
            "dist-tags": {"latest": "1.5.0", "next": "2.0.0-rc.1"},
            "versions": {
                "1.4.0": {"name": "@acme/server-files", "version": "1.4.0", "description": "older"},
                "1.5.0": {
                    "name": "@acme/server-files", "version": "1.5.0", "description": "Files over MCP",
                    "repository": {"type": "git", "url": "git+https://github.com/acme/files.git"},
                    "homepage": "https://acme.example.test/files"
                }
            },
            "time": {"1.5.0": "2026-01-01T00:00:00.000Z"}
        })),
        _ => not_found(),
    }
}

async fn npm_stub(s: Shared) -> String {
    serve(
        Router::new()
            .route("/-/v1/search", get(npm_search))
            .route("/{name}", get(npm_document))
            .with_state(s),
    )
    .await
}

fn pypi_project(name: &str, version: &str, summary: &str) -> Value {
    json!({
        "info": {
            "name": name,
            "version": version,
            "summary": summary,
            "home_page": "",
            "keywords": "mcp",
            "project_urls": {"Homepage": format!("https://example.test/{name}"), "Repository": format!("https://github.com/acme/{name}")},
            "requires_python": ">=3.10"
        },
        "releases": {version: []},
        "urls": []
    })
}

async fn pypi_json(State(s): State<Shared>, Path(name): Path<String>) -> Response {
    if let Some(r) = s.enter(format!("json:{name}")).await {
        return r;
    }
    match name.as_str() {
        "mcp-server-time" => json_response(pypi_project(
            "mcp-server-time",
            "2026.1.0",
            "A Model Context Protocol server providing tools for time queries",
        )),
        "mcp-server-fetch" => json_response(pypi_project(
            "mcp-server-fetch",
            "2026.1.1",
            "A Model Context Protocol server providing tools to fetch web pages",
        )),
        "weather-mcp-py" => json_response(pypi_project(
            "weather-mcp-py",
            "0.2.0",
            "MCP weather server",
        )),
        "unrelated-lib" => json_response(pypi_project("unrelated-lib", "1.0.0", "nothing to see")),
        _ => not_found(),
    }
}

async fn pypi_search(
    State(s): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let query = q.get("q").cloned().unwrap_or_default();
    if let Some(r) = s.enter(format!("search:{query}")).await {
        return r;
    }
    let html = r#"<!DOCTYPE html><html><body><ul>
      <li><a class="package-snippet" href="/project/weather-mcp-py/"><h3 class="package-snippet__title">
        <span class="package-snippet__name">weather-mcp-py</span> <span class="package-snippet__version">0.2.0</span></h3></a></li>
      <li><a class="package-snippet" href="/project/unrelated-lib/"><h3 class="package-snippet__title">
        <span class="package-snippet__name">unrelated-lib</span></h3></a></li>
      <li><a class="package-snippet" href="/project/mcp-server-time/"><h3 class="package-snippet__title">
        <span class="package-snippet__name">mcp-server-time</span></h3></a></li>
    </ul></body></html>"#;
    ([(header::CONTENT_TYPE, "text/html")], html).into_response()
}

async fn pypi_stub(s: Shared) -> String {
    serve(
        Router::new()
            .route("/pypi/{name}/json", get(pypi_json))
            .route("/search/", get(pypi_search))
            .with_state(s),
    )
    .await
}

struct Stubs {
    registry: Shared,
    npm: Shared,
    pypi: Shared,
    config: MarketplaceConfig,
}

async fn stubs_with(registry: Shared, npm: Shared, pypi: Shared) -> Stubs {
    let config = MarketplaceConfig {
        mcp_registry_url: registry_stub(registry.clone()).await,
        npm_registry_url: Some(npm_stub(npm.clone()).await),
        pypi_url: Some(pypi_stub(pypi.clone()).await),
        timeout: Duration::from_secs(3),
        cache_db: None,
        cache_ttl: Duration::ZERO,
        ask_package_managers: false,
        pypi_search: true,
        pypi_curated: vec![
            "mcp-server-time".into(),
            "mcp-server-fetch".into(),
            "mcp-server-missing".into(),
        ],
    };
    Stubs {
        registry,
        npm,
        pypi,
        config,
    }
}

async fn stubs() -> Stubs {
    stubs_with(Stub::new(), Stub::new(), Stub::new()).await
}

fn names(r: &agent_discover::marketplace::BrowseResult) -> Vec<String> {
    r.servers.iter().map(|e| e.key.clone()).collect()
}

fn status(
    r: &agent_discover::marketplace::BrowseResult,
    s: MarketSource,
) -> agent_discover::marketplace::SourceStatus {
    r.sources
        .iter()
        .find(|x| x.source == s)
        .cloned()
        .expect("source reported")
}

// ---------------------------------------------------------------------------------------------------------------
// Browse.

#[tokio::test]
async fn browse_merges_sources_keeps_best_versions_and_pages_the_registry() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");

    // A limit the first registry page fills, so the cursor is handed back.
    let first = m.browse("", 2, None).await;
    assert_eq!(
        names(&first),
        [
            "registry:io.github.acme/weather",
            "registry:io.github.acme/files",
            "npm:mcp-weather",
            "npm:@acme/server-files",
            "pypi:mcp-server-time",
            "pypi:mcp-server-fetch",
        ],
        "deleted/deprecated rows, non-MCP packages and packages of registry rows are left out"
    );
    let weather = &first.servers[0];
    assert_eq!(
        weather.version.as_deref(),
        Some("1.2.0"),
        "isLatest wins over a higher version"
    );
    assert_eq!(
        first.servers[1].version.as_deref(),
        Some("10.0.0"),
        "then the highest semver wins"
    );
    assert_eq!(weather.install_method, Some(InstallMethod::Npx));
    assert_eq!(weather.runtime, Some(Runtime::Node));
    assert_eq!(
        weather.repository.as_deref(),
        Some("https://github.com/acme/servers")
    );
    assert_eq!(
        first.servers[2].repository.as_deref(),
        Some("https://github.com/acme/mcp-weather")
    );
    assert_eq!(first.servers[4].runtime, Some(Runtime::Python));
    assert_eq!(first.next_cursor.as_deref(), Some("c2"));
    for s in &first.sources {
        assert!(s.ok && !s.stale && s.error.is_none(), "{s:?}");
    }
    assert_eq!(status(&first, MarketSource::Registry).count, 2);
    assert_eq!(status(&first, MarketSource::Npm).count, 2);
    assert_eq!(status(&first, MarketSource::Pypi).count, 2);
    assert!(
        st.registry
            .seen()
            .contains(&"list?limit=2&version=latest".to_owned()),
        "{:?}",
        st.registry.seen()
    );
    let npm_seen = st.npm.seen();
    assert!(
        npm_seen.contains(&"search:keywords:mcp".to_owned())
            && npm_seen.contains(&"search:mcp".to_owned()),
        "{npm_seen:?}"
    );

    // The snake_case era and a row without the `server` wrapper, on page two.
    let second = m.browse("", 2, first.next_cursor.as_deref()).await;
    assert_eq!(
        names(&second),
        [
            "registry:io.github.legacy/snake",
            "registry:io.github.legacy/flat"
        ]
    );
    assert_eq!(
        second.sources.len(),
        1,
        "npm and PyPI answer on the first page only"
    );
    assert_eq!(
        second.next_cursor.as_deref(),
        Some("c3"),
        "legacy next_cursor is read"
    );
    let snake = &second.servers[0];
    assert_eq!(snake.version.as_deref(), Some("0.3.0"));
    assert_eq!(snake.install_method, Some(InstallMethod::Uvx));
    let pkg = &snake.packages[0];
    assert_eq!(
        (pkg.registry_type.as_str(), pkg.identifier.as_str()),
        ("pypi", "snake-mcp")
    );
    assert_eq!(pkg.runtime_hint.as_deref(), Some("uvx"));
    assert_eq!(pkg.transport.kind, "stdio");
    assert!(
        pkg.environment_variables[0].input.is_secret
            && pkg.environment_variables[0].input.is_required
    );
    assert_eq!(
        pkg.package_arguments[0].input.default.as_deref(),
        Some("8080")
    );

    let third = m.browse("", 10, Some("c3")).await;
    assert_eq!(names(&third), ["registry:io.github.acme/hosted"]);
    assert_eq!(third.servers[0].runtime, Some(Runtime::Sse));
    assert_eq!(third.next_cursor, None, "no cursor: the last page");
    assert!(
        st.registry
            .seen()
            .contains(&"list?cursor=c3&limit=10&version=latest".to_owned())
    );

    // The rows plan as they are: npm and PyPI rows carry their package.
    let npm_row = &first.servers[2];
    let plan = plan_install(npm_row, &BTreeMap::new()).expect("plan");
    assert_eq!(plan.launch.args, ["-y", "mcp-weather@0.4.0"]);
    let legacy = plan_install(
        snake,
        &BTreeMap::from([("SNAKE_TOKEN".to_owned(), "s3cret".to_owned())]),
    )
    .expect("plan");
    assert_eq!(
        legacy.launch.args,
        ["snake-mcp==0.3.0", "--port", "8080"],
        "an old flag without dashes gets --"
    );
    assert_eq!(
        legacy.secrets.get("SNAKE_TOKEN").map(String::as_str),
        Some("s3cret")
    );
}

/// A registry page shorter than `limit` is followed by the next ones (asking for what is missing) until `limit` is
/// reached or the registry has no more; the cursor handed back continues after the last page read.
#[tokio::test]
async fn browse_fills_the_limit_by_following_the_registry_cursor() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let r = m.browse("", 10, None).await;
    let registry: Vec<String> = names(&r)
        .into_iter()
        .filter(|n| n.starts_with("registry:"))
        .collect();
    assert_eq!(
        registry,
        [
            "registry:io.github.acme/weather",
            "registry:io.github.acme/files",
            "registry:io.github.legacy/snake",
            "registry:io.github.legacy/flat",
            "registry:io.github.acme/hosted",
        ]
    );
    assert_eq!(r.next_cursor, None, "the registry ran out before the limit");
    let seen = st.registry.seen();
    for asked in [
        "list?limit=10&version=latest",
        "list?cursor=c2&limit=8&version=latest",
        "list?cursor=c3&limit=6&version=latest",
    ] {
        assert!(seen.contains(&asked.to_owned()), "{asked} not in {seen:?}");
    }
    // Filled: the cursor of the last page read is handed back. (This stub ignores `limit` on page two and sends both
    // of its rows; nothing read is dropped, since the cursor continues after them.)
    let r = m.browse("", 3, None).await;
    assert_eq!(status(&r, MarketSource::Registry).count, 4);
    assert_eq!(r.next_cursor.as_deref(), Some("c3"));
    let rest = m.browse("", 3, r.next_cursor.as_deref()).await;
    assert_eq!(names(&rest), ["registry:io.github.acme/hosted"]);
}

#[tokio::test]
async fn browse_serializes_as_snake_case_json() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let r = m.browse("", 2, None).await;
    let v = serde_json::to_value(&r).expect("serializes");
    let row = &v["servers"][0];
    assert_eq!(row["key"], "registry:io.github.acme/weather");
    assert_eq!(row["source"], "registry");
    assert_eq!(row["install_method"], "npx");
    assert_eq!(row["runtime"], "node");
    assert_eq!(row["packages"][0]["registry_type"], "npm");
    assert_eq!(v["next_cursor"], "c2");
    assert_eq!(v["sources"][0]["source"], "registry");
    assert_eq!(v["sources"][0]["stale"], false);
}

#[tokio::test]
async fn the_query_reaches_every_source_and_filters_the_curated_pypi_list() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let r = m.browse("  time ", 3, None).await;
    assert!(
        st.registry
            .seen()
            .contains(&"list?limit=3&search=time&version=latest".to_owned()),
        "{:?}",
        st.registry.seen()
    );
    let npm_seen = st.npm.seen();
    assert!(
        npm_seen.contains(&"search:time keywords:mcp".to_owned())
            && npm_seen.contains(&"search:time mcp".to_owned()),
        "{npm_seen:?}"
    );
    let pypi_seen = st.pypi.seen();
    assert!(
        pypi_seen.contains(&"json:mcp-server-time".to_owned()),
        "{pypi_seen:?}"
    );
    assert!(
        !pypi_seen.contains(&"json:mcp-server-fetch".to_owned()),
        "curated names are filtered by the query: {pypi_seen:?}"
    );
    assert!(
        pypi_seen.contains(&"search:time mcp".to_owned()),
        "{pypi_seen:?}"
    );
    let pypi_rows: Vec<_> = r
        .servers
        .iter()
        .filter(|e| e.source == MarketSource::Pypi)
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(
        pypi_rows,
        ["mcp-server-time", "weather-mcp-py"],
        "search hits are added once, non-MCP ones dropped"
    );
    assert!(
        r.servers
            .iter()
            .filter(|e| e.source == MarketSource::Npm)
            .count()
            <= 3,
        "limit applies per source"
    );
}

#[tokio::test]
async fn collect_follows_the_cursor_until_it_is_empty() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let all = m.collect_registry("", 1000).await.expect("collect");
    let names: Vec<_> = all.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "io.github.acme/weather",
            "io.github.acme/files",
            "io.github.legacy/snake",
            "io.github.legacy/flat",
            "io.github.acme/hosted"
        ]
    );
    let lists: Vec<_> = st
        .registry
        .seen()
        .into_iter()
        .filter(|r| r.starts_with("list?"))
        .collect();
    assert_eq!(
        lists,
        [
            "list?limit=100&version=latest",
            "list?cursor=c2&limit=100&version=latest",
            "list?cursor=c3&limit=100&version=latest"
        ]
    );
}

#[tokio::test]
async fn a_source_that_never_answers_fails_alone_and_quickly() {
    let mut st = stubs_with(Stub::new(), Stub::hanging(), Stub::new()).await;
    st.config.timeout = Duration::from_millis(400);
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let started = Instant::now();
    let r = m.browse("", 10, None).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    let npm = status(&r, MarketSource::Npm);
    assert!(!npm.ok && !npm.stale && npm.count == 0, "{npm:?}");
    let err = npm.error.unwrap_or_default();
    assert!(err.contains("no complete answer within 400 ms"), "{err}");
    assert!(status(&r, MarketSource::Registry).ok);
    assert!(status(&r, MarketSource::Pypi).ok);
    assert!(r.servers.iter().any(|e| e.source == MarketSource::Registry));
    assert!(r.servers.iter().any(|e| e.source == MarketSource::Pypi));
    assert!(r.servers.iter().all(|e| e.source != MarketSource::Npm));
}

#[tokio::test]
async fn malformed_json_is_reported_and_typed() {
    let st = stubs_with(Stub::malformed(), Stub::new(), Stub::new()).await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let r = m.browse("", 10, None).await;
    let reg = status(&r, MarketSource::Registry);
    assert!(!reg.ok, "{reg:?}");
    assert!(
        reg.error
            .as_deref()
            .unwrap_or_default()
            .contains("not the expected JSON"),
        "{reg:?}"
    );
    assert!(status(&r, MarketSource::Npm).ok, "the others still answer");
    assert_eq!(r.next_cursor, None);

    let healthy = stubs().await;
    let m = Marketplace::new(healthy.config.clone()).expect("marketplace");
    match m.lookup("io.github.acme/broken").await {
        Err(MarketError::Malformed { registry, url, .. }) => {
            assert_eq!(registry, MarketSource::Registry);
            assert!(
                url.ends_with("/v0.1/servers/io.github.acme%2Fbroken/versions/latest"),
                "{url}"
            );
        }
        other => panic!("expected a malformed-response error, got {other:?}"),
    }
}

#[tokio::test]
async fn lookup_asks_registry_then_npm_then_pypi() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");

    let e = m
        .lookup("io.github.acme/weather")
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(
        (e.source, e.version.as_deref()),
        (MarketSource::Registry, Some("1.2.0"))
    );
    assert!(
        st.registry
            .seen()
            .contains(&"latest:io.github.acme/weather".to_owned())
    );

    assert_eq!(
        m.lookup("io.github.nobody/none")
            .await
            .expect("a 404 is not an error"),
        None
    );

    let files = m
        .lookup("@acme/server-files")
        .await
        .expect("lookup")
        .expect("found on npm");
    assert_eq!(files.key, "npm:@acme/server-files");
    assert_eq!(
        files.version.as_deref(),
        Some("1.5.0"),
        "latest from dist-tags"
    );
    assert_eq!(files.description, "Files over MCP");
    assert_eq!(
        files.repository.as_deref(),
        Some("https://github.com/acme/files")
    );
    assert!(st.npm.seen().contains(&"doc:@acme/server-files".to_owned()));

    let time = m
        .lookup("mcp-server-time")
        .await
        .expect("lookup")
        .expect("npm 404, then PyPI");
    assert_eq!(
        (time.source, time.version.as_deref()),
        (MarketSource::Pypi, Some("2026.1.0"))
    );
    assert_eq!(
        time.repository.as_deref(),
        Some("https://github.com/acme/mcp-server-time")
    );
    assert!(
        st.npm.seen().contains(&"doc:mcp-server-time".to_owned()),
        "npm is asked before PyPI"
    );

    let only = m
        .lookup("pypi:mcp-server-fetch")
        .await
        .expect("lookup")
        .expect("found");
    assert_eq!(only.key, "pypi:mcp-server-fetch");
    assert_eq!(m.lookup("npm:does-not-exist").await.expect("lookup"), None);

    for hostile in ["x; rm -rf /", "../../etc/passwd", "npm:a/b/c", ""] {
        assert!(
            matches!(
                m.lookup(hostile).await,
                Err(MarketError::InvalidName { .. })
            ),
            "{hostile:?} must be refused before any request"
        );
    }
}

#[tokio::test]
async fn an_unconfigured_source_says_so_and_the_others_continue() {
    let mut st = stubs().await;
    st.config.npm_registry_url = None;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let r = m.browse("", 10, None).await;
    let npm = status(&r, MarketSource::Npm);
    let err = npm.error.clone().unwrap_or_default();
    assert!(
        !npm.ok
            && err.contains("not configured")
            && err.contains("AGENT_DISCOVER_NPM_REGISTRY_URL"),
        "{err}"
    );
    assert!(status(&r, MarketSource::Registry).ok && status(&r, MarketSource::Pypi).ok);
    assert!(matches!(
        m.address(MarketSource::Npm).await,
        Err(MarketError::NotConfigured {
            registry: MarketSource::Npm,
            ..
        })
    ));
}

// ---------------------------------------------------------------------------------------------------------------
// Cache.

#[tokio::test]
async fn a_source_that_goes_down_is_served_from_the_cache_marked_stale() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut st = stubs().await;
    st.config.cache_db = Some(dir.path().join("cache").join("market.db"));
    st.config.cache_ttl = Duration::ZERO; // always ask the source
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let fresh = m.browse("", 2, None).await;
    assert!(fresh.sources.iter().all(|s| s.ok && !s.stale));

    for s in [&st.registry, &st.npm, &st.pypi] {
        s.down.store(true, Ordering::SeqCst);
    }
    // A new process on the same file sees the same cache.
    let again = Marketplace::new(st.config.clone()).expect("marketplace");
    let stale = again.browse("", 2, None).await;
    assert_eq!(names(&stale), names(&fresh));
    assert_eq!(stale.next_cursor.as_deref(), Some("c2"));
    for s in &stale.sources {
        assert!(!s.ok && s.stale, "{s:?}");
        assert!(s.error.is_some(), "{s:?}");
    }
    assert!(
        status(&stale, MarketSource::Registry)
            .error
            .unwrap_or_default()
            .contains("503")
    );

    // Nothing cached for this query: failed, not stale. (PyPI has no curated name matching it and its search page
    // is best effort, so it answers "nothing" rather than failing.)
    let other = again.browse("never-asked", 10, None).await;
    assert!(other.servers.is_empty());
    for s in [MarketSource::Registry, MarketSource::Npm] {
        let st = status(&other, s);
        assert!(!st.ok && !st.stale, "{st:?}");
    }
}

#[tokio::test]
async fn a_fresh_cached_answer_is_served_without_asking() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut st = stubs().await;
    st.config.cache_db = Some(dir.path().join("market.db"));
    st.config.cache_ttl = Duration::from_secs(600);
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let a = m.browse("weather", 10, None).await;
    let hits = st.registry.hits.load(Ordering::SeqCst);
    let b = m.browse("weather", 10, None).await;
    assert_eq!(
        st.registry.hits.load(Ordering::SeqCst),
        hits,
        "the registry was not asked again"
    );
    assert_eq!(names(&a), names(&b));
    assert!(b.sources.iter().all(|s| s.ok && !s.stale));
    // Another limit is another key.
    m.browse("weather", 5, None).await;
    assert!(st.registry.hits.load(Ordering::SeqCst) > hits);
}

// ---------------------------------------------------------------------------------------------------------------
// Installer.

fn entry(server: Value) -> agent_discover::marketplace::MarketEntry {
    parse_server_json(&server).expect("a server.json with a name")
}

fn inputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn npm_package_becomes_npx_with_arguments_in_order() {
    let e = entry(json!({
        "name": "io.github.acme/weather",
        "description": "Weather",
        "version": "1.2.3",
        "repository": {"url": "https://github.com/acme/weather", "source": "github"},
        "packages": [{
            "registryType": "npm",
            "identifier": "@acme/weather-mcp",
            "version": "1.2.3",
            "runtimeHint": "npx",
            "transport": {"type": "stdio"},
            "runtimeArguments": [
                {"type": "named", "name": "--node-options", "value": "--max-old-space-size=256"}
            ],
            "packageArguments": [
                {"type": "positional", "valueHint": "target_dir", "default": "/srv/data", "isRequired": true},
                {"type": "named", "name": "--mode", "default": "local", "choices": ["local", "cached"]},
                {"type": "named", "name": "--port", "description": "optional, no default"},
                {"type": "named", "name": "--verbose", "format": "boolean", "default": "true"},
                {"type": "named", "name": "--dry-run", "format": "boolean", "default": "false"},
                {"type": "named", "name": "--level=", "default": "3"}
            ],
            "environmentVariables": [
                {"name": "LOG_LEVEL", "default": "info"},
                {"name": "WEATHER_API_KEY", "isSecret": true, "isRequired": true, "description": "API key"}
            ]
        }]
    }));
    let plan = plan_install(
        &e,
        &inputs(&[("WEATHER_API_KEY", "k-123"), ("mode", "cached")]),
    )
    .expect("plan");
    assert_eq!(plan.method, InstallMethod::Npx);
    assert_eq!(plan.name, "weather");
    assert_eq!(plan.launch.command.as_deref(), Some("npx"));
    assert_eq!(
        plan.launch.args,
        [
            "-y",
            "--node-options=--max-old-space-size=256",
            "@acme/weather-mcp@1.2.3",
            "/srv/data",
            "--mode",
            "cached",
            "--verbose",
            "--level=3"
        ]
    );
    assert_eq!(plan.launch.transport, Transport::Stdio);
    assert_eq!(
        plan.launch.env,
        BTreeMap::from([("LOG_LEVEL".to_owned(), "info".to_owned())])
    );
    assert_eq!(
        plan.secrets,
        BTreeMap::from([("WEATHER_API_KEY".to_owned(), "k-123".to_owned())])
    );
    assert!(plan.missing.is_empty(), "{:?}", plan.missing);
    assert_eq!(plan.package_name.as_deref(), Some("@acme/weather-mcp"));
    assert_eq!(plan.package_version.as_deref(), Some("1.2.3"));
    assert_eq!(
        plan.repository.as_deref(),
        Some("https://github.com/acme/weather")
    );
    assert_eq!(
        plan.warm,
        Some((
            "npm".to_owned(),
            vec![
                "cache".to_owned(),
                "add".to_owned(),
                "@acme/weather-mcp@1.2.3".to_owned()
            ]
        ))
    );

    // A value outside `choices` is refused.
    assert!(matches!(
        plan_install(
            &e,
            &inputs(&[("WEATHER_API_KEY", "k"), ("--mode", "proxy")])
        ),
        Err(InstallError::InvalidValue { .. })
    ));
    // Secrets never show in serialized or debug output.
    let shown = serde_json::to_string(&plan).expect("serializes");
    assert!(
        !shown.contains("k-123") && shown.contains("WEATHER_API_KEY"),
        "{shown}"
    );
    assert!(!format!("{plan:?}").contains("k-123"));
}

#[test]
fn pypi_package_becomes_uvx() {
    let e = entry(json!({
        "name": "io.github.modelcontextprotocol/time",
        "description": "Time",
        "version": "2026.1.0",
        "packages": [{
            "registryType": "pypi",
            "identifier": "mcp-server-time",
            "version": "2026.1.0",
            "transport": {"type": "stdio"},
            "runtimeArguments": [{"type": "named", "name": "--python", "value": "3.12"}],
            "packageArguments": [{"type": "named", "name": "--local-timezone", "isRequired": true}]
        }]
    }));
    let plan = plan_install(&e, &inputs(&[("local-timezone", "Europe/Paris")])).expect("plan");
    assert_eq!(plan.method, InstallMethod::Uvx);
    assert_eq!(plan.launch.command.as_deref(), Some("uvx"));
    assert_eq!(
        plan.launch.args,
        [
            "--python",
            "3.12",
            "mcp-server-time==2026.1.0",
            "--local-timezone",
            "Europe/Paris"
        ]
    );
    assert_eq!(
        plan.warm,
        Some((
            "uv".to_owned(),
            vec![
                "tool".to_owned(),
                "install".to_owned(),
                "mcp-server-time==2026.1.0".to_owned()
            ]
        ))
    );
    assert_eq!(plan.name, "time");
}

#[test]
fn oci_package_becomes_docker_run_with_env_passed_by_name() {
    let e = entry(json!({
        "name": "io.github.example/database-manager",
        "description": "DB",
        "version": "3.1.0",
        "packages": [{
            "registryType": "oci",
            "identifier": "ghcr.io/example/database-manager-mcp",
            "version": "3.1.0",
            "transport": {"type": "stdio"},
            "runtimeArguments": [
                {"type": "named", "name": "-e", "value": "DB_TYPE={db_type}",
                 "variables": {"db_type": {"isRequired": true, "choices": ["postgres", "mysql"]}}}
            ],
            "packageArguments": [{"type": "positional", "valueHint": "database_name", "isRequired": true}],
            "environmentVariables": [
                {"name": "DB_USERNAME", "isRequired": true},
                {"name": "DB_PASSWORD", "isRequired": true, "isSecret": true}
            ]
        }]
    }));
    let plan = plan_install(
        &e,
        &inputs(&[
            ("db_type", "postgres"),
            ("database_name", "orders"),
            ("DB_USERNAME", "app"),
            ("DB_PASSWORD", "pw"),
        ]),
    )
    .expect("plan");
    assert_eq!(plan.method, InstallMethod::Docker);
    assert_eq!(plan.launch.command.as_deref(), Some("docker"));
    assert_eq!(
        plan.launch.args,
        [
            "run",
            "-i",
            "--rm",
            "-e",
            "DB_PASSWORD",
            "-e",
            "DB_USERNAME",
            "-e",
            "DB_TYPE=postgres",
            "ghcr.io/example/database-manager-mcp:3.1.0",
            "orders"
        ]
    );
    assert_eq!(
        plan.launch.env.get("DB_USERNAME").map(String::as_str),
        Some("app")
    );
    assert!(
        !plan.launch.env.contains_key("DB_PASSWORD"),
        "secrets are not in env"
    );
    assert_eq!(
        plan.secrets.get("DB_PASSWORD").map(String::as_str),
        Some("pw")
    );
    assert!(
        !plan.launch.args.iter().any(|a| a.contains("pw")),
        "no secret on the command line"
    );
    assert_eq!(
        plan.warm,
        Some((
            "docker".to_owned(),
            vec![
                "pull".to_owned(),
                "ghcr.io/example/database-manager-mcp:3.1.0".to_owned()
            ]
        ))
    );
    assert!(matches!(
        plan_install(&e, &inputs(&[("db_type", "oracle")])),
        Err(InstallError::InvalidValue { .. })
    ));

    // An image that is already tagged keeps its tag; the legacy `docker` registry name reads as oci.
    let tagged = entry(json!({
        "name": "io.github.mcp/filesystem", "description": "fs", "version": "1.0.2",
        "packages": [{"registry_name": "docker", "name": "docker.io/mcp/filesystem:1.0.2", "version": "1.0.2"}]
    }));
    let plan = plan_install(&tagged, &BTreeMap::new()).expect("plan");
    assert_eq!(
        plan.launch.args,
        ["run", "-i", "--rm", "docker.io/mcp/filesystem:1.0.2"]
    );
}

#[test]
fn remote_fills_url_variables_and_keeps_secret_headers_secret() {
    let e = entry(json!({
        "server": {
            "name": "com.example/hosted",
            "description": "Hosted",
            "version": "1.0.0",
            "packages": [{"registryType": "nuget", "identifier": "Example.Server", "version": "1.0.0"}],
            "remotes": [
                {
                    "type": "streamable-http",
                    "url": "https://{tenant}.mcp.example.test/{region}/mcp",
                    "variables": {
                        "tenant": {"isRequired": true, "description": "Tenant id"},
                        "region": {"default": "eu"}
                    },
                    "headers": [
                        {"name": "Authorization", "value": "Bearer {token}",
                         "variables": {"token": {"isRequired": true, "isSecret": true, "description": "API token"}}},
                        {"name": "X-API-Key", "isRequired": true, "isSecret": true},
                        {"name": "X-Client", "default": "agent-discover"}
                    ]
                },
                {"type": "sse", "url": "https://sse.example.test/sse"}
            ]
        },
        "_meta": {OFFICIAL: {"status": "active", "isLatest": true}}
    }));
    assert_eq!(
        e.install_method,
        Some(InstallMethod::Remote),
        "nuget is not installable here; the remote is"
    );
    let plan = plan_install(
        &e,
        &inputs(&[("tenant", "acme"), ("token", "t0k"), ("X-API-Key", "k3y")]),
    )
    .expect("plan");
    assert_eq!(plan.method, InstallMethod::Remote);
    assert_eq!(plan.launch.transport, Transport::StreamableHttp);
    assert_eq!(plan.launch.command, None);
    assert_eq!(
        plan.launch.url.as_deref(),
        Some("https://acme.mcp.example.test/eu/mcp")
    );
    assert_eq!(
        plan.launch.headers,
        BTreeMap::from([
            ("Authorization".to_owned(), "Bearer ${token}".to_owned()),
            ("X-API-Key".to_owned(), "${X-API-Key}".to_owned()),
            ("X-Client".to_owned(), "agent-discover".to_owned()),
        ])
    );
    assert_eq!(
        plan.secrets,
        BTreeMap::from([
            ("X-API-Key".to_owned(), "k3y".to_owned()),
            ("token".to_owned(), "t0k".to_owned())
        ])
    );
    assert!(plan.missing.is_empty(), "{:?}", plan.missing);
    assert_eq!(plan.warm, None);

    // Nothing supplied: every required value is listed, with its kind.
    let plan = plan_install(&e, &BTreeMap::new()).expect("plan");
    let missing: Vec<_> = plan
        .missing
        .iter()
        .map(|m| (m.name.as_str(), m.kind, m.is_secret))
        .collect();
    assert_eq!(
        missing,
        [
            ("tenant", InputKind::Variable, false),
            ("token", InputKind::Variable, true),
            ("X-API-Key", InputKind::Header, true),
        ]
    );
    assert_eq!(plan.missing[0].description, "Tenant id");

    // An SSE remote.
    let sse_only = entry(json!({
        "name": "com.example/sse", "description": "s", "version": "1",
        "remotes": [{"type": "sse", "url": "https://sse.example.test/sse"}]
    }));
    let plan = plan_install(&sse_only, &BTreeMap::new()).expect("plan");
    assert_eq!(plan.launch.transport, Transport::Sse);
    assert_eq!(
        plan.launch.url.as_deref(),
        Some("https://sse.example.test/sse")
    );

    // A URL that is not http(s) after filling is refused.
    let bad = entry(json!({
        "name": "com.example/bad", "description": "b", "version": "1",
        "remotes": [{"type": "streamable-http", "url": "{scheme}://x.example.test", "variables": {"scheme": {"default": "file"}}}]
    }));
    assert!(matches!(
        plan_install(&bad, &BTreeMap::new()),
        Err(InstallError::InvalidUrl { .. })
    ));
}

#[test]
fn missing_required_values_are_listed_not_guessed() {
    let e = entry(json!({
        "name": "io.github.acme/needs", "description": "n", "version": "1.0.0",
        "packages": [{
            "registryType": "npm", "identifier": "needs-mcp", "version": "1.0.0",
            "packageArguments": [{"type": "positional", "valueHint": "workspace", "isRequired": true, "description": "Folder"}],
            "environmentVariables": [
                {"name": "NEEDS_TOKEN", "isRequired": true, "isSecret": true, "description": "Token"},
                {"name": "NEEDS_URL", "isRequired": true},
                {"name": "OPTIONAL_THING"}
            ]
        }]
    }));
    let plan = plan_install(&e, &BTreeMap::new()).expect("a plan that lists what is missing");
    let missing: Vec<_> = plan
        .missing
        .iter()
        .map(|m| (m.name.as_str(), m.kind, m.is_secret))
        .collect();
    assert_eq!(
        missing,
        [
            ("NEEDS_TOKEN", InputKind::Env, true),
            ("NEEDS_URL", InputKind::Env, false),
            ("workspace", InputKind::Argument, false),
        ]
    );
    assert_eq!(plan.missing[0].description, "Token");
    assert_eq!(plan.launch.args, ["-y", "needs-mcp@1.0.0"]);
    assert!(plan.launch.env.is_empty() && plan.secrets.is_empty());
}

#[test]
fn hostile_identifiers_versions_and_values_are_refused() {
    let hostile = [
        "x; rm -rf /",
        "../../etc",
        "-rf",
        "a b",
        "a\nb",
        "$(id)",
        "`id`",
        "a|b",
        "pkg\u{0}",
    ];
    for registry_type in ["npm", "pypi", "oci"] {
        for id in hostile {
            let e = entry(json!({
                "name": "io.github.evil/x", "description": "x", "version": "1.0.0",
                "packages": [{"registryType": registry_type, "identifier": id, "version": "1.0.0"}]
            }));
            let got = plan_install(&e, &BTreeMap::new());
            assert!(
                matches!(got, Err(InstallError::InvalidIdentifier { .. })),
                "{registry_type} {id:?} gave {got:?}"
            );
        }
    }
    let bad_version = entry(json!({
        "name": "io.github.evil/v", "description": "v", "version": "1",
        "packages": [{"registryType": "npm", "identifier": "ok-pkg", "version": "1.0.0 --registry=http://evil"}]
    }));
    assert!(matches!(
        plan_install(&bad_version, &BTreeMap::new()),
        Err(InstallError::InvalidVersion { .. })
    ));
    let loader = entry(json!({
        "name": "io.github.evil/env", "description": "e", "version": "1",
        "packages": [{"registryType": "npm", "identifier": "ok-pkg", "version": "1.0.0",
                      "environmentVariables": [{"name": "LD_PRELOAD", "default": "/tmp/x.so"}]}]
    }));
    assert!(matches!(
        plan_install(&loader, &BTreeMap::new()),
        Err(InstallError::InvalidValue { .. })
    ));
    let header = entry(json!({
        "name": "io.github.evil/h", "description": "h", "version": "1",
        "remotes": [{"type": "sse", "url": "https://x.example.test/sse", "headers": [{"name": "X-Id", "isRequired": true}]}]
    }));
    assert!(matches!(
        plan_install(&header, &inputs(&[("X-Id", "a\r\nInjected: yes")])),
        Err(InstallError::InvalidValue { .. })
    ));
    let flag = entry(json!({
        "name": "io.github.evil/f", "description": "f", "version": "1",
        "packages": [{"registryType": "npm", "identifier": "ok-pkg", "version": "1.0.0",
                      "packageArguments": [{"type": "named", "name": "--x --y", "default": "1"}]}]
    }));
    assert!(matches!(
        plan_install(&flag, &BTreeMap::new()),
        Err(InstallError::InvalidValue { .. })
    ));
}

#[test]
fn the_caller_can_choose_the_method() {
    let e = entry(json!({
        "name": "io.github.acme/both", "description": "b", "version": "1.0.0",
        "packages": [
            {"registryType": "oci", "identifier": "acme/both", "version": "1.0.0"},
            {"registryType": "pypi", "identifier": "both-mcp", "version": "1.0.0"},
            {"registryType": "npm", "identifier": "both-mcp", "version": "1.0.0"}
        ],
        "remotes": [{"type": "streamable-http", "url": "https://both.example.test/mcp"}]
    }));
    assert_eq!(
        plan_install(&e, &BTreeMap::new()).expect("plan").method,
        InstallMethod::Npx,
        "npm first"
    );
    for m in [
        InstallMethod::Uvx,
        InstallMethod::Docker,
        InstallMethod::Remote,
    ] {
        assert_eq!(
            plan_install_with(&e, &BTreeMap::new(), Some(m))
                .expect("plan")
                .method,
            m
        );
    }
    let only_npm = entry(json!({
        "name": "io.github.acme/one", "description": "o", "version": "1",
        "packages": [{"registryType": "npm", "identifier": "one", "version": "1.0.0"}]
    }));
    assert!(matches!(
        plan_install_with(&only_npm, &BTreeMap::new(), Some(InstallMethod::Docker)),
        Err(InstallError::MethodUnavailable { .. })
    ));
    let nuget = entry(json!({
        "name": "io.github.acme/dotnet", "description": "d", "version": "1",
        "packages": [{"registryType": "nuget", "identifier": "Acme.Server", "version": "1.0.0"}]
    }));
    assert_eq!(nuget.install_method, None);
    let err = plan_install(&nuget, &BTreeMap::new()).expect_err("no supported method");
    assert!(matches!(err, InstallError::NoInstallMethod { .. }));
    assert!(err.to_string().contains("nuget package"), "{err}");
}

#[tokio::test]
async fn warm_cache_runs_only_download_commands() {
    for cmd in [
        ("sh", vec!["-c", "id"]),
        ("npm", vec!["exec", "something"]),
        ("uv", vec!["tool", "run", "x"]),
        ("docker", vec!["run", "x"]),
        (
            "npm",
            vec!["cache", "add", "--registry=http://127.0.0.1:1/"],
        ),
    ] {
        let cmd = (
            cmd.0.to_owned(),
            cmd.1.into_iter().map(str::to_owned).collect::<Vec<_>>(),
        );
        assert!(
            matches!(
                warm_cache(&cmd).await,
                Err(InstallError::UnsupportedCommand { .. })
            ),
            "{cmd:?} must be refused"
        );
    }
}

#[tokio::test]
async fn prerequisites_are_probed_in_parallel() {
    let started = Instant::now();
    let p = probe_prereqs().await;
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "took {:?}",
        started.elapsed()
    );
    for v in [&p.npx, &p.uvx, &p.uv, &p.docker].into_iter().flatten() {
        assert!(v.chars().any(|c| c.is_ascii_digit()), "a version line: {v}");
    }
}

/// `introspect --top N`'s sources: npm's search (both queries, MCP-related packages only, in the search's order when it
/// reports no downloads) and PyPI's curated list first.
#[tokio::test]
async fn the_most_downloaded_servers_come_from_the_searches() {
    let st = stubs().await;
    let m = Marketplace::new(st.config.clone()).expect("marketplace");
    let npm = m.top_npm(2).await.expect("npm top");
    assert_eq!(
        npm,
        ["mcp-weather", "@acme/server-files"],
        "left-pad and random-lib are not MCP servers"
    );
    let seen = st.npm.seen();
    assert!(seen.contains(&"search:keywords:mcp".to_owned()), "{seen:?}");
    let all = m.top_npm(10).await.expect("npm top");
    assert_eq!(
        all,
        ["mcp-weather", "@acme/server-files", "@acme/weather-mcp"]
    );
    let pypi = m.top_pypi(1).await.expect("pypi top");
    assert_eq!(pypi, [st.config.pypi_curated[0].clone()]);
}
