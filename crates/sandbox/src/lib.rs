//! Confinement of child servers: what the child guard applies to a server before `exec`, from a [`Plan`] that
//! agent-discover built. On Linux: user, PID and mount namespaces (a `/proc` of its own, every descendant ended with
//! the server), a network namespace for `network: none` (and for `network: hosts`, with a bridge to the filtering
//! proxy as its only way out), Landlock for the filesystem (and TCP, and signal and abstract
//! socket scoping), `no_new_privs`, a seccomp filter and resource limits. On macOS: a Seatbelt profile run through
//! `sandbox-exec` (generated here; not exercised on this project's Linux machines).
//!
//! Fails closed: [`enter`] returns an error when any layer cannot be set up, and the guard then refuses to start the
//! child. Must not know: servers' storage, the registry, MCP, or how a plan was derived (the proxy builds plans).

pub mod macos;

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod seccomp;

pub use ad_core::sandbox::{Grant, GrantSource, Network, Plan};

/// What this kernel offers the sandbox, probed once per start (cheap: two system calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Landlock's ABI version; `None` when the kernel has no Landlock (or it is disabled).
    pub landlock_abi: Option<u32>,
    /// Whether this process may create a user namespace (needed for the PID, mount and network namespaces).
    pub user_namespaces: bool,
}

impl Support {
    /// Why children cannot be confined here, if they cannot.
    pub fn missing(&self) -> Option<String> {
        if cfg!(target_os = "macos") {
            return None;
        }
        if !cfg!(target_os = "linux") {
            return Some("the sandbox supports Linux and macOS only".into());
        }
        match (self.landlock_abi, self.user_namespaces) {
            (None, _) => Some(
                "the kernel has no Landlock (Linux 5.13 or later with landlock in the lsm= list)".into(),
            ),
            (Some(_), false) => Some(
                "the kernel does not let this user create user namespaces (needed for the PID and mount namespaces)"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// Probes the kernel.
pub fn support() -> Support {
    #[cfg(target_os = "linux")]
    {
        linux::support()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Support {
            landlock_abi: None,
            user_namespaces: false,
        }
    }
}

/// How to run a server unconfined, for every refusal's message.
pub const OPT_OUT: &str = "to run it unconfined anyway: `agent-discover sandbox set NAME --off` (this server), or \
     AGENT_DISCOVER_SANDBOX=off (every server)";

/// Enters the sandbox and replaces this process with `program args`. Called by the child guard in a process of its
/// own (forked for the purpose, single-threaded); returns only on failure, with what went wrong.
pub fn enter(plan: &Plan, program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> String {
    #[cfg(target_os = "linux")]
    {
        linux::enter(plan, program, args)
    }
    #[cfg(target_os = "macos")]
    {
        macos::exec(plan, program, args)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (plan, program, args);
        "the sandbox supports Linux and macOS only".into()
    }
}

#[cfg(unix)]
/// The exit code a shell would report for `pid`, our child, once it ends: its own, or 128 + the signal that ended it
/// (1 if it cannot be waited for).
pub fn wait_exit_code(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status of our own child into `status`.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 1;
        }
    }
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}
