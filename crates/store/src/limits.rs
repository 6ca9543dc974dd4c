//! SQL for limits: each server's settings (the JSON of `LimitSettings`; a server without a row has the defaults),
//! and what replicas share in team mode: rate buckets that replicas lease tokens from in batches, and each server's
//! breaker opening.

use super::{Store, to_json};
use crate::args;
use ad_core::error::{Error, Result};
use ad_core::limits::LimitSettings;

/// Attempts at a lease before giving up (each fails only when another replica leased from the same bucket between
/// this one's read and write).
const LEASE_ATTEMPTS: usize = 16;

/// Tells the other replicas (PostgreSQL) that limit settings or a breaker changed, with the commit: they follow at
/// once ([`Store::limits_marker`]). Nothing on SQLite.
fn limits_changed(c: &dyn crate::db::Conn) -> Result<()> {
    crate::pg::notify(c, crate::pg::backend::CHANNEL, crate::pg::LIMITS_PAYLOAD)
}

impl Store {
    /// On a shared PostgreSQL registry whose listener is connected: a number that moves whenever any replica
    /// committed a change of limit settings or a breaker (or the listener reconnected, after which anything may have
    /// changed unseen). `None` on SQLite, and while the listener is disconnected: read them again on a timer then.
    pub fn limits_marker(&self) -> Option<u64> {
        let state = self.listen_state()?;
        state.connected.then_some(state.limits + state.reconnects)
    }

    /// Every server's stored limit settings, by server name.
    pub fn all_limit_settings(&self) -> Result<Vec<(String, LimitSettings)>> {
        let rows = self.read(|c| {
            c.query(
                "SELECT s.name, l.settings FROM server_limits l JOIN servers s ON s.id = l.server_id",
                &[],
            )
        })?;
        rows.into_iter()
            .map(|r| {
                let name: String = r.get(0)?;
                let json: String = r.get(1)?;
                let settings = serde_json::from_str(&json).map_err(|e| {
                    Error::Internal(format!("stored limits of server `{name}`: {e}"))
                })?;
                Ok((name, settings))
            })
            .collect()
    }

    /// Stores a server's limit settings (replacing what it had); `None` removes them (back to the defaults).
    pub fn set_limit_settings(
        &self,
        server_id: i64,
        settings: Option<&LimitSettings>,
    ) -> Result<()> {
        let json = settings.map(to_json).transpose()?;
        self.write(|c| {
            limits_changed(c)?;
            match &json {
                Some(json) => c.execute(
                    "INSERT INTO server_limits (server_id, settings) VALUES (?1, ?2)
                     ON CONFLICT (server_id) DO UPDATE SET settings = excluded.settings",
                    &args![server_id, json],
                )?,
                None => c.execute(
                    "DELETE FROM server_limits WHERE server_id = ?1",
                    &args![server_id],
                )?,
            };
            Ok(())
        })
    }

    /// Leases up to `want` tokens from the shared bucket `key` (`capacity` tokens, refilled at `per_milli` tokens a
    /// millisecond; a new bucket starts full) at `now_ms`: how many were granted, and the tokens left after.
    pub fn lease_tokens(
        &self,
        key: &str,
        capacity: f64,
        per_milli: f64,
        want: u32,
        now_ms: i64,
    ) -> Result<(u32, f64)> {
        for _ in 0..LEASE_ATTEMPTS {
            let row = self.read(|c| {
                c.query_opt(
                    "SELECT tokens, updated_ms FROM limit_buckets WHERE key = ?1",
                    &args![key],
                )?
                .map(|r| Ok::<_, Error>((r.get::<f64>(0)?, r.get::<i64>(1)?)))
                .transpose()
            })?;
            let (before, updated) = row.unwrap_or((capacity, now_ms));
            // A replica whose clock is behind never takes time back.
            let at = now_ms.max(updated);
            let tokens = (before + (at - updated) as f64 * per_milli).min(capacity);
            let granted = (want as f64).min(tokens.floor()).max(0.0);
            let after = tokens - granted;
            // One conditional statement, atomic on its own: outside `write`, so a lease neither takes SQLite's write
            // transaction nor notifies every replica (it changes nothing they show).
            let changed = self.read(|c| match row {
                None => c.execute(
                    "INSERT INTO limit_buckets (key, tokens, updated_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (key) DO NOTHING",
                    &args![key, after, at],
                ),
                Some(_) => c.execute(
                    "UPDATE limit_buckets SET tokens = ?1, updated_ms = ?2
                     WHERE key = ?3 AND tokens = ?4 AND updated_ms = ?5",
                    &args![after, at, key, before, updated],
                ),
            })?;
            if changed == 1 {
                return Ok((granted as u32, after));
            }
        }
        Err(Error::Unavailable(format!(
            "the shared rate bucket `{key}` is contended; try again"
        )))
    }

