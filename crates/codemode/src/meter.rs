//! The run's clock and its stop switch. The engine thread runs nothing but the script, so its busy time (from each
//! wake-up to the next wait) is the script's CPU time; the interrupt handler QuickJS polls while JavaScript runs
//! checks it, the wall-clock deadline and the stop switch, and stops the script with an uncatchable error. The switch
//! is also thrown from outside (the run cancelled, a call over the limit): the next poll or wake-up ends the run.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::limits::Limit;

/// Why a run was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    Limit(Limit),
    /// The caller went away, or the run was dropped while it waited for an answer.
    Cancelled,
}

const RUNNING: u8 = 0;

impl Stop {
    fn code(self) -> u8 {
        match self {
            Stop::Limit(Limit::CpuTime) => 1,
            Stop::Limit(Limit::WallTime) => 2,
            Stop::Limit(Limit::Memory) => 3,
            Stop::Limit(Limit::InnerCalls) => 4,
            Stop::Cancelled => 5,
        }
    }

    fn of(code: u8) -> Option<Stop> {
        Some(match code {
            1 => Stop::Limit(Limit::CpuTime),
            2 => Stop::Limit(Limit::WallTime),
            3 => Stop::Limit(Limit::Memory),
            4 => Stop::Limit(Limit::InnerCalls),
            5 => Stop::Cancelled,
            _ => return None,
        })
    }
}

#[derive(Debug)]
pub(crate) struct Meter {
    origin: Instant,
    cpu_limit: Duration,
    wall_limit: Duration,
    /// Busy nanoseconds before the current wake-up.
    busy: AtomicU64,
    /// When the engine last woke (nanoseconds since `origin`); `u64::MAX` while it waits.
    woke: AtomicU64,
    stop: AtomicU8,
}

impl Meter {
    pub(crate) fn new(cpu_limit: Duration, wall_limit: Duration) -> Meter {
        Meter {
            origin: Instant::now(),
            cpu_limit,
            wall_limit,
            busy: AtomicU64::new(0),
            woke: AtomicU64::new(u64::MAX),
            stop: AtomicU8::new(RUNNING),
        }
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// The engine starts working (running the script or its jobs).
    pub(crate) fn wake(&self) {
        self.woke.store(self.now_ns(), Ordering::Relaxed);
    }

    /// The engine waits for a tool's answer: its busy time so far is added up.
    pub(crate) fn sleep(&self) {
        let woke = self.woke.swap(u64::MAX, Ordering::Relaxed);
        if woke != u64::MAX {
            let spent = self.now_ns().saturating_sub(woke);
            self.busy.fetch_add(spent, Ordering::Relaxed);
        }
    }

    /// The script's CPU time so far.
    pub(crate) fn cpu(&self) -> Duration {
        let mut ns = self.busy.load(Ordering::Relaxed);
        let woke = self.woke.load(Ordering::Relaxed);
        if woke != u64::MAX {
            ns += self.now_ns().saturating_sub(woke);
        }
        Duration::from_nanos(ns)
    }

    /// Time left before the wall-clock limit.
    pub(crate) fn wall_left(&self) -> Duration {
        self.wall_limit.saturating_sub(self.origin.elapsed())
    }

    /// Throws the stop switch (the first reason wins).
    pub(crate) fn stop(&self, why: Stop) {
        let _ =
            self.stop
                .compare_exchange(RUNNING, why.code(), Ordering::AcqRel, Ordering::Acquire);
    }

    pub(crate) fn stopped(&self) -> Option<Stop> {
        Stop::of(self.stop.load(Ordering::Acquire))
    }

    /// The interrupt handler's question: must the script stop now? Records why when a limit is reached.
    pub(crate) fn must_stop(&self) -> bool {
        if self.stopped().is_some() {
            return true;
        }
        if self.origin.elapsed() >= self.wall_limit {
            self.stop(Stop::Limit(Limit::WallTime));
            return true;
        }
        if self.cpu() >= self.cpu_limit {
            self.stop(Stop::Limit(Limit::CpuTime));
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_is_not_cpu_time_and_the_first_reason_wins() {
        let m = Meter::new(Duration::from_millis(200), Duration::from_secs(60));
        m.wake();
        std::thread::sleep(Duration::from_millis(5));
        m.sleep();
        let busy = m.cpu();
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(m.cpu(), busy, "time spent waiting is not counted");
        assert!(!m.must_stop());
        m.wake();
        std::thread::sleep(Duration::from_millis(210));
        assert!(m.must_stop());
        assert_eq!(m.stopped(), Some(Stop::Limit(Limit::CpuTime)));
        m.stop(Stop::Cancelled);
        assert_eq!(m.stopped(), Some(Stop::Limit(Limit::CpuTime)));
    }
}
