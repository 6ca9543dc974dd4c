//! Starting stdio children under the child guard in their own process group (on Windows: in a job object of their
//! own, `job.rs`), draining their stderr into a ring buffer, and ending the whole group.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::Mutex;

use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

use ad_core::error::{Error, Result};

/// Lines of a child's stderr kept for `status` and error messages.
pub const STDERR_LINES: usize = 200;
const STDERR_LINE_BYTES: usize = 2000;

/// The last lines a child wrote to stderr.
#[derive(Debug, Default)]
pub struct StderrRing(Mutex<VecDeque<String>>);

impl StderrRing {
    pub fn push(&self, line: String) {
        let mut q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() == STDERR_LINES {
            q.pop_front();
        }
        q.push_back(line);
    }

    pub fn tail(&self, n: usize) -> Vec<String> {
        let q = self.0.lock().unwrap_or_else(|p| p.into_inner());
        q.iter().skip(q.len().saturating_sub(n)).cloned().collect()
    }
}

/// A running stdio child: its pipes and the handles that end it.
pub struct Spawned {
    pub child: Child,
    pub stdin: ChildStdin,
    pub stdout: ChildStdout,
    /// Process group id (= the guard's pid).
    pub pgid: i32,
    /// What ends the whole group when dropped: the lifeline's write end (the guard then kills the group), or on
    /// Windows the job object (kill-on-close).
    pub lifeline: Option<Lifeline>,
    /// The task draining stderr into the ring; it ends when every process of the group closed stderr.
    pub stderr_done: Option<tokio::task::JoinHandle<()>>,
}

/// The write end of the lifeline pipe (Unix).
#[cfg(unix)]
pub type Lifeline = std::os::fd::OwnedFd;
/// The child's job object (Windows).
#[cfg(windows)]
pub type Lifeline = crate::job::Job;
#[cfg(not(any(unix, windows)))]
pub type Lifeline = ();

/// How a child is walled off from our own environment (used by introspection of untrusted packages).
#[derive(Debug, Clone)]
pub struct Isolation {
    /// The working directory of the child.
    pub cwd: std::path::PathBuf,
    /// Start from an empty environment: only `env` is passed (no inherited secrets).
    pub clear_env: bool,
}

/// Spawns `program args` under `guard_exe child-guard` with `env` added to ours, never through a shell.
/// stderr is drained into `ring` by a background task.
pub fn spawn(
    guard_exe: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    ring: std::sync::Arc<StderrRing>,
) -> Result<Spawned> {
    spawn_with(guard_exe, program, args, env, ring, None)
}

/// [`spawn`] with an optional [`Isolation`] (working directory, empty environment).
pub fn spawn_with(
    guard_exe: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    ring: std::sync::Arc<StderrRing>,
    isolation: Option<&Isolation>,
) -> Result<Spawned> {
    let mut cmd = guard_command(guard_exe, program, args);
    if let Some(iso) = isolation {
        if iso.clear_env {
            cmd.env_clear();
        }
        cmd.current_dir(&iso.cwd);
    }
    cmd.envs(env);
    start(cmd, guard_exe, ring)
}

/// Spawns `program args` confined by `plan` (`sandbox.rs` built it): the guard gets the plan and nothing else of our
/// environment, and applies it before `exec` (the child's environment and working directory are the plan's).
pub fn spawn_sandboxed(
    guard_exe: &Path,
    program: &str,
    args: &[String],
    plan: &ad_core::sandbox::Plan,
    ring: std::sync::Arc<StderrRing>,
) -> Result<Spawned> {
    let mut cmd = guard_command(guard_exe, program, args);
    let plan = serde_json::to_string(plan)
        .map_err(|e| Error::Internal(format!("cannot encode the sandbox plan: {e}")))?;
    cmd.env_clear().env(ad_core::sandbox::ENV_PLAN, plan);
    start(cmd, guard_exe, ring)
}

fn guard_command(guard_exe: &Path, program: &str, args: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(guard_exe);
    cmd.arg(crate::guard::SUBCOMMAND)
        .arg("--")
        .arg(program)
        .args(args);
    cmd
}

