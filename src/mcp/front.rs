//! Every request with an id gets an answer carrying that id. rmcp drops the id of a well-formed JSON-RPC request whose
//! shape it cannot type (say `params` is a number, for any method): over stdio it answers `Invalid request` without an
//! id, over Streamable HTTP a 415 without JSON-RPC; the client waits forever. This module is a thin layer on the
//! decoded message stream: [`StdioFront`] is our stdio transport (rmcp's line codec, a typed parse per message, and
//! for a message rmcp cannot type [`reply_to_untyped`]); the HTTP layer calls [`reply_to_untyped`] before `/mcp`.

use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use rmcp::ErrorData;
use rmcp::RoleServer;
use rmcp::model::{RequestId, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{DEFAULT_MAX_LINE_LENGTH, JsonRpcMessageCodec};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Decoder, FramedRead};

use crate::proxy::coalesce::CoalescingWriter;
use crate::proxy::relay::{ChildLane, FrontLane};

/// The answer to a well-formed JSON message rmcp could not type, or `None` when it deserves none (it is not JSON,
/// it is a notification, or it is a response). A request with a usable id gets an error with that id: invalid
/// params (-32602) when its `params` is not an object, invalid request (-32600) otherwise; anything else that looks
/// like a request but has no usable id gets invalid request without an id, as JSON-RPC says.
pub fn reply_to_untyped(message: &[u8]) -> Option<ServerJsonRpcMessage> {
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(message) else {
        return None;
    };
    let id = match m.get("id") {
        None => return None, // a notification (or garbage without an id): never answered
        Some(Value::Number(n)) => n.as_i64().map(RequestId::Number),
        Some(Value::String(s)) => Some(RequestId::String(s.as_str().into())),
        Some(_) => None,
    };
    let method = match m.get("method") {
        Some(Value::String(method)) => crate::model::truncate_for_message(method),
        // An id without a method is a response (rmcp handles its own); a non-string method is an invalid request.
        None if m.contains_key("result") || m.contains_key("error") => return None,
        _ => {
            return Some(ServerJsonRpcMessage::error(
                ErrorData::invalid_request("Invalid request: `method` must be a string", None),
                id,
            ));
        }
    };
    let error = match m.get("params") {
        Some(p) if !p.is_object() && !p.is_null() => {
            ErrorData::invalid_params(format!("`params` of `{method}` must be an object"), None)
        }
        _ => ErrorData::invalid_request(
            format!("Invalid request: `{method}` does not match the JSON-RPC request shape"),
            None,
        ),
    };
    Some(ServerJsonRpcMessage::error(error, id))
}

/// The answer to `initialize` sent under 2026-07-28 request metadata (`_meta` naming a protocol version without the
/// handshake): -32601, as for every method the 2026-07-28 revision removed (rmcp would run the legacy handshake).
/// `None` for anything else, `initialize` of the legacy eras included.
pub fn initialize_under_2026(message: &[u8]) -> Option<ServerJsonRpcMessage> {
    // The method first, borrowed (every message of an HTTP client passes here): only an `initialize` is read whole.
    #[derive(serde::Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    let method: Method<'_> = serde_json::from_slice(message).ok()?;
    if method.method.as_deref() != Some("initialize") {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Peek {
        id: RequestId,
        method: String,
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "_meta")]
        meta: Option<serde_json::Map<String, Value>>,
    }
    let peek: Peek = serde_json::from_slice(message).ok()?;
    if peek.method != "initialize" {
        return None;
    }
    let version = peek
        .params?
        .meta?
        .get("io.modelcontextprotocol/protocolVersion")?
        .clone();
    let version: rmcp::model::ProtocolVersion = serde_json::from_value(version).ok()?;
    if version.has_initialize() {
        return None;
    }
    Some(ServerJsonRpcMessage::error(
        ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "Method not found: `initialize` does not exist in protocol 2026-07-28 (use `server/discover`)",
            None,
        ),
        Some(peek.id),
    ))
}

