//! SQL for per-server sandbox settings: one row per server that has settings of its own (the JSON of
//! `SandboxSettings`); a server without a row has the defaults, which the registry fills in.

use super::{Store, to_json};
use crate::args;
use ad_core::error::{Error, Result};
use ad_core::sandbox::SandboxSettings;

impl Store {
    /// A server's stored sandbox settings, `None` when it has none of its own.
    pub fn sandbox_settings(&self, server_id: i64) -> Result<Option<SandboxSettings>> {
        let row: Option<String> = self.read(|c| {
            c.query_opt(
                "SELECT settings FROM server_sandbox WHERE server_id = ?1",
                &args![server_id],
            )?
            .map(|r| r.get(0))
            .transpose()
        })?;
        row.map(|s| {
            serde_json::from_str(&s).map_err(|e| {
                Error::Internal(format!(
                    "stored sandbox settings of server #{server_id}: {e}"
                ))
            })
        })
        .transpose()
    }

    /// Stores a server's sandbox settings (replacing what it had).
    pub fn set_sandbox_settings(&self, server_id: i64, settings: &SandboxSettings) -> Result<()> {
        let json = to_json(settings)?;
        self.write(|c| {
            c.execute(
                "INSERT INTO server_sandbox (server_id, settings) VALUES (?1, ?2)
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
    use ad_core::model::ServerSpec;
    use ad_core::sandbox::Network;
    use std::path::PathBuf;

    fn server(store: &Store, name: &str) -> i64 {
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": name, "command": "true"})).unwrap();
        store.insert_server(&spec).unwrap().id
    }

    #[test]
    fn settings_round_trip_and_go_with_their_server() {
        let store = Store::open_in_memory().unwrap();
        let id = server(&store, "files");
        assert_eq!(store.sandbox_settings(id).unwrap(), None);
        let settings = SandboxSettings {
            enabled: false,
            network: Network::Hosts,
            hosts: vec!["api.github.com".into(), "*.slack.com:443".into()],
            read: vec![PathBuf::from("/srv/data")],
            write: vec![PathBuf::from("/tmp/out")],
        };
        store.set_sandbox_settings(id, &settings).unwrap();
        assert_eq!(store.sandbox_settings(id).unwrap(), Some(settings.clone()));
        let replaced = SandboxSettings::default();
        store.set_sandbox_settings(id, &replaced).unwrap();
        assert_eq!(store.sandbox_settings(id).unwrap(), Some(replaced));
        assert!(store.delete_server("files").unwrap());
        assert_eq!(store.sandbox_settings(id).unwrap(), None);
    }

    /// `migrate` copies a server's settings with it, bound to the id the target gave it.
    #[test]
    fn settings_are_copied_with_their_server() {
        let source = Store::open_in_memory().unwrap();
        let target = Store::open_in_memory().unwrap();
        server(&target, "other");
        let id = server(&source, "files");
        let settings = SandboxSettings {
            network: Network::None,
            write: vec![PathBuf::from("/srv/out")],
            ..SandboxSettings::default()
        };
        source.set_sandbox_settings(id, &settings).unwrap();
        let report = source
            .copy_into(&target, false, &|_, blob| Ok(blob.to_vec()))
            .unwrap();
        assert_eq!(report.rows.get("server_sandbox"), Some(&1));
        let copied = target.server_by_name("files").unwrap().unwrap().id;
        assert_ne!(copied, id);
        assert_eq!(target.sandbox_settings(copied).unwrap(), Some(settings));
    }
}
