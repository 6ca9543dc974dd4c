//! The stdio transport to a child that sees both directions: it remembers which method each outgoing request has
//! and decodes the child's answer straight into that method's result type (`CallToolResult`, `ListToolsResult`, ...),
//! instead of letting rmcp try the untagged `ServerResult` variants one after another. Anything it cannot type this
//! way (a child's own requests and notifications, error responses, unknown ids, unusual results) goes through rmcp's
//! decoder as before. Framing (lines, length limit, BOM) is rmcp's `JsonRpcMessageCodec` in both directions; each
//! line's envelope is read as `envelope.rs` says.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ClientRequest, ErrorData, GetMeta, JsonRpcError,
    JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio_util::bytes::BytesMut;
use tokio_util::codec::Decoder;

use crate::coalesce::CoalescingWriter;
use crate::envelope::{Expect, Parts};
use crate::relay::{ChildLane, FrontLane};
use crate::state::{Inner, ProgressSeen};

mod started;
use started::STARTED_PING_ID;
pub(crate) use started::pipe_end;

/// Requests awaiting an answer are forgotten past this many (a child that never answers must not grow the map).
const MAX_PENDING: usize = 4096;
const READ_CHUNK: usize = 16 * 1024;

/// How a message from the child was decoded (for tests and the bench's accounting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decoded {
    /// A response decoded straight as the result type of its request.
    Typed,
    /// Decoded by rmcp's `ServerJsonRpcMessage` (requests, notifications, errors, unknown ids, unusual results).
    Rmcp,
}

type Pending = Arc<Mutex<HashMap<RequestId, Expect>>>;

/// The handshake's `server/discover` probe. rmcp gives up on it after a fixed few seconds and sends `initialize` on
/// the same pipes; a server still starting then reads and answers both, in order, and the probe's late answer must not
/// be taken for the answer to `initialize` (rmcp refuses an answer with another id, which failed slow starts).
#[derive(Debug, Default)]
struct Probe {
    /// The probe awaiting its answer.
    asked: Option<RequestId>,
    /// The probe given up on: its answer, when it comes, is dropped.
    abandoned: Option<RequestId>,
    /// The `ping` of [`TypedChildTransport::await_started`] still unanswered: its answer is dropped.
    ping: bool,
}

fn lock(p: &Pending) -> std::sync::MutexGuard<'_, HashMap<RequestId, Expect>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// rmcp `Transport<RoleClient>` over a child's stdout (read) and stdin (write).
pub struct TypedChildTransport<R, W> {
    /// rmcp's line codec into a coalescing writer.
    writer: CoalescingWriter<W>,
    read: R,
    buf: BytesMut,
    codec: JsonRpcMessageCodec<Parts>,
    pending: Pending,
    eof: bool,
    progress_seen: ProgressSeen,
    /// The fast lane's calls through this child (`relay.rs`): their answers and progress are routed there.
    lane: Option<Arc<ChildLane>>,
    /// Fronts with fast-lane answers or progress framed but not yet written: flushed once per batch read.
    dirty: Vec<Arc<FrontLane>>,
    /// The proxy whose log messages in flight this transport counts as it reads them (`forward::flush_logs`).
    logs: Option<Weak<Inner>>,
    probe: Mutex<Probe>,
    /// Messages read while waiting for the child to start, handed to rmcp first.
    early: std::collections::VecDeque<ServerJsonRpcMessage>,
}

