//! The fast lane on the HTTP front (issue 31, part 4): a legacy client's `tools/call` POSTed to `/mcp` in a session
//! rmcp's session manager knows, naming a tool the stdio fast lane carries (`proxy/relay.rs`: an allowed, exposed
//! tool of a ready legacy stdio child), goes from here straight to the child through its lane, and is answered on the
//! POST as rmcp answers it (`text/event-stream`: the call's progress to the client's token, then its result, one SSE
//! event each), without rmcp's session worker, request task, handler future and child `Peer` round trip. What the
//! stdio lane keeps is kept, by the same code (timeout reset by progress, the child told of a timeout, a crash failing
//! the call with its cause, call log, metrics, the error shapes); the client's `notifications/cancelled` for such a
//! call, POSTed in its session, reaches the lane here (202, as rmcp answers a notification). An answer stream still
//! open hears an SSE comment every 15 s, as rmcp's do. Unlike rmcp's, the lane's events carry no event id, so a
//! client whose connection drops mid-call cannot resume that one answer with `Last-Event-ID` (rmcp's session keeps
//! its events for that). rmcp's worker of a session whose calls all take the lane hears of them once a minute, so it
//! does not end the session as idle.
//!
//! A 2026-07-28 client's stateless `tools/call` (no session; its revision and capabilities in `_meta`, SEP-2243
//! headers rmcp would accept as they are) takes the lane too, with rmcp's answer, a legacy child's mid-call question
//! routed as on the normal path (the input-required result) and the call cancelled when the client goes away:
//! `lane/stateless.rs`.
//!
//! Everything else is rmcp's, untouched: other methods, a request in no session that is not such a call, or in a
//! session rmcp does not know (rmcp's 404), an `Accept` or `MCP-Protocol-Version` header rmcp would refuse, SEP-2243
//! headers that are missing, repeated, Base64-encoded, `Mcp-Param-*` or not the body's, `_meta` beyond a progress
//! token, trace context and the 2026-07-28 envelope, a tool the lane does not carry (or whose schema annotates an
//! argument for a header), and every legacy call while a connected client declared sampling, elicitation or roots (the
//! lane registers no caller, so a child's request mid-call would go to the newest such client, maybe another
//! session). Not installed with the identity front on (each caller's principal and visibility are the handler's), nor
//! with `AGENT_DISCOVER_FAST_LANE=off`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::BytesMut;
use rmcp::model::{ProtocolVersion, RequestId, ServerJsonRpcMessage};
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use tokio::sync::mpsc;
use tokio_util::codec::Encoder;

use crate::app::App;
use crate::proxy::coalesce::Sink;
use crate::proxy::relay::FrontLane;

use super::MCP_BODY_LIMIT;

mod stateless;

/// The HTTP front's end of the fast lane: the session manager rmcp's `/mcp` service uses, and the lane's calls in
/// flight by session and request id (for the client's cancellation).
pub(crate) struct HttpLane {
    app: Arc<App>,
    sessions: Arc<LocalSessionManager>,
    calls: Mutex<HashMap<(SessionId, RequestId), LaneCall>>,
    /// The answer streams of 2026-07-28 clients' calls in flight (no session: keyed by a number of their own), for
    /// the keep-alive.
    streams: Mutex<HashMap<u64, mpsc::WeakUnboundedSender<Bytes>>>,
    /// The next key of [`HttpLane::streams`].
    next_stream: std::sync::atomic::AtomicU64,
    /// Whether the keep-alive task runs ([`HttpLane::keep_alive`]).
    pinging: std::sync::atomic::AtomicBool,
    /// When each session was last shown to its rmcp worker ([`HttpLane::touch`]).
    touched: Mutex<HashMap<SessionId, Instant>>,
}

