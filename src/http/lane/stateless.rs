//! The HTTP lane for 2026-07-28 clients: a stateless `tools/call` POSTed to `/mcp` (no session, SEP-2567; its
//! revision and capabilities in `_meta`) whose headers and body rmcp would accept as they are, naming a tool the lane
//! carries, goes straight to the child as a legacy client's in a session does (`lane.rs`), and is answered as rmcp
//! answers such a request: once the call's first message is there, 200 with `text/event-stream` (progress, then the
//! result with `resultType`, one SSE event each, the stream ending with the answer) or, when that first message is
//! an error rmcp maps to an HTTP status (a child's -32021 refusal: 400), that status with the error as JSON.
//!
//! Taken only when [`super::stateless_call`] accepts the headers and [`FrontLane::try_stateless_call`] the body
//! (the 2026-07-28 envelope as rmcp checks it, `Mcp-Name` equal to the body's tool, a tool whose schema asks for no
//! `Mcp-Param-*` header). With no session, no `notifications/cancelled` can name the call: a client that goes away
//! before the answer (its response dropped) cancels it, as rmcp cancels its handler, and the child is told.
//!
//! A child's question mid-call (sampling, elicitation, roots) is routed as on the normal path, without the legacy
//! branch's gate on connected clients that take requests: a legacy child's request during this call reaches
//! `ChildClient::ask_held`, which hands the call to an exchange of `held.rs` (`proxy/relay/handover.rs`), so this
//! client gets the input-required result on this stream and its retry goes the normal way; on the normal path a
//! live 2026-07-28 exchange takes such a question the same way. A 2026-07-28 child's input requests come back as its
//! answer (`proxy/relay/crossing.rs`).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{ErrorCode, RequestId};
use tokio::sync::mpsc;

use super::{HttpLane, NAME, SseSink, sse_response};
use crate::http::MCP_BODY_LIMIT;
use crate::proxy::relay::FrontLane;

/// Relays a request [`super::stateless_call`] accepted, or passes it to rmcp.
pub(super) async fn relay(lane: Arc<HttpLane>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    // `answer.rs` read the body already: this is its one chunk.
    let Ok(bytes) = axum::body::to_bytes(body, MCP_BODY_LIMIT).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let Ok(raw) = std::str::from_utf8(&bytes) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let answered = Arc::new(AtomicBool::new(false));
    let front = FrontLane::new(
        lane.app.proxy.clone(),
        Arc::new(SseSink::new(tx.clone(), Some(answered.clone()))),
        crate::mcp::calls::shape_fast_lane_error,
        crate::mcp::served_here,
    );
    let name = parts
        .headers
        .get(NAME)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some((id, child)) = front.try_stateless_call(raw, name) else {
        return next
            .run(Request::from_parts(parts, Body::from(bytes)))
            .await;
    };
    child.flush();
    // The stream ends with the answer (the sink then drops its sender), or when the call ends without one.
    let call = Arc::downgrade(&front);
    drop(front);
    let mut guard = Gone {
        lane,
        key: None,
        call,
        id,
        answered,
    };
    // rmcp's status depends on the first message, so the response waits for it, as rmcp's does.
    let Some(first) = rx.recv().await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "no response message received from handler",
        )
            .into_response();
    };
    if let Some((status, error)) = refusal(&first, &guard.id) {
        return (status, [(header::CONTENT_TYPE, "application/json")], error).into_response();
    }
    // Kept alive from now on, as rmcp's stream is once it is open.
    let key = guard
        .lane
        .next_stream
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    guard.lane.streams().insert(key, tx.downgrade());
    guard.key = Some(key);
    guard.lane.keep_alive();
    drop(tx);
    let rest = futures::stream::unfold((rx, guard), |(mut rx, guard)| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<_, Infallible>(chunk), (rx, guard)))
    });
    let stream =
        futures::StreamExt::chain(futures::stream::iter([Ok::<_, Infallible>(first)]), rest);
    sse_response(Body::from_stream(stream))
}

/// The status and JSON body rmcp answers a 2026-07-28 request with when its first message is `chunk`'s first
/// event and that is an error of a code it maps to a status (`jsonrpc_http_status` in rmcp's `tower.rs`; the
/// request's `_meta` is well formed, as the lane checked); `None` for anything else (then a 200 event stream).
fn refusal(chunk: &Bytes, id: &RequestId) -> Option<(StatusCode, Bytes)> {
    let end = chunk.iter().position(|&b| b == b'\n')?;
    let data = chunk.slice(b"data: ".len().min(end)..end);
    // The lane's error to its client: rmcp's error shape under the client's id.
    let head = b"{\"jsonrpc\":\"2.0\",\"id\":";
    let rest = data.strip_prefix(head.as_slice())?;
    let id = serde_json::to_vec(id).ok()?;
    if !rest
        .strip_prefix(id.as_slice())?
        .starts_with(b",\"error\":")
    {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Refused {
        error: Code,
    }
    #[derive(serde::Deserialize)]
    struct Code {
        code: ErrorCode,
    }
    let status = match serde_json::from_slice::<Refused>(&data).ok()?.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => return None,
    };
    Some((status, data))
}

/// When a 2026-07-28 client's answer stream ends: it leaves the keep-alive, and the call, if it has not answered
/// (the client went away), is cancelled (the child told, as the client's `notifications/cancelled` would).
struct Gone {
    lane: Arc<HttpLane>,
    key: Option<u64>,
    call: Weak<FrontLane>,
    id: RequestId,
    answered: Arc<AtomicBool>,
}

impl Drop for Gone {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.lane.streams().remove(&key);
        }
        if !self.answered.load(Ordering::Acquire)
            && let Some(front) = self.call.upgrade()
        {
            front.cancel(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ServerJsonRpcMessage;

    fn event(message: &ServerJsonRpcMessage) -> Bytes {
        Bytes::from(format!(
            "data: {}\n\n",
            serde_json::to_string(message).unwrap()
        ))
    }

    /// Only an error rmcp maps to a status is answered as JSON, with the error as rmcp's body.
    #[test]
    fn errors_rmcp_maps_to_a_status_are_refusals() {
        for id in [RequestId::Number(7), RequestId::String("a\"b".into())] {
            let refused = ServerJsonRpcMessage::error(
                rmcp::ErrorData::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, "no", None),
                Some(id.clone()),
            );
            let (status, body) = refusal(&event(&refused), &id).expect("a refusal");
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(body, serde_json::to_vec(&refused).unwrap());
            let missing = ServerJsonRpcMessage::error(
                rmcp::ErrorData::new(ErrorCode::METHOD_NOT_FOUND, "no", None),
                Some(id.clone()),
            );
            assert_eq!(
                refusal(&event(&missing), &id).map(|r| r.0),
                Some(StatusCode::NOT_FOUND)
            );
            let in_band = ServerJsonRpcMessage::error(
                rmcp::ErrorData::invalid_params("no", None),
                Some(id.clone()),
            );
            assert!(refusal(&event(&in_band), &id).is_none());
            let result =
                ServerJsonRpcMessage::response(rmcp::model::ServerResult::empty(()), id.clone());
            assert!(refusal(&event(&result), &id).is_none());
        }
        assert!(refusal(&Bytes::from_static(b":\n\n"), &RequestId::Number(1)).is_none());
    }
}