impl<R, W> TypedChildTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W, max_line_length: usize) -> Self {
        Self {
            writer: CoalescingWriter::new(write),
            read,
            buf: BytesMut::with_capacity(READ_CHUNK),
            codec: JsonRpcMessageCodec::new_with_max_length(max_line_length),
            pending: Arc::default(),
            eof: false,
            progress_seen: Arc::default(),
            lane: None,
            dirty: Vec::new(),
            logs: None,
            probe: Mutex::default(),
            early: Default::default(),
        }
    }

    /// Writes what the fast lane framed for its clients while reading.
    fn flush_fronts(&mut self) {
        for front in self.dirty.drain(..) {
            front.flush();
        }
        // The answers are out: now the bookkeeping of the calls they finished.
        if let Some(lane) = &self.lane {
            lane.record_answered();
        }
    }

    /// The writer to the child, for the fast lane (framed in the same order as rmcp's sends).
    pub(crate) fn writer(&self) -> CoalescingWriter<W> {
        self.writer.clone()
    }

    /// Routes the answers and progress of fast-lane calls to `lane`.
    pub(crate) fn with_lane(mut self, lane: Arc<ChildLane>) -> Self {
        self.lane = Some(lane);
        self
    }

    /// Counts each log message read into `inner`'s messages in flight: rmcp forwards it from a task of its own, which
    /// may start after the answer read next, so the count must start here for the call to wait for it.
    pub(crate) fn with_logs_counted(mut self, inner: Weak<Inner>) -> Self {
        self.logs = Some(inner);
        self
    }

    /// Counts the child's progress notifications into `seen`.
    pub fn with_progress_seen(mut self, seen: ProgressSeen) -> Self {
        self.progress_seen = seen;
        self
    }

    /// Records what an outgoing message expects back; a cancelled request's answer is no longer expected.
    fn note_outgoing(&self, item: &ClientJsonRpcMessage) {
        match item {
            JsonRpcMessage::Request(r) => {
                let mut probe = self.probe.lock().unwrap_or_else(|e| e.into_inner());
                match &r.request {
                    ClientRequest::DiscoverRequest(_) => probe.asked = Some(r.id.clone()),
                    ClientRequest::InitializeRequest(_) => probe.abandoned = probe.asked.take(),
                    _ => {}
                }
                drop(probe);
                if let Some(expect) = Expect::of(&r.request) {
                    let mut p = lock(&self.pending);
                    if p.len() >= MAX_PENDING {
                        p.clear();
                    }
                    p.insert(r.id.clone(), expect);
                }
            }
            JsonRpcMessage::Notification(n) => {
                if let ClientNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    lock(&self.pending).remove(id);
                }
            }
            _ => {}
        }
    }

    /// Turns one line from the child into a message; `None` for a line to skip.
    pub(crate) fn message(&mut self, parts: &Parts) -> Option<(ServerJsonRpcMessage, Decoded)> {
        let peek = parts.peek();
        if let Some(peek) = &peek
            && !peek.method
            && let Some(id) = &peek.id
        {
            // `&mut self`: no locking on the way in.
            let probe = self.probe.get_mut().unwrap_or_else(|e| e.into_inner());
            if probe.abandoned.as_ref() == Some(id) {
                probe.abandoned = None;
                tracing::debug!(
                    "dropping the late answer to server/discover (initialize was sent since)"
                );
                return None;
            }
            if probe.asked.as_ref() == Some(id) {
                probe.asked = None;
            }
            if probe.ping && matches!(id, RequestId::String(s) if &**s == STARTED_PING_ID) {
                probe.ping = false;
                return None;
            }
        }
        // The answer to a fast-lane call goes straight to its client (`relay.rs`).
        if let Some(lane) = &self.lane
            && let Some(peek) = &peek
            && !peek.method
            && let Some(id) = &peek.id
            && lane.answer(id, peek.result, parts, &mut self.dirty)
        {
            return None;
        }
        if let Some(peek) = &peek
            && !peek.method
            && !peek.error
            && let (Some(id), Some(result)) = (&peek.id, peek.result)
            && let Some(expect) = lock(&self.pending).remove(id)
            && let Some(result) = expect.decode(result.get())
        {
            return Some((
                ServerJsonRpcMessage::response(result, id.clone()),
                Decoded::Typed,
            ));
        }
        let raw = parts.text();
        if let Some(peek) = &peek
            && !peek.method
            && peek.error
            && let Ok(error) = serde_json::from_str::<JsonRpcError>(&raw)
        {
            if let Some(id) = &error.id {
                lock(&self.pending).remove(id);
            }
            return Some((JsonRpcMessage::Error(error), Decoded::Rmcp));
        }
        match serde_json::from_str::<ServerJsonRpcMessage>(&raw) {
            Ok(m) => {
                if let JsonRpcMessage::Response(r) = &m {
                    lock(&self.pending).remove(&r.id);
                }
                Some((m, Decoded::Rmcp))
            }
            Err(e) => {
                // A request we cannot read still gets an answer; anything else from the child is dropped, as
                // rmcp's own transport does with unknown notifications.
                tracing::debug!("ignoring a message the child sent: {e}");
                if let Some(peek) = peek
                    && peek.method
                    && let Some(id) = peek.id
                {
                    let reply = ClientJsonRpcMessage::error(
                        ErrorData::invalid_request(format!("cannot read this request: {e}"), None),
                        Some(id),
                    );
                    tokio::spawn(self.writer.send(reply));
                }
                None
            }
        }
    }

    /// How many requests still await an answer (tests).
    #[cfg(test)]
    fn pending_len(&self) -> usize {
        lock(&self.pending).len()
    }

    /// Next message and how it was decoded.
    pub(crate) async fn receive_decoded(&mut self) -> Option<(ServerJsonRpcMessage, Decoded)> {
        loop {
            let frame = if self.eof {
                self.codec.decode_eof(&mut self.buf)
            } else {
                self.codec.decode(&mut self.buf)
            };
            match frame {
                Ok(Some(parts)) => {
                    if let Some(m) = self.message(&parts) {
                        self.flush_fronts();
                        return Some(m);
                    }
                    continue;
                }
                // With a JSON object's members as the item, `None` only ever means "no whole line yet".
                Ok(None) if self.eof => {
                    self.flush_fronts();
                    return None;
                }
                Ok(None) => {}
                Err(e) => {
                    // Not JSON, or a line over the limit (the codec skips the rest of it): skip, as rmcp does.
                    tracing::debug!("ignoring a line the child wrote to stdout: {e}");
                    continue;
                }
            }
            // The end of what was read: the fast lane's answers to it go out together.
            self.flush_fronts();
            if self.buf.capacity() - self.buf.len() < READ_CHUNK / 4 {
                self.buf.reserve(READ_CHUNK);
            }
            match self.read.read_buf(&mut self.buf).await {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) => {
                    tracing::error!("reading the child's stdout failed: {e}");
                    self.flush_fronts();
                    return None;
                }
            }
        }
    }
}