/// How often a session whose calls all take the lane is shown to its rmcp worker, which ends a session that hears
/// nothing for 5 minutes (`SessionConfig::keep_alive`).
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// How often an answer stream still open hears an SSE comment, as rmcp's streams do (`sse_keep_alive`: 15 s, or
/// [`super::ENV_KEEPALIVE`]), so that a long call is not ended as idle by something between the client and us.
fn ping_every() -> Duration {
    super::sse_keep_alive()
}

/// A lane call in flight: its call (for the client's cancellation) and its answer stream (for the keep-alive).
type LaneCall = (Weak<FrontLane>, mpsc::WeakUnboundedSender<Bytes>);

impl HttpLane {
    /// The lane of `/mcp`, whose rmcp service keeps its sessions in `sessions`; `None` when it is off (the identity
    /// front on, or `AGENT_DISCOVER_FAST_LANE=off`).
    pub(crate) fn new(
        app: Arc<App>,
        sessions: Arc<LocalSessionManager>,
        identity: bool,
    ) -> Option<Arc<HttpLane>> {
        let off = std::env::var(crate::mcp::ENV_FAST_LANE).as_deref() == Ok("off");
        (!identity && !off).then(|| {
            Arc::new(HttpLane {
                app,
                sessions,
                calls: Mutex::default(),
                streams: Mutex::default(),
                next_stream: Default::default(),
                pinging: Default::default(),
                touched: Mutex::default(),
            })
        })
    }

    /// A call of `session` took the lane: at most once a minute, the session's rmcp worker is sent something that
    /// changes nothing (a request stream opened and closed), so that it does not end an active session as idle.
    fn touch(&self, session: &SessionId) {
        {
            let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
            if touched
                .get(session)
                .is_some_and(|at| at.elapsed() < TOUCH_EVERY)
            {
                return;
            }
            // Sessions not touched for long are gone, or will be touched again on their next call.
            touched.retain(|_, at| at.elapsed() < 10 * TOUCH_EVERY);
            touched.insert(session.clone(), Instant::now());
        }
        let sessions = self.sessions.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let handle = sessions.sessions.read().await.get(&session).cloned();
            if let Some(handle) = handle
                && let Ok(stream) = handle.establish_request_wise_channel().await
                && let Some(id) = stream.http_request_id
            {
                let _ = handle.close_request_wise_channel(id).await;
            }
        });
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<(SessionId, RequestId), LaneCall>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn streams(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::WeakUnboundedSender<Bytes>>> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Started with the first lane call: every 15 s ([`ping_every`]), each answer stream still open gets an SSE comment.
    /// One task and one deadline for all calls (a call's own timer would be one more per call); a stream may hear its
    /// first comment sooner than 15 s after it opened, which changes nothing for the client.
    fn keep_alive(self: &Arc<Self>) {
        if self
            .pinging
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            return;
        }
        let lane = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                ad_core::clock::sleep(ping_every()).await;
                let Some(lane) = lane.upgrade() else { return };
                let ping = |stream: &mpsc::WeakUnboundedSender<Bytes>| {
                    if let Some(tx) = stream.upgrade() {
                        let _ = tx.send(Bytes::from_static(b":\n\n"));
                    }
                };
                lane.calls().values().for_each(|(_, stream)| ping(stream));
                lane.streams().values().for_each(ping);
            }
        });
    }
}

