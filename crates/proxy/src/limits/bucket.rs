//! A token bucket: `capacity` tokens, refilled at a rate, one taken per call; an empty bucket says how long until
//! the next token. Pure: the caller passes the time.

use std::time::Instant;

use ad_core::limits::Rate;

/// One bucket. Starts full.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    tokens: f64,
    last: Instant,
    capacity: f64,
    per_milli: f64,
}

impl Bucket {
    pub(crate) fn new(rate: &Rate, now: Instant) -> Bucket {
        Bucket {
            tokens: f64::from(rate.capacity()),
            last: now,
            capacity: f64::from(rate.capacity()),
            per_milli: rate.per_milli(),
        }
    }

    fn refill(&mut self, now: Instant) {
        // A caller that read the clock before another took the lock must not move time back (and so refill the
        // same interval twice).
        if now <= self.last {
            return;
        }
        let ms = now.saturating_duration_since(self.last).as_secs_f64() * 1_000.0;
        self.tokens = (self.tokens + ms * self.per_milli).min(self.capacity);
        self.last = now;
    }

    /// Whether a token is there now; `Err(ms)`: how long until one is.
    pub(crate) fn check(&mut self, now: Instant) -> Result<(), u64> {
        self.refill(now);
        if self.tokens >= 1.0 {
            Ok(())
        } else {
            Err((((1.0 - self.tokens) / self.per_milli).ceil() as u64).max(1))
        }
    }

    /// Takes a token after [`Bucket::check`] said there is one.
    pub(crate) fn take(&mut self) {
        self.tokens -= 1.0;
    }

    /// Gives back a token taken for a call that was then refused by another limit.
    pub(crate) fn give_back(&mut self) {
        self.tokens = (self.tokens + 1.0).min(self.capacity);
    }

    /// Tokens there now (rounded down), for `status`.
    pub(crate) fn available(&mut self, now: Instant) -> u32 {
        self.refill(now);
        self.tokens.max(0.0) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_burst_then_one_per_interval() {
        let t0 = Instant::now();
        let rate = Rate {
            count: 10,
            per_ms: 1_000,
            burst: Some(3),
        };
        let mut b = Bucket::new(&rate, t0);
        for _ in 0..3 {
            b.check(t0).unwrap();
            b.take();
        }
        // Empty: the next token in 100 ms.
        assert_eq!(b.check(t0), Err(100));
        assert_eq!(b.check(t0 + Duration::from_millis(60)), Err(40));
        assert!(b.check(t0 + Duration::from_millis(100)).is_ok());
        b.take();
        // A long pause refills no more than the burst.
        assert_eq!(b.available(t0 + Duration::from_secs(60)), 3);
    }

    #[test]
    fn what_goes_through_over_a_window_is_the_burst_plus_the_rate() {
        let t0 = Instant::now();
        let rate = Rate {
            count: 100,
            per_ms: 1_000,
            burst: Some(10),
        };
        let mut b = Bucket::new(&rate, t0);
        let mut passed = 0;
        // A caller trying every millisecond for 10 s.
        for ms in 0..10_000u64 {
            if b.check(t0 + Duration::from_millis(ms)).is_ok() {
                b.take();
                passed += 1;
            }
        }
        assert!((1_009..=1_010).contains(&passed), "{passed}");
    }
}
