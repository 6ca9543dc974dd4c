//! OpenTelemetry traces out of the process: the spans the MCP fronts (`mcp/served.rs`) and the proxy
//! (`ad_proxy::spans`) record, batched and posted to an OTLP/HTTP collector (`http/protobuf` or `http/json`),
//! configured by the standard `OTEL_*` variables (`config.rs`).
//!
//! Off by default, and then nothing runs: no sink is installed, so `trace::enabled()` is false and no span is made;
//! no task, no queue. On, one task owns a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`; a span that finds it full is
//! dropped and counted), sends a batch when it is full or `OTEL_BSP_SCHEDULE_DELAY` after its first span, and
//! flushes on shutdown. A batch the collector could not take for now (HTTP 429, 502, 503, 504, or no connection) is
//! retried, as the OTLP/HTTP specification asks: after the `Retry-After` the collector gave, else with exponential
//! backoff (1 s, 2 s, 4 s, ... plus jitter), until `OTEL_BSP_EXPORT_TIMEOUT` since its first attempt; any other
//! failure, or running out of time, drops it, counted (the count is logged at exit). The wire format is written by hand (`encode.rs`): a few messages, no protobuf or
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
    /// Spans whose export failed for good (a non-retryable answer, or retries out of time).
    lost: Arc<AtomicU64>,
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
    for warning in &config.warnings {
        tracing::warn!("OpenTelemetry configuration: {warning}");
    }
    let (control, commands) = mpsc::unbounded_channel();
    tracing::info!(endpoint = %config.endpoint, protocol = ?config.protocol, "exporting traces over OTLP");
    let timeout = config.timeout;
    let lost = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn(run(config, spans, commands, lost.clone()));
    Some(Tracing {
        control,
        task,
        dropped,
        lost,
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
        let lost = self.lost.load(Ordering::Relaxed);
        if lost > 0 {
            tracing::warn!(lost, "spans were dropped: the collector did not take them");
        }
    }
}

async fn run(
    config: Config,
    mut spans: mpsc::Receiver<Span>,
    mut commands: mpsc::UnboundedReceiver<oneshot::Sender<()>>,
    lost: Arc<AtomicU64>,
) {
    let exporter = Exporter::new(&config, lost);
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
    /// A batch's export, retries included, takes at most this long.
    export_timeout: std::time::Duration,
    lost: Arc<AtomicU64>,
}

/// How one export attempt went.
enum Attempt {
    Done,
    /// Worth trying again (429, 502, 503, 504, no connection), after the collector's `Retry-After` if it gave one.
    Retry(String, Option<std::time::Duration>),
    Failed(String),
}

impl Exporter {
    fn new(config: &Config, lost: Arc<AtomicU64>) -> Exporter {
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
            export_timeout: config.export_timeout,
            lost,
        }
    }

    /// Posts one batch (emptied, whatever the outcome: a collector that is down loses spans, not memory), retrying
    /// what may pass later within the export timeout.
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
        let body = bytes::Bytes::from(body);
        let deadline = Instant::now() + self.export_timeout;
        let mut backoff = std::time::Duration::from_secs(1);
        let why = loop {
            match self.attempt(body.clone(), content_type).await {
                Attempt::Done => return,
                Attempt::Failed(why) => break why,
                Attempt::Retry(why, after) => {
                    let wait = after.unwrap_or_else(|| jitter(backoff));
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(30));
                    if Instant::now() + wait >= deadline {
                        break format!("{why} (no more retries: OTEL_BSP_EXPORT_TIMEOUT)");
                    }
                    tracing::debug!(error = %why, ?wait, "retrying a span export");
                    crate::clock::sleep_until(Instant::now() + wait).await;
                }
            }
        };
        self.lost.fetch_add(n as u64, Ordering::Relaxed);
        // The first failure and every hundredth after it: a collector that is down must not flood stderr.
        if self
            .failures
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(100)
        {
            tracing::warn!(endpoint = %self.endpoint, spans = n, error = %why, "could not export spans");
        }
    }

    async fn attempt(&self, body: bytes::Bytes, content_type: &'static str) -> Attempt {
        let res = self
            .http
            .post(&self.endpoint)
            .headers(self.headers.clone())
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body)
            .send()
            .await;
        match res {
            Ok(r) if r.status().is_success() => Attempt::Done,
            Ok(r) => {
                let status = r.status().as_u16();
                let why = format!("HTTP {}", r.status());
                if matches!(status, 429 | 502 | 503 | 504) {
                    Attempt::Retry(why, retry_after(r.headers()))
                } else {
                    Attempt::Failed(why)
                }
            }
            Err(e) if e.is_connect() || e.is_timeout() => Attempt::Retry(e.to_string(), None),
            Err(e) => Attempt::Failed(e.to_string()),
        }
    }
}

/// A `Retry-After` of whole seconds (the HTTP-date form is rare from collectors: backoff applies then).
fn retry_after(headers: &http::HeaderMap) -> Option<std::time::Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim()
        .parse::<u64>()
        .ok()
        .map(std::time::Duration::from_secs)
}

/// A backoff with up to half of it again, at random (clients that failed together do not retry together).
fn jitter(backoff: std::time::Duration) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    backoff + backoff.mul_f64(f64::from(nanos % 1000) / 2000.0)
}