/// rmcp's line codec over raw JSON values, skipping lines that are not JSON (as rmcp does: answering garbage can
/// start an error storm with a peer that echoes it) instead of ending the stream.
struct RawLines(JsonRpcMessageCodec<Box<RawValue>>);

impl Decoder for RawLines {
    type Item = Box<RawValue>;
    type Error = std::io::Error;

    fn decode(
        &mut self,
        buf: &mut tokio_util::bytes::BytesMut,
    ) -> Result<Option<Self::Item>, Self::Error> {
        loop {
            match self.0.decode(buf) {
                Ok(item) => return Ok(item),
                Err(e) => {
                    tracing::debug!("ignoring an unreadable incoming line: {e}");
                    // The codec consumed the bad line (or is discarding an oversized one); go on with the rest.
                    if buf.is_empty() {
                        return Ok(None);
                    }
                }
            }
        }
    }

    fn decode_eof(
        &mut self,
        buf: &mut tokio_util::bytes::BytesMut,
    ) -> Result<Option<Self::Item>, Self::Error> {
        match self.0.decode_eof(buf) {
            Ok(item) => Ok(item),
            Err(e) => {
                tracing::debug!("ignoring an unreadable last line: {e}");
                buf.clear();
                Ok(None)
            }
        }
    }
}

/// A client's request decoded straight as its method's request type, instead of rmcp trying the untagged
/// `ClientRequest` variants one after another; `None` for anything else, or a request that does not fit its type
/// (then rmcp's decoder decides, as before).
pub fn typed_request(raw: &str) -> Option<RxJsonRpcMessage<RoleServer>> {
    use rmcp::model::{
        CallToolRequest, ClientRequest, CompleteRequest, GetPromptRequest, JsonRpcMessage,
        JsonRpcRequest, ListPromptsRequest, ListResourceTemplatesRequest, ListResourcesRequest,
        ListToolsRequest, PingRequest, ReadResourceRequest,
    };
    use serde::de::IgnoredAny;

    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(default, borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(default)]
        id: Option<IgnoredAny>,
        #[serde(default)]
        result: Option<IgnoredAny>,
        #[serde(default)]
        error: Option<IgnoredAny>,
    }
    let peek: Peek<'_> = serde_json::from_str(raw).ok()?;
    if peek.id.is_none() || peek.result.is_some() || peek.error.is_some() {
        return None;
    }
    macro_rules! typed {
        ($ty:ident) => {{
            let r: JsonRpcRequest<$ty> = serde_json::from_str(raw).ok()?;
            JsonRpcMessage::Request(JsonRpcRequest {
                jsonrpc: r.jsonrpc,
                id: r.id,
                request: ClientRequest::$ty(r.request),
            })
        }};
    }
    Some(match peek.method?.as_ref() {
        "tools/call" => typed!(CallToolRequest),
        "tools/list" => typed!(ListToolsRequest),
        "ping" => typed!(PingRequest),
        "resources/read" => typed!(ReadResourceRequest),
        "resources/list" => typed!(ListResourcesRequest),
        "resources/templates/list" => typed!(ListResourceTemplatesRequest),
        "prompts/get" => typed!(GetPromptRequest),
        "prompts/list" => typed!(ListPromptsRequest),
        "completion/complete" => typed!(CompleteRequest),
        _ => return None,
    })
}

/// Our MCP server's stdio transport: rmcp's codec both ways (writes coalesced, see
/// [`crate::proxy::coalesce`]); every request with an id is answered. Once its [`FastLaneSlot`] is filled (after
/// the handshake), the tool calls the fast lane carries go from here straight to the child (`proxy/relay.rs`).
pub struct StdioFront<R, W> {
    read: FramedRead<R, RawLines>,
    write: CoalescingWriter<W>,
    fast: Arc<OnceLock<Arc<FrontLane>>>,
    /// Children with fast-lane requests framed but not yet written: flushed once per batch read from the client.
    unflushed: Vec<Arc<ChildLane>>,
}

