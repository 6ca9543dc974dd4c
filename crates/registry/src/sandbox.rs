//! A server's sandbox settings as the user set them: read (the defaults when none were stored) and replaced
//! (validated first, then announced like any change to a server so the dashboard and the feed refresh). Building the
//! plan a child runs under is the proxy's; a new setting applies at the server's next start.

use ad_core::error::Result;
use ad_core::events::Event;
use ad_core::sandbox::SandboxSettings;

use crate::registry::Registry;

impl Registry {
    /// A server's sandbox settings: what was stored for it, or the defaults (confined, full network).
    pub fn sandbox_settings(&self, server_id: i64) -> Result<SandboxSettings> {
        Ok(self
            .store()
            .sandbox_settings(server_id)?
            .unwrap_or_default())
    }

    /// Replaces a server's sandbox settings after validating them (absolute paths without `..`); returns what was
    /// stored. Restarts nothing: the settings apply when the server next starts.
    pub fn set_sandbox_settings(
        &self,
        server: &str,
        settings: SandboxSettings,
    ) -> Result<SandboxSettings> {
        settings.validate()?;
        let s = self.get(server)?;
        self.store().set_sandbox_settings(s.id, &settings)?;
        self.emit(Event::ServerUpdated { name: s.name });
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use ad_core::error::Error;
    use ad_core::events::EventBus;
    use ad_core::model::ServerSpec;
    use ad_core::sandbox::{Network, SandboxSettings};
    use ad_store::Store;

    use crate::registry::Registry;

    fn reg() -> Registry {
        let reg = Registry::new(Store::open_in_memory().unwrap(), EventBus::default());
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "files", "command": "true"}))
                .unwrap();
        reg.register(spec).unwrap();
        reg
    }

    #[test]
    fn defaults_until_set_then_what_was_set() {
        let reg = reg();
        let id = reg.get("files").unwrap().id;
        assert_eq!(
            reg.sandbox_settings(id).unwrap(),
            SandboxSettings::default()
        );
        let set = SandboxSettings {
            network: Network::None,
            read: vec![PathBuf::from("/srv/data")],
            ..SandboxSettings::default()
        };
        assert_eq!(reg.set_sandbox_settings("files", set.clone()).unwrap(), set);
        assert_eq!(reg.sandbox_settings(id).unwrap(), set);
    }

    #[test]
    fn invalid_settings_and_unknown_servers_are_refused() {
        let reg = reg();
        let relative = SandboxSettings {
            write: vec![PathBuf::from("out")],
            ..SandboxSettings::default()
        };
        assert!(matches!(
            reg.set_sandbox_settings("files", relative),
            Err(Error::Invalid { .. })
        ));
        let dotdot = SandboxSettings {
            read: vec![PathBuf::from("/srv/../etc")],
            ..SandboxSettings::default()
        };
        assert!(matches!(
            reg.set_sandbox_settings("files", dotdot),
            Err(Error::Invalid { .. })
        ));
        let id = reg.get("files").unwrap().id;
        assert_eq!(
            reg.sandbox_settings(id).unwrap(),
            SandboxSettings::default()
        );
        assert!(matches!(
            reg.set_sandbox_settings("nope", SandboxSettings::default()),
            Err(Error::NotFound { .. })
        ));
    }
}