fn start(
    mut cmd: tokio::process::Command,
    guard_exe: &Path,
    ring: std::sync::Arc<StderrRing>,
) -> Result<Spawned> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg_attr(windows, allow(unused_variables))]
    let (read_end, lifeline) = attach_lifeline(&mut cmd)?;
    let spawned = cmd.spawn();
    // The guard has its copy of the read end now; ours must close so only the write end keeps the pipe open.
    drop(read_end);
    let mut child = spawned.map_err(|e| {
        Error::Unavailable(format!(
            "cannot start the child guard {}: {e}",
            guard_exe.display()
        ))
    })?;
    #[cfg(windows)]
    let lifeline = match child.raw_handle().map(crate::job::Job::holding) {
        Some(Ok(job)) => Some(job),
        Some(Err(e)) => {
            let _ = child.start_kill();
            return Err(Error::Unavailable(format!(
                "cannot put the child in a job object: {e}"
            )));
        }
        None => None,
    };
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let stdin = child
        .stdin
        .take()
        .ok_or_else(|| Error::Internal("child stdin missing".into()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::Internal("child stdout missing".into()))?;
    let stderr_done = child.stderr.take().map(|stderr| {
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).split(b'\n');
            while let Ok(Some(line)) = lines.next_segment().await {
                let mut s = String::from_utf8_lossy(&line).trim_end().to_owned();
                if s.len() > STDERR_LINE_BYTES {
                    let mut end = STDERR_LINE_BYTES;
                    while !s.is_char_boundary(end) {
                        end -= 1;
                    }
                    s.truncate(end);
                }
                ring.push(s);
            }
        })
    });
    Ok(Spawned {
        child,
        stdin,
        stdout,
        pgid,
        lifeline,
        stderr_done,
    })
}

#[cfg(unix)]
fn attach_lifeline(
    cmd: &mut tokio::process::Command,
) -> Result<(Option<std::os::fd::OwnedFd>, Option<Lifeline>)> {
    use std::os::fd::{AsRawFd, OwnedFd};
    // Both ends close-on-exec, which keeps them out of other children (the standard library's pipe: `pipe2` with
    // `O_CLOEXEC` on Linux; macOS, which has no `pipe2`, gets the same flags its own way).
    let (read, write) = std::io::pipe()?;
    let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
    let read_fd = read.as_raw_fd();
    cmd.process_group(0);
    // SAFETY: the closure runs between fork and exec and only calls async-signal-safe dup2.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 clears close-on-exec on the copy, so the guard receives the read end as fd 3.
            if libc::dup2(read_fd, crate::guard::LIFELINE_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok((Some(read), Some(write)))
}

/// Elsewhere there is no pipe: on Windows the job object is made once the guard exists (`start`).
#[cfg(not(unix))]
fn attach_lifeline(
    _cmd: &mut tokio::process::Command,
) -> Result<(Option<std::fs::File>, Option<Lifeline>)> {
    Ok((None, None))
}

/// Sends `signal` to every process of the group; a group that is already gone is fine. (Windows has no signals: a
/// child there is ended by its job object.)
#[cfg_attr(not(unix), allow(unused_variables))]
pub fn signal_group(pgid: i32, signal: i32) {
    #[cfg(unix)]
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions; ESRCH (no such group) is expected and ignored.
        unsafe { libc::killpg(pgid, signal) };
    }
}

/// How many processes of the group are still running (zombies, which hold nothing, are not counted). Reads /proc on
/// Linux; elsewhere it can only tell whether the group exists (1 or 0).
pub fn live_group_members(pgid: i32) -> usize {
    if pgid <= 1 {
        return 0;
    }
    #[cfg(target_os = "linux")]
    if let Ok(dir) = std::fs::read_dir("/proc") {
        let mut n = 0;
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // Fields after `(comm)`: state ppid pgrp ...
            let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            let f: Vec<&str> = rest.split_whitespace().take(3).collect();
            if f.len() == 3 && f[0] != "Z" && f[0] != "X" && f[2].parse::<i32>().ok() == Some(pgid)
            {
                n += 1;
            }
        }
        return n;
    }
    #[cfg(unix)]
    {
        // SAFETY: signal 0 only checks for existence; no memory is involved.
        usize::from(unsafe { libc::killpg(pgid, 0) } == 0)
    }
    #[cfg(not(unix))]
    0
}

/// Sends SIGKILL to every process left in the group; a group that is already gone is fine. (On Windows the job object
/// does this when it is dropped.)
#[cfg_attr(not(unix), allow(unused_variables))]
pub fn kill_group(pgid: i32) {
    #[cfg(unix)]
    if pgid > 1 {
        // SAFETY: killpg has no memory-safety preconditions; ESRCH (no such group) is expected and ignored.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
    }
}
