//! macOS: the plan as a Seatbelt (SBPL) profile, and `exec` through `/usr/bin/sandbox-exec` with it.
//!
//! The profile is the Linux policy in Seatbelt's terms: `(deny default)`, then only allows, so the order of the rules
//! never matters (Seatbelt's precedence between an allow and a deny that both match is not something this file has to
//! rely on). What is allowed: forking; running and mapping as code only what may be read; signals and process
//! information within the sandbox; a short list of system services; reading the system's own locations; reading (and
//! for write grants writing) the plan's grants; the network as the plan says.
//!
//! Seatbelt matches the path the kernel resolved, so grants are written with their symlinks resolved (`/tmp` is
//! `/private/tmp`, `/var/folders` is `/private/var/folders`), and a grant for something absent grants nothing, as on
//! Linux. The generator is pure ([`seatbelt_profile_with`] takes the filesystem as a function) so it is tested on
//! Linux; only [`exec`] is macOS-only, and it is not exercised on this project's machines.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use ad_core::sandbox::{GrantSource, Network, Plan};

/// The program that applies a profile and `exec`s the server (absolute: never looked up on `PATH`).
#[cfg(target_os = "macos")]
const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// What the filesystem says about a grant's path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path with every symlink resolved (what Seatbelt matches).
    pub path: PathBuf,
    /// A directory (granted with everything beneath it) rather than a file (granted alone).
    pub dir: bool,
}

/// The profile for `plan`, asking the filesystem where each grant really is and whether it is a directory.
pub fn seatbelt_profile(plan: &Plan) -> String {
    seatbelt_profile_with(plan, |path| {
        let real = std::fs::canonicalize(path).ok()?;
        let dir = std::fs::metadata(&real).ok()?.is_dir();
        Some(Resolved { path: real, dir })
    })
}

/// What every profile starts with: the default, processes, system services and the system's own files.
const BASE: &str = r#"(version 1)
(deny default)

; Processes. Running a program and mapping a library as code are allowed only where reading is (the rules below).
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
; libuv's os.cpus() (host_processor_info).
(allow mach-host*)
(allow sysctl-read
    (sysctl-name-prefix "hw.")
    (sysctl-name-prefix "machdep.cpu.")
    (sysctl-name "kern.argmax")
    (sysctl-name "kern.boottime")
    (sysctl-name "kern.hostname")
    (sysctl-name "kern.maxfiles")
    (sysctl-name "kern.maxfilesperproc")
    (sysctl-name "kern.maxproc")
    (sysctl-name "kern.ngroups")
    (sysctl-name "kern.osproductversion")
    (sysctl-name "kern.osrelease")
    (sysctl-name "kern.ostype")
    (sysctl-name "kern.osvariant_status")
    (sysctl-name "kern.osversion")
    (sysctl-name "kern.secure_kernel")
    (sysctl-name "kern.usrstack64")
    (sysctl-name "kern.version")
    (sysctl-name "sysctl.proc_cputype")
    (sysctl-name "sysctl.proc_native")
    (sysctl-name "sysctl.proc_translated")
    (sysctl-name "vm.loadavg")
    ; One process by pid (runtimes check whether a debugger traces them); not the process list, not arguments.
    (sysctl-name-prefix "kern.proc.pid."))

; System services a plain process uses.
(allow mach-lookup
    ; syslog(3) and ASL.
    (global-name "com.apple.system.logger")
    ; notify(3): time zone and resolver changes.
    (global-name "com.apple.system.notification_center")
    ; getpwuid(3) and friends: the user's name and groups.
    (global-name "com.apple.system.opendirectoryd.libinfo"))