/// Middleware on `/mcp` (inside `answer.rs`'s): relays what the lane carries, passes the rest to rmcp.
pub(crate) async fn relay(
    State(lane): State<Arc<HttpLane>>,
    request: Request,
    next: Next,
) -> Response {
    if stateless_call(request.method(), request.headers()) {
        return stateless::relay(lane, request, next).await;
    }
    let Some(session) = lane_session(request.method(), request.headers()) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    // `answer.rs` read the body already: this is its one chunk.
    let Ok(bytes) = axum::body::to_bytes(body, MCP_BODY_LIMIT).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    // The client's revision, for the spans the lane makes (tracing on only).
    let protocol = crate::trace::enabled()
        .then(|| parts.headers.get(VERSION)?.to_str().ok().map(str::to_owned))
        .flatten();
    let again = |bytes: Bytes| Request::from_parts(parts, Body::from(bytes));
    let Ok(raw) = std::str::from_utf8(&bytes) else {
        return next.run(again(bytes)).await;
    };
    let call = raw.contains("\"tools/call\"");
    let cancel = !call && raw.contains("notifications/cancelled");
    // An unknown session is rmcp's to refuse (404).
    if !(call || cancel) || !lane.sessions.has_session(&session).await.unwrap_or(false) {
        return next.run(again(bytes)).await;
    }
    if cancel {
        let id = cancelled_request(raw);
        let front = id.as_ref().and_then(|id| {
            lane.calls()
                .get(&(session, id.clone()))
                .and_then(|(front, _)| front.upgrade())
        });
        if let (Some(id), Some(front)) = (id, front)
            && front.cancel(&id)
        {
            return StatusCode::ACCEPTED.into_response();
        }
        return next.run(again(bytes)).await;
    }
    // A child's request mid-call (sampling, elicitation, roots) must reach the caller: with a client that could take
    // one connected, the call registers its caller on the normal path.
    if lane.app.proxy.some_client_takes_requests() {
        return next.run(again(bytes)).await;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let front = FrontLane::new(
        lane.app.proxy.clone(),
        Arc::new(SseSink::new(tx.clone(), None)),
        crate::mcp::calls::shape_fast_lane_error,
        crate::mcp::served_here,
    );
    if let Some(protocol) = protocol {
        front.set_protocol(protocol);
    }
    // The call's id, for the client's cancellation while it runs (known before the child is asked; removed when its
    // answer's stream ends).
    let key = call_id(raw).map(|id| (session.clone(), id));
    if let Some(key) = &key {
        lane.calls()
            .insert(key.clone(), (Arc::downgrade(&front), tx.downgrade()));
        lane.keep_alive();
    }
    // The stream ends when the sink's sender goes with `front`; the keep-alive holds only a weak one.
    drop(tx);
    let Some(child) = front.try_call(raw) else {
        if let Some(key) = &key {
            lane.calls().remove(key);
        }
        return next.run(again(bytes)).await;
    };
    child.flush();
    lane.touch(&session);
    // The stream ends once the call has answered (or ended without an answer): the lane then drops `front`, and with
    // it the sink's sender.
    drop(front);
    let guard = Forget { lane, key };
    let stream = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), (rx, guard)))
    });
    sse_response(Body::from_stream(stream))
}

/// An answer stream's response, with rmcp's headers.
fn sse_response(body: Body) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        [("x-accel-buffering", "no")],
        body,
    )
        .into_response()
}

const SESSION: &str = "mcp-session-id";
const VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";

