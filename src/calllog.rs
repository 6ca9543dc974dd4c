//! The call log: an in-memory ring of the last 500 proxied calls, pruned by age, announced on the event bus.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::events::{Event, EventBus};

pub const CAPACITY: usize = 500;
/// Longest response text kept per entry.
pub const RESPONSE_CHARS: usize = 2000;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogEntry {
    pub id: u64,
    /// Milliseconds since the epoch; serialised as `timestamp`, RFC 3339 in UTC (formatted when read, not per call).
    #[serde(rename = "timestamp", serialize_with = "serialize_rfc3339")]
    pub unix_ms: u64,
    pub server: String,
    pub tool: String,
    pub args: serde_json::Value,
    pub response: String,
    pub latency_ms: u64,
    pub success: bool,
}

#[derive(Debug)]
pub struct CallLog {
    inner: Mutex<Inner>,
    retention: Duration,
    events: EventBus,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    entries: VecDeque<LogEntry>,
}

impl CallLog {
    pub fn new(retention_days: u32, events: EventBus) -> CallLog {
        CallLog {
            inner: Mutex::new(Inner {
                next_id: 1,
                entries: VecDeque::new(),
            }),
            retention: Duration::from_secs(u64::from(retention_days) * 86_400),
            events,
        }
    }

    /// Appends a finished call and returns its id. `response` is already cut to size (see [`excerpt`]).
    pub fn record(
        &self,
        server: &str,
        tool: &str,
        args: serde_json::Value,
        response: String,
        latency: Duration,
        success: bool,
    ) -> u64 {
        self.record_at(now_ms(), server, tool, args, response, latency, success)
    }

    #[allow(clippy::too_many_arguments)]
    fn record_at(
        &self,
        now: u64,
        server: &str,
        tool: &str,
        args: serde_json::Value,
        response: String,
        latency: Duration,
        success: bool,
    ) -> u64 {
        let id = {
            let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let id = inner.next_id;
            inner.next_id += 1;
            let cutoff = now.saturating_sub(self.retention.as_millis() as u64);
            while inner.entries.front().is_some_and(|e| e.unix_ms < cutoff)
                || inner.entries.len() >= CAPACITY
            {
                inner.entries.pop_front();
            }
            inner.entries.push_back(LogEntry {
                id,
                unix_ms: now,
                server: server.to_owned(),
                tool: tool.to_owned(),
                args,
                response,
                latency_ms: latency.as_millis() as u64,
                success,
            });
            id
        };
        self.events.emit(Event::CallLogged { id });
        id
    }

    /// Newest first, skipping `offset`; also returns how many entries there are.
    pub fn entries(&self, limit: usize, offset: usize) -> (Vec<LogEntry>, usize) {
        let inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let cutoff = now_ms().saturating_sub(self.retention.as_millis() as u64);
        let live: Vec<&LogEntry> = inner
            .entries
            .iter()
            .rev()
            .filter(|e| e.unix_ms >= cutoff)
            .collect();
        let total = live.len();
        (
            live.into_iter().skip(offset).take(limit).cloned().collect(),
            total,
        )
    }

    pub fn get(&self, id: u64) -> Option<LogEntry> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .iter()
            .rev()
            .find(|e| e.id == id)
            .cloned()
    }

    pub fn clear(&self) {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entries
            .clear();
    }
}

fn serialize_rfc3339<S: serde::Serializer>(unix_ms: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*unix_ms))
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The logged form of a response made of text parts: joined with newlines and cut at `RESPONSE_CHARS` characters,
/// without copying more than that (a 10 MB result costs the log 2,000 characters).
pub fn excerpt<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let (mut chars, mut total, mut cut) = (0usize, 0usize, false);
    for (i, part) in parts.into_iter().enumerate() {
        let sep = if i == 0 { "" } else { "\n" };
        total += sep.len() + part.len();
        for ch in sep.chars().chain(part.chars()) {
            if cut {
                break;
            }
            if chars == RESPONSE_CHARS {
                cut = true;
                break;
            }
            out.push(ch);
            chars += 1;
        }
    }
    if cut {
        out.push_str(&format!("… ({total} bytes in all)"));
    }
    out
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (civil-from-days, no date crate).
pub fn rfc3339(unix_ms: u64) -> String {
    let secs = (unix_ms / 1000) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        unix_ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_keeps_newest_500() {
        let log = CallLog::new(30, EventBus::default());
        for i in 0..600 {
            log.record(
                "s",
                &format!("t{i}"),
                serde_json::Value::Null,
                "ok".into(),
                Duration::from_millis(1),
                true,
            );
        }
        let (entries, total) = log.entries(10, 0);
        assert_eq!(total, CAPACITY);
        assert_eq!(entries[0].tool, "t599");
        log.clear();
        assert_eq!(log.entries(10, 0).1, 0);
    }

    #[test]
    fn entries_older_than_the_retention_are_pruned() {
        let log = CallLog::new(30, EventBus::default());
        let day = 86_400_000;
        let now = now_ms();
        let rec = |at: u64, tool: &str| {
            log.record_at(
                at,
                "s",
                tool,
                serde_json::Value::Null,
                String::new(),
                Duration::ZERO,
                true,
            )
        };
        rec(now - 31 * day, "too-old");
        rec(now - 29 * day, "kept");
        // Reading hides expired entries even before the next write drops them.
        let (entries, total) = log.entries(10, 0);
        assert_eq!(total, 1);
        assert_eq!(entries[0].tool, "kept");
        // Writing drops them.
        rec(now, "new");
        assert_eq!(log.inner.lock().unwrap().entries.len(), 2);
        let (entries, _) = log.entries(10, 0);
        assert_eq!(
            entries.iter().map(|e| e.tool.as_str()).collect::<Vec<_>>(),
            ["new", "kept"]
        );
        // The timestamp is serialised as RFC 3339.
        let v = serde_json::to_value(&entries[0]).unwrap();
        assert_eq!(v["timestamp"], rfc3339(now));
    }

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_305_600_123), "2026-11-22T00:00:00.123Z");
        assert_eq!(excerpt(["héllo"]), "héllo");
        let long = "é".repeat(RESPONSE_CHARS);
        assert_eq!(excerpt([long.as_str()]), long);
        let cut = excerpt([long.as_str(), "x"]);
        assert!(cut.starts_with(&long));
        assert!(cut.ends_with(&format!("… ({} bytes in all)", long.len() + 2)));
        assert_eq!(
            cut.chars().count(),
            RESPONSE_CHARS + "… ( bytes in all)".chars().count() + 4
        );
    }
}
