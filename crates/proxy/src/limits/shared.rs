//! Team mode: what replicas share through the registry's database. Rate buckets live in the database and each
//! replica leases tokens from them in small batches, spending them locally (the fast lane spends only what is
//! leased already; a lease is one round trip, on the normal path). A replica never lets through more than it leased,
//! and a lease never grants more than the shared bucket holds, so all replicas together never exceed the burst plus
//! the rate; they may fall short by the tokens leased but not yet spent (at most one batch per replica and bucket).
//! A breaker's opening (and closing) is written to the database, whatever the backend; every process on the registry
//! follows it when it reads its settings again (a change marker on SQLite; on PostgreSQL the write's `NOTIFY`, so at
//! the first call after it arrives), and `status` in another process shows it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ad_core::limits::Rate;
use ad_store::Store;

use super::Limits;
use crate::sync::lock;

/// A batch is at most this long at the rate (and at most a quarter of the burst).
const BATCH_MS: f64 = 50.0;

#[derive(Clone)]
pub(crate) struct Shared {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    /// Rate buckets are leased from the database (team mode on PostgreSQL); otherwise they are this process's own
    /// and only breaker openings are recorded (so `status` in another process, and the other processes on the same
    /// registry, see them).
    leases: bool,
    /// Tokens leased and not yet spent, by shared key (`server`, U+001F, bucket key).
    budgets: Mutex<HashMap<String, u32>>,
}

fn key(server: &str, bucket: &str) -> String {
    format!("{server}\u{1f}{bucket}")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn batch(rate: &Rate) -> u32 {
    let by_rate = (rate.per_milli() * BATCH_MS).floor() as u32;
    by_rate.min(rate.capacity() / 4).max(1)
}

impl Shared {
    pub(crate) fn new(store: Store) -> Shared {
        Shared {
            inner: Arc::new(Inner {
                leases: store.is_shared(),
                store,
                budgets: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Whether rate buckets are leased from the database.
    pub(crate) fn leases(&self) -> bool {
        self.inner.leases
    }

    /// Takes a token for each bucket from the local budget, leasing a batch where it is spent; none and the scope
    /// and wait in milliseconds of the first bucket that has none.
    pub(crate) fn take(
        &self,
        server: &str,
        rates: impl Iterator<Item = (&'static str, Rate, String)>,
    ) -> Result<(), (&'static str, u64)> {
        let mut taken: Vec<String> = Vec::new();
        for (scope, rate, bucket) in rates {
            let k = key(server, &bucket);
            if let Err(ms) = self.take_one(&k, &rate) {
                let mut budgets = lock(&self.inner.budgets);
                for t in taken {
                    *budgets.entry(t).or_default() += 1;
                }
                return Err((scope, ms));
            }
            taken.push(k);
        }
        Ok(())
    }

    fn take_one(&self, k: &str, rate: &Rate) -> Result<(), u64> {
        {
            let mut budgets = lock(&self.inner.budgets);
            if let Some(n) = budgets.get_mut(k)
                && *n > 0
            {
                *n -= 1;
                return Ok(());
            }
        }
        let lease = self.inner.store.lease_tokens(
            k,
            f64::from(rate.capacity()),
            rate.per_milli(),
            batch(rate),
            now_ms(),
        );
        match lease {
            Ok((0, left)) => Err((((1.0 - left) / rate.per_milli()).ceil() as u64).max(1)),
            Ok((granted, _)) => {
                *lock(&self.inner.budgets).entry(k.to_owned()).or_default() += granted - 1;
                Ok(())
            }
            Err(e) => {
                tracing::warn!(bucket = k, error = %e, "leasing rate-limit tokens failed; the call is refused");
                Err(100)
            }
        }
    }

    /// The fast lane's take: only from the local budget, every bucket or none.
    pub(crate) fn try_local(&self, server: &str, buckets: impl Iterator<Item = String>) -> bool {
        let keys: Vec<String> = buckets.map(|b| key(server, &b)).collect();
        let mut budgets = lock(&self.inner.budgets);
        if !keys.iter().all(|k| budgets.get(k).is_some_and(|n| *n > 0)) {
            return false;
        }
        for k in keys {
            if let Some(n) = budgets.get_mut(&k) {
                *n -= 1;
            }
        }
        true
    }

    /// Forgets the local budgets of a server whose settings changed.
    pub(crate) fn forget(&self, server: &str) {
        let prefix = key(server, "");
        lock(&self.inner.budgets).retain(|k, _| !k.starts_with(&prefix));
    }

    pub(crate) fn breaker_opened(&self, server: &str, open_for_ms: u64, failures: u32) {
        let until = now_ms() + open_for_ms as i64;
        if let Err(e) = self.inner.store.set_breaker(server, until, failures) {
            tracing::warn!(server, error = %e, "recording the breaker's opening failed");
        }
    }

    pub(crate) fn breaker_closed(&self, server: &str) {
        if let Err(e) = self.inner.store.set_breaker(server, 0, 0) {
            tracing::warn!(server, error = %e, "recording the breaker's closing failed");
        }
    }

    /// Follows the breakers other replicas recorded: an opening seen here opens ours until the same time, a
    /// closing closes ours.
    pub(crate) fn follow_breakers(&self, limits: &Limits) {
        let rows = match self.inner.store.breakers() {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "reading the shared breakers failed");
                return;
            }
        };
        let now = now_ms();
        let at = Instant::now();
        for (server, until, failures) in rows {
            let s = limits.of_loaded(&server);
            let Some(b) = &s.breaker else { continue };
            let mut b = lock(b);
            if until > now {
                let left = Duration::from_millis((until - now) as u64);
                if b.is_closed()
                    || b.open_for_ms(at)
                        .is_some_and(|ms| ms + 50 < left.as_millis() as u64)
                {
                    b.open_until(at + left, failures);
                }
            } else if until == 0 && b.open_for_ms(at).is_some() {
                // Closed by another replica's successful trial or a person's reset (an opening that merely ran out
                // leaves ours to its own half-open trial).
                b.close();
            }
        }
    }
}
