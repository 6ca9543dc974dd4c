//! The fast lane of `agent-discover mcp` (stdio front): a client's `tools/call` of an allowed, approved tool of
//! a ready stdio child goes from the front transport (`mcp/front.rs`) straight to the child's writer under an id
//! of its own, and the child's answer from the child transport (`typed.rs`) straight to the front's writer under the
//! client's id: no rmcp request task, handler future, child `Peer` round trip or response task per call. Messages are
//! rmcp's types framed by rmcp's codec both ways.
//!
//! What the normal path does for a call is done here too: the call timeout (reset by progress; the child is told of
//! the cancellation), progress forwarded to the client's token in the child's order and before the result, the
//! client's cancellation passed on to the child (and no answer, as rmcp gives none), a child that exits failing its
//! calls at once with its exit cause and stderr, the call log, metrics and the call observer, and the same tool error
//! shapes (SEP-1303, through the front's `shape`). A 2026-07-28 client's call (its `_meta` envelope checked as rmcp
//! checks it) is taken too: its result is decoded and gets `resultType: "complete"`, its errors rmcp's 2026 codes.
//! Requests the child sends during a legacy client's call (sampling, elicitation, roots) and list changes go through
//! rmcp's client service as before; during a 2026-07-28 client's call, the child's request hands the call to an
//! exchange of `held.rs` (`relay/handover.rs`), so the client gets the input-required result (or -32021) the normal
//! path gives, and its retry goes the normal way. A legacy client's registry `proxy_call` of a tool the lane may
//! call is relayed the same way (`relay/registry.rs`): its answer is the child's result, as `proxy_call` gives it,
//! and a child's question mid-call hands it to an exchange that asks this client alone, as `proxy_call` does.
//! Anything else falls back to the normal path before the call starts: `_meta` beyond a progress token, trace
//! context and the 2026-07-28 envelope (a log level, say), an envelope of another revision or one rmcp would refuse,
//! an input-required retry, a tool not exposed now (pins, filters), a child not running, a 2026-07-28 client's
//! `proxy_call`, any `proxy_call` of a 2026-07-28 child, a legacy HTTP client's call of one (`http/lane.rs`), a call
//! of a 2026-07-28 child that serves tasks (SEP-2663) by a client that takes them (the answer may be a task, which the
//! normal path relays: `tasks.rs`), or any `proxy_call` with tracing on. A ready 2026-07-28 child's other calls are
//! taken (`relay/crossing.rs`): each request carries the envelope the normal path's does, a complete result is
//! decoded as the normal path decodes it, and an input-required answer goes to a 2026-07-28 client as it is, while a
//! legacy client's call is handed to the normal path's rounds (`Inner::after_round`). With tracing on, the lane makes the call's
//! two spans itself (the served request's and the proxied call's, `spans.rs`), takes the client's
//! `_meta.traceparent` and hands the child its own. A call of a tool some policy is scoped to stays in the lane only
//! when the policies allow it at once for this front's caller (`relay/policed.rs`).
//!
//! The lane's data ([`FrontLane`], [`ChildLane`], the calls in flight) is declared in `state.rs` with the rest of the
//! object graph it points back into; its wire shapes are in `relay/wire.rs`.

mod crossing;
mod ending;
mod handover;
mod policed;
mod registry;
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    JsonRpcError, JsonRpcVersion2_0, NumberOrString, ProgressNotification,
    ProgressNotificationParam, ProgressToken, RequestId, ServerJsonRpcMessage, ServerNotification,
    ServerResult,
};
use rmcp::transport::async_rw::JsonRpcMessageCodec;
use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::codec::Encoder;

use ad_core::error::Error;

