//! The fast lane of `agent-discover mcp` (stdio front): a legacy client's `tools/call` of an allowed, approved tool of
//! a ready legacy stdio child goes from the front transport (`mcp/front.rs`) straight to the child's writer under an id
//! of its own, and the child's answer from the child transport (`typed.rs`) straight to the front's writer under the
//! client's id: no rmcp request task, handler future, child `Peer` round trip or response task per call. Messages are
//! rmcp's types framed by rmcp's codec both ways.
//!
//! What the normal path does for a call is done here too: the call timeout (reset by progress; the child is told of
//! the cancellation), progress forwarded to the client's token in the child's order and before the result, the
//! client's cancellation passed on to the child (and no answer, as rmcp gives none), a child that exits failing its
//! calls at once with its exit cause and stderr, the call log, metrics and the call observer, and the same tool error
//! shapes (SEP-1303, through the front's `shape`). Requests the child sends during a call (sampling, elicitation,
//! roots) and list changes go through rmcp's client service as before. Anything else falls back to the normal path
//! before the call starts: a request with `_meta` beyond a progress token (2026-07-28 clients), an input-required
//! retry, a 2026-07-28 child, a tool not exposed now (pins, filters), a child not running.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use std::borrow::Cow;

use rmcp::model::{
    CallToolResponse, CallToolResult, CancelledNotification, CancelledNotificationParam,
    ClientJsonRpcMessage, ClientNotification, ErrorData, JsonRpcError, JsonRpcVersion2_0,
    NumberOrString, ProgressNotification, ProgressNotificationParam, ProgressToken, RequestId,
    ServerJsonRpcMessage, ServerNotification, ServerResult,
};
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::codec::Encoder;

use super::coalesce::Sink;
use super::{Inner, Proxy, StderrRing, exited_during_call};
use ad_core::error::Error;

/// Fast-lane request ids and progress tokens to a child start here. rmcp numbers its own requests and tokens with a
/// `u32` counter from 0, so the two never meet on one child connection.
const FAST_BASE: i64 = 1 << 40;

/// The fast-lane number in a request id or progress token, if it is one.
fn fast_number(id: &NumberOrString) -> Option<i64> {
    match id {
        NumberOrString::Number(n) if *n >= FAST_BASE => Some(*n),
        _ => None,
    }
}

/// How a front shapes a failed call for its client: the tool error result with `{error, code, kind, ...}`, or the
/// child's JSON-RPC error where the normal path passes it on.
pub type ShapeError = fn(&Proxy, &str, &str, Error) -> Result<CallToolResponse, ErrorData>;

/// One stdio client's end of the fast lane: where answers go, and what is not a proxied tool.
pub struct FrontLane {
    proxy: Proxy,
    sink: Arc<dyn Sink<ServerJsonRpcMessage>>,
    shape: ShapeError,
    /// Names the front serves itself (the registry tool, agent tools), never relayed.
    reserved: fn(&str) -> bool,
}

impl FrontLane {
    pub fn new(
        proxy: Proxy,
        sink: Arc<dyn Sink<ServerJsonRpcMessage>>,
        shape: ShapeError,
        reserved: fn(&str) -> bool,
    ) -> Arc<FrontLane> {
        Arc::new(FrontLane {
            proxy,
            sink,
            shape,
            reserved,
        })
    }

    /// Relays the client's message `raw` when it is a `tools/call` the fast lane carries: the request is framed for
    /// the child, whose lane is returned (the caller flushes it, once per batch of requests: [`ChildLane::flush`]).
    /// `None` otherwise: the message is the normal path's, untouched.
    pub fn try_call(self: &Arc<Self>, raw: &str) -> Option<Arc<ChildLane>> {
        let (id, params) = read_call(raw)?;
        if (self.reserved)(&params.name) {
            return None;
        }
        let (lane, tool) = self.proxy.fast_target(&params.name)?;
        let token = params.meta.and_then(|m| m.progress_token);
        lane.start(self.clone(), id, token, tool, params.arguments);
        Some(lane)
    }

    /// Writes the answers and progress framed for this client so far.
    pub(crate) fn flush(&self) {
        self.sink.flush_now();
    }

