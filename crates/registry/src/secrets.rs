//! Per-server secrets: encrypted at rest (XChaCha20-Poly1305, key file readable only by the user), masked in every output.
//!
//! Values leave this module in two ways only: masked (first 4 characters) for display, and in clear as the
//! environment of a child being started. They are never logged.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, Generate, Key, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::Serialize;

use crate::registry::Registry;
use ad_core::error::{Error, Result};
use ad_core::events::{Event, EventBus};

pub const KEY_FILE: &str = "secrets.key";
/// A 64-hex-digit key in this variable replaces the key file (containers, CI).
pub const ENV_MASTER_KEY: &str = "AGENT_DISCOVER_MASTER_KEY";
const NONCE_LEN: usize = 24;

/// A secret as shown to people and agents.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MaskedSecret {
    pub key: String,
    pub masked_value: String,
    pub updated_at: String,
}

/// The first four characters, then `****`; values of four characters or fewer are fully masked.
pub fn mask(value: &str) -> String {
    let n = value.chars().count();
    if n <= 4 {
        "****".into()
    } else {
        format!("{}****", value.chars().take(4).collect::<String>())
    }
}

#[derive(Clone)]
pub struct Secrets {
    pub(crate) registry: Registry,
    pub(crate) events: EventBus,
    pub(crate) cipher: SealKey,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secrets { .. }")
    }
}

impl Secrets {
    /// Loads the key from `AGENT_DISCOVER_MASTER_KEY` or `<data_dir>/secrets.key`, creating the file (mode 0600) on first use.
    pub fn open(data_dir: &Path, registry: Registry, events: EventBus) -> Result<Secrets> {
        let key = load_key(data_dir)?;
        Ok(Secrets {
            registry,
            events,
            cipher: SealKey(XChaCha20Poly1305::new(&key)),
        })
    }

    pub fn set(&self, server: &str, key: &str, value: &str) -> Result<()> {
        ad_core::model::validate_key("secret key", key)?;
        if value.is_empty() {
            return Err(Error::invalid(
                "secret value",
                "empty; to remove a secret, delete it",
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
        let blob = self.seal_bytes(&aad(server.id, key), value.as_bytes())?;
        self.registry.store().upsert_secret(server.id, key, &blob)?;
        self.events
            .emit(Event::SecretsChanged { name: server.name });
        Ok(())
    }

    pub fn delete(&self, server: &str, key: &str) -> Result<bool> {
        let server = self.registry.get(server)?;
        let existed = self.registry.store().delete_secret(server.id, key)?;
        if existed {
            self.events
                .emit(Event::SecretsChanged { name: server.name });
        }
        Ok(existed)
    }

    pub fn list(&self, server: &str) -> Result<Vec<MaskedSecret>> {
        let server = self.registry.get(server)?;
        self.registry
            .store()
            .secrets_of(server.id)?
            .into_iter()
            .map(|row| {
                let value = self.open_value(server.id, &row.key, &row.value)?;
                Ok(MaskedSecret {
                    key: row.key,
                    masked_value: mask(&value),
                    updated_at: row.updated_at,
                })
            })
            .collect()
    }

    /// All secrets of a server in clear, for the environment (or headers) of a child being started.
    pub fn env_for(&self, server_id: i64) -> Result<BTreeMap<String, String>> {
        self.registry
            .store()
            .secrets_of(server_id)?
            .into_iter()
            .map(|row| {
                Ok((
                    row.key.clone(),
                    self.open_value(server_id, &row.key, &row.value)?,
                ))
            })
            .collect()
    }

    fn open_value(&self, server_id: i64, key: &str, blob: &[u8]) -> Result<String> {
        let unreadable = || {
            Error::Internal(format!(
                "secret `{key}` cannot be decrypted (was {KEY_FILE} replaced?); set it again"
            ))
        };
        let clear = self
            .open_bytes(&aad(server_id, key), blob)
            .ok_or_else(unreadable)?;
        String::from_utf8(clear).map_err(|_| unreadable())
    }

    /// Encrypts `value` bound to `aad` (nonce first). For records other modules keep (OAuth tokens, registrations).
    pub fn seal_bytes(&self, aad: &str, value: &[u8]) -> Result<Vec<u8>> {
        self.cipher.seal(aad, value)
    }

    /// Decrypts what [`Secrets::seal_bytes`] sealed with the same `aad`; `None` when it does not open.
    pub fn open_bytes(&self, aad: &str, blob: &[u8]) -> Option<Vec<u8>> {
        self.cipher.open(aad, blob)
    }
}

/// A master key, apart from a registry: what `migrate` uses to open one registry's sealed values and seal them for
/// another's.
#[derive(Clone)]
pub struct SealKey(XChaCha20Poly1305);

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealKey { .. }")
    }
}

impl SealKey {
    /// The key in `AGENT_DISCOVER_MASTER_KEY`, if the variable is set.
    pub fn from_env() -> Result<Option<SealKey>> {
        if std::env::var_os(ENV_MASTER_KEY).is_none() {
            return Ok(None);
        }
        load_key(Path::new("")).map(|k| Some(SealKey(XChaCha20Poly1305::new(&k))))
    }