use crate::coalesce::Sink;
use crate::envelope::{Expect, Parts};
use crate::failure::exited_during_call;
use crate::spawn::StderrRing;
pub use crate::state::{ChildLane, FrontLane, ShapeError};
use crate::state::{FastCall, FastSpans, Finished, Inner, LaneState, Proxy};
use ending::{Reply, mark};
use wire::{
    ChildCall, ChildCallParams, ChildMeta, Era, FAST_BASE, ProgressMeta, RawResponse, fast_number,
    plain_result, read_call,
};

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
            protocol: std::sync::OnceLock::new(),
            peer: std::sync::OnceLock::new(),
        })
    }

    /// The client of this front (stdio): the lane takes its registry `proxy_call`s too (`relay/registry.rs`).
    pub fn set_peer(&self, peer: rmcp::Peer<rmcp::RoleServer>) {
        let _ = self.peer.set(peer);
    }

    /// The protocol revision of the client's session, recorded on the spans of its calls.
    pub fn set_protocol(&self, protocol: String) {
        let _ = self.protocol.set(protocol);
    }

    /// Relays the client's message `raw` when it is a `tools/call` the fast lane carries: the request is framed for
    /// the child, whose lane is returned (the caller flushes it, once per batch of requests: [`ChildLane::flush`]).
    /// `None` otherwise: the message is the normal path's, untouched.
    pub fn try_call(self: &Arc<Self>, raw: &str) -> Option<Arc<ChildLane>> {
        self.take_call(raw, None).map(|(_, lane)| lane)
    }

    /// [`FrontLane::try_call`] for a 2026-07-28 client's stateless request on the HTTP front (`http/lane.rs`): taken
    /// only when it carries the 2026-07-28 envelope, calls the tool its `Mcp-Name` header names (`name`), and that
    /// tool's input schema asks for no `Mcp-Param-*` header (SEP-2243's `x-mcp-header`, which rmcp checks against
    /// the request's headers). Returned with the call's id (to cancel it when the client goes away).
    pub fn try_stateless_call(
        self: &Arc<Self>,
        raw: &str,
        name: &str,
    ) -> Option<(RequestId, Arc<ChildLane>)> {
        self.take_call(raw, Some(name))
    }

    /// [`FrontLane::try_call`]; with `stateless`, [`FrontLane::try_stateless_call`]'s name.
    fn take_call(
        self: &Arc<Self>,
        raw: &str,
        stateless: Option<&str>,
    ) -> Option<(RequestId, Arc<ChildLane>)> {
        let (id, params) = read_call(raw)?;
        // Arguments that may hold a credential take the normal path, where the argument guard decides
        // (`callguard.rs`); the test is on the raw text, about a microsecond per kilobyte.
        if params
            .arguments
            .is_some_and(|a| ad_scan::guard::may_hold_secret(a.get()))
        {
            return None;
        }
        let meta = params.meta.unwrap_or_default();
        if stateless.is_some_and(|name| name != params.name) {
            return None;
        }
        if (self.reserved)(&params.name) {
            // A 2026-07-28 client's is the normal path's (below).
            if stateless.is_some() {
                return None;
            }
            // The registry's `proxy_call` of a tool the lane may call (`relay/registry.rs`).
            let (lane, tool, args) = self.proxy_call(&params.name, params.arguments)?;
            // Not of a 2026-07-28 child (the normal path carries it).
            if lane.envelope.get().is_some() {
                return None;
            }
            // A legacy client's only (a 2026-07-28 client's goes the normal way).
            let era = meta.era().ok().filter(Option::is_none)?;
            // The policies, when some are scoped to the tool (`relay/policed.rs`).
            if !self.policies_pass(&lane.server, &tool, args, false) {
                return None;
            }
            // Its server's limits, checked in the lane (`limits/`); a call they would hold or refuse goes the normal way.
            let admitted = self.proxy.inner.limits.admit_in_lane(&lane.server, &tool)?;
            lane.start(
                self.clone(),
                id.clone(),
                meta.progress_token,
                tool,
                args,
                None,
                era,
                true,
                admitted,
            );
            return Some((id, lane));
        }
        // A 2026-07-28 client's envelope is checked as rmcp checks it; one it would refuse goes the normal way.
        let era = meta.era().ok()?;
        if stateless.is_some() && era.is_none() {
            return None;
        }
        let (lane, tool, child_protocol) =
            self.proxy.fast_target(&params.name, stateless.is_some())?;
        // The policies, when some are scoped to the tool (`relay/policed.rs`).
        if !self.policies_pass(&lane.server, &tool, params.arguments, stateless.is_some()) {
            return None;
        }
        // A 2026-07-28 child's input requests are asked of a legacy client through its peer (`relay/crossing.rs`):
        // without one (the HTTP lane), its calls take the normal path.
        if lane.envelope.get().is_some() && era.is_none() && self.peer.get().is_none() {
            return None;
        }
        // Nor may the lane get a task back (a child serving tasks, a caller taking them): the normal path relays it.
        if lane.tasks.load(Ordering::Relaxed) {
            let takes_tasks = match &era {
                Some(caps) => caps.supports_tasks(),
                None => self
                    .peer
                    .get()
                    .and_then(|p| p.peer_info())
                    .is_some_and(|i| i.capabilities.supports_tasks()),
            };
            if takes_tasks {
                return None;
            }
        }
        // Its server's limits, checked in the lane (`limits/`); a call they would hold or refuse goes the normal way.
        let admitted = self.proxy.inner.limits.admit_in_lane(&lane.server, &tool)?;
        // With tracing on, the call's spans are made here (the served request's and the proxied call's), as the
        // normal path would (`spans.rs`).
        let spans = ad_core::trace::enabled().then(|| {
            crate::spans::fast_call(
                &lane.server,
                &params.name,
                &tool,
                &id,
                meta.traceparent.as_deref().and_then(|tp| {
                    ad_core::trace::SpanContext::parse(tp, meta.tracestate.as_deref())
                }),
                match &era {
                    Some(_) => Some(rmcp::model::ProtocolVersion::V_2026_07_28.as_str()),
                    None => self.protocol.get().map(String::as_str),
                },
                child_protocol.as_ref().map(|p| p.as_str()),
            )
        });
        lane.start(
            self.clone(),
            id.clone(),
            meta.progress_token,
            tool,
            params.arguments,
            spans,
            era,
            false,
            admitted,
        );
        Some((id, lane))
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
            envelope: std::sync::OnceLock::new(),
            tasks: Default::default(),
            crossing: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LaneState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        self: &Arc<Self>,
        front: Arc<FrontLane>,
        front_id: RequestId,
        client_token: Option<ProgressToken>,
        tool: String,
        args: Option<&RawValue>,
        mut spans: Option<Box<FastSpans>>,
        modern: Era,
        asks_caller: bool,
        admitted: crate::limits::Admission,
    ) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        // The proxied call's span is the child's parent.
        let (traceparent, tracestate) = match &mut spans {
            Some(spans) => spans.sent(number),
            None => (None, None),
        };
        let progress = ProgressMeta {
            progress_token: Some(ProgressToken(NumberOrString::Number(number))),
            traceparent,
            tracestate,
        };
        let meta = match self.envelope.get() {
            // A 2026-07-28 child's: the envelope as the normal path's request carries it (`relay/crossing.rs`).
            Some(envelope) => {
                ChildMeta::Modern(self.envelope_for(envelope, &front, &modern, progress))
            }
            None => ChildMeta::Legacy(progress),
        };
        let request = ChildCall {
            jsonrpc: JsonRpcVersion2_0,
            id: number,
            method: "tools/call",
            params: ChildCallParams {
                meta,
                name: &tool,
                arguments: args,
            },
        };
        let started = std::time::Instant::now();
        let now = Instant::from_std(started);
        // Framed and registered under one lock: the request may be written by another front's flush as soon as it is
        // framed, and its answer must then find the call (`answer`, which takes this lock).
        let mut state = self.state();
        let framed = !state.closed && frame(&*self.writer, &request);
        let call = FastCall {
            number,
            front,
            front_id,
            client_token,
            tool,
            args: args.map(ToOwned::to_owned),
            started,
            last_progress: now,
            spans,
            modern,
            handed: None,
            asks_caller,
            admitted: Some(admitted),
        };
        if !framed {
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
        self: &Arc<Self>,
        id: &RequestId,
        result: Option<&RawValue>,
        parts: &Parts,
        dirty: &mut Vec<Arc<FrontLane>>,
    ) -> bool {
        let Some(number) = fast_number(id) else {
            return false;
        };
        // Late (after a timeout or cancellation): dropped, as rmcp drops answers to requests it no longer awaits.
        let Some(call) = self.take(number) else {
            return true;
        };
        // A plain tool result goes to a legacy client as the child wrote it; anything else (every result for a
        // 2026-07-28 client, which gets `resultType`, and a handed call's, which its exchange answers) is decoded.
        if let Some(result) = result
            && call.modern.is_none()
            && call.handed.is_none()
            && !self.may_page(result.get().len())
            && !self.result_needs_guard(result.get())
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
            if let Some(spans) = call.spans {
                spans.end_plain(ok);
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
            Some(result) => match Expect::CallTool.decode(result.get()) {
                Some(ServerResult::CallToolResult(r)) => Ok(r),
                _ => match self.asks(&call, result) {
                    // A 2026-07-28 child asks for input: as the normal path has it (`relay/crossing.rs`).
                    Some(asked) => {
                        self.input_required(call, asked, dirty);
                        return true;
                    }
                    None => Err(Error::Upstream {
                        server: self.server.clone(),
                        message: "the server answered tools/call with something that is not a tool result \
                                  (a task or an input request), which agent-discover does not relay here"
                            .into(),
                    }),
                },
            },
            None => match serde_json::from_str::<JsonRpcError>(&parts.text()) {
                // The child's own JSON-RPC error, as the normal path keeps it.
                Ok(e) => Err(Error::Child {
                    server: self.server.clone(),
                    error: Box::new(e.error),
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
        if self.cancel_crossing(front, id) {
            return true;
        }
        let number = {
            let state = self.state();
            match state
                .calls
                .iter()
                .find(|c| Arc::ptr_eq(&c.front, front) && c.front_id == *id)
            {
                // Handed to an exchange: it watches the client's cancellation (`held.rs`).
                Some(FastCall {
                    handed: Some(handed),
                    ..
                }) => {
                    handed.cancel.cancel();
                    return true;
                }
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

    /// Whether a result of `bytes` (its JSON) may be over this server's paging limit: then it is decoded (and paged)
    /// rather than passed as the child wrote it.
    fn may_page(&self, bytes: usize) -> bool {
        self.inner
            .upgrade()
            .is_some_and(|inner| inner.page_limit(self.server_id, None, bytes).is_some())
    }
}

/// Frames `message` for `sink` with rmcp's codec.
fn frame<T, M: Serialize>(sink: &dyn Sink<T>, message: &M) -> bool {
    sink.frame_with(&mut |buf| {
        JsonRpcMessageCodec::<&M>::default()
            .encode(message, buf)
            .is_ok()
    })
}