    /// The client cancelled request `id`: when it is a fast-lane call of this front, the child is told and the call
    /// ends without an answer. False when it is not one (rmcp's to handle).
    pub fn cancel(self: &Arc<Self>, id: &RequestId) -> bool {
        self.proxy
            .fast_lanes()
            .iter()
            .any(|lane| lane.cancel_from(self, id))
    }
}

/// One fast-lane call in flight.
struct FastCall {
    number: i64,
    front: Arc<FrontLane>,
    front_id: RequestId,
    client_token: Option<ProgressToken>,
    tool: String,
    /// The arguments as the client wrote them (for the call log).
    args: Option<Box<RawValue>>,
    started: std::time::Instant,
    /// The call's start, or the child's last progress on it: the deadline is this plus the call timeout.
    last_progress: Instant,
}

#[derive(Default)]
struct LaneState {
    calls: Vec<FastCall>,
    /// When the reaper wakes next (`None`: it waits to be told of a call).
    armed: Option<Instant>,
    reaper: bool,
    /// The child is gone: no more calls, the reaper ends.
    closed: bool,
}

/// One stdio child's end of the fast lane, shared by its transport (answers and progress) and the proxy (calls).
pub struct ChildLane {
    server: String,
    server_id: i64,
    timeout: Duration,
    writer: Arc<dyn Sink<ClientJsonRpcMessage>>,
    stderr: Arc<StderrRing>,
    exited: watch::Receiver<Option<String>>,
    inner: Weak<Inner>,
    state: Mutex<LaneState>,
    /// Calls answered with a plain result whose answer is framed but not yet recorded: recorded once the answers
    /// are written ([`ChildLane::record_answered`]), so that the call log and metrics do not delay them.
    answered: Mutex<Vec<Finished>>,
    wake: Notify,
    next: AtomicI64,
    /// Calls relayed by any child's fast lane (`status`, tests).
    relayed: Arc<AtomicU64>,
}

