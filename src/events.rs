//! Typed lifecycle events on an in-process broadcast bus, with wildcard subscriptions (`server:*`, `*`).
//!
//! Producers are the domain services; consumers are transports (MCP `list_changed`, the WebSocket stream).
//! Events carry names, not whole records: a consumer that needs state reads it from the registry.

use serde::Serialize;
use tokio::sync::broadcast;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", content = "data")]
pub enum Event {
    #[serde(rename = "server:registered")]
    ServerRegistered { name: String },
    #[serde(rename = "server:updated")]
    ServerUpdated { name: String },
    #[serde(rename = "server:removed")]
    ServerRemoved { name: String },
    #[serde(rename = "server:activated")]
    ServerActivated { name: String, tool_count: usize },
    #[serde(rename = "server:deactivated")]
    ServerDeactivated { name: String },
    /// A child failed (exited, crashed, refused to start); `error` says why.
    #[serde(rename = "server:error")]
    ServerError { name: String, error: String },
    /// A server's tool, resource or prompt list changed while it was active. Every event that changes what clients
    /// list is a `server:*` event, so list watchers need not wake for each call.
    #[serde(rename = "server:tools_changed")]
    ToolsChanged { name: String },
    #[serde(rename = "secrets:changed")]
    SecretsChanged { name: String },
    /// Filling the package cache of a newly installed server finished.
    #[serde(rename = "server:warmup")]
    Warmup {
        name: String,
        ok: bool,
        message: Option<String>,
    },
    /// One proxied call finished; `id` is its call-log entry.
    #[serde(rename = "call:logged")]
    CallLogged { id: u64 },
}

impl Event {
    /// The event's name, e.g. `server:registered`; wildcard patterns match against it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::ServerRegistered { .. } => "server:registered",
            Event::ServerUpdated { .. } => "server:updated",
            Event::ServerRemoved { .. } => "server:removed",
            Event::ServerActivated { .. } => "server:activated",
            Event::ServerDeactivated { .. } => "server:deactivated",
            Event::ServerError { .. } => "server:error",
            Event::ToolsChanged { .. } => "server:tools_changed",
            Event::SecretsChanged { .. } => "secrets:changed",
            Event::Warmup { .. } => "server:warmup",
            Event::CallLogged { .. } => "call:logged",
        }
    }

    /// Whether this event changes what a client's `tools/list` shows.
    pub fn changes_tool_list(&self) -> bool {
        matches!(
            self,
            Event::ServerActivated { .. }
                | Event::ServerDeactivated { .. }
                | Event::ServerError { .. }
                | Event::ToolsChanged { .. }
                | Event::ServerRemoved { .. }
        )
    }
}

/// `*` matches everything, `server:*` every event whose kind starts with `server:`, anything else exactly.
pub fn pattern_matches(pattern: &str, kind: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => kind.starts_with(prefix),
        None => pattern == kind,
    }
}

#[derive(Clone, Debug)]
pub struct EventBus {
    tx: broadcast::Sender<Event>,
}

impl Default for EventBus {
    fn default() -> EventBus {
        EventBus {
            tx: broadcast::channel(1024).0,
        }
    }
}

impl EventBus {
    /// Sends to every current subscriber; with none, the event is dropped.
    pub fn emit(&self, event: Event) {
        tracing::debug!(kind = event.kind(), ?event, "event");
        let _ = self.tx.send(event);
    }

    pub fn subscribe(&self, pattern: impl Into<String>) -> Subscription {
        Subscription {
            rx: self.tx.subscribe(),
            pattern: pattern.into(),
        }
    }
}

pub struct Subscription {
    rx: broadcast::Receiver<Event>,
    pattern: String,
}

/// What a subscriber gets: an event, or word that it fell behind and should resynchronise from state.
#[derive(Debug, Clone, PartialEq)]
pub enum Received {
    Event(Event),
    Lagged(u64),
}

impl Subscription {
    /// The next matching event; `None` once the bus is gone.
    pub async fn recv(&mut self) -> Option<Received> {
        loop {
            match self.rx.recv().await {
                Ok(ev) if pattern_matches(&self.pattern, ev.kind()) => {
                    return Some(Received::Event(ev));
                }
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(n)) => return Some(Received::Lagged(n)),
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(pattern_matches("*", "server:registered"));
        assert!(pattern_matches("server:*", "server:removed"));
        assert!(!pattern_matches("server:*", "call:logged"));
        assert!(pattern_matches("call:logged", "call:logged"));
        assert!(!pattern_matches("call:log", "call:logged"));
    }

    #[tokio::test]
    async fn wildcard_subscription_filters() {
        let bus = EventBus::default();
        let mut servers = bus.subscribe("server:*");
        let mut all = bus.subscribe("*");
        bus.emit(Event::CallLogged { id: 1 });
        bus.emit(Event::ServerRegistered { name: "a".into() });
        assert_eq!(
            servers.recv().await,
            Some(Received::Event(Event::ServerRegistered {
                name: "a".into()
            }))
        );
        assert_eq!(
            all.recv().await,
            Some(Received::Event(Event::CallLogged { id: 1 }))
        );
    }
}
