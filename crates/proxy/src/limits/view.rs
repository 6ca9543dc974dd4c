//! What the limits look like from outside: each server's settings and live state (tokens, calls in flight and
//! waiting, the breaker's state) for `status`, REST and the dashboard, and the refusal counters for `/metrics`.

use std::fmt::Write;
use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{Value, json};

use super::{Limits, ServerLimits};
use crate::sync::lock;

impl ServerLimits {
    /// Settings and state, as `limits show` and REST give them.
    pub(crate) fn view(&self) -> Value {
        let now = Instant::now();
        let mut out = json!({
            "server": self.name,
            "settings": self.settings,
            "refused": {
                "rate_limited": self.refused.rate_limited.load(Ordering::Relaxed),
                "server_busy": self.refused.server_busy.load(Ordering::Relaxed),
                "server_unavailable": self.refused.server_unavailable.load(Ordering::Relaxed),
            },
        });
        if !self.shared.as_ref().is_some_and(|s| s.leases())
            && let Some(b) = lock(&self.buckets).server.as_mut()
        {
            out["tokens"] = json!(b.available(now));
        }
        if let Some(g) = &self.gate {
            out["concurrency"] = json!({"cap": g.cap, "in_flight": g.in_flight(), "waiting": g.waiting(), "queue": g.queue});
        }
        out["breaker"] = match &self.breaker {
            None => json!({"state": "off"}),
            Some(b) => {
                let b = lock(b);
                let mut v = json!({
                    "state": b.state.name(),
                    "recent_failures": b.recent_failures(),
                    "opened": b.opened,
                });
                if let Some(ms) = b.open_for_ms(now) {
                    v["retry_after_ms"] = json!(ms);
                    v["opened_after_failures"] = json!(b.opened_after());
                }
                v
            }
        };
        out
    }

    /// The breaker's state name (`closed`, `open`, `half_open`, `off`).
    pub(crate) fn breaker_state(&self) -> &'static str {
        match &self.breaker {
            None => "off",
            Some(b) => lock(b).state.name(),
        }
    }
}

impl Limits {
    /// Every server's view, for the servers `names` (each made with its settings if not yet).
    pub(crate) fn views(&self, names: &[String]) -> Vec<Value> {
        names.iter().map(|n| self.of(n).view()).collect()
    }

    /// The refusal counters and breaker states, in Prometheus' text format.
    pub(crate) fn prometheus(&self) -> String {
        let known = self.known();
        let mut out = String::new();
        out.push_str("# HELP agent_discover_limit_refusals_total Proxied tool calls refused by a limit, by kind (rate_limited, server_busy, server_unavailable).\n# TYPE agent_discover_limit_refusals_total counter\n");
        for s in &known {
            for (kind, n) in [
                ("rate_limited", &s.refused.rate_limited),
                ("server_busy", &s.refused.server_busy),
                ("server_unavailable", &s.refused.server_unavailable),
            ] {
                let _ = writeln!(
                    out,
                    "agent_discover_limit_refusals_total{{server=\"{}\",kind=\"{kind}\"}} {}",
                    s.name,
                    n.load(Ordering::Relaxed)
                );
            }
        }
        out.push_str("# HELP agent_discover_breaker_open Whether a server's circuit breaker is open (1) or half-open (0.5).\n# TYPE agent_discover_breaker_open gauge\n");
        for s in &known {
            let v = match s.breaker_state() {
                "open" => "1",
                "half_open" => "0.5",
                _ => "0",
            };
            let _ = writeln!(
                out,
                "agent_discover_breaker_open{{server=\"{}\"}} {v}",
                s.name
            );
        }
        out
    }
}
