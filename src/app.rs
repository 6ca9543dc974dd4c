//! `App`: the dependency-injection root. Opens storage and wires the domain services every transport shares.

use std::sync::Arc;

use crate::calllog::CallLog;
use crate::config::Config;
use crate::error::Result;
use crate::events::EventBus;
use crate::proxy::Proxy;
use crate::registry::Registry;
use crate::secrets::Secrets;
use crate::store::Store;

/// One per process. Transports hold an `Arc<App>` and call the domain services on it; nothing here is global.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub events: EventBus,
    pub registry: Registry,
    pub secrets: Secrets,
    pub calllog: Arc<CallLog>,
    pub proxy: Proxy,
}

impl App {
    /// Opens the database and builds the services. Must run inside a Tokio runtime (the proxy starts a metrics writer).
    pub fn open(config: Config) -> Result<Arc<App>> {
        let store = Store::open(&config.db_path)?;
        let events = EventBus::default();
        let registry = Registry::new(store, events.clone());
        let secrets = Secrets::open(&config.data_dir, registry.clone(), events.clone())?;
        let calllog = Arc::new(CallLog::new(config.log_retention_days, events.clone()));
        let guard_exe = match &config.guard_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe()?,
        };
        let proxy = Proxy::new(
            registry.clone(),
            secrets.clone(),
            events.clone(),
            calllog.clone(),
            config.timeouts,
            guard_exe,
        );
        Ok(Arc::new(App {
            config,
            events,
            registry,
            secrets,
            calllog,
            proxy,
        }))
    }

    /// Removes a server, stopping it first if it runs here.
    pub async fn uninstall(&self, name: &str) -> Result<()> {
        self.registry.get(name)?;
        self.proxy.deactivate(name).await?;
        self.registry.remove(name)
    }
}
