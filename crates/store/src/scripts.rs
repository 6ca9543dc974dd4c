//! SQL for saved scripts (code-mode scripts served as the tools of the built-in server `scripts`: name,
//! description, input schema as JSON text, body, CPU limit) and for each server's paging limit (`server_paging`).
//! What a script may be, and how it is run, is the application's; this module stores what it is given.

use super::Store;
use super::db::{Row, now_text};
use crate::args;
use ad_core::error::Result;

/// One saved script as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedScriptRow {
    pub name: String,
    pub description: String,
    /// The input schema, JSON text.
    pub input_schema: String,
    pub code: String,
    pub timeout_ms: Option<i64>,
    pub created_at: String,
    pub updated_at: String,
}

const SELECT: &str = "SELECT name, description, input_schema, code, timeout_ms, created_at, updated_at FROM saved_scripts";

fn from_row(r: &Row) -> Result<SavedScriptRow> {
    Ok(SavedScriptRow {
        name: r.get(0)?,
        description: r.get(1)?,
        input_schema: r.get(2)?,
        code: r.get(3)?,
        timeout_ms: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
    })
}

impl Store {
    /// Saves a script, replacing one of the same name (its `created_at` kept). True when it was new.
    pub fn save_script(
        &self,
        name: &str,
        description: &str,
        input_schema: &str,
        code: &str,
        timeout_ms: Option<i64>,
    ) -> Result<bool> {
        self.write(|c| {
            let now = now_text();
            let existed = c
                .query_opt("SELECT 1 FROM saved_scripts WHERE name = ?1", &args![name])?
                .is_some();
            c.execute(
                "INSERT INTO saved_scripts (name, description, input_schema, code, timeout_ms, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                 ON CONFLICT (name) DO UPDATE SET description = excluded.description,
                   input_schema = excluded.input_schema, code = excluded.code, timeout_ms = excluded.timeout_ms,
                   updated_at = excluded.updated_at",
                &args![name, description, input_schema, code, timeout_ms, &now],
            )?;
            Ok(!existed)
        })
    }

    /// Every saved script, by name.
    pub fn saved_scripts(&self) -> Result<Vec<SavedScriptRow>> {
        self.read(|c| {
            c.query(&format!("{SELECT} ORDER BY name"), &[])?
                .iter()
                .map(from_row)
                .collect()
        })
    }

    /// One saved script.
    pub fn saved_script(&self, name: &str) -> Result<Option<SavedScriptRow>> {
        self.read(|c| {
            c.query_opt(&format!("{SELECT} WHERE name = ?1"), &args![name])?
                .map(|r| from_row(&r))
                .transpose()
        })
    }

    /// Removes a saved script; false when there was none of that name.
    pub fn remove_script(&self, name: &str) -> Result<bool> {
        self.write(|c| {
            Ok(c.execute("DELETE FROM saved_scripts WHERE name = ?1", &args![name])? > 0)
        })
    }

    /// Sets a server's paging limit in bytes; `None` goes back to the default.
    pub fn set_page_bytes(&self, server_id: i64, bytes: Option<i64>) -> Result<()> {
        self.write(|c| {
            match bytes {
                Some(b) => c.execute(
                    "INSERT INTO server_paging (server_id, page_bytes) VALUES (?1, ?2)
                     ON CONFLICT (server_id) DO UPDATE SET page_bytes = excluded.page_bytes",
                    &args![server_id, b],
                )?,
                None => c.execute(
                    "DELETE FROM server_paging WHERE server_id = ?1",
                    &args![server_id],
                )?,
            };
            Ok(())
        })
    }

    /// A server's own paging limit in bytes, when it has one.
    pub fn page_bytes(&self, server_id: i64) -> Result<Option<i64>> {
        self.read(|c| {
            c.query_opt(
                "SELECT page_bytes FROM server_paging WHERE server_id = ?1",
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
    fn scripts_are_saved_replaced_listed_and_removed() {
        let store = Store::open_in_memory().unwrap();
        assert!(store.save_script("b", "B", "{}", "return 1", None).unwrap());
        assert!(
            store
                .save_script("a", "A", "{}", "return 2", Some(100))
                .unwrap()
        );
        let first = store.saved_script("a").unwrap().unwrap();
        assert!(
            !store
                .save_script("a", "A2", "{\"type\":\"object\"}", "return 3", None)
                .unwrap()
        );
        let a = store.saved_script("a").unwrap().unwrap();
        assert_eq!(
            (a.description.as_str(), a.code.as_str(), a.timeout_ms),
            ("A2", "return 3", None)
        );
        assert_eq!(a.created_at, first.created_at);
        let names: Vec<String> = store
            .saved_scripts()
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        assert!(store.remove_script("a").unwrap());
        assert!(!store.remove_script("a").unwrap());
        assert_eq!(store.saved_script("a").unwrap(), None);
    }

    #[test]
    fn a_servers_page_limit_is_set_and_cleared() {
        let store = Store::open_in_memory().unwrap();
        let spec: ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "n", "command": "npx"})).unwrap();
        let id = store.insert_server(&spec).unwrap().id;
        assert_eq!(store.page_bytes(id).unwrap(), None);
        store.set_page_bytes(id, Some(4096)).unwrap();
        store.set_page_bytes(id, Some(8192)).unwrap();
        assert_eq!(store.page_bytes(id).unwrap(), Some(8192));
        store.set_page_bytes(id, None).unwrap();
        assert_eq!(store.page_bytes(id).unwrap(), None);
    }
}