    /// Forgets the shared buckets whose key starts with `prefix` (a server's limits changed: they start full).
    pub fn clear_buckets(&self, prefix: &str) -> Result<()> {
        let like = format!(
            "{}%",
            prefix
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        self.write(|c| {
            c.execute(
                "DELETE FROM limit_buckets WHERE key LIKE ?1 ESCAPE '\\'",
                &args![&like],
            )?;
            Ok(())
        })
    }

    /// Records a server's breaker as open until `open_until_ms` (Unix ms) after `failures`; 0 records it closed.
    pub fn set_breaker(&self, server: &str, open_until_ms: i64, failures: u32) -> Result<()> {
        self.write(|c| {
            limits_changed(c)?;
            c.execute(
                "INSERT INTO limit_breakers (server, open_until_ms, failures) VALUES (?1, ?2, ?3)
                 ON CONFLICT (server) DO UPDATE SET open_until_ms = excluded.open_until_ms,
                 failures = excluded.failures",
                &args![server, open_until_ms, i64::from(failures)],
            )?;
            Ok(())
        })
    }

    /// Every recorded breaker: server, open until (Unix ms; 0 or past is closed), failures that opened it.
    pub fn breakers(&self) -> Result<Vec<(String, i64, u32)>> {
        let rows = self.read(|c| {
            c.query(
                "SELECT server, open_until_ms, failures FROM limit_breakers",
                &[],
            )
        })?;
        rows.into_iter()
            .map(|r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get::<i64>(2)?.clamp(0, u32::MAX as i64) as u32,
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::limits::Rate;

    #[test]
    fn settings_round_trip_and_go_with_their_server() {
        let store = Store::open_in_memory().unwrap();
        let spec: ad_core::model::ServerSpec =
            serde_json::from_value(serde_json::json!({"name": "files", "command": "true"}))
                .unwrap();
        let id = store.insert_server(&spec).unwrap().id;
        assert!(store.all_limit_settings().unwrap().is_empty());
        let settings = LimitSettings {
            rate: Some(Rate::parse("10/s").unwrap()),
            concurrency: Some(1),
            ..LimitSettings::default()
        };
        store.set_limit_settings(id, Some(&settings)).unwrap();
        assert_eq!(
            store.all_limit_settings().unwrap(),
            vec![("files".to_owned(), settings)]
        );
        store.set_limit_settings(id, None).unwrap();
        assert!(store.all_limit_settings().unwrap().is_empty());
    }

    #[test]
    fn leases_never_grant_more_than_the_bucket_holds() {
        let store = Store::open_in_memory().unwrap();
        // 10 tokens, 1 a second.
        assert_eq!(store.lease_tokens("k", 10.0, 0.001, 4, 1_000).unwrap().0, 4);
        assert_eq!(store.lease_tokens("k", 10.0, 0.001, 4, 1_000).unwrap().0, 4);
        assert_eq!(store.lease_tokens("k", 10.0, 0.001, 4, 1_000).unwrap().0, 2);
        let (granted, left) = store.lease_tokens("k", 10.0, 0.001, 4, 1_500).unwrap();
        assert_eq!(granted, 0);
        assert!((left - 0.5).abs() < 1e-9);
        // 2 s later: 2.5 tokens, so 2 whole ones.
        assert_eq!(store.lease_tokens("k", 10.0, 0.001, 4, 3_500).unwrap().0, 2);
        store.clear_buckets("k").unwrap();
        assert_eq!(store.lease_tokens("k", 10.0, 0.001, 4, 3_500).unwrap().0, 4);
    }

    #[test]
    fn breakers_are_recorded_per_server() {
        let store = Store::open_in_memory().unwrap();
        store.set_breaker("slow", 5_000, 3).unwrap();
        store.set_breaker("slow", 0, 0).unwrap();
        store.set_breaker("hung", 9_000, 5).unwrap();
        let mut all = store.breakers().unwrap();
        all.sort();
        assert_eq!(all, vec![("hung".into(), 9_000, 5), ("slow".into(), 0, 0)]);
    }
}
