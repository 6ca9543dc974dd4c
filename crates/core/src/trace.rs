//! Trace vocabulary: W3C trace context (`traceparent`, `tracestate`), spans as the fronts and the proxy record them,
//! and the one process-wide sink they go to. The exporter (OTLP over HTTP) is the application's; this module does
//! no I/O.
//!
//! Off unless a sink is installed: [`enabled`] is one atomic load, and every caller checks it before building
//! anything, so with tracing off a request costs a branch.

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Where finished spans go: the application's exporter. Must not block (a bounded queue that drops when full).
pub trait Sink: Send + Sync + 'static {
    fn export(&self, span: Span);
}

static SINK: OnceLock<Box<dyn Sink>> = OnceLock::new();

/// Installs the process's span sink; false if one was installed already.
pub fn install(sink: Box<dyn Sink>) -> bool {
    SINK.set(sink).is_ok()
}

/// Whether spans are recorded at all (a sink is installed).
#[inline]
pub fn enabled() -> bool {
    SINK.get().is_some()
}

/// The position of one span in a trace, as W3C trace context carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanContext {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    /// The trace flags; bit 0 is `sampled`.
    pub flags: u8,
    /// The vendors' `tracestate`, passed on unchanged.
    pub state: Option<String>,
}

impl SpanContext {
    /// Reads a `traceparent` (version 00 format: `00-<32 hex>-<16 hex>-<2 hex>`; a later version's first four
    /// fields), and its `tracestate`. None for anything malformed or an all-zero id.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
        let t = traceparent.trim();
        let mut parts = t.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        let rest = parts.next();
        if version.len() != 2
            || version.eq_ignore_ascii_case("ff")
            || (version == "00" && rest.is_some())
        {
            return None;
        }
        let mut trace_id = [0u8; 16];
        let mut span_id = [0u8; 8];
        let mut flag = [0u8; 1];
        if !hex_into(trace, &mut trace_id)
            || !hex_into(span, &mut span_id)
            || !hex_into(flags, &mut flag)
        {
            return None;
        }
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let state = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        Some(SpanContext {
            trace_id,
            span_id,
            flags: flag[0],
            state,
        })
    }

    /// A new trace, sampled.
    pub fn root() -> SpanContext {
        let (a, b) = (random_u64(), random_u64());
        let mut trace_id = [0u8; 16];
        trace_id[..8].copy_from_slice(&a.to_be_bytes());
        trace_id[8..].copy_from_slice(&b.to_be_bytes());
        SpanContext {
            trace_id,
            span_id: random_u64().to_be_bytes(),
            flags: 1,
            state: None,
        }
    }

    /// A new span in this trace (same flags and state).
    pub fn child(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: random_u64().to_be_bytes(),
            flags: self.flags,
            state: self.state.clone(),
        }
    }

    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            hex(&self.trace_id),
            hex(&self.span_id),
            self.flags
        )
    }
}

/// The kinds of span recorded here (OTLP's numbering is the exporter's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request served to a client.
    Server,
    /// A request made to a child.
    Client,
    /// A step of agent-discover's own inside a call (the guards' decisions).
    Internal,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

/// A finished span.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub kind: Kind,
    pub context: SpanContext,
    /// The parent span (in this process or the caller's), if any.
    pub parent: Option<[u8; 8]>,
    pub start_unix_nanos: u64,
    pub end_unix_nanos: u64,
    pub attributes: Vec<(&'static str, Value)>,
    /// Some: the span's status is error, with this description.
    pub error: Option<String>,
}

/// A span being timed: made when the work starts, handed to the sink by [`Started::end`].
#[derive(Debug)]
pub struct Started {
    span: Span,
    start: Instant,
}

impl Started {
    /// Starts a span under `parent` (a new trace without one). Only call when [`enabled`].
    pub fn new(name: String, kind: Kind, parent: Option<&SpanContext>) -> Started {
        let context = parent.map_or_else(SpanContext::root, SpanContext::child);
        Started {
            span: Span {
                name,
                kind,
                context,
                parent: parent.map(|p| p.span_id),
                start_unix_nanos: unix_nanos(),
                end_unix_nanos: 0,
                attributes: Vec::with_capacity(8),
                error: None,
            },
            start: Instant::now(),
        }
    }

    /// This span's context: the parent of what it starts, and the `traceparent` passed on.
    pub fn context(&self) -> &SpanContext {
        &self.span.context
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        self.span.attributes.push((key, value.into()));
    }

    /// Marks the span failed: `error.type` and the status description.
    pub fn fail(&mut self, error_type: impl Into<String>, message: impl Into<String>) {
        self.set("error.type", error_type.into());
        self.span.error = Some(message.into());
    }

    /// Ends the span and hands it to the sink (dropped if the trace is not sampled).
    pub fn end(mut self) {
        let elapsed = self.start.elapsed().as_nanos() as u64;
        self.span.end_unix_nanos = self.span.start_unix_nanos + elapsed;
        if self.span.context.sampled()
            && let Some(sink) = SINK.get()
        {
            sink.export(self.span);
        }
    }
}

fn unix_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// A random non-zero number: the standard library's randomly keyed SipHash over a counter (keys drawn from the
/// operating system once per process), so ids need no random-number crate.
fn random_u64() -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let keys = KEYS.get_or_init(RandomState::new);
    loop {
        let n = keys.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
        if n != 0 {
            return n;
        }
    }
}

/// Lowercase hex of some bytes.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// Lowercase hex digits into `out` (exactly `2 * out.len()` of them; uppercase is refused, as W3C requires).
fn hex_into(s: &str, out: &mut [u8]) -> bool {
    let b = s.as_bytes();
    if b.len() != out.len() * 2 {
        return false;
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    for (i, o) in out.iter_mut().enumerate() {
        match (digit(b[2 * i]), digit(b[2 * i + 1])) {
            (Some(h), Some(l)) => *o = (h << 4) | l,
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_malformed() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let c = SpanContext::parse(tp, Some("rojo=00f067aa0ba902b7")).unwrap();
        assert_eq!(c.traceparent(), tp);
        assert!(c.sampled());
        assert_eq!(c.state.as_deref(), Some("rojo=00f067aa0ba902b7"));
        let child = c.child();
        assert_eq!(child.trace_id, c.trace_id);
        assert_ne!(child.span_id, c.span_id);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(SpanContext::parse(bad, None).is_none(), "{bad}");
        }
        // A later version may append fields.
        assert!(
            SpanContext::parse(
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                None
            )
            .is_some()
        );
    }

    #[test]
    fn roots_are_fresh_and_sampled() {
        let (a, b) = (SpanContext::root(), SpanContext::root());
        assert_ne!(a.trace_id, b.trace_id);
        assert!(a.sampled() && a.parent_free());
    }

    impl SpanContext {
        fn parent_free(&self) -> bool {
            self.trace_id != [0; 16] && self.span_id != [0; 8]
        }
    }
}
