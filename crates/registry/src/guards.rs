//! A server's own guard settings as the user set them: read (nothing set when none were stored) and replaced
//! (announced like any change to a server so the dashboard and the feed refresh). What they mean for a call is the
//! proxy's (`ad_proxy::callguard`); a change applies to the server's next call.

use ad_core::error::Result;
use ad_core::events::Event;
use ad_core::guards::GuardSettings;

use crate::registry::Registry;

impl Registry {
    /// A server's own guard settings: what was stored for it, or none set (it follows the global settings).
    pub fn guard_settings(&self, server_id: i64) -> Result<GuardSettings> {
        Ok(self.store().guard_settings(server_id)?.unwrap_or_default())
    }

    /// Replaces a server's own guard settings; returns what was stored.
    pub fn set_guard_settings(
        &self,
        server: &str,
        settings: GuardSettings,
    ) -> Result<GuardSettings> {
        let s = self.get(server)?;
        self.store().set_guard_settings(s.id, &settings)?;
        self.emit(Event::ServerUpdated { name: s.name });
        Ok(settings)
    }
}