impl ChildLane {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        inner: Weak<Inner>,
        server: String,
        server_id: i64,
        timeout: Duration,
        writer: Arc<dyn Sink<ClientJsonRpcMessage>>,
        stderr: Arc<StderrRing>,
        exited: watch::Receiver<Option<String>>,
        relayed: Arc<AtomicU64>,
    ) -> ChildLane {
        ChildLane {
            server,
            server_id,
            timeout,
            writer,
            stderr,
            exited,
            inner,
            state: Mutex::default(),
            answered: Mutex::default(),
            wake: Notify::new(),
            next: AtomicI64::new(FAST_BASE),
            relayed,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn start(
        self: &Arc<Self>,
        front: Arc<FrontLane>,
        front_id: RequestId,
        client_token: Option<ProgressToken>,
        tool: String,
        args: Option<&RawValue>,
    ) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let request = ChildCall {
            jsonrpc: JsonRpcVersion2_0,
            id: number,
            method: "tools/call",
            params: ChildCallParams {
                meta: ProgressMeta {
                    progress_token: Some(ProgressToken(NumberOrString::Number(number))),
                },
                name: &tool,
                arguments: args,
            },
        };
        let started = std::time::Instant::now();
        let now = Instant::from_std(started);
        // Framed before the call is registered: an answer cannot come before the request is written (by the flush).
        let framed = frame(&*self.writer, &request);
        let call = FastCall {
            number,
            front,
            front_id,
            client_token,
            tool,
            args: args.map(ToOwned::to_owned),
            started,
            last_progress: now,
        };
        let mut state = self.state();
        if state.closed || !framed {
            drop(state);
            let error = self.exit_error();
            return self.finish(call, Err(error), Reply::Now);
        }
        self.relayed.fetch_add(1, Ordering::Relaxed);
        let deadline = now + self.timeout;
        if !state.reaper {
            state.reaper = true;
            state.armed = Some(deadline);
            tokio::spawn(self.clone().reap());
        } else if state.armed.is_none_or(|armed| deadline < armed) {
            state.armed = Some(deadline);
            self.wake.notify_one();
        }
        state.calls.push(call);
    }

    /// Writes the requests framed for this child so far.
    pub fn flush(&self) {
        self.writer.flush_now();
    }

    fn take(&self, number: i64) -> Option<FastCall> {
        let mut state = self.state();
        let i = state.calls.iter().position(|c| c.number == number)?;
        Some(state.calls.swap_remove(i))
    }

    /// A line from the child that answers request `id`: true when it was a fast-lane call's (handled here, or late
    /// and dropped), false when it is not a fast-lane id.
    /// The answer is framed for its client, whose front is added to `dirty` for the reader to flush.
    pub(super) fn answer(
        &self,
        id: &RequestId,
        result: Option<&RawValue>,
        parts: &super::typed::Parts,
        dirty: &mut Vec<Arc<FrontLane>>,
    ) -> bool {
        let Some(number) = fast_number(id) else {
            return false;
        };
        // Late (after a timeout or cancellation): dropped, as rmcp drops answers to requests it no longer awaits.
        let Some(call) = self.take(number) else {
            return true;
        };
        // A plain tool result goes to the client as the child wrote it; anything else is decoded and shaped.
        if let Some(result) = result
            && let Some((ok, text)) = plain_result(result.get())
        {
            let latency = call.started.elapsed();
            let answer = RawResponse {
                jsonrpc: JsonRpcVersion2_0,
                id: &call.front_id,
                result,
            };
            if frame(&*call.front.sink, &answer) {
                mark(dirty, call.front);
            }
            self.answered
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Finished {
                    tool: call.tool,
                    args: call.args,
                    latency,
                    ok,
                    text,
                });
            return true;
        }
        let res = match result {
            Some(result) => match super::typed::Expect::CallTool.decode(result.get()) {
                Some(ServerResult::CallToolResult(r)) => Ok(r),
                _ => Err(Error::Upstream {
                    server: self.server.clone(),
                    message: "the server answered tools/call with something that is not a tool result \
                              (a task or an input request), which agent-discover does not relay here"
                        .into(),
                }),
            },
            None => match serde_json::from_str::<JsonRpcError>(&parts.text()) {
                // The child's own JSON-RPC error, as the normal path keeps it.
                Ok(e) => Err(Error::Child {
                    server: self.server.clone(),
                    error: e.error,
                }),
                Err(e) => Err(Error::Upstream {
                    server: self.server.clone(),
                    message: format!("unreadable answer: {e}"),
                }),
            },
        };
        self.finish(call, res, Reply::Deferred(dirty));
        true
    }

    /// A progress notification from the child: true when it belongs to a fast-lane call (forwarded to the client's
    /// token, if it gave one, and the call's deadline moved), false otherwise.
    pub(super) fn progress(
        &self,
        params: &ProgressNotificationParam,
        dirty: &mut Vec<Arc<FrontLane>>,
    ) -> bool {
        let Some(number) = fast_number(&params.progress_token.0) else {
            return false;
        };
        let target = {
            let mut state = self.state();
            let Some(call) = state.calls.iter_mut().find(|c| c.number == number) else {
                return true;
            };
            call.last_progress = Instant::now();
            call.client_token
                .clone()
                .map(|token| (token, call.front.clone()))
        };
        if let Some((token, front)) = target {
            let mut forwarded = params.clone();
            forwarded.progress_token = token;
            let framed = front.sink.frame_now(&ServerJsonRpcMessage::notification(
                ServerNotification::ProgressNotification(ProgressNotification::new(forwarded)),
            ));
            if framed {
                mark(dirty, front);
            }
        }
        true
    }

    /// The client of `front` cancelled its request `id`: when it is a call of this child, tells the child and ends
    /// the call (recorded, not answered).
    fn cancel_from(&self, front: &Arc<FrontLane>, id: &RequestId) -> bool {
        let number = {
            let state = self.state();
            match state
                .calls
                .iter()
                .find(|c| Arc::ptr_eq(&c.front, front) && c.front_id == *id)
            {
                Some(c) => c.number,
                None => return false,
            }
        };
        let Some(call) = self.take(number) else {
            return false;
        };
        self.cancel_child(number, "cancelled by the client");
        let error = Error::Upstream {
            server: self.server.clone(),
            message: "cancelled by the client".into(),
        };
        self.finish(call, Err(error), Reply::None);
        true
    }

    fn cancel_child(&self, number: i64, reason: &str) {
        let notification =
            ClientJsonRpcMessage::notification(ClientNotification::CancelledNotification(
                CancelledNotification::new(CancelledNotificationParam::new(
                    Some(RequestId::Number(number)),
                    Some(reason.to_owned()),
                )),
            ));
        self.writer.send_now(&notification);
    }

    /// The child is gone (its process exited, or its stdout ended): every call fails now, later ones at once.
    pub(super) fn close(&self) {
        let calls = {
            let mut state = self.state();
            state.closed = true;
            std::mem::take(&mut state.calls)
        };
        self.wake.notify_one();
        for call in calls {
            let error = self.exit_error();
            self.finish(call, Err(error), Reply::Now);
        }
    }

    /// The child's stdout ended: wait briefly for the exit watcher so the error names the real cause (exit code,
    /// stderr), then fail what is left.
    pub(super) fn on_eof(self: &Arc<Self>) {
        if self.state().calls.is_empty() {
            self.state().closed = true;
            self.wake.notify_one();
            return;
        }
        let lane = self.clone();
        tokio::spawn(async move {
            let mut exited = lane.exited.clone();
            let _ = tokio::time::timeout(Duration::from_secs(1), exited.wait_for(|c| c.is_some()))
                .await;
            lane.close();
        });
    }

    fn exit_error(&self) -> Error {
        let cause = self
            .exited
            .borrow()
            .clone()
            .unwrap_or_else(|| "its stdout closed".to_owned());
        exited_during_call(&self.server, &cause, &self.stderr)
    }

    /// Times calls out: sleeps until the earliest deadline (progress moves deadlines lazily: a call whose child
    /// reported progress meanwhile is re-armed, as in `call.rs`). One task per child, woken only when a call's
    /// deadline comes before the one it sleeps towards.
    async fn reap(self: Arc<Self>) {
        loop {
            let (expired, next) = {
                let mut state = self.state();
                if state.closed {
                    state.reaper = false;
                    return;
                }
                let now = Instant::now();
                let mut expired = Vec::new();
                let mut i = 0;
                while i < state.calls.len() {
                    if state.calls[i].last_progress + self.timeout <= now {
                        expired.push(state.calls.swap_remove(i));
                    } else {
                        i += 1;
                    }
                }
                let next = state
                    .calls
                    .iter()
                    .map(|c| c.last_progress + self.timeout)
                    .min();
                state.armed = next;
                (expired, next)
            };
            for call in expired {
                self.cancel_child(call.number, "timed out in agent-discover");
                let error = Error::Timeout {
                    server: self.server.clone(),
                    what: "tool call",
                    ms: self.timeout.as_millis() as u64,
                };
                self.finish(call, Err(error), Reply::Now);
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        // Not a tokio timer: see `clock.rs`.
                        _ = ad_core::clock::sleep_until(at.into_std()) => {}
                        _ = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }

    /// Records a finished call as the normal path does (metrics, call log, observer) and answers the client, unless
    /// it cancelled.
    fn finish(&self, mut call: FastCall, res: Result<CallToolResult, Error>, reply: Reply<'_>) {
        let res = res.map(CallToolResponse::Complete);
        let (ok, text) = super::outcome(&res);
        self.record([Finished {
            tool: call.tool.clone(),
            args: call.args.take(),
            latency: call.started.elapsed(),
            ok,
            text,
        }]);
        if matches!(reply, Reply::None) {
            return;
        }
        let shaped = match res {
            Ok(r) => Ok(r),
            Err(e) => (call.front.shape)(&call.front.proxy, &self.server, &call.tool, e),
        };
        let message = match shaped {
            Ok(response) => {
                // What rmcp's server handler does for a legacy client (the fast lane serves only those).
                let mut result = ServerResult::from(response);
                result.strip_result_type_for_legacy_peer();
                result.strip_non_object_output_for_legacy_peer();
                ServerJsonRpcMessage::response(result, call.front_id)
            }
            Err(error) => ServerJsonRpcMessage::error(error, Some(call.front_id)),
        };
        match reply {
            Reply::Deferred(dirty) => {
                if call.front.sink.frame_now(&message) {
                    mark(dirty, call.front);
                }
            }
            _ => call.front.sink.send_now(&message),
        }
    }

    /// Records finished calls as the normal path does (metrics, call log, observer).
    fn record(&self, calls: impl IntoIterator<Item = Finished>) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        for c in calls {
            inner.record_call(
                &self.server,
                self.server_id,
                c.tool,
                logged_args(c.args),
                c.latency,
                c.ok,
                c.text,
            );
        }
    }

    /// Records the calls answered since the last time (their answers have been written).
    pub(super) fn record_answered(&self) {
        // Only the child's reader pushes and records, so holding the list meanwhile blocks nobody (and keeps its
        // allocation for the next batch).
        let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        if !answered.is_empty() {
            self.record(answered.drain(..));
        }
    }
}

