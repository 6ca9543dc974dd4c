//! The Linux sandbox: namespaces, Landlock, seccomp and resource limits, set up in three processes.
//!
//! The guard forks `A`, which leaves agent-discover's user, PID and mount namespaces (and its network namespace for
//! `network: none`) and forks `B`, the first process of the new PID namespace. `B` mounts a `/proc` of its own,
//! restricts itself (limits, Landlock, `no_new_privs`, seccomp) and forks `C`, which builds the server's environment
//! and `exec`s the server. `B` stays as the namespace's init: it forwards stop signals to `C`, reaps orphans, and exits
//! with `C`'s status, and when it exits the kernel ends every process left in the namespace (daemons that left the
//! process group included). `A` stays outside, waits for `B` and exits with its status, so the guard sees the server's
//! own exit code; when `A` dies (the guard killed its group), `B` is killed with it (`PR_SET_PDEATHSIG`). With
//! `network: hosts`, `B` also brings the namespace's loopback up and forks the bridge to the filtering proxy
//! (`netns.rs`) before it restricts itself.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use super::{Network, Plan, Support};

/// The newest Landlock ABI this code knows the rights of.
const ABI_KNOWN: ABI = ABI::V6;

pub fn support() -> Support {
    static CACHED: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    *CACHED.get_or_init(|| Support {
        landlock_abi: landlock_abi(),
        user_namespaces: user_namespaces_allowed(),
    })
}

fn landlock_abi() -> Option<u32> {
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns the ABI version.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32, // LANDLOCK_CREATE_RULESET_VERSION
        )
    };
    (v > 0).then_some(v as u32)
}

/// Whether a user namespace can be created and used (mapped): tried in a forked process that exits at once.
fn user_namespaces_allowed() -> bool {
    // SAFETY: the forked child calls only async-signal-safe functions (unshare, open, write, close, _exit).
    unsafe {
        let pid = libc::fork();
        if pid < 0 {
            return false;
        }
        if pid == 0 {
            let uid = libc::getuid();
            let ok =
                libc::unshare(libc::CLONE_NEWUSER) == 0 && write_map(b"/proc/self/uid_map\0", uid);
            libc::_exit(if ok { 0 } else { 1 });
        }
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if *libc::__errno_location() != libc::EINTR {
                return false;
            }
        }
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
    }
}

/// Writes `ID ID 1` (the id mapped to itself) to a map file without allocating: usable right after `fork`.
unsafe fn write_map(path: &[u8], id: u32) -> bool {
    let mut buf = [0u8; 40];
    let mut digits = [0u8; 10];
    let (mut n, mut v) = (0, id);
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let mut len = 0;
    for _ in 0..2 {
        for i in (0..n).rev() {
            buf[len] = digits[i];
            len += 1;
        }
        buf[len] = b' ';
        len += 1;
    }
    buf[len] = b'1';
    buf[len + 1] = b'\n';
    len += 2;
    // SAFETY: `path` is NUL-terminated; `buf[..len]` is initialised.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, buf.as_ptr().cast(), len) == len as isize;
        libc::close(fd);
        ok
    }
}

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

pub fn enter(plan: &Plan, program: &OsStr, args: &[OsString]) -> String {
    // SAFETY: plain system calls on this (single-threaded, freshly forked) process.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if plan.network != Network::Full {
        flags |= libc::CLONE_NEWNET;
    }
    if plan.network == Network::Hosts && plan.net_proxy.is_none() {
        return "a network allow-list without its proxy socket".into();
    }
    // SAFETY: unshare has no memory-safety preconditions.
    if unsafe { libc::unshare(flags) } != 0 {
        return os_error("cannot create the user, PID and mount namespaces");
    }
    if let Err(e) = std::fs::write("/proc/self/setgroups", "deny") {
        return format!("cannot deny setgroups in the user namespace: {e}");
    }
    // SAFETY: NUL-terminated paths; see write_map.
    if !unsafe {
        write_map(b"/proc/self/uid_map\0", uid) && write_map(b"/proc/self/gid_map\0", gid)
    } {
        return os_error("cannot map the user and group ids into the user namespace");
    }
    // A: ignore the stop signals (the server gets them and ends; B follows, then A), wait for B.
    // SAFETY: setting dispositions to SIG_IGN, then fork; both have no memory-safety preconditions.
    let b = unsafe {
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
        libc::fork()
    };
    if b < 0 {
        return os_error("cannot start the sandbox's first process");
    }
    if b > 0 {
        // SAFETY: waits for our own child, then exits without running destructors (nothing to flush).
        unsafe { libc::_exit(super::wait_exit_code(b)) }
    }
    // B, PID 1 of the new namespace.
    let why = init(plan, program, args);
    eprintln!(
        "{} cannot start `{}`: {why}; {}",
        ad_core::sandbox::REFUSED_PREFIX,
        plan.server,
        super::OPT_OUT
    );
    // SAFETY: exiting the process.
    unsafe { libc::_exit(ad_core::sandbox::REFUSED_EXIT) }
}

/// C's pid, for B's signal handler.
static SERVER_PID: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(signal: libc::c_int) {
    let pid = SERVER_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, signal) };
    }
}

