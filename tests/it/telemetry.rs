//! Issue 29, part 3: OpenTelemetry traces end to end. An OTLP/HTTP receiver in the test (axum on 127.0.0.1) takes
//! what agent-discover exports, in `http/protobuf` (decoded here by a small wire-format reader) and `http/json`;
//! real MCP clients (rmcp) call fixture tools through the proxy with a W3C traceparent, in both protocol eras, over
//! stdio and Streamable HTTP. Checked: the spans' trace id, their parents (client's span -> served request ->
//! proxied call), names, kinds and attributes, and the trace context the child received. With tracing off, nothing
//! is sent and nothing is passed on; gRPC is refused at start-up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use rmcp::model::*;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::Notify;

use crate::harness;

pub(crate) const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub(crate) const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// One exported span, from either encoding.
#[derive(Debug, Clone)]
pub(crate) struct Got {
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    pub(crate) parent: String,
    pub(crate) name: String,
    pub(crate) kind: u64,
    pub(crate) attrs: HashMap<String, String>,
    /// 2: error.
    pub(crate) status: u64,
}

/// What the receiver took: each request's content type, resource attributes and spans.
#[derive(Default)]
pub(crate) struct Received {
    requests: Mutex<Vec<String>>,
    resource: Mutex<HashMap<String, String>>,
    spans: Mutex<Vec<Got>>,
    notify: Notify,
    /// The answers to give, in order, before 200s: (status, Retry-After); the spans of an answered-with-an-error
    /// request are not kept (a collector that refused them).
    pub(crate) answers: Mutex<std::collections::VecDeque<(u16, Option<&'static str>)>>,
    /// Every request: its status and the ids of the spans it carried, in the order they came.
    pub(crate) log: Mutex<Vec<(u16, Vec<String>, std::time::Instant)>>,
}

impl Received {
    /// Waits (bounded) until the spans satisfy `done`; the spans then.
    pub(crate) async fn wait(&self, what: &str, done: impl Fn(&[Got]) -> bool) -> Vec<Got> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let notified = self.notify.notified();
            {
                let spans = self.spans.lock().unwrap();
                if done(&spans) {
                    return spans.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!(
                    "no {what} in time; spans: {:#?}",
                    self.spans.lock().unwrap()
                );
            }
        }
    }
}

async fn take(
    State(r): State<Arc<Received>>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let ct = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (resource, spans) = if ct == "application/x-protobuf" {
        decode_protobuf(&body)
    } else {
        decode_json(&serde_json::from_slice(&body).expect("OTLP/JSON body"))
    };
    let answer = r.answers.lock().unwrap().pop_front();
    let (status, retry_after) = answer.unwrap_or((200, None));
    let ids = spans.iter().map(|s| s.span_id.clone()).collect();
    r.log
        .lock()
        .unwrap()
        .push((status, ids, std::time::Instant::now()));
    if status == 200 {
        r.requests.lock().unwrap().push(ct);
        r.resource.lock().unwrap().extend(resource);
        r.spans.lock().unwrap().extend(spans);
    }
    r.notify.notify_waiters();
    let mut response =
        axum::response::IntoResponse::into_response(StatusCode::from_u16(status).unwrap());
    if let Some(after) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", after.parse().unwrap());
    }
    response
}

/// An OTLP/HTTP receiver on 127.0.0.1; its base URL.
pub(crate) async fn receiver() -> (Arc<Received>, String) {
    let received = Arc::new(Received::default());
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(take))
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (received, url)
}

// --- a small protobuf reader ------------------------------------------------------------------------------------

enum Field<'a> {
    Int(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let byte = b[*i];
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// The fields of one message, in order: (number, value); fixed-width values read as integers.
fn fields(b: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i);
        let value = match key & 7 {
            0 => Field::Int(varint(b, &mut i)),
            1 => {
                i += 8;
                Field::Int(u64::from_le_bytes(b[i - 8..i].try_into().unwrap()))
            }
            2 => {
                let n = varint(b, &mut i) as usize;
                i += n;
                Field::Bytes(&b[i - n..i])
            }
            5 => {
                i += 4;
                Field::Int(u64::from(u32::from_le_bytes(
                    b[i - 4..i].try_into().unwrap(),
                )))
            }
            w => panic!("wire type {w}"),
        };
        out.push((key >> 3, value));
    }
    out
}

