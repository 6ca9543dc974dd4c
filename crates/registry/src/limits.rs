//! A server's limits as the user set them: read (the defaults when none were stored), replaced after validation, or
//! reset to the defaults; each change is announced like any change to a server. Enforcing them is the proxy's.

use ad_core::error::Result;
use ad_core::events::Event;
use ad_core::limits::LimitSettings;

use crate::registry::Registry;

impl Registry {
    /// A server's limits: what was stored for it, or the defaults (no rate limit, no cap, the default breaker).
    pub fn limit_settings(&self, server: &str) -> Result<LimitSettings> {
        let s = self.get(server)?;
        Ok(self
            .store()
            .all_limit_settings()?
            .into_iter()
            .find(|(name, _)| *name == s.name)
            .map(|(_, l)| l)
            .unwrap_or_default())
    }

    /// Replaces a server's limits after validating them; `None` goes back to the defaults. Returns what applies.
    pub fn set_limit_settings(
        &self,
        server: &str,
        settings: Option<LimitSettings>,
    ) -> Result<LimitSettings> {
        if let Some(l) = &settings {
            l.validate()?;
        }
        let s = self.get(server)?;
        let stored = settings.filter(|l| *l != LimitSettings::default());
        self.store().set_limit_settings(s.id, stored.as_ref())?;
        // Shared buckets start full with the new settings.
        self.store().clear_buckets(&format!("{}\u{1f}", s.name))?;
        self.emit(Event::ServerUpdated { name: s.name });
        Ok(stored.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use ad_core::error::Error;
    use ad_core::events::EventBus;
    use ad_core::limits::{LimitSettings, Rate};
    use ad_core::model::ServerSpec;
    use ad_store::Store;

    use crate::registry::Registry;

    #[test]
    fn defaults_until_set_then_what_was_set_and_bad_settings_refused() {
        let reg = Registry::new(Store::open_in_memory().unwrap(), EventBus::default());
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "files", "command": "true"}))
                .unwrap();
        reg.register(spec).unwrap();
        assert_eq!(
            reg.limit_settings("files").unwrap(),
            LimitSettings::default()
        );
        let set = LimitSettings {
            rate: Some(Rate::parse("5/s").unwrap()),
            ..LimitSettings::default()
        };
        assert_eq!(
            reg.set_limit_settings("files", Some(set.clone())).unwrap(),
            set
        );
        assert_eq!(reg.limit_settings("files").unwrap(), set);
        let bad = LimitSettings {
            concurrency: Some(0),
            ..LimitSettings::default()
        };
        assert!(matches!(
            reg.set_limit_settings("files", Some(bad)),
            Err(Error::Invalid { .. })
        ));
        assert_eq!(
            reg.set_limit_settings("files", None).unwrap(),
            LimitSettings::default()
        );
        assert!(matches!(
            reg.limit_settings("nope"),
            Err(Error::NotFound { .. })
        ));
    }
}
