//! Per (server, tool) call counters, gathered in memory and written to `server_metrics` in one transaction per
//! window: no call waits for SQLite, and only the first call of a window wakes the writer.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use ad_store::{CallSample, Store};

/// How long samples gather before one write.
const WINDOW: Duration = Duration::from_millis(250);

pub(super) struct CallMetrics {
    store: Store,
    state: Mutex<State>,
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// server id -> tool -> counters since the last write (ordered maps: cheaper than hashing per call).
    pending: BTreeMap<i64, BTreeMap<String, Pending>>,
    /// A write is due (the writer was woken and has not taken the pending counters yet).
    scheduled: bool,
}

#[derive(Default)]
struct Pending {
    calls: u64,
    errors: u64,
    latency_us: u64,
}

impl CallMetrics {
    /// Starts the writer task (it runs as long as the runtime does).
    pub(super) fn start(store: Store) -> Arc<CallMetrics> {
        let metrics = Arc::new(CallMetrics {
            store,
            state: Mutex::default(),
            wake: Notify::new(),
        });
        let m = metrics.clone();
        tokio::spawn(async move {
            loop {
                m.wake.notified().await;
                // Not a tokio timer, which would be pending while calls flow: see `clock.rs`.
                ad_core::clock::sleep(WINDOW).await;
                m.flush().await;
            }
        });
        metrics
    }

    /// Counts one finished call.
    pub(super) fn record(&self, server_id: i64, tool: &str, latency: Duration, ok: bool) {
        let wake = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let tools = st.pending.entry(server_id).or_default();
            let p = match tools.get_mut(tool) {
                Some(p) => p,
                None => tools.entry(tool.to_owned()).or_default(),
            };
            p.calls += 1;
            p.errors += u64::from(!ok);
            p.latency_us += latency.as_micros() as u64;
            !std::mem::replace(&mut st.scheduled, true)
        };
        if wake {
            self.wake.notify_one();
        }
    }

    /// Writes what is pending now.
    pub(super) async fn flush(&self) {
        let batch: Vec<CallSample> = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.scheduled = false;
            std::mem::take(&mut st.pending)
                .into_iter()
                .flat_map(|(server_id, tools)| {
                    tools.into_iter().map(move |(tool, p)| CallSample {
                        server_id,
                        tool,
                        calls: p.calls,
                        errors: p.errors,
                        latency_ms: (p.latency_us + 500) / 1000,
                    })
                })
                .collect()
        };
        if batch.is_empty() {
            return;
        }
        let store = self.store.clone();
        let written = tokio::task::spawn_blocking(move || store.record_calls(&batch))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        if let Err(e) = written {
            tracing::warn!(error = %e, "recording call metrics failed");
        }
    }
}