/// A finished call, to be recorded.
struct Finished {
    tool: String,
    args: Option<Box<RawValue>>,
    latency: Duration,
    ok: bool,
    text: String,
}

/// Whether and when a finished call is answered.
enum Reply<'a> {
    /// Not at all (the client cancelled it).
    None,
    /// Written now.
    Now,
    /// Framed now, written when the reader flushes the fronts in `dirty` (once per batch it read).
    Deferred(&'a mut Vec<Arc<FrontLane>>),
}

/// Frames `message` for `sink` with rmcp's codec.
fn frame<T, M: Serialize>(sink: &dyn Sink<T>, message: &M) -> bool {
    sink.frame_with(&mut |buf| {
        JsonRpcMessageCodec::<&M>::default()
            .encode(message, buf)
            .is_ok()
    })
}

/// Adds `front` to the fronts to flush, once.
fn mark(dirty: &mut Vec<Arc<FrontLane>>, front: Arc<FrontLane>) {
    if !dirty.iter().any(|f| Arc::ptr_eq(f, &front)) {
        dirty.push(front);
    }
}

/// The arguments of a call as the call log keeps them: as the client wrote them (an object), or `null`.
fn logged_args(args: Option<Box<RawValue>>) -> ad_registry::calllog::Args {
    args.map(Into::into)
        .unwrap_or_else(|| serde_json::Value::Null.into())
}

