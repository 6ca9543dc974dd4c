//! A 2026-07-28 client's fast-lane call whose legacy child asks the client something mid-call (sampling,
//! elicitation, roots) is handed to an exchange of `held.rs`, as the normal path would have run it from the start:
//! the child's request is held and the client gets an input-required result (or the refusal and -32021 when it did
//! not declare the capability); its retry goes the normal way and finds the exchange by its token. The lane keeps
//! the call's routing (the child's answer, progress, the timeout, the child's exit) and reports its end to the
//! exchange instead of answering the client; the exchange's first answer (or the call's end) is recorded and
//! written here, as the lane would have.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::model::{CallToolResponse, ProtocolVersion};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use ad_core::error::Error;

use super::ending::Reply;
use crate::caller::Caller;
use crate::held::store::{Binding, Outcome, Step};
use crate::state::{ChildLane, FastCall, Handed, Inner, Proxy, Slot};
use crate::sync::lock;

impl Inner {
    /// When a 2026-07-28 client's fast-lane call of `server` is in flight (the oldest, if several), hands it to a
    /// new exchange and returns where the child's request goes; `None` when there is no such call.
    pub(crate) fn hand_over_lane_call(
        self: &Arc<Self>,
        server: &str,
    ) -> Option<mpsc::Sender<Step>> {
        let child = match lock(&self.children).get(server)? {
            Slot::Running(child) => child.clone(),
            _ => return None,
        };
        let lane = child.lane.clone()?;
        let id = self.held.next.fetch_add(1, Ordering::Relaxed);
        let (tx, steps) = mpsc::channel(4);
        let client_cancel = CancellationToken::new();
        let (watch, watched) = oneshot::channel();
        // What the exchange needs of the call, taken while it is marked handed (the lane keeps routing it).
        let (number, binding, caller, taken) = {
            let mut state = lane.state();
            let call = state
                .calls
                .iter_mut()
                .find(|c| (c.modern.is_some() || c.asks_caller) && c.handed.is_none())?;
            let args = call
                .args
                .as_deref()
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok());
            // As `call_held` binds a tool call's token.
            let binding = Binding::new(&child.name, "tools/call", &call.tool, args.as_ref());
            // A legacy client's `proxy_call` is asked through its peer (or refused, as `drive` does).
            let caller = Caller {
                progress_token: call.client_token.clone(),
                cancel: Some(client_cancel.clone()),
                protocol: call
                    .modern
                    .is_some()
                    .then_some(ProtocolVersion::V_2026_07_28),
                capabilities: call.modern.as_deref().cloned(),
                peer: call
                    .modern
                    .is_none()
                    .then(|| call.front.peer.get().cloned())
                    .flatten(),
                questions_to_caller: call.asks_caller,
                ..Caller::default()
            };
            // The exchange's answer is the lane's to write: its client, id and spans move to it.
            let taken = FastCall {
                number: call.number,
                front: call.front.clone(),
                front_id: call.front_id.clone(),
                client_token: None,
                tool: call.tool.clone(),
                args: call.args.clone(),
                started: call.started,
                last_progress: call.last_progress,
                spans: call.spans.take(),
                modern: call.modern.clone(),
                handed: None,
                asks_caller: call.asks_caller,
                admitted: call.admitted.take(),
            };
            call.handed = Some(Box::new(Handed {
                steps: tx.clone(),
                exchange: id,
                cancel: client_cancel,
                _watch: watch,
            }));
            (call.number, binding, caller, taken)
        };
        lock(&self.held.asking)
            .entry(child.name.clone())
            .or_default()
            .push((id, tx.clone()));
        let cancel = CancellationToken::new();
        // The exchange gives up on the call (the client cancelled, or nobody came back for a held request): the
        // child is told, as the normal path's call would.
        let abandon = {
            let (lane, cancel) = (lane.clone(), cancel.clone());
            async move {
                tokio::select! {
                    _ = cancel.cancelled() => lane.abandon(number),
                    _ = watched => {}
                }
            }
        };
        tokio::spawn(abandon);
        let proxy = Proxy {
            inner: self.clone(),
        };
        tokio::spawn(async move {
            let res = proxy
                .drive(&child, id, steps, binding, &caller, cancel, None)
                .await;
            let res = match res {
                Ok(Outcome::Call(r)) => Ok(r),
                Ok(_) => Err(Error::Upstream {
                    server: child.name.clone(),
                    message: "a tool call ended with another request's result".into(),
                }),
                Err(e) => Err(e),
            };
            // A cancelled client gets no answer (as rmcp gives none); the call is recorded.
            let reply = if caller.cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
                Reply::None
            } else {
                Reply::Now
            };
            lane.conclude(taken, res, reply);
        });
        Some(tx)
    }
}

impl ChildLane {
    /// The end of a handed call, reported to its exchange.
    pub(super) fn report(&self, handed: Handed, res: Result<CallToolResponse, Error>) {
        if let Some(inner) = self.inner.upgrade() {
            inner.held.forget(&self.server, handed.exchange);
        }
        let step = Step::Done(res.map(Outcome::Call));
        if let Err(mpsc::error::TrySendError::Full(step)) = handed.steps.try_send(step) {
            let steps = handed.steps.clone();
            tokio::spawn(async move { steps.send(step).await });
        }
    }

    /// A handed call its exchange gave up on: the child is told, and the exchange hears the call ended.
    fn abandon(&self, number: i64) {
        let Some(call) = self.take(number) else {
            return;
        };
        self.cancel_child(number, "cancelled by the client");
        let error = Error::Upstream {
            server: self.server.clone(),
            message: "cancelled by the client".into(),
        };
        self.finish(call, Err(error), Reply::None);
    }
}
