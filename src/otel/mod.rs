//! OpenTelemetry traces out of the process: the spans the MCP fronts (`mcp/served.rs`) and the proxy
//! (`ad_proxy::spans`) record, batched and posted to an OTLP/HTTP collector (`http/protobuf` or `http/json`),
//! configured by the standard `OTEL_*` variables (`config.rs`).
//!
//! Off by default, and then nothing runs: no sink is installed, so `trace::enabled()` is false and no span is made;
//! no task, no queue. On, one task owns a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`; a span that finds it full is
//! dropped and counted), sends a batch when it is full or `OTEL_BSP_SCHEDULE_DELAY` after its first span, and
//! flushes on shutdown. The wire format is written by hand (`encode.rs`): a few messages, no protobuf or
//! OpenTelemetry crates (BENCHMARKS.md measures what they would add to the build).

pub mod config;
pub mod encode;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use crate::trace::{Sink, Span};
use config::{Config, Protocol};
use encode::Resource;

/// The running exporter; [`Tracing::shutdown`] flushes what is queued.
pub struct Tracing {
    control: mpsc::UnboundedSender<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    dropped: Arc<AtomicU64>,
    timeout: std::time::Duration,
}

struct QueueSink {
    queue: mpsc::Sender<Span>,
    dropped: Arc<AtomicU64>,
}

impl Sink for QueueSink {
    fn export(&self, span: Span) {
        if self.queue.try_send(span).is_err() && self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                "the trace export queue is full: spans are being dropped (OTEL_BSP_MAX_QUEUE_SIZE)"
            );
        }
    }
}

/// Starts the exporter if the `OTEL_*` variables ask for it (on a runtime). An unsupported setting (gRPC, say) is
/// an error that stops the program, rather than traces silently missing.
pub fn start_from_env() -> anyhow::Result<Option<Tracing>> {
    match config::from_env(|k| std::env::var(k).ok()) {
        Ok(Some(config)) => Ok(start(config)),
        Ok(None) => Ok(None),
        Err(e) => Err(anyhow::anyhow!("OpenTelemetry configuration: {e}")),
    }
}

/// Installs the span sink and starts the export task; `None` if a sink was installed already.
pub fn start(config: Config) -> Option<Tracing> {
    let (queue, spans) = mpsc::channel(config.max_queue);
    let dropped = Arc::new(AtomicU64::new(0));
    let sink = QueueSink {
        queue,
        dropped: dropped.clone(),
    };
    if !crate::trace::install(Box::new(sink)) {
        return None;
    }
    let (control, commands) = mpsc::unbounded_channel();
    tracing::info!(endpoint = %config.endpoint, protocol = ?config.protocol, "exporting traces over OTLP");
    let timeout = config.timeout;
    let task = tokio::spawn(run(config, spans, commands));
    Some(Tracing {
        control,
        task,
        dropped,
        timeout,
    })
}

impl Tracing {
    /// Exports every span queued so far and stops the task (waiting at most one export timeout and a second).
    pub async fn shutdown(self) {
        let (done, flushed) = oneshot::channel();
        if self.control.send(done).is_ok() {
            let _ = tokio::time::timeout(self.timeout + std::time::Duration::from_secs(1), flushed)
                .await;
        }
        drop(self.control);
        self.task.abort();
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!(dropped, "spans were dropped: the export queue was full");
        }
    }
}

async fn run(
    config: Config,
    mut spans: mpsc::Receiver<Span>,
    mut commands: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
) {
    let exporter = Exporter::new(&config);
    let mut batch: Vec<Span> = Vec::with_capacity(config.max_batch);
    // When the oldest waiting span must go (no tokio timer pending meanwhile: `clock.rs`).
    let mut due: Option<Instant> = None;
    loop {
        let wait = async {
            match due {
                Some(at) => crate::clock::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let room = config.max_batch - batch.len();
        tokio::select! {
            n = spans.recv_many(&mut batch, room) => {
                if n == 0 {
                    exporter.send(&mut batch).await;
                    return;
                }
                due.get_or_insert_with(|| Instant::now() + config.delay);
                if batch.len() >= config.max_batch {
                    exporter.send(&mut batch).await;
                    due = None;
                }
            }
            _ = wait => {
                exporter.send(&mut batch).await;
                due = None;
            }
            command = commands.recv() => {
                // A flush: everything queued, in batches.
                while let Ok(span) = spans.try_recv() {
                    batch.push(span);
                    if batch.len() >= config.max_batch {
                        exporter.send(&mut batch).await;
                    }
                }
                exporter.send(&mut batch).await;
                due = None;
                match command {
                    Some(done) => { let _ = done.send(()); }
                    None => return,
                }
            }
        }
    }
}

struct Exporter {
    http: reqwest::Client,
    endpoint: String,
    protocol: Protocol,
    headers: http::HeaderMap,
    resource: Resource,
    failures: AtomicU64,
}

impl Exporter {
    fn new(config: &Config) -> Exporter {
        let mut headers = http::HeaderMap::new();
        for (k, v) in &config.headers {
            match (
                http::HeaderName::try_from(k.as_str()),
                http::HeaderValue::try_from(v.as_str()),
            ) {
                (Ok(k), Ok(v)) => {
                    headers.insert(k, v);
                }
                _ => {
                    tracing::warn!(header = %k, "an OTLP header that is not a valid HTTP header is left out")
                }
            }
        }
        Exporter {
            http: reqwest::Client::builder()
                .timeout(config.timeout)
                .build()
                .unwrap_or_default(),
            endpoint: config.endpoint.clone(),
            protocol: config.protocol,
            headers,
            resource: Resource {
                attributes: config.resource.clone(),
            },
            failures: AtomicU64::new(0),
        }
    }

    /// Posts one batch (emptied, whatever the outcome: a collector that is down loses spans, not memory).
    async fn send(&self, batch: &mut Vec<Span>) {
        if batch.is_empty() {
            return;
        }
        let (body, content_type) = match self.protocol {
            Protocol::Protobuf => (
                encode::protobuf(&self.resource, batch),
                "application/x-protobuf",
            ),
            Protocol::Json => (encode::json(&self.resource, batch), "application/json"),
        };
        let n = batch.len();
        batch.clear();
        let res = self
            .http
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await;
        let failed = match res {
            Ok(r) if r.status().is_success() => None,
            Ok(r) => Some(format!("HTTP {}", r.status())),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            // The first failure and every hundredth after it: a collector that is down must not flood stderr.
            if self
                .failures
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(100)
            {
                tracing::warn!(endpoint = %self.endpoint, spans = n, error = %why, "could not export spans");
            }
        }
    }
}
