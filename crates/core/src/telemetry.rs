//! Call telemetry for Prometheus: counters and latency histograms per (server, tool), rendered as text exposition.
//!
//! `observe_call` is on the path of every proxied call, so it takes one short lock, allocates only the first time a
//! (server, tool) pair is seen, and does no I/O. Persistent per-tool totals are the store's `server_metrics`; these
//! counters are this process's since it started, which is what a Prometheus scraper expects.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the latency buckets, in seconds (`+Inf` is implied).
pub const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

#[derive(Debug, Default, Clone)]
struct Series {
    calls: u64,
    errors: u64,
    /// Non-cumulative counts per bucket; the last slot counts calls above every bound.
    buckets: [u64; BUCKETS.len() + 1],
    sum_micros: u64,
}

/// server → tool → series. Nested so a lookup by `&str` needs no allocation; ordered maps because comparing a few
/// short names costs less than hashing them (SipHash) on every call, and a scrape lists them in order.
type Table = BTreeMap<String, BTreeMap<String, Series>>;

#[derive(Debug, Default)]
pub struct Telemetry {
    table: Mutex<Table>,
    /// `replica="…"` on every series, when this process is one of several replicas (see `Config::replica`).
    replica: Option<String>,
}

impl Telemetry {
    /// Telemetry whose series carry `replica="NAME"` when `replica` is given.
    pub fn new(replica: Option<String>) -> Telemetry {
        Telemetry {
            table: Mutex::default(),
            replica,
        }
    }

    /// Records one finished proxied call.
    pub fn observe_call(&self, server: &str, tool: &str, latency: Duration, ok: bool) {
        let secs = latency.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|&le| secs <= le)
            .unwrap_or(BUCKETS.len());
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let tools = match table.get_mut(server) {
            Some(t) => t,
            None => table.entry(server.to_owned()).or_default(),
        };
        let series = match tools.get_mut(tool) {
            Some(s) => s,
            None => tools.entry(tool.to_owned()).or_default(),
        };
        series.calls += 1;
        series.errors += u64::from(!ok);
        series.buckets[bucket] += 1;
        series.sum_micros = series
            .sum_micros
            .saturating_add(latency.as_micros().min(u128::from(u64::MAX)) as u64);
    }

    /// The Prometheus text exposition (format 0.0.4) of every series plus the two gauges given.
    pub fn render_prometheus(&self, active_servers: usize, children: usize) -> String {
        // Copy out under the lock, format outside it: a scrape must not stall calls.
        let rows: Vec<(String, String, Series)> = {
            let table = self.table.lock().unwrap_or_else(|p| p.into_inner());
            table
                .iter()
                .flat_map(|(server, tools)| {
                    tools
                        .iter()
                        .map(|(tool, s)| (server.clone(), tool.clone(), s.clone()))
                })
                .collect()
        };
        let mut out = String::with_capacity(256 + rows.len() * 1200);
        let replica = self
            .replica
            .as_deref()
            .map(|r| format!(",replica=\"{}\"", escape_label(r)))
            .unwrap_or_default();
        let labels = |server: &str, tool: &str| {
            format!(
                "server=\"{}\",tool=\"{}\"{replica}",
                escape_label(server),
                escape_label(tool)
            )
        };
        // The gauges' label set: only the replica, when there is one.
        let only = match replica.strip_prefix(',') {
            Some(r) => format!("{{{r}}}"),
            None => String::new(),
        };
        out.push_str("# HELP agent_discover_build_info The running agent-discover version.\n# TYPE agent_discover_build_info gauge\n");
        let _ = writeln!(
            out,
            "agent_discover_build_info{{version=\"{}\"{replica}}} 1",
            env!("CARGO_PKG_VERSION")
        );
        out.push_str("# HELP agent_discover_active_servers Servers active in this process.\n# TYPE agent_discover_active_servers gauge\n");
        let _ = writeln!(out, "agent_discover_active_servers{only} {active_servers}");
        out.push_str("# HELP agent_discover_children Child server processes running under this process.\n# TYPE agent_discover_children gauge\n");
        let _ = writeln!(out, "agent_discover_children{only} {children}");
        out.push_str("# HELP agent_discover_tool_calls_total Proxied tool calls since start.\n# TYPE agent_discover_tool_calls_total counter\n");
        for (server, tool, s) in &rows {
            let _ = writeln!(
                out,
                "agent_discover_tool_calls_total{{{}}} {}",
                labels(server, tool),
                s.calls
            );
        }
        out.push_str("# HELP agent_discover_tool_call_errors_total Proxied tool calls that failed or returned isError.\n# TYPE agent_discover_tool_call_errors_total counter\n");
        for (server, tool, s) in &rows {
            let _ = writeln!(
                out,
                "agent_discover_tool_call_errors_total{{{}}} {}",
                labels(server, tool),
                s.errors
            );
        }
        out.push_str("# HELP agent_discover_tool_call_duration_seconds Latency of proxied tool calls.\n# TYPE agent_discover_tool_call_duration_seconds histogram\n");
        for (server, tool, s) in &rows {
            let l = labels(server, tool);
            let mut cumulative = 0;
            for (i, le) in BUCKETS.iter().enumerate() {
                cumulative += s.buckets[i];
                let _ = writeln!(
                    out,
                    "agent_discover_tool_call_duration_seconds_bucket{{{l},le=\"{le}\"}} {cumulative}"
                );
            }
            cumulative += s.buckets[BUCKETS.len()];
            let _ = writeln!(
                out,
                "agent_discover_tool_call_duration_seconds_bucket{{{l},le=\"+Inf\"}} {cumulative}"
            );
            let _ = writeln!(
                out,
                "agent_discover_tool_call_duration_seconds_sum{{{l}}} {}",
                s.sum_micros as f64 / 1e6
            );
            let _ = writeln!(
                out,
                "agent_discover_tool_call_duration_seconds_count{{{l}}} {}",
                s.calls
            );
        }
        out
    }
}