/// Where the fast lane of one [`StdioFront`] is installed, after rmcp has taken the transport.
pub struct FastLaneSlot {
    slot: Arc<OnceLock<Arc<FrontLane>>>,
    sink: Arc<dyn crate::proxy::coalesce::Sink<ServerJsonRpcMessage>>,
}

impl FastLaneSlot {
    /// Relays this client's proxied tool calls through the fast lane from now on.
    pub fn install(
        self,
        proxy: crate::proxy::Proxy,
        shape: crate::proxy::relay::ShapeError,
        reserved: fn(&str) -> bool,
        protocol: Option<String>,
        peer: rmcp::Peer<rmcp::RoleServer>,
    ) {
        let lane = FrontLane::new(proxy, self.sink, shape, reserved);
        if let Some(protocol) = protocol {
            lane.set_protocol(protocol);
        }
        // Its registry `proxy_call`s take the lane too, a child's question going to this client.
        lane.set_peer(peer);
        let _ = self.slot.set(lane);
    }
}

/// The request a `notifications/cancelled` from the client names, if the line is one.
fn cancelled_request(raw: &str) -> Option<RequestId> {
    if !raw.contains("notifications/cancelled") {
        return None;
    }
    match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(raw).ok()? {
        rmcp::model::JsonRpcMessage::Notification(n) => match n.notification {
            rmcp::model::ClientNotification::CancelledNotification(c) => c.params.request_id,
            _ => None,
        },
        _ => None,
    }
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Send + Unpin + 'static> StdioFront<R, W> {
    pub fn new((read, write): (R, W)) -> Self {
        StdioFront {
            read: FramedRead::new(
                read,
                RawLines(JsonRpcMessageCodec::new_with_max_length(
                    DEFAULT_MAX_LINE_LENGTH,
                )),
            ),
            write: CoalescingWriter::new(write),
            fast: Arc::default(),
            unflushed: Vec::new(),
        }
    }

    /// The next message for rmcp; the tool calls the fast lane takes are relayed on the way (their writes to the
    /// children are left to [`Self::flush_lanes`], which also runs whenever reading would wait).
    async fn next_message(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let next = if self.unflushed.is_empty() {
                self.read.next().await
            } else {
                match futures::FutureExt::now_or_never(self.read.next()) {
                    Some(next) => next,
                    None => {
                        self.flush_lanes();
                        self.read.next().await
                    }
                }
            };
            let raw = match next? {
                Ok(raw) => raw,
                Err(e) => {
                    tracing::error!("error reading stdin: {e}");
                    return None;
                }
            };
            if let Some(lane) = self.fast.get()
                && let Some(child) = lane.try_call(raw.get())
            {
                if !self.unflushed.iter().any(|c| Arc::ptr_eq(c, &child)) {
                    self.unflushed.push(child);
                }
                continue;
            }
            if let Some(message) = typed_request(raw.get()) {
                return Some(message);
            }
            if let Some(lane) = self.fast.get()
                && let Some(id) = cancelled_request(raw.get())
                && lane.cancel(&id)
            {
                continue;
            }
            if let Some(reply) = initialize_under_2026(raw.get().as_bytes()) {
                tokio::spawn(self.write.send(reply));
                continue;
            }
            match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(raw.get()) {
                Ok(message) => return Some(message),
                Err(e) => {
                    tracing::debug!("incoming message rmcp cannot type: {e}");
                    if let Some(reply) = reply_to_untyped(raw.get().as_bytes()) {
                        tokio::spawn(self.write.send(reply));
                    }
                }
            }
        }
    }

    /// Writes the fast-lane requests framed for children so far.
    fn flush_lanes(&mut self) {
        for lane in self.unflushed.drain(..) {
            lane.flush();
        }
    }

    /// The slot to install this front's fast lane in once the handshake is done.
    pub fn fast_lane_slot(&self) -> FastLaneSlot {
        FastLaneSlot {
            slot: self.fast.clone(),
            sink: Arc::new(self.write.clone()),
        }
    }
}

