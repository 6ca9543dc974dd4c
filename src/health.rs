//! Health checks: does a server answer? Records the outcome (status, time, error count) and announces it.
//!
//! A running server must list its tools; a stopped one is started, listed and stopped again, within the health time
//! limit (seed 000: 5 s). Neither changes the server's active flag or the tools clients see.

use std::time::Instant;

use serde::Serialize;

use crate::app::App;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::model::Health;

#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub name: String,
    pub status: Health,
    pub latency_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl App {
    /// Checks `name` now. A failing server is a report with `unhealthy`, not an error; unknown names are.
    pub async fn check_health(&self, name: &str) -> Result<HealthReport> {
        let server = self.registry.get(name)?;
        if server.status == crate::model::ServerStatus::Disabled {
            // Paused by the operator: not started, nothing recorded.
            return Ok(HealthReport {
                name: server.name,
                status: Health::Unknown,
                latency_ms: 0,
                tool_count: None,
                error: Some("disabled: not checked (enable it first)".into()),
            });
        }
        let started = Instant::now();
        let outcome = self
            .proxy
            .probe(&server.name, self.config.timeouts.health)
            .await;
        let latency_ms = started.elapsed().as_millis() as u64;
        let report = match outcome {
            Ok(n) => HealthReport {
                name: server.name.clone(),
                status: Health::Healthy,
                latency_ms,
                tool_count: Some(n),
                error: None,
            },
            Err(e @ (Error::NotFound { .. } | Error::Store(_))) => return Err(e),
            Err(e) => HealthReport {
                name: server.name.clone(),
                status: Health::Unhealthy,
                latency_ms,
                tool_count: None,
                error: Some(e.to_string()),
            },
        };
        self.registry.store().record_health(
            server.id,
            report.status == Health::Healthy,
            report.error.as_deref(),
        )?;
        self.events.emit(Event::ServerUpdated { name: server.name });
        Ok(report)
    }
}