/// Label values escape backslash, double quote and newline (exposition format rules).
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_buckets_and_escapes() {
        let t = Telemetry::default();
        t.observe_call("fs", "read", Duration::from_millis(3), true);
        t.observe_call("fs", "read", Duration::from_millis(700), false);
        t.observe_call("fs", "read", Duration::from_secs(500), true);
        t.observe_call("we\"ird", "x", Duration::from_millis(1), true);
        let text = t.render_prometheus(2, 1);
        assert!(text.contains("agent_discover_active_servers 2\n"), "{text}");
        assert!(text.contains("agent_discover_children 1\n"));
        assert!(text.contains("agent_discover_tool_calls_total{server=\"fs\",tool=\"read\"} 3\n"));
        assert!(
            text.contains("agent_discover_tool_call_errors_total{server=\"fs\",tool=\"read\"} 1\n")
        );
        // 3 ms falls in le=0.005; 700 ms first counts at le=1; 500 s only at +Inf.
        assert!(text.contains("_bucket{server=\"fs\",tool=\"read\",le=\"0.005\"} 1\n"));
        assert!(text.contains("_bucket{server=\"fs\",tool=\"read\",le=\"0.5\"} 1\n"));
        assert!(text.contains("_bucket{server=\"fs\",tool=\"read\",le=\"1\"} 2\n"));
        assert!(text.contains("_bucket{server=\"fs\",tool=\"read\",le=\"120\"} 2\n"));
        assert!(text.contains("_bucket{server=\"fs\",tool=\"read\",le=\"+Inf\"} 3\n"));
        assert!(text.contains("_count{server=\"fs\",tool=\"read\"} 3\n"));
        assert!(text.contains("server=\"we\\\"ird\""));
        assert!(
            !text.contains("replica="),
            "no replica label unless one is configured"
        );
    }

    #[test]
    fn a_replica_labels_every_series() {
        let t = Telemetry::new(Some("r\"1".into()));
        t.observe_call("fs", "read", Duration::from_millis(3), true);
        let text = t.render_prometheus(2, 1);
        assert!(
            text.contains("agent_discover_active_servers{replica=\"r\\\"1\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("agent_discover_children{replica=\"r\\\"1\"} 1\n"));
        assert!(text.contains(
            "agent_discover_tool_calls_total{server=\"fs\",tool=\"read\",replica=\"r\\\"1\"} 1\n"
        ));
        assert!(text.contains("le=\"+Inf\"} 1\n"));
        assert!(
            text.contains(
                "_bucket{server=\"fs\",tool=\"read\",replica=\"r\\\"1\",le=\"0.005\"} 1\n"
            )
        );
        let series = text.lines().filter(|l| !l.starts_with('#')).count();
        let labelled = text.lines().filter(|l| l.contains("replica=")).count();
        assert_eq!(series, labelled, "{text}");
    }
}
