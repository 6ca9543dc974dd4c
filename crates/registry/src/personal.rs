//! Each user's own values of a server's secrets (team mode with identity): sealed with a key derived from the master
//! key and the user (`SealKey::derive`) and bound to their row (server, user, key), so one user's value opens neither
//! as another user's nor as another server's or key's. Shown masked to their owner only; an administrator learns
//! which users have which keys, never the values. Values leave in clear only as the environment (or headers) of that
//! user's own child (`ad_proxy`'s `personal.rs`).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use serde::Serialize;

use crate::secrets::{MaskedSecret, SealKey, Secrets, mask};
use ad_core::error::{Error, Result};
use ad_core::events::Event;

/// Who has their own values of a server's secrets, and the server's rule for users without one (for admins).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PersonalKeys {
    pub name: String,
    /// Whether a user without their own values uses the server's shared ones (else their calls are refused).
    pub allow_shared: bool,
    pub users: Vec<PersonalHolder>,
}

/// One user's own keys of a server (names only).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PersonalHolder {
    pub user: String,
    pub keys: Vec<String>,
    pub updated_at: String,
}

/// A user without values of their own uses the shared ones unless the admin says otherwise: servers registered
/// before personal keys existed go on working for everyone.
pub const ALLOW_SHARED_DEFAULT: bool = true;

fn aad(server_id: i64, user: &str, key: &str) -> String {
    format!("personal;server={server_id};user={user};key={key}")
}

/// The key and row binding of `user`'s own value of `key` for server `server_id` under the master key `master`:
/// what `migrate` opens a value with and seals it again for the same user under another master key and server id.
pub fn personal_seal(
    master: &SealKey,
    server_id: i64,
    user: &str,
    key: &str,
) -> Result<(SealKey, String)> {
    Ok((user_key(master, user)?, aad(server_id, user, key)))
}

fn user_key(master: &SealKey, user: &str) -> Result<SealKey> {
    master.derive(&format!("user={user}"))
}

/// Checks a user key (`issuer#sub`, as the call log shows it).
pub fn validate_user(user: &str) -> Result<()> {
    if user.is_empty() || user.len() > 1024 || user.chars().any(char::is_control) {
        return Err(Error::invalid(
            "user",
            "must be the user's `issuer#sub` (as the call log shows it), at most 1024 characters",
        ));
    }
    Ok(())
}

impl Secrets {
    fn user_key(&self, user: &str) -> Result<SealKey> {
        user_key(&self.cipher, user)
    }

    /// Sets `user`'s own value of `key` for `server`; their next call starts their own child with it.
    pub fn set_mine(&self, server: &str, user: &str, key: &str, value: &str) -> Result<()> {
        validate_user(user)?;
        ad_core::model::validate_key("secret key", key)?;
        if value.is_empty() {
            return Err(Error::invalid(
                "secret value",
                "empty; to remove your value, delete it",
            ));
        }
        if value.len() > ad_core::model::limits::ENV_VALUE {
            return Err(Error::invalid(
                "secret value",
                format!(
                    "over the limit of {} bytes",
                    ad_core::model::limits::ENV_VALUE
                ),
            ));
        }
        let server = self.registry.get(server)?;
        let blob = self
            .user_key(user)?
            .seal(&aad(server.id, user, key), value.as_bytes())?;
        self.registry
            .store()
            .upsert_personal_secret(server.id, user, key, &blob)?;
        self.events
            .emit(Event::SecretsChanged { name: server.name });
        Ok(())
    }

    pub fn delete_mine(&self, server: &str, user: &str, key: &str) -> Result<bool> {
        validate_user(user)?;
        let server = self.registry.get(server)?;
        let existed = self
            .registry
            .store()
            .delete_personal_secret(server.id, user, key)?;
        if existed {
            self.events
                .emit(Event::SecretsChanged { name: server.name });
        }
        Ok(existed)
    }

