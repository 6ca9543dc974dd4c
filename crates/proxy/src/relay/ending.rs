//! How a relayed call ends: the result guards and paging as on the normal path, the breaker told how it went, the
//! call recorded as the normal path records it (metrics, call log, observer; a plain result's once its answer is
//! written), and the answer shaped for the client's revision and framed, now or when the reader flushes its batch;
//! or reported to the exchange that took the call over (`handover.rs`).

use std::sync::Arc;

use rmcp::model::{
    CallToolResponse, CallToolResult, ErrorCode, ResultType, ServerJsonRpcMessage, ServerResult,
};
use serde_json::value::RawValue;

use ad_core::error::Error;

use crate::accounting::outcome;
use crate::state::{ChildLane, FastCall, Finished, FrontLane};

impl ChildLane {
    /// Records a finished call as the normal path does (metrics, call log, observer) and answers the client, unless
    /// it cancelled.
    pub(super) fn finish(
        &self,
        mut call: FastCall,
        mut res: Result<CallToolResult, Error>,
        reply: Reply<'_>,
    ) {
        // The result guards, as on the normal path (`callguard.rs`).
        let note = match (&mut res, self.inner.upgrade()) {
            (Ok(r), Some(inner)) => crate::callguard::notes(&inner.guard_result(
                &self.server,
                self.server_id,
                &call.tool,
                r,
                call.spans.as_ref().map(|s| s.call.context()),
            )),
            _ => None,
        };
        // A legacy child's result has no `resultType`; a 2026-07-28 client requires one (stripped for others).
        let res = res.map(|mut r| {
            r.result_type.get_or_insert(ResultType::COMPLETE);
            CallToolResponse::Complete(r)
        });
        if let Some(handed) = call.handed.take() {
            return self.report(*handed, res);
        }
        self.conclude_noted(call, res, reply, note);
    }

    /// Records a call's end and answers its client (unless it cancelled): the lane's own, or an exchange's that
    /// took the call over (`handover.rs`).
    pub(super) fn conclude(
        &self,
        call: FastCall,
        res: Result<CallToolResponse, Error>,
        reply: Reply<'_>,
    ) {
        self.conclude_noted(call, res, reply, None);
    }

    /// [`ChildLane::conclude`] with the guards' note for the call log.
    fn conclude_noted(
        &self,
        mut call: FastCall,
        mut res: Result<CallToolResponse, Error>,
        reply: Reply<'_>,
        note: Option<String>,
    ) {
        // The breaker hears how it went (a call the client cancelled is no failure of the server).
        if let Some(admitted) = call.admitted.take() {
            admitted.finish(
                !matches!(reply, Reply::None) && matches!(&res, Err(e) if crate::limits::breaks(e)),
            );
        }
        // A result over its paging limit: its head and a link to the whole (`pages.rs`).
        let paged = match (&mut res, self.inner.upgrade()) {
            (Ok(CallToolResponse::Complete(r)), Some(inner)) => {
                let keep = inner.tool_has_output_schema(&self.server, &call.tool);
                inner.page_result(self.server_id, None, keep, None, r)
            }
            _ => None,
        };
        let (ok, mut text) = outcome(&res);
        if let Some(note) = note {
            text.insert_str(0, &note);
        }
        if let Some(p) = paged {
            text.insert_str(0, &p.note());
        }
        let spans = call.spans.take().map(|spans| spans.end_call(&res));
        self.record([Finished {
            tool: call.tool.clone(),
            args: call.args.take(),
            latency: call.started.elapsed(),
            ok,
            text,
        }]);
        if matches!(reply, Reply::None) {
            if let Some(served) = spans {
                crate::spans::end_fast_served(
                    served,
                    Err(("cancelled", "cancelled by the client")),
                );
            }
            return;
        }
        let shaped = match res {
            Ok(r) => Ok(r),
            Err(e) => (call.front.shape)(&call.front.proxy, &self.server, &call.tool, e),
        };
        if let Some(served) = spans {
            crate::spans::end_fast_shaped(served, &shaped);
        }
        let modern = call.modern.is_some();
        let message = match shaped {
            Ok(response) => {
                // What rmcp's server handler does for the client's revision.
                let mut result = ServerResult::from(response);
                if modern {
                    result.fill_missing_cache_hints();
                } else {
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
                ServerJsonRpcMessage::response(result, call.front_id)
            }
            Err(mut error) => {
                if modern && error.code == ErrorCode::RESOURCE_NOT_FOUND {
                    error.code = ErrorCode::INVALID_PARAMS;
                }
                ServerJsonRpcMessage::error(error, Some(call.front_id))
            }
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
                None,
            );
        }
    }

    /// Records the calls answered since the last time (their answers have been written).
    pub(crate) fn record_answered(&self) {
        // Only the child's reader pushes and records, so holding the list meanwhile blocks nobody (and keeps its
        // allocation for the next batch).
        let mut answered = self.answered.lock().unwrap_or_else(|p| p.into_inner());
        if !answered.is_empty() {
            self.record(answered.drain(..));
        }
    }
}

/// Whether and when a finished call is answered.
pub(super) enum Reply<'a> {
    /// Not at all (the client cancelled it).
    None,
    /// Written now.
    Now,
    /// Framed now, written when the reader flushes the fronts in `dirty` (once per batch it read).
    Deferred(&'a mut Vec<Arc<FrontLane>>),
}

/// Adds `front` to the fronts to flush, once.
pub(super) fn mark(dirty: &mut Vec<Arc<FrontLane>>, front: Arc<FrontLane>) {
    if !dirty.iter().any(|f| Arc::ptr_eq(f, &front)) {
        dirty.push(front);
    }
}

/// The arguments of a call as the call log keeps them: as the client wrote them (an object), or `null`.
fn logged_args(args: Option<Box<RawValue>>) -> ad_registry::calllog::Args {
    args.map(Into::into)
        .unwrap_or_else(|| serde_json::Value::Null.into())
}