fn sub(b: &[u8], n: u64) -> Vec<&[u8]> {
    fields(b)
        .into_iter()
        .filter_map(|(f, v)| match (f == n, v) {
            (true, Field::Bytes(x)) => Some(x),
            _ => None,
        })
        .collect()
}

fn int(b: &[u8], n: u64) -> u64 {
    fields(b)
        .into_iter()
        .find_map(|(f, v)| match (f == n, v) {
            (true, Field::Int(x)) => Some(x),
            _ => None,
        })
        .unwrap_or(0)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn string(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

/// KeyValue (key = 1, value = 2: AnyValue string = 1, bool = 2, int = 3) as text.
fn key_values(list: Vec<&[u8]>) -> HashMap<String, String> {
    list.into_iter()
        .map(|kv| {
            let key = string(sub(kv, 1)[0]);
            let any = sub(kv, 2)[0];
            let value = match fields(any).into_iter().next() {
                Some((1, Field::Bytes(s))) => string(s),
                Some((2, Field::Int(b))) => (b == 1).to_string(),
                Some((3, Field::Int(n))) => (n as i64).to_string(),
                _ => panic!("unexpected AnyValue"),
            };
            (key, value)
        })
        .collect()
}

fn decode_protobuf(b: &[u8]) -> (HashMap<String, String>, Vec<Got>) {
    let mut resource = HashMap::new();
    let mut spans = Vec::new();
    for rs in sub(b, 1) {
        for r in sub(rs, 1) {
            resource.extend(key_values(sub(r, 1)));
        }
        for ss in sub(rs, 2) {
            for s in sub(ss, 2) {
                spans.push(Got {
                    trace_id: hex(sub(s, 1)[0]),
                    span_id: hex(sub(s, 2)[0]),
                    parent: sub(s, 4).first().map(|p| hex(p)).unwrap_or_default(),
                    name: string(sub(s, 5)[0]),
                    kind: int(s, 6),
                    attrs: key_values(sub(s, 9)),
                    status: sub(s, 15).first().map(|st| int(st, 3)).unwrap_or(0),
                });
            }
        }
    }
    (resource, spans)
}

fn json_attrs(v: &Value) -> HashMap<String, String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|kv| {
            let value = &kv["value"];
            let text = value["stringValue"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| value["intValue"].as_str().map(str::to_owned))
                .or_else(|| value["boolValue"].as_bool().map(|b| b.to_string()))
                .expect("a string, int or bool value");
            (kv["key"].as_str().unwrap().to_owned(), text)
        })
        .collect()
}

fn decode_json(v: &Value) -> (HashMap<String, String>, Vec<Got>) {
    let mut resource = HashMap::new();
    let mut spans = Vec::new();
    for rs in v["resourceSpans"].as_array().unwrap() {
        resource.extend(json_attrs(&rs["resource"]["attributes"]));
        for ss in rs["scopeSpans"].as_array().unwrap() {
            for s in ss["spans"].as_array().unwrap() {
                spans.push(Got {
                    trace_id: s["traceId"].as_str().unwrap().to_owned(),
                    span_id: s["spanId"].as_str().unwrap().to_owned(),
                    parent: s["parentSpanId"].as_str().unwrap_or_default().to_owned(),
                    name: s["name"].as_str().unwrap().to_owned(),
                    kind: s["kind"].as_u64().unwrap(),
                    attrs: json_attrs(&s["attributes"]),
                    status: s["status"]["code"].as_u64().unwrap_or(0),
                });
            }
        }
    }
    (resource, spans)
}

// --- helpers ----------------------------------------------------------------------------------------------------

