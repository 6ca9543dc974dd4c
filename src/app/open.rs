//! [`App::open`], the composition root's wiring: the store opened, the domain services built and handed to each
//! other as narrow handles, and the application's own parts installed in them (the saved scripts as the proxy's
//! built-in server, the search indexer, the policies' watch, the call observer).

use std::sync::Arc;

use super::{App, policies_source};
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
}