(allow ipc-posix-shm-read-data (ipc-posix-name "apple.shm.notification_center"))
; Named semaphores (Python's multiprocessing locks): a count, no data.
(allow ipc-posix-sem)
; Unnamed and pair Unix sockets (pipes to helpers); connecting to or binding a path is a network rule below.
(allow system-socket (socket-domain AF_UNIX))

; Files. Metadata (stat, readlink) everywhere: macOS resolves paths through their parents, and Landlock does not
; restrict it on Linux either; no data, no directory listing.
(allow file-read-metadata)
; getcwd and path resolution fall back to reading the root directory itself (its entries' names, nothing beneath).
(allow file-read-data (literal "/"))
; The system's programs and libraries (the dynamic linker's shared cache lives under /System), interpreters from
; Homebrew, Rosetta's translations.
(allow file-read* process-exec file-map-executable
    (subpath "/usr")
    (subpath "/bin")
    (subpath "/sbin")
    (subpath "/System")
    (subpath "/Library/Apple")
    (subpath "/opt/homebrew")
    (subpath "/private/var/db/dyld")
    (subpath "/private/var/db/oah"))
; Configuration (certificates, hosts, services), time zones, the shell /bin/sh runs.
(allow file-read*
    (subpath "/private/etc")
    (subpath "/private/var/db/timezone")
    (subpath "/private/var/select"))
(allow file-read* file-write-data file-ioctl
    (literal "/dev/null")
    (literal "/dev/zero"))
(allow file-read*
    (literal "/dev/random")
    (literal "/dev/urandom"))
(allow file-read* file-write-data
    (subpath "/dev/fd"))
"#;

/// Full network: any host, and what name resolution and TLS need.
const NETWORK_FULL: &str = r#"
; Network: full.
(allow network*)
; Routing sockets and kernel control sockets: interface lists and name resolution.
(allow system-socket
    (socket-domain AF_ROUTE)
    (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))
(allow sysctl-read (sysctl-name-prefix "net.routetable"))
(allow mach-lookup
    ; Proxies and network configuration.
    (global-name "com.apple.SystemConfiguration.configd")
    ; The resolver's configuration, and the resolver (mDNSResponder).
    (global-name "com.apple.SystemConfiguration.DNSConfiguration")
    (global-name "com.apple.dnssd.service")
    ; Network.framework (URLSession).
    (global-name "com.apple.networkd")
    ; TLS: certificate evaluation.
    (global-name "com.apple.trustd")
    (global-name "com.apple.trustd.agent"))
; /etc/resolv.conf links here; the system keychains hold the roots an administrator installed.
(allow file-read*
    (literal "/private/var/run/resolv.conf")
    (subpath "/Library/Keychains")
    (subpath "/private/var/db/mds"))
"#;

/// The profile for `plan`, with `resolve` saying where each grant's path really is and whether it is a directory
/// (`None`: absent, the grant grants nothing). Grants whose path is relative, or not one that can be written into
/// a profile as is (see `sbpl_path`), are skipped.
pub fn seatbelt_profile_with(plan: &Plan, resolve: impl Fn(&Path) -> Option<Resolved>) -> String {
    let mut profile = String::from(BASE);
    profile.push_str(
        "\n; The plan's grants, symlinks resolved. Reading includes running and mapping as code.\n",
    );
    let mut seen = HashSet::new();
    let mut state_dirs = Vec::new();
    for grant in &plan.grants {
        if !grant.path.is_absolute() {
            continue;
        }
        let Some(found) = resolve(&grant.path) else {
            continue;
        };
        let Some(path) = sbpl_path(&found.path) else {
            continue;
        };
        let filter = if found.dir { "subpath" } else { "literal" };
        // A file granted for writing: its content, as on Linux (not removing or renaming it).
        let ops = match (grant.write, found.dir) {
            (false, _) => "file-read* process-exec file-map-executable",
            (true, true) => "file-read* file-write* process-exec file-map-executable",
            (true, false) => "file-read* file-write-data process-exec file-map-executable",
        };
        if grant.write
            && found.dir
            && grant.source == GrantSource::State
            && !state_dirs.contains(&path)
        {
            state_dirs.push(path.clone());
        }
        if seen.insert((ops, filter, path.clone())) {
            let _ = writeln!(
                profile,
                "(allow {ops} ({filter} {path})) ; {}",
                grant.source.as_str()
            );
        }
    }
    match plan.network {
        Network::Full => profile.push_str(NETWORK_FULL),
        // An allow-list needs the Linux network namespace and its bridge to the filtering proxy; here it fails closed
        // to no network at all.
        Network::None | Network::Hosts => {
            // No IP at all. Unix sockets only inside the server's own state directory: a server and its helpers may
            // talk through one there, and no socket of the user's or the system's is reachable (stricter than Linux,
            // where a reachable socket path stays connectable).
            profile.push_str("\n; Network: none. Unix sockets inside the state directory only.\n");
            for dir in &state_dirs {
                let _ = writeln!(
                    profile,
                    "(allow network-bind network-inbound (local unix-socket (subpath {dir})))"
                );
                let _ = writeln!(
                    profile,
                    "(allow network-outbound (remote unix-socket (subpath {dir})))"
                );
            }
        }
    }
    profile
}

/// `path` as an SBPL string literal (quoted, `\` and `"` escaped), or `None` when it cannot name one place in a
/// profile: not absolute, not UTF-8 (Seatbelt compares bytes; a lossy spelling would name another path), with a
/// control character, or not in the form Seatbelt sees a resolved path in (a `.` or `..`, a doubled or trailing `/`).
fn sbpl_path(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    let normal: PathBuf = path.components().collect();
    if !path.is_absolute()
        || text.chars().any(char::is_control)
        || normal.as_os_str() != path.as_os_str()
        || path.components().any(|c| c == Component::ParentDir)
    {
        return None;
    }
    Some(sbpl_string(text))
}

/// `text` as an SBPL (Scheme) string literal.
fn sbpl_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Replaces this process with `sandbox-exec -p PROFILE program args`, with the plan's environment and working
/// directory. Returns only on failure, with what went wrong.
#[cfg(target_os = "macos")]
pub fn exec(plan: &Plan, program: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> String {
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(SANDBOX_EXEC)
        .arg("-p")
        .arg(seatbelt_profile(plan))
        .arg(program)
        .args(args)
        .env_clear()
        .envs(&plan.env)
        .current_dir(&plan.cwd)
        .exec();
    format!("cannot run {SANDBOX_EXEC}: {error}")
}

#[cfg(test)]
mod tests;