pub(crate) fn otel_env(url: &str, protocol: &str) -> Vec<(&'static str, String)> {
    vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", url.to_owned()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
        ("OTEL_SERVICE_NAME", "it-traces".to_owned()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=test".to_owned(),
        ),
        // Batches go 20 ms after their first span, so the test waits on spans arriving, not on a 5 s default.
        ("OTEL_BSP_SCHEDULE_DELAY", "20".to_owned()),
    ]
}

pub(crate) fn traced_call(name: &str, trace: &str, span: &str) -> CallToolRequestParams {
    let mut meta = RequestMetaObject::default();
    meta.set_traceparent(format!("00-{trace}-{span}-01"));
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(Default::default());
    params.meta = Some(meta);
    params
}

/// Whether the served span and the proxied call's span of `trace` have both arrived (they may come in two batches).
fn both_ended(spans: &[Got], trace: &str) -> bool {
    [2, 3]
        .iter()
        .all(|k| spans.iter().any(|g| g.kind == *k && g.trace_id == trace))
}

pub(crate) fn find<'a>(spans: &'a [Got], name: &str, kind: u64) -> Option<&'a Got> {
    spans.iter().find(|s| s.name == name && s.kind == kind)
}

/// The served request's span (SERVER, under the client's span) and the proxied call's (CLIENT, under it), checked
/// for the MCP conventions' attributes; returns them.
fn check_pair<'a>(
    spans: &'a [Got],
    exposed: &str,
    tool: &str,
    server: &str,
    trace: &str,
    parent: &str,
) -> (&'a Got, &'a Got) {
    let served = find(spans, &format!("tools/call {exposed}"), 2).expect("the served span");
    let proxied = find(spans, &format!("tools/call {tool}"), 3).expect("the proxied call's span");
    assert_eq!(served.trace_id, trace, "{served:?}");
    assert_eq!(
        served.parent, parent,
        "the client's span is the parent: {served:?}"
    );
    assert_eq!(proxied.trace_id, trace);
    assert_eq!(proxied.parent, served.span_id, "{proxied:?}");
    assert_eq!(served.attrs["mcp.method.name"], "tools/call");
    assert_eq!(served.attrs["gen_ai.tool.name"], exposed);
    assert_eq!(served.attrs["gen_ai.operation.name"], "execute_tool");
    assert!(
        served.attrs.contains_key("jsonrpc.request.id"),
        "{served:?}"
    );
    assert_eq!(proxied.attrs["mcp.method.name"], "tools/call");
    assert!(
        proxied.attrs.contains_key("jsonrpc.request.id"),
        "the id sent to the child: {proxied:?}"
    );
    assert_eq!(proxied.attrs["gen_ai.tool.name"], tool);
    assert_eq!(proxied.attrs["agent_discover.server"], server);
    assert!(
        proxied.attrs.contains_key("mcp.protocol.version"),
        "{proxied:?}"
    );
    (served, proxied)
}

// --- tests ------------------------------------------------------------------------------------------------------