impl<R, W> Transport<RoleServer> for StdioFront<R, W>
where
    R: AsyncRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.write.send(item)
    }

    /// Cancel-safe (rmcp polls it in a `select!`): the line codec keeps partial input, and a reply to an untyped
    /// request is sent by its own task.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.next_message().await;
        // Fast-lane requests framed while reading go out together before anything else happens.
        self.flush_lanes();
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.close().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(s: &str) -> Option<Value> {
        reply_to_untyped(s.as_bytes()).map(|m| serde_json::to_value(m).unwrap())
    }

    #[test]
    fn requests_with_an_id_get_it_back() {
        let r = reply(r#"{"jsonrpc":"2.0","id":5,"method":"ping","params":3}"#).unwrap();
        assert_eq!(r["id"], 5);
        assert_eq!(r["error"]["code"], -32602);
        let r = reply(r#"{"jsonrpc":"2.0","id":"a","method":"tools/list","params":"x"}"#).unwrap();
        assert_eq!(r["id"], "a");
        let r = reply(r#"{"jsonrpc":"2.0","id":1,"method":7}"#).unwrap();
        assert_eq!(r["error"]["code"], -32600);
        assert_eq!(r["id"], 1);
        let r = reply(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).unwrap();
        assert!(r.get("id").is_none_or(Value::is_null), "{r}");
    }

    /// The typed decode of a request equals rmcp's own, `_meta` (progress token) included; what it does not type
    /// (other methods, bad params, notifications, responses) is left to rmcp.
    #[test]
    fn typed_requests_decode_exactly_as_rmcp_does() {
        let typed = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"},"_meta":{"progressToken":7}}}"#,
            r#"{"method":"tools/call","params":{"name":"a"},"jsonrpc":"2.0","id":"s"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":"c"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"resources/read","params":{"uri":"agent-discover://fx/a"}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"resources/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/templates/list"}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"prompts/list"}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p"},"argument":{"name":"a","value":"x"}}}"#,
        ];
        for line in typed {
            let ours = typed_request(line).unwrap_or_else(|| panic!("not typed: {line}"));
            let rmcp: RxJsonRpcMessage<RoleServer> = serde_json::from_str(line).unwrap();
            assert_eq!(
                serde_json::to_value(&ours).unwrap(),
                serde_json::to_value(&rmcp).unwrap(),
                "{line}"
            );
        }
        let untyped = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":5}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"x/custom"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            "not json",
        ];
        for line in untyped {
            assert!(typed_request(line).is_none(), "{line}");
        }
    }

    /// `initialize` under 2026-07-28 request metadata is a removed method (-32601 with its id); the legacy handshake
    /// and other methods are left to rmcp.
    #[test]
    fn initialize_under_2026_metadata_is_method_not_found() {
        let modern = r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"c","version":"1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let r = serde_json::to_value(initialize_under_2026(modern.as_bytes()).unwrap()).unwrap();
        assert_eq!(r["id"], 3);
        assert_eq!(r["error"]["code"], -32601);
        let legacy = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
        ];
        for line in legacy {
            assert!(initialize_under_2026(line.as_bytes()).is_none(), "{line}");
        }
    }

    #[test]
    fn notifications_responses_and_garbage_get_nothing() {
        assert!(reply(r#"{"jsonrpc":"2.0","method":"x/y","params":3}"#).is_none());
        assert!(reply(r#"{"jsonrpc":"2.0","id":3,"result":7}"#).is_none());
        assert!(reply("not json").is_none());
        assert!(reply("[1,2]").is_none());
    }
}
