//! `App`: the dependency-injection root. Opens storage and wires the domain services every transport shares.

use std::sync::Arc;

use crate::calllog::CallLog;
use crate::config::Config;
use crate::error::Result;
use crate::events::EventBus;
use crate::proxy::Proxy;
use crate::registry::Registry;
use crate::search::Search;
use crate::secrets::Secrets;
use crate::store::Store;
use crate::telemetry::Telemetry;

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
    pub(crate) scopes: crate::profiles::Scopes,
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

/// Keeps the search index in step with stored tools: marks it stale and embeds new tools in the background.
fn spawn_search_indexer(events: &EventBus, search: Search) {
    let mut sub = events.subscribe("server:*");
    tokio::spawn(async move {
        while let Some(received) = sub.recv().await {
            let relevant = match &received {
                crate::events::Received::Event(ev) => ev.changes_tool_list(),
                crate::events::Received::Lagged(_) => true,
            };
            if relevant {
                search.tools_changed();
                if search.hybrid()
                    && let Err(e) = search.embed_pending().await
                {
                    tracing::warn!(error = %e, "embedding new tools failed");
                }
            }
        }
    });
}

impl App {
    /// Opens the database and builds the services. Must run inside a Tokio runtime (the proxy starts a metrics writer).
    pub fn open(config: Config) -> Result<Arc<App>> {
        let store = match &config.database_url {
            Some(url) => {
                // Every replica must open the secrets and tokens the others sealed: one key for the team.
                if std::env::var(crate::secrets::ENV_MASTER_KEY)
                    .map_or(true, |k| k.trim().is_empty())
                {
                    return Err(crate::error::Error::invalid(
                        crate::secrets::ENV_MASTER_KEY,
                        "a shared registry needs the team's master key in AGENT_DISCOVER_MASTER_KEY (64 hex digits, the same on every replica)",
                    ));
                }
                Store::open_url(url)?
            }
            None => Store::open(&config.db_path)?,
        };
        let events = EventBus::default();
        // Search's embedding provider; its local model is lent to the scanner too when asked for (`scan_model.rs`).
        let (provider, provider_status) = crate::search::Provider::from_env();
        let registry = Registry::new(store, events.clone())
            .with_pin_policy(config.pinning)
            .with_scan_model(crate::scan_model::from_env(&provider));
        let secrets = Secrets::open(&config.data_dir, registry.clone(), events.clone())?;
        let calllog = Arc::new(match (config.team, &config.replica) {
            (true, Some(replica)) => CallLog::shared(
                config.log_retention_days,
                events.clone(),
                registry.store().clone(),
                replica.clone(),
            ),
            _ => CallLog::new(config.log_retention_days, events.clone()),
        });
        calllog.spawn_flusher();
        let guard_exe = match &config.guard_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe()?,
        };
        let oauth = crate::oauth::OAuth::new(registry.clone(), secrets.clone(), events.clone());
        let agents = crate::agents::Agents::new(
            registry.store().clone(),
            secrets.clone(),
            guard_exe.clone(),
            events.clone(),
            config.sandbox.clone(),
        );
        agents.set_default_agent_id(config.default_agent_id.clone());
        let proxy = Proxy::new(
            registry.clone(),
            secrets.clone(),
            oauth.clone(),
            events.clone(),
            calllog.clone(),
            config.timeouts,
            guard_exe,
            config.sandbox.clone(),
            config.db_path.clone(),
        );
        proxy.set_guards(config.guards);
        let search = Search::new(registry.store().clone(), provider, provider_status);
        spawn_search_indexer(&events, search.clone());
        let marketplace = std::sync::OnceLock::new();
        let prereqs = tokio::sync::OnceCell::new();
        let telemetry = Arc::new(Telemetry::new(config.replica.clone()));
        let observer = telemetry.clone();
        // The policies for calls (`policy.rs`), read now and again whenever their files change.
        let policies = ad_policy::Policies::open(policies_source(&config.data_dir));
        policies.watch(tokio_util::sync::CancellationToken::new());
        proxy.set_policies(policies);
        proxy.set_call_observer(Arc::new(move |server, tool, latency, ok| {
            observer.observe_call(server, tool, latency, ok)
        }));
        proxy.set_paging(crate::proxy::pages::PagingConfig::from_env()?);
        let app = Arc::new(App {
            scripts: crate::codemode::CodeMode::new(proxy.clone()),
            summary: std::sync::Mutex::default(),
            scopes: Default::default(),
            config,
            events,
            registry,
            secrets,
            calllog,
            proxy,
            search,
            prereqs,
            marketplace,
            telemetry,
            lifecycle: tokio::sync::Mutex::new(()),
            oauth,
            feed: Default::default(),
            agents,
        });
        crate::saved_scripts::serve(&app);
        Ok(app)
    }

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
