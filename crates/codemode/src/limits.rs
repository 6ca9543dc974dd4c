//! What a script may use, and the limits that stop it: each exceeded limit ends the run with a typed error naming it
//! ([`Limit`]); an oversized result or log is cut, and the answer says so.

use std::time::Duration;

/// The limits of one run. `Default` gives the documented defaults (docs/code-mode.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The script's own running time on its engine thread: waiting for tools and people does not count.
    pub cpu: Duration,
    /// The whole run, waiting included (a script paused for an approval is held at most this long from its start).
    pub wall: Duration,
    /// The engine's heap: every JavaScript value, string and object of the run.
    pub memory: usize,
    /// Tool calls, `find_tool` and `find_tools` together.
    pub calls: u32,
    /// The result as JSON text; a longer one is cut and the answer says so.
    pub result_bytes: usize,
    /// Everything `console` wrote; lines past it are dropped and the answer says how many.
    pub log_bytes: usize,
}

/// The longest script accepted (its source text).
pub const CODE_BYTES: usize = 256 * 1024;
/// The most a caller may raise the CPU time limit to with `timeout_ms`.
pub const MAX_CPU: Duration = Duration::from_secs(60);
/// How many scripts may run (or wait for an answer) at once in one process; each has its own engine thread and heap.
pub const MAX_RUNS: usize = 16;
/// The engine thread's stack; QuickJS stops recursion well before it (`STACK_LIMIT`).
pub(crate) const THREAD_STACK: usize = 8 * 1024 * 1024;
/// The stack QuickJS lets a script use before a (catchable) `RangeError`.
pub(crate) const STACK_LIMIT: usize = 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu: Duration::from_secs(5),
            wall: Duration::from_secs(300),
            memory: 64 * 1024 * 1024,
            calls: 100,
            result_bytes: 64 * 1024,
            log_bytes: 16 * 1024,
        }
    }
}

impl Limits {
    /// These limits with the caller's `timeout_ms` as the CPU time limit (at most [`MAX_CPU`], at least 1 ms).
    pub fn with_timeout_ms(mut self, timeout_ms: Option<u64>) -> Self {
        if let Some(ms) = timeout_ms {
            self.cpu = Duration::from_millis(ms.max(1)).min(MAX_CPU);
        }
        self
    }
}

/// A limit a run exceeded: the `limit` of its typed error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    CpuTime,
    WallTime,
    Memory,
    InnerCalls,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::CpuTime => "cpu_time",
            Limit::WallTime => "wall_time",
            Limit::Memory => "memory",
            Limit::InnerCalls => "inner_calls",
        }
    }

    /// What the error says, with the limit's value.
    pub fn message(self, limits: &Limits) -> String {
        match self {
            Limit::CpuTime => format!(
                "the script ran longer than its CPU time limit of {} ms (timeout_ms)",
                limits.cpu.as_millis()
            ),
            Limit::WallTime => format!(
                "the script took longer than {} s in all, waiting included",
                limits.wall.as_secs()
            ),
            Limit::Memory => format!(
                "the script used more than its memory limit of {} MB",
                limits.memory / (1024 * 1024)
            ),
            Limit::InnerCalls => format!(
                "the script made more than {} calls (tools, find_tool and find_tools together)",
                limits.calls
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_ms_sets_the_cpu_limit_within_bounds() {
        let d = Limits::default();
        assert_eq!(d.cpu, Duration::from_secs(5));
        assert_eq!(d.with_timeout_ms(None), d);
        assert_eq!(d.with_timeout_ms(Some(250)).cpu, Duration::from_millis(250));
        assert_eq!(d.with_timeout_ms(Some(0)).cpu, Duration::from_millis(1));
        assert_eq!(d.with_timeout_ms(Some(u64::MAX)).cpu, MAX_CPU);
        assert!(Limit::Memory.message(&d).contains("64 MB"));
    }
}