/// B: sets the namespace up, restricts itself, starts the server and stays as init. Returns only on failure.
fn init(plan: &Plan, program: &OsStr, args: &[OsString]) -> String {
    // SAFETY: prctl and mount with valid NUL-terminated strings; no memory is handed to the kernel beyond the call.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return os_error("cannot tie the sandbox to its guard");
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) != 0
        {
            return os_error("cannot make the mount namespace private");
        }
        if libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ) != 0
        {
            return os_error("cannot mount a /proc of its own (other processes would be visible)");
        }
    }
    // The bridge to the filtering proxy starts before the restrictions (it is not the server's to touch).
    let proxy_url = match (&plan.network, &plan.net_proxy) {
        (Network::Hosts, Some(socket)) => match crate::netns::open(socket) {
            Ok(url) => Some(url),
            Err(e) => return e,
        },
        _ => None,
    };
    if let Err(e) = limits() {
        return e;
    }
    if let Err(e) = landlock(plan) {
        return e;
    }
    if let Err(e) = crate::seccomp::install() {
        return e;
    }
    // Everything the server may need from here on is granted; check the program can be reached before forking.
    let mut cmd = std::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(&plan.env)
        .current_dir(&plan.cwd);
    if let Some(url) = &proxy_url {
        for var in crate::netns::PROXY_VARS {
            cmd.env(var, url);
        }
        cmd.env_remove("NO_PROXY")
            .env_remove("no_proxy")
            .env("NODE_USE_ENV_PROXY", "1");
    }
    // SAFETY: fork in a single-threaded process; the child only execs (or reports and exits).
    let c = unsafe { libc::fork() };
    if c < 0 {
        return os_error("cannot start the server");
    }
    if c == 0 {
        // SAFETY: restoring default dispositions before exec.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
        }
        let e = cmd.exec();
        let denied = e.kind() == std::io::ErrorKind::PermissionDenied;
        eprintln!(
            "{} cannot start `{}`: {}: {e}{}",
            ad_core::sandbox::REFUSED_PREFIX,
            plan.server,
            program.to_string_lossy(),
            if denied {
                format!(
                    " (the sandbox grants no access to it: grant it with `agent-discover sandbox set NAME --read \
                     PATH`; {})",
                    super::OPT_OUT
                )
            } else {
                String::new()
            }
        );
        // SAFETY: exiting the forked child.
        unsafe {
            libc::_exit(if denied {
                ad_core::sandbox::REFUSED_EXIT
            } else {
                127
            })
        }
    }
    SERVER_PID.store(c, Ordering::SeqCst);
    // SAFETY: installing a handler that only calls kill (async-signal-safe).
    unsafe {
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::signal(
                s,
                forward as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    // Init: reap every child until the server itself is gone; then the namespace ends with us.
    let code = loop {
        let mut status = 0;
        // SAFETY: waitpid writes into `status`.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == c {
            break if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            break 1;
        }
    };
    // SAFETY: exiting init; the kernel ends what is left of the namespace.
    unsafe { libc::_exit(code) }
}

/// Resource limits: no core dumps (a dump holds what the process held), bounded descriptors and file sizes.
fn limits() -> Result<(), String> {
    let set = |resource, soft: u64, hard: u64, what: &str| -> Result<(), String> {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit read and write the struct we own.
        unsafe {
            libc::getrlimit(resource, &mut cur);
            let new = libc::rlimit {
                rlim_cur: soft.min(cur.rlim_max),
                rlim_max: hard.min(cur.rlim_max),
            };
            if libc::setrlimit(resource, &new) != 0 {
                return Err(os_error(&format!("cannot limit {what}")));
            }
        }
        Ok(())
    };
    set(libc::RLIMIT_CORE, 0, 0, "core dumps")?;
    set(libc::RLIMIT_NOFILE, 8192, 65536, "open files")?;
    // 16 GiB: a server that writes more than that to one file is not one we want to run.
    set(libc::RLIMIT_FSIZE, 16 << 30, 16 << 30, "file sizes")?;
    Ok(())
}

fn landlock(plan: &Plan) -> Result<(), String> {
    let abi = ABI_KNOWN;
    let fail = |e: &dyn std::fmt::Display| format!("cannot set up Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| fail(&e))?;
    if plan.network == Network::None {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| fail(&e))?;
    }
    ruleset = ruleset.scope(Scope::from_all(abi)).map_err(|e| fail(&e))?;
    let mut created = ruleset.create().map_err(|e| fail(&e))?;
    // The namespace's own /proc (mounted above, so this rule is about it, not agent-discover's).
    for (path, write) in std::iter::once((Path::new("/proc"), false))
        .chain(plan.grants.iter().map(|g| (g.path.as_path(), g.write)))
    {
        let Ok(meta) = std::fs::metadata(path) else {
            // A grant for something absent (a runtime directory this system lacks) grants nothing.
            continue;
        };
        let access = match (meta.is_dir(), write) {
            (true, true) => AccessFs::from_all(abi),
            (true, false) => AccessFs::from_read(abi),
            (false, true) => AccessFs::from_file(abi),
            (false, false) => AccessFs::from_read(abi) & AccessFs::from_file(abi),
        };
        let fd = PathFd::new(path).map_err(|e| fail(&format!("{}: {e}", path.display())))?;
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| fail(&format!("{}: {e}", path.display())))?;
    }
    let status = created.restrict_self().map_err(|e| fail(&e))?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("the kernel did not enforce the Landlock ruleset".into());
    }
    if !status.no_new_privs {
        return Err("no_new_privs could not be set".into());
    }
    Ok(())
}
