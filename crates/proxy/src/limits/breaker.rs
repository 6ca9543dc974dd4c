//! A circuit breaker's states: closed (failures counted in a sliding window), open (refusing until the cool-down
//! ends), half-open (one trial call out; its success closes, its failure opens again). Pure: the caller passes the
//! time and reports each admitted call's outcome.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ad_core::limits::Breaker;

#[derive(Debug, Clone)]
pub(crate) enum State {
    Closed,
    Open { until: Instant },
    HalfOpen { trial_out: bool },
}

impl State {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            State::Closed => "closed",
            State::Open { .. } => "open",
            State::HalfOpen { .. } => "half_open",
        }
    }
}

/// How a call was let through: as an ordinary call, or as the half-open breaker's one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pass {
    Normal,
    Trial,
}

/// A refusal: how long until a call may be tried, and how many failures opened the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) retry_after_ms: u64,
    pub(crate) failures: u32,
}

/// While a trial is out, other callers are told to come back after this.
const TRIAL_RETRY_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub(crate) struct CircuitBreaker {
    pub(crate) settings: Breaker,
    pub(crate) state: State,
    /// When recent failures happened (closed), newest last; at most `settings.failures` kept.
    failures: VecDeque<Instant>,
    /// The failures that opened it last (for the refusal's message).
    opened_after: u32,
    /// How many times it opened since it was made.
    pub(crate) opened: u64,
}

impl CircuitBreaker {
    pub(crate) fn new(settings: Breaker) -> CircuitBreaker {
        CircuitBreaker {
            settings,
            state: State::Closed,
            failures: VecDeque::new(),
            opened_after: 0,
            opened: 0,
        }
    }

    /// Whether it is closed (the fast lane takes calls only then, without a state change).
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Lets a call through or refuses it.
    pub(crate) fn admit(&mut self, now: Instant) -> Result<Pass, Refused> {
        match self.state {
            State::Closed => Ok(Pass::Normal),
            State::Open { until } if now < until => Err(Refused {
                retry_after_ms: (until - now).as_millis() as u64 + 1,
                failures: self.opened_after,
            }),
            State::Open { .. } | State::HalfOpen { trial_out: false } => {
                self.state = State::HalfOpen { trial_out: true };
                Ok(Pass::Trial)
            }
            State::HalfOpen { trial_out: true } => Err(Refused {
                retry_after_ms: TRIAL_RETRY_MS,
                failures: self.opened_after,
            }),
        }
    }

    /// A let-through call ended: `failed` when it timed out or the server broke (not a tool's own error).
    pub(crate) fn record(&mut self, now: Instant, pass: Pass, failed: bool) {
        match (pass, failed) {
            (Pass::Trial, false) => self.close(),
            (Pass::Trial, true) => self.open(now),
            (Pass::Normal, false) => {
                if matches!(self.state, State::Closed) {
                    self.failures.clear();
                }
            }
            (Pass::Normal, true) => {
                if !matches!(self.state, State::Closed) {
                    return;
                }
                let window = Duration::from_millis(self.settings.window_ms);
                while self
                    .failures
                    .front()
                    .is_some_and(|t| now.saturating_duration_since(*t) > window)
                {
                    self.failures.pop_front();
                }
                self.failures.push_back(now);
                if self.failures.len() >= self.settings.failures as usize {
                    self.open(now);
                }
            }
        }
    }

    /// A trial call ended without an outcome (cancelled, refused by another limit): another may be tried.
    pub(crate) fn release(&mut self, pass: Pass) {
        if pass == Pass::Trial && matches!(self.state, State::HalfOpen { trial_out: true }) {
            self.state = State::HalfOpen { trial_out: false };
        }
    }

    fn open(&mut self, now: Instant) {
        self.opened_after = self.failures.len().max(1) as u32;
        self.failures.clear();
        self.opened += 1;
        self.state = State::Open {
            until: now + Duration::from_millis(self.settings.cooldown_ms),
        };
    }

    /// Closes it (a successful trial, or a person's reset).
    pub(crate) fn close(&mut self) {
        self.failures.clear();
        self.state = State::Closed;
    }

    /// Opens it as another replica said it opened, until `until`.
    pub(crate) fn open_until(&mut self, until: Instant, failures: u32) {
        self.failures.clear();
        self.opened_after = failures;
        self.state = State::Open { until };
    }

    /// Recent failures counted while closed.
    pub(crate) fn recent_failures(&self) -> usize {
        self.failures.len()
    }

    /// Milliseconds until an open breaker lets a trial through.
    pub(crate) fn open_for_ms(&self, now: Instant) -> Option<u64> {
        match self.state {
            State::Open { until } => Some(until.saturating_duration_since(now).as_millis() as u64),
            _ => None,
        }
    }

    /// The failures that opened it last.
    pub(crate) fn opened_after(&self) -> u32 {
        self.opened_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> CircuitBreaker {
        CircuitBreaker::new(Breaker {
            failures: 3,
            window_ms: 1_000,
            cooldown_ms: 500,
        })
    }

    #[test]
    fn opens_after_n_failures_in_the_window_then_half_opens_and_closes_on_success() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut b = breaker();
        for n in 0..3 {
            assert_eq!(b.admit(ms(n)), Ok(Pass::Normal));
            b.record(ms(n), Pass::Normal, true);
        }
        assert_eq!(b.state.name(), "open");
        let refused = b.admit(ms(100)).unwrap_err();
        assert_eq!(refused.failures, 3);
        // Opened at 2 ms for 500 ms: 402 ms left at 100 ms (rounded up).
        assert!((402..=403).contains(&refused.retry_after_ms), "{refused:?}");
        // After the cool-down: one trial, the others refused while it is out.
        assert_eq!(b.admit(ms(510)), Ok(Pass::Trial));
        assert!(b.admit(ms(511)).is_err());
        b.record(ms(600), Pass::Trial, false);
        assert_eq!(b.state.name(), "closed");
        assert_eq!(b.admit(ms(601)), Ok(Pass::Normal));
    }

    #[test]
    fn a_failed_trial_opens_it_again_and_a_released_one_lets_another_try() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut b = breaker();
        for n in 0..3 {
            b.record(ms(n), Pass::Normal, true);
        }
        assert_eq!(b.admit(ms(600)), Ok(Pass::Trial));
        b.release(Pass::Trial);
        assert_eq!(b.admit(ms(601)), Ok(Pass::Trial));
        b.record(ms(700), Pass::Trial, true);
        assert_eq!(b.state.name(), "open");
        assert!(b.admit(ms(1_100)).is_err());
        assert_eq!(b.opened, 2);
    }

    #[test]
    fn failures_outside_the_window_or_before_a_success_do_not_count() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        let mut b = breaker();
        b.record(ms(0), Pass::Normal, true);
        b.record(ms(10), Pass::Normal, true);
        // The first two are more than a window old.
        b.record(ms(2_000), Pass::Normal, true);
        assert!(b.is_closed());
        b.record(ms(2_010), Pass::Normal, true);
        b.record(ms(2_020), Pass::Normal, false);
        b.record(ms(2_030), Pass::Normal, true);
        assert!(b.is_closed());
        assert_eq!(b.recent_failures(), 1);
    }
}