impl<R, W> Transport<RoleClient> for TypedChildTransport<R, W>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.note_outgoing(&item);
        self.writer.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        if let Some(m) = self.early.pop_front() {
            return Some(m);
        }
        loop {
            let Some((m, _)) = self.receive_decoded().await else {
                if let Some(lane) = &self.lane {
                    lane.on_eof();
                }
                return None;
            };
            if let JsonRpcMessage::Notification(n) = &m
                && let ServerNotification::ProgressNotification(p) = &n.notification
            {
                // A fast-lane call's progress goes straight to its client, in the order read (`relay.rs`).
                if let Some(lane) = &self.lane
                    && lane.progress(&p.params, &mut self.dirty)
                {
                    continue;
                }
                let mut seen = self.progress_seen.lock().unwrap_or_else(|p| p.into_inner());
                let s = seen.entry(p.params.progress_token.clone()).or_default();
                s.count += 1;
                s.order.push_back(p.params.progress);
            }
            // A log message rmcp will hand to the handler (one tagged for a subscription goes to that stream instead).
            if let JsonRpcMessage::Notification(n) = &m
                && let ServerNotification::LoggingMessageNotification(_) = &n.notification
                && n.notification.get_meta().subscription_id().is_none()
                && let Some(inner) = self.logs.as_ref().and_then(Weak::upgrade)
            {
                inner.logs_in_flight.send_modify(|n| *n += 1);
            }
            self.flush_fronts();
            return Some(m);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ServerResult;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};

    pub(super) type Child = (BufReader<ReadHalf<DuplexStream>>, WriteHalf<DuplexStream>);

    /// A transport and the child's ends of its pipes.
    pub(super) fn pair() -> (
        TypedChildTransport<ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
        Child,
    ) {
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (our_read, our_write) = tokio::io::split(ours);
        let (their_read, their_write) = tokio::io::split(theirs);
        (
            TypedChildTransport::new(our_read, our_write, 1 << 20),
            (BufReader::new(their_read), their_write),
        )
    }

    /// Sends `request` through the transport and returns it as the child read it.
    pub(super) async fn send(
        t: &mut TypedChildTransport<ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
        child: &mut Child,
        request: Value,
    ) -> Value {
        let msg: ClientJsonRpcMessage = serde_json::from_value(request).unwrap();
        t.send(msg).await.unwrap();
        let mut line = String::new();
        child.0.read_line(&mut line).await.unwrap();
        serde_json::from_str(&line).unwrap()
    }

    pub(super) async fn reply(child: &mut Child, line: &Value) {
        let mut s = line.to_string();
        s.push('\n');
        child.1.write_all(s.as_bytes()).await.unwrap();
    }

    pub(super) fn variant(r: &ServerResult) -> &'static str {
        match r {
            ServerResult::EmptyResult(_) => "empty",
            ServerResult::InitializeResult(_) => "initialize",
            ServerResult::CompleteResult(_) => "complete",
            ServerResult::GetPromptResult(_) => "get_prompt",
            ServerResult::ListPromptsResult(_) => "list_prompts",
            ServerResult::ListResourcesResult(_) => "list_resources",
            ServerResult::ListResourceTemplatesResult(_) => "list_resource_templates",
            ServerResult::ReadResourceResult(_) => "read_resource",
            ServerResult::CallToolResult(_) => "call_tool",
            ServerResult::ListToolsResult(_) => "list_tools",
            _ => "other",
        }
    }

    #[tokio::test]
    async fn every_typed_method_decodes_as_its_result_type_exactly_as_rmcp_would() {
        let (mut t, mut child) = pair();
        let cases = [
            ("ping", json!(null), json!({}), "empty"),
            (
                "logging/setLevel",
                json!({"level": "debug"}),
                json!({}),
                "empty",
            ),
            (
                "resources/subscribe",
                json!({"uri": "test://a"}),
                json!({}),
                "empty",
            ),
            (
                "resources/unsubscribe",
                json!({"uri": "test://a"}),
                json!({}),
                "empty",
            ),
            (
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
                json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}),
                "initialize",
            ),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "x"}}),
                json!({"completion": {"values": ["xa", "xb"], "total": 2, "hasMore": false}}),
                "complete",
            ),
            (
                "prompts/get",
                json!({"name": "p"}),
                json!({"description": "d", "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}),
                "get_prompt",
            ),
            (
                "prompts/list",
                json!({}),
                json!({"prompts": [{"name": "p", "title": "P"}]}),
                "list_prompts",
            ),
            (
                "resources/list",
                json!({}),
                json!({"resources": [{"uri": "test://a", "name": "a", "mimeType": "text/plain"}], "nextCursor": "2"}),
                "list_resources",
            ),
            (
                "resources/templates/list",
                json!({}),
                json!({"resourceTemplates": [{"uriTemplate": "test://t/{id}", "name": "t"}]}),
                "list_resource_templates",
            ),
            (
                "resources/read",
                json!({"uri": "test://a"}),
                json!({"contents": [{"uri": "test://a", "mimeType": "text/plain", "text": "x"}]}),
                "read_resource",
            ),
            (
                "tools/call",
                json!({"name": "echo", "arguments": {"x": 1}}),
                json!({"content": [{"type": "text", "text": "x", "annotations": {"priority": 0.5}}],
                       "structuredContent": {"a": 1}, "isError": false, "_meta": {"k": "v"}}),
                "call_tool",
            ),
            (
                "tools/list",
                json!({}),
                json!({"tools": [{"name": "echo", "title": "Echo", "inputSchema": {"type": "object"},
                                  "outputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true},
                                  "_meta": {"m": 1}}]}),
                "list_tools",
            ),
        ];
        for (i, (method, params, result, want)) in cases.into_iter().enumerate() {
            let mut req = json!({"jsonrpc": "2.0", "id": i, "method": method});
            if !params.is_null() {
                req["params"] = params;
            }
            let sent = send(&mut t, &mut child, req).await;
            let response = json!({"jsonrpc": "2.0", "id": sent["id"], "result": result});
            reply(&mut child, &response).await;
            let (msg, how) = t.receive_decoded().await.unwrap();
            assert_eq!(how, Decoded::Typed, "{method}");
            let JsonRpcMessage::Response(r) = &msg else {
                panic!("{method}: not a response: {msg:?}")
            };
            assert_eq!(variant(&r.result), want, "{method}");
            // Exactly what rmcp's own decoder makes of the same line, and nothing lost on the way back out.
            let rmcp: ServerJsonRpcMessage = serde_json::from_value(response.clone()).unwrap();
            let JsonRpcMessage::Response(rr) = &rmcp else {
                panic!("{method}: rmcp decoded {rmcp:?}")
            };
            assert_eq!(variant(&rr.result), want, "{method}");
            assert_eq!(
                serde_json::to_value(&msg).unwrap(),
                serde_json::to_value(&rmcp).unwrap()
            );
            assert_eq!(serde_json::to_value(&r.result).unwrap(), result, "{method}");
        }
        assert_eq!(t.pending_len(), 0);
    }

    #[tokio::test]
    async fn whatever_cannot_be_typed_falls_back_to_rmcp() {
        let (mut t, mut child) = pair();

        // A custom method: not recorded, decoded by rmcp.
        let sent = send(
            &mut t,
            &mut child,
            json!({"jsonrpc": "2.0", "id": 1, "method": "x/custom", "params": {"a": 1}}),
        )
        .await;
        assert_eq!(t.pending_len(), 0);
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": sent["id"], "result": {"tools": 5}}),
        )
        .await;
        let (msg, how) = t.receive_decoded().await.unwrap();
        assert_eq!(how, Decoded::Rmcp);
        assert!(
            matches!(msg, JsonRpcMessage::Response(ref r) if matches!(r.result, ServerResult::CustomResult(_))),
            "{msg:?}"
        );

        // An error response keeps the child's code and message, and the request is no longer pending.
        let sent = send(
            &mut t,
            &mut child,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "boom"}}),
        )
        .await;
        assert_eq!(t.pending_len(), 1);
        reply(&mut child, &json!({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -32042, "message": "nope", "data": {"d": 1}}})).await;
        let (msg, how) = t.receive_decoded().await.unwrap();
        assert_eq!(how, Decoded::Rmcp);
        let JsonRpcMessage::Error(e) = msg else {
            panic!("{msg:?}")
        };
        assert_eq!((e.error.code.0, e.error.message.as_ref()), (-32042, "nope"));
        assert_eq!(e.error.data, Some(json!({"d": 1})));
        assert_eq!(t.pending_len(), 0);

        // A result for an id we never sent.
        reply(&mut child, &json!({"jsonrpc": "2.0", "id": 999, "result": {"content": [{"type": "text", "text": "late"}]}})).await;
        let (msg, how) = t.receive_decoded().await.unwrap();
        assert_eq!(how, Decoded::Rmcp);
        assert!(
            matches!(msg, JsonRpcMessage::Response(ref r) if variant(&r.result) == "call_tool"),
            "{msg:?}"
        );

        // A tools/call answered with something that is not a complete CallToolResult (an input-required result,
        // an empty object): rmcp decides, as before.
        for odd in [
            json!({"resultType": "input_required", "inputRequests": {}}),
            json!({}),
        ] {
            let sent = send(
                &mut t,
                &mut child,
                json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}}),
            )
            .await;
            let response = json!({"jsonrpc": "2.0", "id": sent["id"], "result": odd});
            reply(&mut child, &response).await;
            let (msg, how) = t.receive_decoded().await.unwrap();
            assert_eq!(how, Decoded::Rmcp, "{odd}");
            let rmcp: ServerJsonRpcMessage = serde_json::from_value(response).unwrap();
            assert_eq!(
                serde_json::to_value(&msg).unwrap(),
                serde_json::to_value(&rmcp).unwrap()
            );
            assert!(
                matches!(msg, JsonRpcMessage::Response(ref r) if variant(&r.result) != "call_tool"),
                "{msg:?}"
            );
            assert_eq!(t.pending_len(), 0);
        }

        // The child's own requests and notifications, with junk on stdout between them.
        child.1.write_all(b"this is not json\n\n").await.unwrap();
        reply(&mut child, &json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})).await;
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"}),
        )
        .await;
        let (msg, how) = t.receive_decoded().await.unwrap();
        assert_eq!(how, Decoded::Rmcp);
        assert!(matches!(msg, JsonRpcMessage::Notification(_)), "{msg:?}");
        let (msg, _) = t.receive_decoded().await.unwrap();
        assert!(matches!(msg, JsonRpcMessage::Request(_)), "{msg:?}");

        // A cancelled request is forgotten.
        send(
            &mut t,
            &mut child,
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}),
        )
        .await;
        assert_eq!(t.pending_len(), 1);
        send(&mut t, &mut child, json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})).await;
        assert_eq!(t.pending_len(), 0);

        // A last line without a newline still counts; then the end.
        child
            .1
            .write_all(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
            .await
            .unwrap();
        child.1.shutdown().await.unwrap();
        drop(child);
        let (msg, _) = t.receive_decoded().await.unwrap();
        assert!(matches!(msg, JsonRpcMessage::Notification(_)), "{msg:?}");
        assert!(t.receive_decoded().await.is_none());
    }

    #[tokio::test]
    async fn an_unreadable_request_from_the_child_is_answered_with_its_id() {
        let (mut t, mut child) = pair();
        reply(
            &mut child,
            &json!({"jsonrpc": "2.0", "id": 41, "method": "sampling/createMessage", "params": 5}),
        )
        .await;
        reply(&mut child, &json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}})).await;
        let (msg, _) = t.receive_decoded().await.unwrap();
        assert!(matches!(msg, JsonRpcMessage::Notification(_)), "{msg:?}");
        let mut line = String::new();
        child.0.read_line(&mut line).await.unwrap();
        let answer: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(answer["id"], 41, "{answer}");
        assert_eq!(answer["error"]["code"], -32600, "{answer}");
    }
}