    /// The key in a key file (as `secrets.key`); `None` when the file does not exist (it is never created here).
    pub fn from_file(path: &Path) -> Result<Option<SealKey>> {
        match std::fs::read(path) {
            Ok(bytes) => {
                check_private(path)?;
                let key = Key::<XChaCha20Poly1305>::try_from(bytes.as_slice()).map_err(|_| {
                    Error::invalid(
                        "secrets key file",
                        format!("{} is not a 32-byte key", path.display()),
                    )
                })?;
                Ok(Some(SealKey(XChaCha20Poly1305::new(&key))))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Encrypts `value` bound to `aad` (nonce first).
    pub fn seal(&self, aad: &str, value: &[u8]) -> Result<Vec<u8>> {
        let nonce = XNonce::generate();
        let sealed = self
            .0
            .encrypt(
                &nonce,
                Payload {
                    msg: value,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| Error::Internal("secret encryption failed".into()))?;
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        Ok(blob)
    }

    /// A key of its own for `context` (a user's): the first 32 bytes of the XChaCha20 keystream under this key for
    /// a nonce that is the SHA-256 of `context` (a PRF of key and nonce), so a value sealed with one context's key
    /// does not open with another's, and no key is stored.
    pub fn derive(&self, context: &str) -> Result<SealKey> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("agent-discover/derived-key\0{context}"));
        let nonce = XNonce::try_from(&digest[..NONCE_LEN])
            .map_err(|_| Error::Internal("key derivation".into()))?;
        let stream = self
            .0
            .encrypt(
                &nonce,
                Payload {
                    msg: &[0u8; 32],
                    aad: b"agent-discover/derived-key",
                },
            )
            .map_err(|_| Error::Internal("key derivation failed".into()))?;
        let key = Key::<XChaCha20Poly1305>::try_from(&stream[..32])
            .map_err(|_| Error::Internal("key derivation".into()))?;
        Ok(SealKey(XChaCha20Poly1305::new(&key)))
    }

    /// Decrypts what [`SealKey::seal`] sealed with the same `aad`; `None` when it does not open.
    pub fn open(&self, aad: &str, blob: &[u8]) -> Option<Vec<u8>> {
        if blob.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = blob.split_at(NONCE_LEN);
        let nonce = XNonce::try_from(nonce).ok()?;
        self.0
            .decrypt(
                &nonce,
                Payload {
                    msg: sealed,
                    aad: aad.as_bytes(),
                },
            )
            .ok()
    }
}

/// 32 bytes from the operating system's random source (PKCE verifiers, OAuth `state`).
pub fn random_bytes() -> [u8; 32] {
    let key = Key::<XChaCha20Poly1305>::generate();
    let mut out = [0u8; 32];
    out.copy_from_slice(key.as_slice());
    out
}

/// Binds a ciphertext to its row, so a value copied to another server or key does not decrypt.
pub fn aad(server_id: i64, key: &str) -> String {
    format!("server={server_id};key={key}")
}

fn load_key(data_dir: &Path) -> Result<Key<XChaCha20Poly1305>> {
    if let Ok(hex) = std::env::var(ENV_MASTER_KEY) {
        let bytes = decode_hex(hex.trim())
            .filter(|b| b.len() == 32)
            .ok_or_else(|| Error::invalid(ENV_MASTER_KEY, "must be 64 hex digits (32 bytes)"))?;
        return Key::<XChaCha20Poly1305>::try_from(bytes.as_slice())
            .map_err(|_| Error::invalid(ENV_MASTER_KEY, "wrong length"));
    }
    let path = data_dir.join(KEY_FILE);
    match std::fs::read(&path) {
        Ok(bytes) => {
            check_private(&path)?;
            Key::<XChaCha20Poly1305>::try_from(bytes.as_slice()).map_err(|_| {
                Error::invalid(
                    "secrets key file",
                    format!("{} is not a 32-byte key", path.display()),
                )
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_key(&path),
        Err(e) => Err(e.into()),
    }
}

/// Creates the key file with a new key, or, when another process got there first, reads theirs. The key is written
/// to a private temporary file and hard-linked into place, so no process ever sees a partly written key and no
/// existing key is ever replaced.
fn create_key(path: &PathBuf) -> Result<Key<XChaCha20Poly1305>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let key = Key::<XChaCha20Poly1305>::generate();
    let tmp = dir.join(format!(".{KEY_FILE}.{}.tmp", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let written = opts.open(&tmp).and_then(|mut f| {
        f.write_all(key.as_slice())?;
        f.sync_all()
    });
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        // Another process created it first: use theirs (complete, since it too was linked into place).
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let bytes = std::fs::read(path)?;
            Key::<XChaCha20Poly1305>::try_from(bytes.as_slice()).map_err(|_| {
                Error::invalid(
                    "secrets key file",
                    format!("{} is not a 32-byte key", path.display()),
                )
            })
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(unix)]
fn check_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(Error::invalid(
            "secrets key file",
            format!(
                "{} is readable by other users (mode {:o}); run `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            ),
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path) -> Result<()> {
    Ok(())
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::ServerSpec;
    use ad_store::Store;

    #[test]
    fn round_trip_masked_and_bound_to_row() {
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
        secrets.set("a", "API_KEY", "sk-test-123456").unwrap();
        assert_eq!(secrets.list("a").unwrap()[0].masked_value, "sk-t****");
        let id = registry.get("a").unwrap().id;
        assert_eq!(secrets.env_for(id).unwrap()["API_KEY"], "sk-test-123456");
        let raw = registry.store().secrets_of(id).unwrap().remove(0).value;
        assert!(!raw.windows(7).any(|w| w == b"sk-test"), "stored in clear");
        // A ciphertext moved to another key does not open.
        registry.store().upsert_secret(id, "OTHER", &raw).unwrap();
        assert!(secrets.env_for(id).is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(dir.path().join(KEY_FILE))
                    .unwrap()
                    .permissions()
                    .mode()
                    & 0o777,
                0o600
            );
        }
    }
}
