//! How many children with users' own keys may run and when an idle one is stopped, read from the environment. A
//! leaf: `Inner` keeps them with the children (`state.rs`), `personal.rs` applies them.

use std::time::Duration;

/// How many children with users' own keys may run, and when an idle one is stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PersonalBounds {
    /// In all (`AGENT_DISCOVER_PERSONAL_CHILDREN`, default 32).
    pub total: usize,
    /// Per server (`AGENT_DISCOVER_PERSONAL_CHILDREN_PER_SERVER`, default 8).
    pub per_server: usize,
    /// Stopped after this long without a call (`AGENT_DISCOVER_PERSONAL_IDLE_SECS`, default 300).
    pub idle: Duration,
}

impl PersonalBounds {
    /// The bounds the environment sets, the defaults for what it does not (or sets to something unreadable).
    pub fn from_env() -> PersonalBounds {
        let read = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        PersonalBounds {
            total: read("AGENT_DISCOVER_PERSONAL_CHILDREN", 32) as usize,
            per_server: read("AGENT_DISCOVER_PERSONAL_CHILDREN_PER_SERVER", 8) as usize,
            idle: Duration::from_secs(read("AGENT_DISCOVER_PERSONAL_IDLE_SECS", 300)),
        }
    }
}