/// stdio front, a legacy stdio child, `http/protobuf`: the spans of a traced call and of a failing one.
#[tokio::test]
async fn a_stdio_call_is_traced_over_otlp_protobuf() {
    let (received, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn_env(dir.path(), &[], None, &otel_env(&url, "http/protobuf")).await;
    agent
        .install_fixture("tr", &["--trace-tool"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "tr"}))
        .await;

    let r = agent
        .client
        .call_tool(traced_call("tr__trace_context", CLIENT_TRACE, CLIENT_SPAN))
        .await
        .unwrap();
    let seen = harness::parse(&r);
    let spans = received
        .wait("the traced call's spans", |s| {
            find(s, "tools/call trace_context", 3).is_some()
                && find(s, "tools/call tr__trace_context", 2).is_some()
        })
        .await;
    let (served, proxied) = check_pair(
        &spans,
        "tr__trace_context",
        "trace_context",
        "tr",
        CLIENT_TRACE,
        CLIENT_SPAN,
    );
    assert_eq!(served.attrs["network.transport"], "pipe");
    assert_eq!(
        served.attrs["mcp.protocol.version"], "2025-11-25",
        "{served:?}"
    );
    assert_eq!(proxied.attrs["network.transport"], "pipe");
    // With tracing on, the call took the fast lane, which made both spans.
    assert!(
        crate::relay::fast_lane_calls(&agent).await > 0,
        "the traced call went through the fast lane"
    );
    assert_eq!(proxied.attrs["agent_discover.outcome"], "ok");
    assert_eq!(served.status, 0);
    // The child was handed the proxied call's span as its parent, in `_meta`.
    assert_eq!(
        seen["meta_traceparent"],
        format!("00-{CLIENT_TRACE}-{}-01", proxied.span_id),
        "{seen}"
    );
    {
        let resource = received.resource.lock().unwrap();
        assert_eq!(resource["service.name"], "it-traces");
        assert_eq!(resource["deployment.environment"], "test");
    }
    assert!(
        received
            .requests
            .lock()
            .unwrap()
            .iter()
            .all(|ct| ct == "application/x-protobuf")
    );

    // A tool error: `error.type` = tool_error and status ERROR on both spans. Without a traceparent, a new trace.
    let failed = agent.call("tr__fail", json!({"message": "nope"})).await;
    assert_eq!(failed.is_error, Some(true));
    let spans = received
        .wait("the failed call's spans", |s| {
            find(s, "tools/call fail", 3).is_some() && find(s, "tools/call tr__fail", 2).is_some()
        })
        .await;
    let proxied = find(&spans, "tools/call fail", 3).unwrap();
    let served = find(&spans, "tools/call tr__fail", 2).unwrap();
    assert_ne!(served.trace_id, CLIENT_TRACE);
    assert!(
        served.parent.is_empty(),
        "a new trace has no parent: {served:?}"
    );
    assert_eq!(proxied.parent, served.span_id);
    for s in [proxied, served] {
        assert_eq!(s.attrs["error.type"], "tool_error", "{s:?}");
        assert_eq!(s.status, 2);
    }
    assert_eq!(proxied.attrs["agent_discover.outcome"], "tool_error");
    // Other requests have spans too (tools/list by the registry's own listing, here the client's initialize).
    assert!(spans.iter().any(|s| s.name == "initialize" && s.kind == 2));
    agent.stop().await;
}

