//! SQL for the runtime that last ran each server's child (`{"kind":"node","version":...,"source":"cache"}` as JSON):
//! one row per server that has run with a known runtime.

use super::Store;
use super::db::now_text;
use crate::args;
use ad_core::error::Result;

impl Store {
    /// Records the runtime (JSON) of a server's latest start; `None` forgets it (a start with no known runtime).
    pub fn set_server_runtime(&self, server_id: i64, runtime: Option<&str>) -> Result<()> {
        self.write(|c| {
            match runtime {
                Some(r) => c.execute(
                    "INSERT INTO server_runtime (server_id, runtime, updated_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT (server_id) DO UPDATE SET runtime = excluded.runtime, updated_at = excluded.updated_at",
                    &args![server_id, r, &now_text()],
                )?,
                None => c.execute(
                    "DELETE FROM server_runtime WHERE server_id = ?1",
                    &args![server_id],
                )?,
            };
            Ok(())
        })
    }

    /// The runtime (JSON) of a server's latest start, when known.
    pub fn server_runtime(&self, server_id: i64) -> Result<Option<String>> {
        self.read(|c| {
            c.query_opt(
                "SELECT runtime FROM server_runtime WHERE server_id = ?1",
                &args![server_id],
            )?
            .map(|r| r.get(0))
            .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use ad_core::model::ServerSpec;

    #[test]
    fn runtime_is_recorded_replaced_and_forgotten() {
        let store = Store::open_in_memory().unwrap();
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "n", "command": "npx"})).unwrap();
        let id = store.insert_server(&spec).unwrap().id;
        assert_eq!(store.server_runtime(id).unwrap(), None);
        let a = r#"{"kind":"node","version":"20.20.2","source":"system"}"#;
        let b = r#"{"kind":"node","version":"22.23.3","source":"cache"}"#;
        store.set_server_runtime(id, Some(a)).unwrap();
        store.set_server_runtime(id, Some(b)).unwrap();
        assert_eq!(store.server_runtime(id).unwrap().as_deref(), Some(b));
        store.set_server_runtime(id, None).unwrap();
        assert_eq!(store.server_runtime(id).unwrap(), None);
        store.set_server_runtime(id, Some(a)).unwrap();
        assert!(store.delete_server("n").unwrap());
        assert_eq!(store.server_runtime(id).unwrap(), None);
    }
}
