//! SQL for per-server guard settings: one row per server that has settings of its own (the JSON of
//! `GuardSettings`); a server without a row follows the global settings, which the proxy fills in.

use super::{Store, to_json};
use crate::args;
use ad_core::error::{Error, Result};
use ad_core::guards::GuardSettings;

impl Store {
    /// A server's stored guard settings, `None` when it has none of its own.
    pub fn guard_settings(&self, server_id: i64) -> Result<Option<GuardSettings>> {
        let row: Option<String> = self.read(|c| {
            c.query_opt(
                "SELECT settings FROM server_guards WHERE server_id = ?1",
                &args![server_id],
            )?
            .map(|r| r.get(0))
            .transpose()
        })?;
        row.map(|s| {
            serde_json::from_str(&s).map_err(|e| {
                Error::Internal(format!("stored guard settings of server #{server_id}: {e}"))
            })
        })
        .transpose()
    }

    /// Stores a server's guard settings (replacing what it had); settings with nothing set remove its row.
    pub fn set_guard_settings(&self, server_id: i64, settings: &GuardSettings) -> Result<()> {
        if settings.is_empty() {
            return self.write(|c| {
                c.execute(
                    "DELETE FROM server_guards WHERE server_id = ?1",
                    &args![server_id],
                )?;
                Ok(())
            });
        }
        let json = to_json(settings)?;
        self.write(|c| {
            c.execute(
                "INSERT INTO server_guards (server_id, settings) VALUES (?1, ?2)
                 ON CONFLICT (server_id) DO UPDATE SET settings = excluded.settings",
                &args![server_id, &json],
            )?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::guards::Mode;
    use ad_core::model::ServerSpec;

    #[test]
    fn settings_round_trip_are_cleared_and_go_with_their_server() {
        let store = Store::open_in_memory().unwrap();
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "files", "command": "true"}))
                .unwrap();
        let id = store.insert_server(&spec).unwrap().id;
        assert_eq!(store.guard_settings(id).unwrap(), None);
        let own = GuardSettings {
            arguments: Some(Mode::Warn),
            ..Default::default()
        };
        store.set_guard_settings(id, &own).unwrap();
        assert_eq!(store.guard_settings(id).unwrap(), Some(own));
        store
            .set_guard_settings(id, &GuardSettings::default())
            .unwrap();
        assert_eq!(store.guard_settings(id).unwrap(), None);
        store.set_guard_settings(id, &own).unwrap();
        assert!(store.delete_server("files").unwrap());
        assert_eq!(store.guard_settings(id).unwrap(), None);
    }
}
