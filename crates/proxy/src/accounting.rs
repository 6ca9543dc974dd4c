//! Recording a finished proxied call, on the normal path and the fast lane alike: its metrics, the call log with an
//! excerpt of its answer, and the observer (the HTTP layer's histograms).

use std::time::Duration;

use rmcp::model::CallToolResponse;
use serde_json::{Map, Value};

use ad_core::error::Result;

use crate::state::{CallObserver, Inner, Proxy};
use crate::sync::lock;

impl Proxy {
    /// Registers a hook called after every proxied call (server, tool, latency, ok): the HTTP layer's histograms.
    pub fn set_call_observer(&self, f: CallObserver) {
        *lock(&self.inner.observer) = Some(f);
    }
}

/// A call's success and the call log's excerpt of its answer.
pub(super) fn outcome(res: &Result<CallToolResponse>) -> (bool, String) {
    match res {
        Ok(CallToolResponse::Complete(r)) => (
            r.is_error != Some(true),
            ad_registry::calllog::excerpt(
                r.content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.as_str())),
            ),
        ),
        Ok(CallToolResponse::Task(t)) => (true, format!("task {}", t.task.task_id)),
        Ok(_) => (true, "input required".to_owned()),
        Err(e) => (
            false,
            ad_registry::calllog::excerpt([e.to_string().as_str()]),
        ),
    }
}

impl Inner {
    /// Records a finished proxied call: metrics, the call log (with an excerpt of the answer, after `note`: how the
    /// call was approved) and the observer (the Prometheus histogram).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn account(
        &self,
        server: &str,
        server_id: i64,
        tool: &str,
        args: Option<Map<String, Value>>,
        latency: Duration,
        res: &Result<CallToolResponse>,
        note: Option<&str>,
        who: Option<&ad_core::identity::Principal>,
    ) {
        let (ok, mut text) = outcome(res);
        // How the call was approved (#27), ahead of its answer.
        if let Some(note) = note {
            text.insert_str(0, note);
        }
        let args = args.map(Value::Object).unwrap_or(Value::Null);
        self.record_call(
            server,
            server_id,
            tool.to_owned(),
            args.into(),
            latency,
            ok,
            text,
            who.map(ad_registry::calllog::Who::of),
        );
    }

    /// [`Inner::account`] for a call whose outcome is already summed up: success and the call log's excerpt.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_call(
        &self,
        server: &str,
        server_id: i64,
        tool: String,
        args: ad_registry::calllog::Args,
        latency: Duration,
        ok: bool,
        text: String,
        who: Option<ad_registry::calllog::Who>,
    ) {
        self.metrics.record(server_id, &tool, latency, ok);
        let observer = lock(&self.observer).clone();
        if let Some(observe) = observer {
            observe(server, &tool, latency, ok);
        }
        // Last: the call log keeps the tool's name (moved, not copied).
        self.calllog
            .record_by(server, tool, args, text, latency, ok, who);
    }
}