/// A client's message when it is a `tools/call` the fast lane can relay as written: its id and parameters.
fn read_call(raw: &str) -> Option<(RequestId, RawCallParams<'_>)> {
    let call: RawCall<'_> = serde_json::from_str(raw).ok()?;
    // rmcp types the arguments as an object (or none): anything else is the normal path's to refuse.
    let args_fit = call
        .params
        .arguments
        .is_none_or(|a| a.get().starts_with('{'));
    (call.jsonrpc == "2.0" && call.method == "tools/call" && args_fit)
        .then_some((call.id, call.params))
}

/// A client's `tools/call` as the fast lane reads it: borrowed, its arguments left as the client wrote them. A field
/// beyond these (a task request, input responses, request state, `_meta` beyond a progress token, as 2026-07-28
/// clients send) makes the parse fail and leaves the message to the normal path. Checked against rmcp's own
/// decoding in the tests below.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall<'a> {
    /// "2.0" (checked after the parse: rmcp's own type for it reads it into a `String` first).
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: RawCallParams<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(default, rename = "_meta")]
    meta: Option<ProgressMeta>,
}

/// Request metadata holding at most a progress token.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressMeta {
    #[serde(
        default,
        rename = "progressToken",
        skip_serializing_if = "Option::is_none"
    )]
    progress_token: Option<ProgressToken>,
}

/// The request to the child: rmcp's `tools/call` request shape (a test checks rmcp reads it back as one), with the
/// arguments copied as the client wrote them.
#[derive(Serialize)]
struct ChildCall<'a> {
    jsonrpc: JsonRpcVersion2_0,
    id: i64,
    method: &'static str,
    params: ChildCallParams<'a>,
}

#[derive(Serialize)]
struct ChildCallParams<'a> {
    #[serde(rename = "_meta")]
    meta: ProgressMeta,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a RawValue>,
}

/// The answer to the client: rmcp's response shape under the client's id, with the result as the child wrote it.
#[derive(Serialize)]
struct RawResponse<'a> {
    jsonrpc: JsonRpcVersion2_0,
    id: &'a RequestId,
    result: &'a RawValue,
}

