//! Typed lifecycle events on an in-process bus, with wildcard subscriptions (`server:*`, `*`).
//!
//! Producers are the domain services; consumers are transports (MCP `list_changed`, the WebSocket stream).
//! Events carry names, not whole records: a consumer that needs state reads it from the registry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::mpsc;

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
    /// A server's stored status changed without its tools changing (connecting, authenticating, a failed start,
    /// stopped or disabled while not running).
    #[serde(rename = "server:status")]
    StatusChanged {
        name: String,
        status: crate::model::ServerStatus,
    },
    #[serde(rename = "secrets:changed")]
    SecretsChanged { name: String },
    /// Filling the package cache of a newly installed server finished.
    #[serde(rename = "server:warmup")]
    Warmup {
        name: String,
        ok: bool,
        message: Option<String>,
    },
    /// One proxied call finished; `id` is its call-log entry. Who made it (issue 30): the user (`issuer#sub`) and
    /// OAuth client of the caller's access token, and the replica that proxied it (in a team).
    #[serde(rename = "call:logged")]
    CallLogged {
        id: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        user: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        client: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        replica: Option<String>,
    },
    /// A tool was seen for the first time (`change: new`), differs from its approved definition (`changed`), or is
    /// back to it (`reverted`); `withheld` says whether callers can no longer see it.
    #[serde(rename = "server:tool_changed")]
    ToolPinChanged {
        name: String,
        tool: String,
        change: &'static str,
        withheld: bool,
    },
    /// An agent (#15) was registered in-process, added or removed: the agent tools appear in `tools/list` once there
    /// is an agent, and `find_tool` may answer with its skills.
    #[serde(rename = "server:agents_changed")]
    AgentsChanged { id: String },
    /// The scanner flagged a definition (`kind`: tool, prompt, resource_template) as poisoned; `withheld` is false in
    /// `AGENT_DISCOVER_SCAN=warn` mode.
    #[serde(rename = "server:tool_flagged")]
    ToolFlagged {
        name: String,
        tool: String,
        kind: &'static str,
        rules: Vec<&'static str>,
        withheld: bool,
    },
    /// A tool's current definition was approved, by the pinning `policy` or by a `user`.
    #[serde(rename = "server:tool_approved")]
    ToolApproved {
        name: String,
        tool: String,
        by: String,
    },
    /// #27 (approvals): a server's approval policy rules changed (`agent-discover tools policy`, REST, the registry's
    /// `tool_policy`).
    #[serde(rename = "server:tool_policy")]
    ToolPolicyChanged { name: String },
    /// #27: a call of a tool whose policy is `ask` waits for a person: `via` says how it is asked (`elicitation` of
    /// the calling client, `input` (an input-required result for a 2026-07-28 client), or `wait`: a pending approval
    /// that `agent-discover approvals`, REST or the dashboard answers). `id` names the approval.
    #[serde(rename = "approval:requested")]
    ApprovalRequested {
        id: String,
        server: String,
        tool: String,
        via: &'static str,
    },
    /// #27: an approval was decided: `decision` is `approved` (for `scope` `once` or `session`), `denied` or
    /// `expired` (no answer in time, or the caller went away); `by` says who (`elicitation`, `input`, `cli:USER`,
    /// `rest`, `dashboard`, `policy`, `timeout`, `cancelled`).
    #[serde(rename = "approval:decided")]
    ApprovalDecided {
        id: String,
        server: String,
        tool: String,
        decision: &'static str,
        scope: Option<&'static str>,
        by: String,
    },
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
            Event::StatusChanged { .. } => "server:status",
            Event::SecretsChanged { .. } => "secrets:changed",
            Event::Warmup { .. } => "server:warmup",
            Event::CallLogged { .. } => "call:logged",
            Event::ToolPinChanged { .. } => "server:tool_changed",
            Event::ToolApproved { .. } => "server:tool_approved",
            Event::ToolFlagged { .. } => "server:tool_flagged",
            Event::AgentsChanged { .. } => "server:agents_changed",
            Event::ToolPolicyChanged { .. } => "server:tool_policy",
            Event::ApprovalRequested { .. } => "approval:requested",
            Event::ApprovalDecided { .. } => "approval:decided",
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
                | Event::AgentsChanged { .. }
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

/// The bus. Each subscriber has its own bounded queue and only matching events are put on it, so a subscriber
/// wakes for its own events only (list watchers do not wake for every proxied call's `call:logged`).
#[derive(Clone, Debug, Default)]
pub struct EventBus {
    subscribers: Arc<Mutex<Vec<Subscriber>>>,
}