/// Whether a request is a 2026-07-28 client's stateless `tools/call` the lane may take, by its headers: a POST in
/// no session, under exactly one `MCP-Protocol-Version: 2026-07-28`, accepting both media types as rmcp requires,
/// of JSON (as rmcp reads `Content-Type`), with exactly one `Mcp-Method: tools/call` and one plain (not Base64
/// encoded) `Mcp-Name`, and no `Mcp-Param-*` header (SEP-2243: rmcp checks those against the tool's schema). The
/// body is checked against them by [`FrontLane::try_stateless_call`].
fn stateless_call(method: &Method, headers: &HeaderMap) -> bool {
    method == Method::POST
        && !headers.contains_key(SESSION)
        && sole(headers, VERSION) == Some("2026-07-28")
        && sole(headers, METHOD) == Some("tools/call")
        && sole(headers, NAME).is_some_and(|name| !name.starts_with("=?base64?"))
        && sole(headers, header::CONTENT_TYPE.as_str()).is_some_and(|t| {
            let essence = t.split_once(';').map_or(t, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
        && accepts_both(headers)
        && !headers.keys().any(|k| k.as_str().starts_with("mcp-param-"))
}

/// The one value of header `name` as text; `None` when absent, repeated or not text.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    values.next().is_none().then(|| value.to_str().ok())?
}

/// The session of a POST the lane may take: one in a session, accepting both media types as rmcp requires, under a
/// known legacy `MCP-Protocol-Version` (or none, which rmcp reads as 2025-03-26).
fn lane_session(method: &Method, headers: &HeaderMap) -> Option<SessionId> {
    if method != Method::POST {
        return None;
    }
    let session = headers.get(SESSION)?.to_str().ok()?;
    if let Some(version) = headers.get(VERSION) {
        let version = version.to_str().ok()?;
        let known = ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .any(|v| v.as_str() == version && v.has_initialize());
        if !known {
            return None;
        }
    }
    accepts_both(headers).then(|| session.into())
}

/// Whether the `Accept` header lists both `application/json` and `text/event-stream`, as rmcp requires of a POST,
/// with no parameters (a weighted range, maybe `q=0`, is rmcp's to read).
fn accepts_both(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for accept in headers.get_all(header::ACCEPT) {
        let Ok(accept) = accept.to_str() else {
            return false;
        };
        for range in accept.split(',') {
            let mut fields = range.split(';');
            let essence = fields.next().unwrap_or_default().trim();
            if fields.next().is_some() {
                return false;
            }
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// The id of the request in `raw` (a `tools/call` the lane took, so a request).
fn call_id(raw: &str) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Id {
        id: RequestId,
    }
    serde_json::from_str::<Id>(raw).ok().map(|r| r.id)
}

/// The request a `notifications/cancelled` names, if `raw` is one.
fn cancelled_request(raw: &str) -> Option<RequestId> {
    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, JsonRpcMessage};
    match serde_json::from_str::<ClientJsonRpcMessage>(raw).ok()? {
        JsonRpcMessage::Notification(n) => match n.notification {
            ClientNotification::CancelledNotification(c) => c.params.request_id,
            _ => None,
        },
        _ => None,
    }
}

/// Removes a call from [`HttpLane::calls`] when its answer's stream ends (answered, or the client went away).
struct Forget {
    lane: Arc<HttpLane>,
    key: Option<(SessionId, RequestId)>,
}

impl Drop for Forget {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.lane.calls().remove(&key);
        }
    }
}

/// One lane call's answer stream: each message framed by rmcp's codec as one SSE event, sent on flush. The stream
/// ends once the call's answer is sent (as rmcp's does), even while the call lives on (a 2026-07-28 client's call
/// handed to an exchange, `proxy/relay/handover.rs`, whose answer was the input-required result).
struct SseSink {
    state: Mutex<SinkState>,
    /// Set once the answer is on the stream (see [`stateless`]: the stream's end then cancels nothing).
    answered: Option<Arc<std::sync::atomic::AtomicBool>>,
}

struct SinkState {
    /// The events framed and not sent yet.
    pending: BytesMut,
    /// The stream, until the answer is sent.
    tx: Option<mpsc::UnboundedSender<Bytes>>,
    /// Whether `pending` holds the answer.
    last: bool,
}

impl SseSink {
    fn new(
        tx: mpsc::UnboundedSender<Bytes>,
        answered: Option<Arc<std::sync::atomic::AtomicBool>>,
    ) -> SseSink {
        SseSink {
            state: Mutex::new(SinkState {
                pending: BytesMut::new(),
                tx: Some(tx),
                last: false,
            }),
            answered,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Sink<ServerJsonRpcMessage> for SseSink {
    fn frame_now(&self, item: &ServerJsonRpcMessage) -> bool {
        self.frame_with(&mut |buf| {
            JsonRpcMessageCodec::<&ServerJsonRpcMessage>::default()
                .encode(item, buf)
                .is_ok()
        })
    }

    fn frame_with(&self, encode: &mut dyn FnMut(&mut BytesMut) -> bool) -> bool {
        let mut state = self.state();
        if state.tx.is_none() {
            return false;
        }
        let before = state.pending.len();
        if !sse_event(&mut state.pending, encode) {
            return false;
        }
        state.last |= is_answer(&state.pending[before..]);
        true
    }

    fn flush_now(&self) {
        let mut state = self.state();
        let chunk = state.pending.split().freeze();
        if !chunk.is_empty()
            && let Some(tx) = &state.tx
        {
            // The client went away: the lane's call ends as it would have anyway.
            let _ = tx.send(chunk);
        }
        if state.last {
            state.tx = None;
            if let Some(answered) = &self.answered {
                answered.store(true, std::sync::atomic::Ordering::Release);
            }
        }
    }
}

/// Whether an SSE event framed by [`sse_event`] is a response (a result or an error: the answer), not a
/// notification. rmcp's messages put `jsonrpc` first, then a response's `id` (a notification's `method`); the lane
/// sends its clients no requests.
fn is_answer(event: &[u8]) -> bool {
    event.starts_with(b"data: {\"jsonrpc\":\"2.0\",\"id\":")
}

/// Frames one message (`encode`: rmcp's codec, a JSON line) into `buf` as an SSE event, as rmcp's `/mcp` sends a
/// message without an event id: `data: <message>` and a blank line. What `encode` wrote is taken back when it fails.
fn sse_event(buf: &mut BytesMut, encode: &mut dyn FnMut(&mut BytesMut) -> bool) -> bool {
    let before = buf.len();
    buf.extend_from_slice(b"data: ");
    if !encode(buf) {
        buf.truncate(before);
        return false;
    }
    // The codec ends the line; the blank line ends the event.
    if !buf.ends_with(b"\n") {
        buf.extend_from_slice(b"\n");
    }
    buf.extend_from_slice(b"\n");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_sse_event() {
        let mut buf = BytesMut::new();
        let message = ServerJsonRpcMessage::error(
            rmcp::ErrorData::invalid_params("x", None),
            Some(RequestId::Number(3)),
        );
        assert!(sse_event(&mut buf, &mut |b| {
            JsonRpcMessageCodec::<&ServerJsonRpcMessage>::default()
                .encode(&message, b)
                .is_ok()
        }));
        let text = std::str::from_utf8(&buf).unwrap().to_owned();
        let data = text
            .strip_prefix("data: ")
            .unwrap()
            .strip_suffix("\n\n")
            .unwrap();
        assert!(!data.contains('\n'), "{text}");
        let back: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(back["id"], 3);
        // A failed encode leaves nothing behind.
        assert!(!sse_event(&mut buf, &mut |b| {
            b.extend_from_slice(b"partial");
            false
        }));
        assert_eq!(std::str::from_utf8(&buf).unwrap(), text);
    }

    #[test]
    fn only_2026_calls_under_headers_rmcp_accepts_as_they_are_are_stateless_lane_calls() {
        let ok: &[(&str, &str)] = &[
            ("accept", "application/json, text/event-stream"),
            ("content-type", "application/json"),
            (VERSION, "2026-07-28"),
            (METHOD, "tools/call"),
            (NAME, "fx__echo"),
        ];
        let with = |change: &dyn Fn(&mut HeaderMap)| {
            let mut h = HeaderMap::new();
            for (k, v) in ok {
                h.append(*k, v.parse().unwrap());
            }
            change(&mut h);
            stateless_call(&Method::POST, &h)
        };
        assert!(with(&|_| {}));
        assert!(with(&|h| {
            h.insert(
                "content-type",
                "application/json; charset=utf-8".parse().unwrap(),
            );
        }));
        type Change<'a> = &'a dyn Fn(&mut HeaderMap);
        let refused: [(&str, Change<'_>); 10] = [
            ("a session", &|h| {
                h.insert(SESSION, "s1".parse().unwrap());
            }),
            ("a legacy revision", &|h| {
                h.insert(VERSION, "2025-11-25".parse().unwrap());
            }),
            ("two revisions", &|h| {
                h.append(VERSION, "2026-07-28".parse().unwrap());
            }),
            ("another method", &|h| {
                h.insert(METHOD, "tools/list".parse().unwrap());
            }),
            ("no method", &|h| {
                h.remove(METHOD);
            }),
            ("two names", &|h| {
                h.append(NAME, "fx__echo".parse().unwrap());
            }),
            ("a Base64 name", &|h| {
                h.insert(NAME, "=?base64?Zng=?=".parse().unwrap());
            }),
            ("an Mcp-Param header", &|h| {
                h.insert("mcp-param-region", "eu".parse().unwrap());
            }),
            ("a weighted Accept", &|h| {
                h.insert(
                    "accept",
                    "application/json, text/event-stream;q=0".parse().unwrap(),
                );
            }),
            ("text", &|h| {
                h.insert("content-type", "text/plain".parse().unwrap());
            }),
        ];
        for (what, change) in refused {
            assert!(!with(change), "{what}");
        }
        let mut h = HeaderMap::new();
        for (k, v) in ok {
            h.append(*k, v.parse().unwrap());
        }
        assert!(!stateless_call(&Method::GET, &h));
    }

    /// The stream ends with the answer (a response), not with progress, and says so.
    #[test]
    fn the_answer_ends_the_stream() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let answered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let sink = SseSink::new(tx, Some(answered.clone()));
        let progress = ServerJsonRpcMessage::notification(
            rmcp::model::ServerNotification::ProgressNotification(
                rmcp::model::ProgressNotification::new(
                    rmcp::model::ProgressNotificationParam::new(
                        rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(1)),
                        1.0,
                    ),
                ),
            ),
        );
        sink.send_now(&progress);
        assert!(!answered.load(std::sync::atomic::Ordering::Acquire));
        let answer = ServerJsonRpcMessage::response(
            rmcp::model::ServerResult::empty(()),
            RequestId::Number(3),
        );
        sink.send_now(&answer);
        assert!(answered.load(std::sync::atomic::Ordering::Acquire));
        assert!(!sink.frame_now(&progress), "nothing after the answer");
        let first = rx.try_recv().unwrap();
        assert!(!is_answer(&first), "{first:?}");
        assert!(is_answer(&rx.try_recv().unwrap()));
        // The sender went with the answer: the stream ends.
        assert!(matches!(
            rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
    }

    #[test]
    fn only_sessions_under_legacy_headers_accepting_both_types_are_the_lanes() {
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, v.parse().unwrap());
            }
            h
        };
        let both = ("accept", "application/json, text/event-stream");
        let ok = headers(&[both, (SESSION, "s1"), (VERSION, "2025-06-18")]);
        assert_eq!(lane_session(&Method::POST, &ok).as_deref(), Some("s1"));
        assert!(lane_session(&Method::GET, &ok).is_none());
        assert!(lane_session(&Method::POST, &headers(&[both, (VERSION, "2025-06-18")])).is_none());
        for version in ["2026-07-28", "1999-01-01"] {
            let h = headers(&[both, (SESSION, "s1"), (VERSION, version)]);
            assert!(lane_session(&Method::POST, &h).is_none(), "{version}");
        }
        let h = headers(&[("accept", "application/json"), (SESSION, "s1")]);
        assert!(lane_session(&Method::POST, &h).is_none());
        let h = headers(&[
            ("accept", "application/json, text/event-stream;q=0"),
            (SESSION, "s1"),
        ]);
        assert!(lane_session(&Method::POST, &h).is_none());
        let h = headers(&[both, (SESSION, "s1")]);
        assert!(lane_session(&Method::POST, &h).is_some());
    }
}