/// What the fast lane reads of a tool result: enough to tell it is a plain one and to log it.
#[derive(Deserialize)]
struct PlainResult<'a> {
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    /// Present, `null` included (a `null` is not an object either).
    #[serde(
        default,
        rename = "structuredContent",
        borrow,
        deserialize_with = "super::typed::present"
    )]
    structured: Option<&'a RawValue>,
    #[serde(default, rename = "resultType")]
    result_type: Option<IgnoredAny>,
    #[serde(default)]
    task: Option<IgnoredAny>,
    #[serde(default, rename = "inputRequests")]
    input_requests: Option<IgnoredAny>,
}

/// One content block: its type, its text, and whether the fields its type requires are there.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<IgnoredAny>,
    #[serde(default, rename = "mimeType")]
    mime_type: Option<IgnoredAny>,
    #[serde(default)]
    resource: Option<IgnoredAny>,
    #[serde(default)]
    uri: Option<IgnoredAny>,
    #[serde(default)]
    name: Option<IgnoredAny>,
}

impl Block<'_> {
    /// Whether rmcp would read this block as one of the spec's content blocks (its required fields present).
    fn is_known(&self) -> bool {
        match self.kind.as_ref() {
            "text" => self.text.is_some(),
            "image" | "audio" => self.data.is_some() && self.mime_type.is_some(),
            "resource" => self.resource.is_some(),
            "resource_link" => self.uri.is_some() && self.name.is_some(),
            _ => false,
        }
    }
}