#[derive(Debug)]
struct Subscriber {
    pattern: String,
    /// Kinds starting with this are never sent, even when the pattern matches (empty: none excluded).
    except: &'static str,
    tx: mpsc::Sender<Event>,
    /// Events dropped because the subscriber's queue was full; reported once as `Received::Lagged`.
    lagged: Arc<AtomicU64>,
}

/// Events a subscriber may have queued before it is reported as lagging.
const QUEUE: usize = 1024;

impl EventBus {
    /// Sends to every current subscriber whose pattern matches; with none, the event is dropped.
    pub fn emit(&self, event: Event) {
        tracing::debug!(kind = event.kind(), ?event, "event");
        let kind = event.kind();
        let mut subs = self.subscribers.lock().unwrap_or_else(|p| p.into_inner());
        subs.retain(|s| {
            if !pattern_matches(&s.pattern, kind)
                || (!s.except.is_empty() && kind.starts_with(s.except))
            {
                return !s.tx.is_closed();
            }
            match s.tx.try_send(event.clone()) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    s.lagged.fetch_add(1, Ordering::Relaxed);
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }

    pub fn subscribe(&self, pattern: impl Into<String>) -> Subscription {
        self.subscribe_except(pattern, "")
    }

    /// Like [`EventBus::subscribe`], without the kinds that start with `except` (say `call:`, so a listener that
    /// ignores proxied calls is not woken by each of them).
    pub fn subscribe_except(
        &self,
        pattern: impl Into<String>,
        except: &'static str,
    ) -> Subscription {
        let (tx, rx) = mpsc::channel(QUEUE);
        let lagged = Arc::new(AtomicU64::new(0));
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Subscriber {
                pattern: pattern.into(),
                except,
                tx,
                lagged: lagged.clone(),
            });
        Subscription { rx, lagged }
    }
}

pub struct Subscription {
    rx: mpsc::Receiver<Event>,
    lagged: Arc<AtomicU64>,
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
        let lost = self.lagged.swap(0, Ordering::Relaxed);
        if lost > 0 {
            return Some(Received::Lagged(lost));
        }
        self.rx.recv().await.map(Received::Event)
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
        bus.emit(Event::CallLogged {
            id: 1,
            user: None,
            client: None,
            replica: None,
        });
        bus.emit(Event::ServerRegistered { name: "a".into() });
        assert_eq!(
            servers.recv().await,
            Some(Received::Event(Event::ServerRegistered {
                name: "a".into()
            }))
        );
        assert_eq!(
            all.recv().await,
            Some(Received::Event(Event::CallLogged {
                id: 1,
                user: None,
                client: None,
                replica: None,
            }))
        );
    }

    /// The feed's subscription: everything but proxied calls, so a call wakes no task of the feed.
    #[tokio::test]
    async fn an_excepted_kind_is_never_queued() {
        let bus = EventBus::default();
        let mut feed = bus.subscribe_except("*", "call:");
        bus.emit(Event::CallLogged {
            id: 1,
            user: None,
            client: None,
            replica: None,
        });
        bus.emit(Event::SecretsChanged { name: "k".into() });
        bus.emit(Event::ServerRegistered { name: "a".into() });
        assert_eq!(
            feed.recv().await,
            Some(Received::Event(Event::SecretsChanged { name: "k".into() }))
        );
        assert_eq!(
            feed.recv().await,
            Some(Received::Event(Event::ServerRegistered {
                name: "a".into()
            }))
        );
        assert!(feed.rx.try_recv().is_err(), "nothing else was queued");
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_it_lagged_and_others_are_not_woken() {
        let bus = EventBus::default();
        let mut calls = bus.subscribe("call:*");
        let mut servers = bus.subscribe("server:*");
        for id in 0..(QUEUE as u64 + 6) {
            bus.emit(Event::CallLogged {
                id,
                user: None,
                client: None,
                replica: None,
            });
        }
        assert_eq!(calls.recv().await, Some(Received::Lagged(6)));
        assert_eq!(
            calls.recv().await,
            Some(Received::Event(Event::CallLogged {
                id: 0,
                user: None,
                client: None,
                replica: None,
            }))
        );
        // Nothing was queued for the `server:*` subscriber.
        assert!(servers.rx.try_recv().is_err());
        drop(bus);
        assert_eq!(servers.recv().await, None);
    }
}
