//! `App`: the dependency-injection root. Opens storage and wires the domain services every transport shares.

use std::sync::Arc;

use crate::config::Config;
use crate::error::Result;
use crate::events::EventBus;
use crate::registry::Registry;
use crate::store::Store;

/// One per process. Transports hold an `Arc<App>` and call the domain services on it; nothing here is global.
#[derive(Debug)]
pub struct App {
    pub config: Config,
    pub events: EventBus,
    pub registry: Registry,
}

impl App {
    pub fn open(config: Config) -> Result<Arc<App>> {
        let store = Store::open(&config.db_path)?;
        let events = EventBus::default();
        let registry = Registry::new(store, events.clone());
        Ok(Arc::new(App {
            config,
            events,
            registry,
        }))
    }
}