/// Success and the call log's excerpt of a tool result a legacy client can get exactly as the child wrote it: the
/// content blocks are the spec's, there is no `resultType` to strip (a 2026-07-28 field), no task or input request,
/// and `structuredContent`, if any, is an object (what rmcp's handler would strip for a legacy client otherwise).
/// `None` for anything else, which is decoded and shaped as before.
fn plain_result(result: &str) -> Option<(bool, String)> {
    let r: PlainResult<'_> = serde_json::from_str(result).ok()?;
    if r.result_type.is_some()
        || r.task.is_some()
        || r.input_requests.is_some()
        || r.structured.is_some_and(|s| !s.get().starts_with('{'))
        || !r.content.iter().all(Block::is_known)
    {
        return None;
    }
    let text =
        ad_registry::calllog::excerpt(r.content.iter().filter_map(|b| match b.kind.as_ref() {
            "text" => b.text.as_deref(),
            _ => None,
        }));
    Some((r.is_error != Some(true), text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::RoleServer;
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, ClientRequest, GetMeta, JsonRpcMessage,
    };
    use rmcp::service::RxJsonRpcMessage;
    use serde_json::{Value, json};

    /// What rmcp reads from a client's line, when it is a `tools/call`: id, name, arguments, progress token.
    fn rmcp_call(line: &str) -> Option<(RequestId, String, Option<Value>, Option<ProgressToken>)> {
        let JsonRpcMessage::Request(r) =
            serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(line).ok()?
        else {
            return None;
        };
        let token = r.request.get_meta().get_progress_token();
        let ClientRequest::CallToolRequest(call) = r.request else {
            return None;
        };
        let p = call.params;
        Some((
            r.id,
            p.name.to_string(),
            p.arguments.map(Value::Object),
            token,
        ))
    }

    /// Every line the fast lane takes is a `tools/call` rmcp reads the same way; the lines it leaves (other
    /// methods, fields it does not relay, metadata beyond a progress token, arguments that are not an object) go to
    /// the normal path.
    #[test]
    fn the_calls_it_takes_read_as_rmcp_reads_them() {
        let taken = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}}"#,
            r#"{"method":"tools/call","params":{"arguments":{"a":[1,{"b":null}]},"name":"s__t","_meta":{"progressToken":"p"}},"id":"abc","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","_meta":{"progressToken":9}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"fx__echo","arguments":null,"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__\u00e9cho","arguments":{"t":"a\"b\\n"}}}"#,
        ];
        for line in taken {
            let (id, params) = read_call(line).unwrap_or_else(|| panic!("not taken: {line}"));
            let (rid, name, args, token) = rmcp_call(line).expect("rmcp reads it");
            assert_eq!(id, rid, "{line}");
            assert_eq!(params.name, name, "{line}");
            assert_eq!(
                params
                    .arguments
                    .map(|a| serde_json::from_str::<Value>(a.get()).unwrap()),
                args,
                "{line}"
            );
            assert_eq!(params.meta.and_then(|m| m.progress_token), token, "{line}");
        }
        let left = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":1000}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ];
        for line in left {
            assert!(read_call(line).is_none(), "taken: {line}");
        }
    }

    /// The request written to the child is rmcp's `tools/call` with the fast lane's id and progress token.
    #[test]
    fn the_request_to_the_child_is_rmcps_tools_call() {
        let args = RawValue::from_string(r#"{"text":"ping","n":[1,2]}"#.to_owned()).unwrap();
        for arguments in [Some(&*args), None] {
            let ours = ChildCall {
                jsonrpc: JsonRpcVersion2_0,
                id: FAST_BASE + 3,
                method: "tools/call",
                params: ChildCallParams {
                    meta: ProgressMeta {
                        progress_token: Some(ProgressToken(NumberOrString::Number(FAST_BASE + 3))),
                    },
                    name: "echo",
                    arguments,
                },
            };
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = arguments.map(|a| serde_json::from_str(a.get()).unwrap());
            params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(
                ProgressToken(NumberOrString::Number(FAST_BASE + 3)),
            ));
            let theirs = ClientJsonRpcMessage::request(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                RequestId::Number(FAST_BASE + 3),
            );
            let ours = serde_json::to_string(&ours).unwrap();
            let decoded: ClientJsonRpcMessage = serde_json::from_str(&ours).unwrap();
            assert_eq!(
                serde_json::to_value(&decoded).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
            assert_eq!(
                serde_json::from_str::<Value>(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
        }
    }

    /// The answer to the client is rmcp's response under the client's id, the result exactly as the child wrote it.
    #[test]
    fn the_answer_is_rmcps_response_with_the_childs_result() {
        let result = RawValue::from_string(
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"n":1},"_meta":{"x":2},"future":true}"#
                .to_owned(),
        )
        .unwrap();
        for id in [RequestId::Number(41), RequestId::String("s-1".into())] {
            let line = serde_json::to_string(&RawResponse {
                jsonrpc: JsonRpcVersion2_0,
                id: &id,
                result: &result,
            })
            .unwrap();
            let JsonRpcMessage::Response(r) =
                serde_json::from_str::<ServerJsonRpcMessage>(&line).unwrap()
            else {
                panic!("not a response: {line}");
            };
            assert_eq!(r.id, id);
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                v["result"],
                serde_json::from_str::<Value>(result.get()).unwrap()
            );
        }
    }

    /// Plain tool results pass as written, with success and the call log's excerpt; results a legacy client must
    /// not get as written, or that rmcp would not read as a tool result, are left to the typed path.
    #[test]
    fn plain_results_pass_others_are_decoded() {
        let plain = [
            (
                json!({"content": [{"type": "text", "text": "hi"}]}),
                true,
                "hi",
            ),
            (
                json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "isError": true}),
                false,
                "a\nb",
            ),
            (
                json!({"content": [], "structuredContent": {"k": [1]}, "_meta": {"m": 1}}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png", "annotations": {"priority": 1}}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "t"}}], "isError": false}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "text", "text": "x", "_meta": {"a": 1}}], "unknownField": 1}),
                true,
                "x",
            ),
        ];
        for (result, ok, text) in plain {
            let got = plain_result(&result.to_string());
            assert_eq!(got, Some((ok, text.to_owned())), "{result}");
            // rmcp reads each of them as a tool result too.
            assert!(
                serde_json::from_value::<CallToolResult>(result.clone()).is_ok(),
                "{result}"
            );
        }
        let decoded = [
            json!({"content": [{"type": "text", "text": "x"}], "resultType": "complete"}),
            json!({"content": [], "structuredContent": [1, 2]}),
            json!({"content": [], "structuredContent": null}),
            json!({"task": {"taskId": "t"}}),
            json!({"content": [], "inputRequests": {}}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [{"type": "image", "data": "AA=="}]}),
            json!({"content": [{"type": "video", "data": "x"}]}),
            json!({"content": [{"type": "resource_link", "uri": "file:///a"}]}),
            json!({"content": [{"type": "text", "text": "x"}], "isError": "yes"}),
            json!({"structuredContent": {"a": 1}}),
            json!([1]),
        ];
        for result in decoded {
            assert_eq!(plain_result(&result.to_string()), None, "{result}");
        }
    }
}