    /// `user`'s own values of `server`'s secrets, masked.
    pub fn list_mine(&self, server: &str, user: &str) -> Result<Vec<MaskedSecret>> {
        validate_user(user)?;
        let server = self.registry.get(server)?;
        let sealer = self.user_key(user)?;
        self.registry
            .store()
            .personal_secrets_of(server.id, user)?
            .into_iter()
            .map(|row| {
                let value = open(&sealer, server.id, user, &row.key, &row.value)?;
                Ok(MaskedSecret {
                    key: row.key,
                    masked_value: mask(&value),
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    /// Which users have their own keys of `server` (names, never values) and its rule for the others.
    pub fn personal_keys(&self, server: &str) -> Result<PersonalKeys> {
        let server = self.registry.get(server)?;
        let mut users: Vec<PersonalHolder> = Vec::new();
        for (user, key, updated_at) in self.registry.store().personal_holders(server.id)? {
            match users.last_mut() {
                Some(h) if h.user == user => {
                    h.keys.push(key);
                    if updated_at > h.updated_at {
                        h.updated_at = updated_at;
                    }
                }
                _ => users.push(PersonalHolder {
                    user,
                    keys: vec![key],
                    updated_at,
                }),
            }
        }
        Ok(PersonalKeys {
            allow_shared: self.allows_shared(server.id)?,
            name: server.name,
            users,
        })
    }

    /// Whether a user without values of their own may use `server_id`'s shared ones.
    pub fn allows_shared(&self, server_id: i64) -> Result<bool> {
        Ok(self
            .registry
            .store()
            .personal_allows_shared(server_id)?
            .unwrap_or(ALLOW_SHARED_DEFAULT))
    }

    pub fn set_allows_shared(&self, server: &str, allow: bool) -> Result<()> {
        let server = self.registry.get(server)?;
        self.registry
            .store()
            .set_personal_allows_shared(server.id, allow)?;
        self.events
            .emit(Event::SecretsChanged { name: server.name });
        Ok(())
    }

    /// A fingerprint of `user`'s own values of `server_id` (their sealed rows: a value set again changes it), and
    /// the names of their keys; `None` when they have none. Opens nothing: what every call of theirs reads.
    pub fn personal_fingerprint(
        &self,
        server_id: i64,
        user: &str,
    ) -> Result<Option<(u64, Vec<String>)>> {
        let rows = self.registry.store().personal_secrets_of(server_id, user)?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for r in &rows {
            r.key.hash(&mut h);
            r.value.hash(&mut h);
        }
        Ok(Some((
            h.finish(),
            rows.into_iter().map(|r| r.key).collect(),
        )))
    }

    /// `user`'s own values of `server_id` in clear, for the environment (or headers) of their own child.
    pub fn personal_env(&self, server_id: i64, user: &str) -> Result<BTreeMap<String, String>> {
        let sealer = self.user_key(user)?;
        self.registry
            .store()
            .personal_secrets_of(server_id, user)?
            .into_iter()
            .map(|row| {
                let value = open(&sealer, server_id, user, &row.key, &row.value)?;
                Ok((row.key, value))
            })
            .collect()
    }
}

fn open(sealer: &SealKey, server_id: i64, user: &str, key: &str, blob: &[u8]) -> Result<String> {
    let unreadable = || {
        Error::Internal(format!(
            "your value of `{key}` cannot be decrypted (was the master key replaced?); set it again"
        ))
    };
    let clear = sealer
        .open(&aad(server_id, user, key), blob)
        .ok_or_else(unreadable)?;
    String::from_utf8(clear).map_err(|_| unreadable())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use ad_core::events::EventBus;
    use ad_core::model::ServerSpec;
    use ad_store::Store;

    #[test]
    fn each_users_value_opens_only_as_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let events = EventBus::default();
        let registry = Registry::new(Store::open_in_memory().unwrap(), events.clone());
        registry
            .register(ServerSpec {
                name: "a".into(),
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let secrets = Secrets::open(dir.path(), registry.clone(), events).unwrap();
        let id = registry.get("a").unwrap().id;
        assert_eq!(secrets.personal_fingerprint(id, "i#alice").unwrap(), None);
        secrets
            .set_mine("a", "i#alice", "API_KEY", "alice-key-1")
            .unwrap();
        secrets
            .set_mine("a", "i#bob", "API_KEY", "bob-key-22")
            .unwrap();
        assert_eq!(
            secrets.personal_env(id, "i#alice").unwrap()["API_KEY"],
            "alice-key-1"
        );
        assert_eq!(
            secrets.list_mine("a", "i#bob").unwrap()[0].masked_value,
            "bob-****"
        );
        let (before, keys) = secrets
            .personal_fingerprint(id, "i#alice")
            .unwrap()
            .unwrap();
        assert_eq!(keys, ["API_KEY"]);
        secrets
            .set_mine("a", "i#alice", "API_KEY", "alice-key-1")
            .unwrap();
        let (after, _) = secrets
            .personal_fingerprint(id, "i#alice")
            .unwrap()
            .unwrap();
        assert_ne!(before, after, "a value set again changes the fingerprint");

        // Stored sealed, and alice's sealed value put in bob's row does not open as his (another derived key).
        let store = registry.store();
        let alice_raw = store
            .personal_secrets_of(id, "i#alice")
            .unwrap()
            .remove(0)
            .value;
        assert!(!alice_raw.windows(9).any(|w| w == b"alice-key"));
        store
            .upsert_personal_secret(id, "i#bob", "API_KEY", &alice_raw)
            .unwrap();
        assert!(secrets.personal_env(id, "i#bob").is_err());
        // Nor does it open with the user's own key under another user's name in the binding.
        let k = secrets.user_key("i#alice").unwrap();
        assert!(k.open(&aad(id, "i#bob", "API_KEY"), &alice_raw).is_none());

        let view = secrets.personal_keys("a").unwrap();
        assert!(view.allow_shared);
        assert_eq!(view.users.len(), 2);
        secrets.set_allows_shared("a", false).unwrap();
        assert!(!secrets.allows_shared(id).unwrap());
        assert!(secrets.set_mine("a", "", "K", "v").is_err());
    }
}
