//! How a batch runs: the time limits of the stages, the concurrency, the cache and the child guard, the second pass.

use std::path::PathBuf;
use std::time::Duration;

/// Time limits of the stages (seed 002's tiers; install is apart from the protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub install: Duration,
    pub initialize: Duration,
    pub list: Duration,
    /// Grace between SIGTERM and SIGKILL at teardown.
    pub term_grace: Duration,
    /// The whole protocol part of one attempt (spawn to teardown).
    pub hard: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            install: Duration::from_secs(180),
            initialize: Duration::from_secs(15),
            list: Duration::from_secs(15),
            term_grace: Duration::from_secs(2),
            hard: Duration::from_secs(120),
        }
    }
}

/// How a batch runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub limits: Limits,
    /// Packages introspected at once (default: cores + 1).
    pub concurrency: usize,
    /// Where packages are installed (`<dir>/npm/...`, `<dir>/pypi/...`) and attempts get their scratch directories.
    pub cache_dir: PathBuf,
    /// The program that runs `child-guard` (this executable).
    pub guard_exe: PathBuf,
    /// Retry a failed package once with placeholders.
    pub second_pass: bool,
    /// How the packages run: confined (the default; `AGENT_DISCOVER_SANDBOX=off` turns it off), with the package
    /// cache grantable though it lies in the data directory.
    pub sandbox: ad_registry::config::SandboxConfig,
    /// Paths every attempt may also read, beyond the package and the system (a tool a package runs from elsewhere).
    pub read: Vec<PathBuf>,
    /// Where newer Node runtimes are installed and found (`<data>/runtimes`, shared with activation).
    pub runtimes: PathBuf,
    /// The Node binary treated as the system's (default: `AGENT_DISCOVER_SYSTEM_NODE`, else `node` on PATH).
    pub system_node: Option<PathBuf>,
}

impl Options {
    pub fn new(cache_dir: PathBuf, guard_exe: PathBuf) -> Options {
        let mut sandbox = ad_registry::config::SandboxConfig::default_for(&cache_dir);
        sandbox.grantable_in_data.push(cache_dir.clone());
        // The data directory's runtimes (the cache is `<data>/introspect`).
        let runtimes = ad_proxy::runtime::root_in(cache_dir.parent().unwrap_or(&cache_dir));
        Options {
            limits: Limits::default(),
            concurrency: default_concurrency(),
            cache_dir,
            guard_exe,
            second_pass: true,
            sandbox,
            read: Vec::new(),
            runtimes,
            system_node: ad_proxy::runtime::system_node_from_env(),
        }
    }
}

/// Cores + 1.
pub fn default_concurrency() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        + 1
}