/// `serve` over Streamable HTTP, `http/json`; a 2026-07-28 HTTP child: a legacy client's `traceparent` header and a
/// 2026-07-28 client's `_meta.traceparent` both become the served span's parent, and the child gets the proxied
/// call's span in `_meta` and as the `traceparent` header.
#[tokio::test]
async fn http_clients_of_both_eras_are_traced_over_otlp_json() {
    let (received, url) = receiver().await;
    let mut http_child = tokio::process::Command::new(harness::fixture())
        .args([
            "--name",
            "th",
            "--trace-tool",
            "--era",
            "both",
            "--http",
            "0",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(http_child.stdout.take().unwrap()).lines();
    let child_url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .registry(json!({"action": "install", "name": "th", "transport": "streamable-http", "url": child_url}))
        .await;
    setup.stop().await;
    let served = crate::replicas::replica(dir.path(), &otel_env(&url, "http/json")).await;
    let endpoint = format!("{}/mcp/servers/th", served.url);

    // A legacy client whose HTTP requests carry a traceparent header.
    let legacy_span = "1111111111111111";
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        "traceparent",
        format!("00-{CLIENT_TRACE}-{legacy_span}-01")
            .parse()
            .unwrap(),
    );
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .build()
        .unwrap();
    let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
        http,
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            endpoint.clone(),
        ),
    );
    let legacy = rmcp::ServiceExt::serve(
        harness::TestClient {
            seen: Arc::default(),
            sampling_reply: None,
        },
        transport,
    )
    .await
    .expect("initialize");
    let r = legacy
        .call_tool(CallToolRequestParams::new("trace_context").with_arguments(Default::default()))
        .await
        .unwrap();
    let seen = harness::parse(&r);
    let spans = received
        .wait("the legacy client's spans", |s| both_ended(s, CLIENT_TRACE))
        .await;
    let mine: Vec<Got> = spans
        .iter()
        .filter(|s| s.trace_id == CLIENT_TRACE)
        .cloned()
        .collect();
    let (served_span, proxied) = check_pair(
        &mine,
        "trace_context",
        "trace_context",
        "th",
        CLIENT_TRACE,
        legacy_span,
    );
    assert_eq!(served_span.attrs["network.transport"], "tcp");
    assert!(
        served_span.attrs.contains_key("mcp.session.id"),
        "a legacy HTTP session: {served_span:?}"
    );
    assert_eq!(proxied.attrs["network.transport"], "tcp");
    assert_eq!(proxied.attrs["mcp.protocol.version"], "2026-07-28");
    let expected = format!("00-{CLIENT_TRACE}-{}-01", proxied.span_id);
    assert_eq!(seen["header_traceparent"], expected, "{seen}");
    assert_eq!(seen["meta_traceparent"], expected, "{seen}");

    // A 2026-07-28 client: the trace context in `_meta`, a trace of its own.
    let modern_trace = "0af7651916cd43dd8448eb211c80319c";
    let modern_span = "b7ad6b7169203331";
    let modern = crate::eras::client_2026_as(
        &endpoint,
        harness::TestClient {
            seen: Arc::default(),
            sampling_reply: None,
        },
    )
    .await;
    let r = modern
        .call_tool(traced_call("trace_context", modern_trace, modern_span))
        .await
        .unwrap();
    let seen = harness::parse(&r);
    let spans = received
        .wait("the 2026 client's spans", |s| both_ended(s, modern_trace))
        .await;
    let mine: Vec<Got> = spans
        .iter()
        .filter(|s| s.trace_id == modern_trace)
        .cloned()
        .collect();
    let (served_span, proxied) = check_pair(
        &mine,
        "trace_context",
        "trace_context",
        "th",
        modern_trace,
        modern_span,
    );
    assert_eq!(served_span.attrs["mcp.protocol.version"], "2026-07-28");
    let expected = format!("00-{modern_trace}-{}-01", proxied.span_id);
    assert_eq!(seen["header_traceparent"], expected, "{seen}");
    assert_eq!(seen["meta_traceparent"], expected, "{seen}");
    assert!(
        received
            .requests
            .lock()
            .unwrap()
            .iter()
            .all(|ct| ct == "application/json")
    );
    drop(legacy);
    drop(modern);
}

/// Off (here: `OTEL_TRACES_EXPORTER=none` with an endpoint set): the call works, the child gets no trace context,
/// and the receiver gets nothing, even after the process flushed and exited.
#[tokio::test]
async fn with_tracing_off_nothing_is_sent() {
    let (received, url) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = otel_env(&url, "http/protobuf");
    env.push(("OTEL_TRACES_EXPORTER", "none".to_owned()));
    let agent = harness::spawn_env(dir.path(), &[], None, &env).await;
    agent
        .install_fixture("tr", &["--trace-tool"], json!({}))
        .await;
    agent
        .registry(json!({"action": "activate", "name": "tr"}))
        .await;
    let r = agent
        .client
        .call_tool(traced_call("tr__trace_context", CLIENT_TRACE, CLIENT_SPAN))
        .await
        .unwrap();
    assert_eq!(harness::parse(&r)["meta_traceparent"], Value::Null);
    let pid = agent.pid;
    agent.stop().await;
    harness::wait_for(Duration::from_secs(10), || !harness::pid_alive(pid)).await;
    assert!(!harness::pid_alive(pid), "agent-discover did not exit");
    assert!(received.requests.lock().unwrap().is_empty());
}

/// OTLP over gRPC is refused at start-up with a message saying what to use instead.
#[tokio::test]
async fn grpc_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = harness::command(dir.path(), &["mcp"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("gRPC is not supported"), "{stderr}");
    assert!(stderr.contains("http/protobuf"), "{stderr}");
}
