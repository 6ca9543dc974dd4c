//! `App`: the dependency-injection root, the domain services every transport shares. `open.rs` opens storage and
//! wires them.

use std::sync::Arc;

use crate::calllog::CallLog;
use crate::config::Config;
use crate::error::Result;
use crate::events::EventBus;
use crate::proxy::Proxy;
use crate::registry::Registry;
use crate::search::Search;
use crate::secrets::Secrets;
use crate::telemetry::Telemetry;

mod open;

/// One per process. Transports hold an `Arc<App>` and call the domain services on it; nothing here is global.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub events: EventBus,
    pub registry: Registry,
    pub secrets: Secrets,
    pub calllog: Arc<CallLog>,
    pub proxy: Proxy,
    pub search: Search,
    /// The marketplace, built on first use (its HTTP client and cache cost start-up time), or why it could not be
    /// configured (a broken config file must not stop agent-discover).
    prereqs: tokio::sync::OnceCell<crate::marketplace::Prereqs>,
    marketplace: std::sync::OnceLock<std::result::Result<crate::marketplace::Marketplace, String>>,
    /// Prometheus counters and latency histograms of proxied calls (fed by the proxy's call observer).
    pub telemetry: Arc<Telemetry>,
    /// Serialises config changes (`add_server`, `apply_config`, `enable`, `disable`) in this process.
    lifecycle: tokio::sync::Mutex<()>,
    /// OAuth for remote servers: tokens, registrations, pending authorizations (`oauth/`, `authflow.rs`).
    pub oauth: crate::oauth::OAuth,
    /// Registry snapshots for subscribers (`feed.rs`), started on first use.
    feed: crate::feed::snapshot::FeedCell,
    /// Agents (#15): in-process and A2A worker executors, sessions (`agents/`).
    pub agents: crate::agents::Agents,
    /// Code mode (#28): scripts that call tools through the proxy, and the runs paused for an answer (`scripts.rs`).
    pub scripts: crate::codemode::CodeMode,
    /// The catalog summary in the server instructions, with the store's change marker it was read at: every
    /// 2026-07-28 request over HTTP builds the server info (`find.rs`).
    pub(crate) summary: std::sync::Mutex<Option<((i64, u64), String)>>,
    /// Each profile's search scope (`profiles.rs`).
    pub(crate) scopes: crate::profiles::scopes::Scopes,
}

/// A policy directory (`*.cedar` files) or one policy file; default `<data dir>/policies` (`src/policy.rs`).
pub const ENV_POLICIES: &str = "AGENT_DISCOVER_POLICIES";

/// Where the policies for calls of a process with `data_dir` come from.
pub fn policies_source(data_dir: &std::path::Path) -> std::path::PathBuf {
    match std::env::var(ENV_POLICIES) {
        Ok(p) if !p.trim().is_empty() => std::path::PathBuf::from(p),
        _ => data_dir.join("policies"),
    }
}

impl App {
    pub(crate) fn lifecycle_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.lifecycle
    }

    pub(crate) fn feed_cell(&self) -> &crate::feed::snapshot::FeedCell {
        &self.feed
    }

    /// Which install tools (npx, uvx, uv, docker) this machine has, probed once per process.
    pub async fn prereqs(&self) -> &crate::marketplace::Prereqs {
        self.prereqs
            .get_or_init(crate::marketplace::probe_prereqs)
            .await
    }

    pub fn marketplace(&self) -> Result<&crate::marketplace::Marketplace> {
        self.marketplace
            .get_or_init(|| {
                crate::marketplace::MarketplaceConfig::load(None)
                    .and_then(|mut c| {
                        c.cache_db = Some(self.config.db_path.clone());
                        crate::marketplace::Marketplace::new(c)
                    })
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| {
                crate::error::Error::Unavailable(format!("the marketplace is not configured: {e}"))
            })
    }
}
