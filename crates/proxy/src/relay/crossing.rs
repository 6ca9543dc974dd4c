//! A ready 2026-07-28 stdio child on the fast lane. Each request to it carries the envelope the normal path's does:
//! rmcp puts the child's revision, our client info and capabilities (`client.rs`) on every request to such a child,
//! and the normal path the calling client's capabilities (`call::caller_meta`); the lane builds it from the same
//! pieces. A complete result is decoded as the normal path decodes it (a legacy client gets it without
//! `resultType`, a 2026-07-28 client with it, `relay.rs`). An input-required result goes back to a 2026-07-28
//! client as it is, as on the normal path; for a legacy client, the call is handed to the normal path's rounds
//! (`Inner::after_round`): the client is asked (elicitation, sampling, roots) and the child called again with the
//! answers, through rmcp; the lane records the call and answers the client when the rounds end.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, InputRequiredResult, ProtocolVersion, RequestId,
    RequestMetaObject,
};
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;

use super::FrontLane;
use super::ending::Reply;
use super::wire::{Era, ProgressMeta};
use crate::caller::Caller;
use crate::state::{ChildLane, FastCall, Slot};
use crate::sync::lock;

impl ChildLane {
    /// Notes that this lane's child speaks `protocol` (2026-07-28): its requests carry the envelope rmcp gives them;
    /// `tasks` says (asked once) whether it declares the tasks extension.
    pub(crate) fn envelope_of(&self, protocol: &ProtocolVersion, tasks: impl FnOnce() -> bool) {
        self.envelope.get_or_init(|| {
            self.tasks
                .store(tasks(), std::sync::atomic::Ordering::Relaxed);
            let config = crate::client::child_client_config();
            RequestMetaObject::with_client_context(
                protocol.clone(),
                config.client_info,
                config.capabilities,
            )
        });
    }

    /// The `_meta` of a call's request to a 2026-07-28 child: `envelope`, then what the normal path adds for the
    /// calling client (its capabilities: a 2026-07-28 client's from its request, a legacy client's from its
    /// initialization, as rmcp's request context gives them), then the progress token and trace context.
    pub(super) fn envelope_for(
        &self,
        envelope: &RequestMetaObject,
        front: &FrontLane,
        modern: &Era,
        progress: ProgressMeta,
    ) -> RequestMetaObject {
        let caller = Caller {
            capabilities: match modern {
                Some(caps) => Some((**caps).clone()),
                None => front
                    .peer
                    .get()
                    .and_then(|p| p.peer_info())
                    .map(|i| i.capabilities.clone()),
            },
            ..Caller::default()
        };
        let mut meta = envelope.clone();
        meta.extend(crate::call::caller_meta(&caller));
        if let Some(token) = progress.progress_token {
            meta.set_progress_token(token);
        }
        if let Some(traceparent) = progress.traceparent {
            meta.set_traceparent(traceparent);
        }
        if let Some(tracestate) = progress.tracestate {
            meta.set_tracestate(tracestate);
        }
        meta
    }

    /// A 2026-07-28 child's input-required answer to `call`, if it is one.
    pub(super) fn asks(&self, call: &FastCall, result: &RawValue) -> Option<InputRequiredResult> {
        if self.envelope.get().is_none() || call.handed.is_some() || call.asks_caller {
            return None;
        }
        serde_json::from_str(result.get()).ok()
    }

    /// A call the child answered with input requests. A 2026-07-28 client gets them; a legacy client's call goes on
    /// in the normal path's rounds, which ask it and call the child again (`Inner::after_round`).
    pub(super) fn input_required(
        self: &Arc<Self>,
        call: FastCall,
        asked: InputRequiredResult,
        dirty: &mut Vec<Arc<FrontLane>>,
    ) {
        let asked = CallToolResponse::InputRequired(asked);
        let peer = call.front.peer.get().cloned();
        let (Some(peer), None) = (peer, &call.modern) else {
            // As `Inner::call` answers a caller that takes input-required results (or has no client to ask).
            return self.conclude(call, Ok(asked), Reply::Deferred(dirty));
        };
        let child =
            self.inner
                .upgrade()
                .and_then(|inner| match lock(&inner.children).get(&self.server) {
                    Some(Slot::Running(child)) => Some((inner.clone(), child.clone())),
                    _ => None,
                });
        let Some((inner, child)) = child else {
            let error = self.exit_error();
            return self.finish(call, Err(error), Reply::Deferred(dirty));
        };
        let cancel = CancellationToken::new();
        // The caller the normal path makes of this client's request (`Caller::of_call`).
        let caller = Caller {
            capabilities: peer.peer_info().map(|i| i.capabilities.clone()),
            peer: Some(peer),
            progress_token: call.client_token.clone(),
            cancel: Some(cancel.clone()),
            ..Caller::default()
        };
        let mut params = CallToolRequestParams::new(call.tool.clone());
        params.arguments = call
            .args
            .as_deref()
            .and_then(|a| serde_json::from_str(a.get()).ok());
        lock(&self.crossing).push((call.front.clone(), call.front_id.clone(), cancel.clone()));
        let lane = self.clone();
        tokio::spawn(async move {
            // The rounds watch the client's cancellation as on the normal path (the child is told).
            let res = inner.after_round(&child, params, &caller, asked).await;
            let (front, id) = (call.front.clone(), call.front_id.clone());
            lock(&lane.crossing).retain(|(f, i, _)| !(Arc::ptr_eq(f, &front) && *i == id));
            // A cancelled client gets no answer (as rmcp gives none); the call is recorded.
            let reply = if cancel.is_cancelled() {
                Reply::None
            } else {
                Reply::Now
            };
            lane.conclude(call, res, reply);
        });
    }

    /// The client cancelled request `id` while its call was in the normal path's rounds: true when it was one.
    pub(super) fn cancel_crossing(&self, front: &Arc<FrontLane>, id: &RequestId) -> bool {
        let crossing = lock(&self.crossing);
        match crossing
            .iter()
            .find(|(f, i, _)| Arc::ptr_eq(f, front) && i == id)
        {
            Some((_, _, cancel)) => {
                cancel.cancel();
                true
            }
            None => false,
        }
    }
}
