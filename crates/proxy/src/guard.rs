//! `agent-discover child-guard`: a tiny supervisor between agent-discover and each stdio child, so no child outlives us.
//!
//! The guard leads the child's process group and holds the read end of a "lifeline" pipe (fd 3) whose write end only
//! agent-discover holds. When agent-discover exits in any way, `kill -9` included, the pipe reaches end-of-file and the
//! guard kills its whole group (npx -> node -> server chains and stragglers that ignore stdin EOF). When the child exits
//! first, the guard exits with the child's status and agent-discover reaps the rest of the group.
//!
//! Runs before the async runtime and logging start; uses only std and libc, and never writes to stdout.

use std::ffi::OsString;

/// The file descriptor the lifeline arrives on.
pub const LIFELINE_FD: i32 = 3;
pub const SUBCOMMAND: &str = "child-guard";

/// `args` are what follows `child-guard`: `-- PROGRAM [ARGS...]`. Returns the exit code.
#[cfg(unix)]
pub fn run(args: Vec<OsString>) -> i32 {
    use std::os::unix::process::ExitStatusExt;

    let mut args = args.into_iter().skip_while(|a| a != "--").skip(1);
    let Some(program) = args.next() else {
        eprintln!("agent-discover child-guard: usage: child-guard -- PROGRAM [ARGS...]");
        return 2;
    };
    // The child must not inherit the lifeline, or our death would not close it.
    // SAFETY: fcntl on a descriptor number has no memory-safety preconditions.
    let have_lifeline = unsafe { libc::fcntl(LIFELINE_FD, libc::F_SETFD, libc::FD_CLOEXEC) } == 0;
    // A sandboxed child: agent-discover put the plan (and nothing else) in our environment.
    if let Some(plan) = std::env::var_os(ad_core::sandbox::ENV_PLAN) {
        let args: Vec<OsString> = args.collect();
        return run_sandboxed(&plan, &program, &args, have_lifeline);
    }
    let mut child = match std::process::Command::new(&program).args(args).spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "agent-discover: cannot start `{}`: {e}",
                program.to_string_lossy()
            );
            return 127;
        }
    };
    if have_lifeline {
        spawn_lifeline_watch();
    }
    match child.wait() {
        Ok(status) => status
            .code()
            .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        Err(e) => {
            eprintln!("agent-discover child-guard: wait failed: {e}");
            1
        }
    }
}

/// Forks the process that enters the sandbox (`ad_sandbox::enter`, which execs the server inside it), then waits for
/// it as for an unconfined child. The fork happens before the lifeline thread starts: the sandbox's namespaces need a
/// single-threaded process.
#[cfg(unix)]
fn run_sandboxed(
    plan: &std::ffi::OsStr,
    program: &OsString,
    args: &[OsString],
    lifeline: bool,
) -> i32 {
    let refuse = |server: &str, why: &str| {
        eprintln!(
            "{} cannot start `{server}`: {why}; {}",
            ad_core::sandbox::REFUSED_PREFIX,
            ad_sandbox::OPT_OUT
        );
        ad_core::sandbox::REFUSED_EXIT
    };
    let plan: ad_core::sandbox::Plan = match serde_json::from_slice(plan.as_encoded_bytes()) {
        Ok(p) => p,
        Err(e) => return refuse("?", &format!("unreadable sandbox plan: {e}")),
    };
    // SAFETY: fork while this process has one thread; the child runs ordinary code and execs or exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return refuse(
            &plan.server,
            &format!("fork failed: {}", std::io::Error::last_os_error()),
        );
    }
    if pid == 0 {
        let why = ad_sandbox::enter(&plan, program, args);
        let code = refuse(&plan.server, &why);
        // SAFETY: leaving the forked child without running the guard's exit path.
        unsafe { libc::_exit(code) }
    }
    if lifeline {
        spawn_lifeline_watch();
    }
    ad_sandbox::wait_exit_code(pid)
}

/// Watches the lifeline: when agent-discover is gone, takes the whole group down, ourselves included.
#[cfg(unix)]
fn spawn_lifeline_watch() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    std::thread::spawn(|| {
        // SAFETY: fd 3 was handed to us by agent-discover and nothing else in this process owns it.
        let mut lifeline = unsafe { std::fs::File::from_raw_fd(LIFELINE_FD) };
        let mut buf = [0u8; 16];
        while matches!(lifeline.read(&mut buf), Ok(n) if n > 0) {}
        // SAFETY: killpg(0, ..) signals our own process group; no memory is involved.
        unsafe { libc::killpg(0, libc::SIGKILL) };
    });
}

/// Elsewhere (Windows) the guard only starts the child and waits for it: agent-discover put the guard in a job object
/// with kill-on-close before it ran (`job.rs`), and every descendant inherits the job. A sandbox plan cannot be applied
/// here, and agent-discover never sends one (the sandbox refuses such starts first): one that arrives is refused.
#[cfg(not(unix))]
pub fn run(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter().skip_while(|a| a != "--").skip(1);
    let Some(program) = args.next() else {
        eprintln!("agent-discover child-guard: usage: child-guard -- PROGRAM [ARGS...]");
        return 2;
    };
    if std::env::var_os(ad_core::sandbox::ENV_PLAN).is_some() {
        eprintln!("agent-discover child-guard: the sandbox supports Linux and macOS only");
        return 126;
    }
    match std::process::Command::new(&program).args(args).status() {
        Ok(status) => status.code().unwrap_or(1),
        Err(e) => {
            eprintln!(
                "agent-discover: cannot start `{}`: {e}",
                program.to_string_lossy()
            );
            127
        }
    }
}
