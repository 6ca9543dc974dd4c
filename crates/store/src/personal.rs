//! SQL for each user's own secret values (`personal_secrets`, values arrive here already sealed for their user) and
//! each server's rule for users without one (`personal_settings`: whether they fall back to the shared value).

use super::Store;
use super::db::now_text;
use crate::args;
use ad_core::error::Result;

/// One user's stored value of one key: the sealed value and when it was last set.
pub struct PersonalRow {
    pub key: String,
    pub value: Vec<u8>,
    pub updated_at: String,
}

impl Store {
    pub fn upsert_personal_secret(
        &self,
        server_id: i64,
        user: &str,
        key: &str,
        value: &[u8],
    ) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO personal_secrets (server_id, user_key, key, value, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?5)
                 ON CONFLICT (server_id, user_key, key) DO UPDATE SET value = excluded.value,
                    updated_at = excluded.updated_at",
                &args![server_id, user, key, value, now_text()],
            )?;
            Ok(())
        })
    }

    pub fn delete_personal_secret(&self, server_id: i64, user: &str, key: &str) -> Result<bool> {
        self.write(|c| {
            Ok(c.execute(
                "DELETE FROM personal_secrets WHERE server_id = ?1 AND user_key = ?2 AND key = ?3",
                &args![server_id, user, key],
            )? > 0)
        })
    }

    /// `user`'s own values of a server's secrets, by key.
    pub fn personal_secrets_of(&self, server_id: i64, user: &str) -> Result<Vec<PersonalRow>> {
        self.read(|c| {
            c.query(
                "SELECT key, value, updated_at FROM personal_secrets WHERE server_id = ?1 AND user_key = ?2
                 ORDER BY key",
                &args![server_id, user],
            )?
            .iter()
            .map(|r| {
                Ok(PersonalRow {
                    key: r.get(0)?,
                    value: r.get(1)?,
                    updated_at: r.get(2)?,
                })
            })
            .collect()
        })
    }

    /// Which users have their own values of a server's secrets: (user, key, updated_at), never the values.
    pub fn personal_holders(&self, server_id: i64) -> Result<Vec<(String, String, String)>> {
        self.read(|c| {
            c.query(
                "SELECT user_key, key, updated_at FROM personal_secrets WHERE server_id = ?1
                 ORDER BY user_key, key",
                &args![server_id],
            )?
            .iter()
            .map(|r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .collect()
        })
    }

    /// Whether a user without their own values may use the server's shared ones; `None`: not set (the default).
    pub fn personal_allows_shared(&self, server_id: i64) -> Result<Option<bool>> {
        self.read(|c| {
            c.query_opt(
                "SELECT allow_shared FROM personal_settings WHERE server_id = ?1",
                &args![server_id],
            )?
            .map(|r| r.get::<i64>(0).map(|v| v != 0))
            .transpose()
        })
    }

    pub fn set_personal_allows_shared(&self, server_id: i64, allow: bool) -> Result<()> {
        self.write(|c| {
            c.execute(
                "INSERT INTO personal_settings (server_id, allow_shared) VALUES (?1, ?2)
                 ON CONFLICT (server_id) DO UPDATE SET allow_shared = excluded.allow_shared",
                &args![server_id, allow as i64],
            )?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::ServerSpec;

    #[test]
    fn each_users_rows_are_their_own_and_go_with_their_server() {
        let store = Store::open_in_memory().unwrap();
        let spec: ServerSpec = ServerSpec {
            name: "a".into(),
            command: Some("x".into()),
            ..Default::default()
        };
        let id = store.insert_server(&spec).unwrap().id;
        store
            .upsert_personal_secret(id, "i#alice", "K", b"1")
            .unwrap();
        store
            .upsert_personal_secret(id, "i#alice", "K", b"2")
            .unwrap();
        store
            .upsert_personal_secret(id, "i#bob", "K", b"3")
            .unwrap();
        let alice = store.personal_secrets_of(id, "i#alice").unwrap();
        assert_eq!(alice.len(), 1);
        assert_eq!(alice[0].value, b"2");
        assert_eq!(store.personal_holders(id).unwrap().len(), 2);
        assert_eq!(store.personal_allows_shared(id).unwrap(), None);
        store.set_personal_allows_shared(id, false).unwrap();
        assert_eq!(store.personal_allows_shared(id).unwrap(), Some(false));
        assert!(store.delete_personal_secret(id, "i#bob", "K").unwrap());
        assert!(!store.delete_personal_secret(id, "i#bob", "K").unwrap());
        store.delete_server("a").unwrap();
        assert!(store.personal_secrets_of(id, "i#alice").unwrap().is_empty());
    }
}
