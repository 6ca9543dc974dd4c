//! Making a stdio child's program startable before it is spawned, the same way for every start (activation, enable,
//! restarts, health checks, agent workers): the program is looked up on the PATH the child gets; a launcher that is
//! missing there (`uvx`/`uv`, `npx`/`node`/`npm`) is fetched into `<data>/runtimes` once and put first on the child's
//! PATH (`runtime::uv`, `runtime::ensure`); any other missing program is a [`StartFailure::ProgramMissing`] naming it
//! and the fix, never a sandbox refusal. Also how long a start may take: the activation timeout, longer for the first
//! start of a package runner (`npx -y`, `uvx`, ...), which downloads its package before it answers.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ad_core::error::{Error, Result, StartFailure};
use ad_core::model::Server;

use crate::which::{child_path, find};

/// `off` (or `0`, `false`): never fetch a missing launcher; the start fails naming the program instead.
pub const ENV_FETCH: &str = "AGENT_DISCOVER_FETCH_LAUNCHERS";
/// The handshake timeout of a package runner's first start (`npx -y`, `uvx`, `uv tool run`, `pipx run`, `bunx`,
/// `pnpm dlx`, `npm exec`), unless the server sets its own activation timeout: it downloads its package first.
pub const FIRST_START_TIMEOUT: Duration = Duration::from_secs(120);

/// The launchers agent-discover can fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Launcher {
    Uv,
    Node,
}

fn base_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

fn launcher_of(program: &str) -> Option<Launcher> {
    match base_name(program) {
        "uvx" | "uv" => Some(Launcher::Uv),
        "npx" | "node" | "npm" => Some(Launcher::Node),
        _ => None,
    }
}

/// Whether fetching missing launchers is on (`AGENT_DISCOVER_FETCH_LAUNCHERS` is not `off`).
pub fn fetch_enabled() -> bool {
    !std::env::var(ENV_FETCH).is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "off" | "0" | "false" | "no"
        )
    })
}

fn missing(server: &str, message: String) -> Error {
    Error::StartFailed {
        server: server.to_owned(),
        why: StartFailure::ProgramMissing,
        message,
    }
}

/// A relative program path (`./server`, `bin/server`) made absolute against our working directory, as an unconfined
/// start would find it (a confined child starts in its state directory); names without `/` and absolute paths stay.
pub fn absolute(program: &str) -> String {
    if program.contains('/')
        && !program.starts_with('/')
        && let Ok(cwd) = std::env::current_dir()
    {
        return cwd.join(program).to_string_lossy().into_owned();
    }
    program.to_owned()
}

/// Makes `program` startable with `env`: nothing to do when the child's PATH finds it; a missing launcher is fetched
/// into the runtimes folder `root` (`<data>/runtimes`, or found there from an earlier fetch) and its folder put first
/// on `env`'s PATH. Returns what to tell the user (a launcher fetched now), or the typed error naming the program and
/// the fix.
pub async fn prepare(
    root: &Path,
    server: &str,
    program: &str,
    env: &mut BTreeMap<String, String>,
) -> Result<Option<String>> {
    if find(program, env).is_some() {
        return Ok(None);
    }
    if program.contains('/') {
        return Err(missing(
            server,
            format!(
                "program `{program}` does not exist (or is not a file): install it there, or change the server's command"
            ),
        ));
    }
    let Some(launcher) = launcher_of(program) else {
        return Err(missing(
            server,
            format!(
                "program `{program}` is not installed: it is not on the PATH the server gets ({}); install it, or register the server with the program's absolute path",
                child_path(env)
            ),
        ));
    };
    let (what, install) = match launcher {
        Launcher::Uv => ("uv", "install uv"),
        Launcher::Node => (
            "Node.js",
            "install Node.js (22 or later; it brings npx and npm)",
        ),
    };
    if !fetch_enabled() {
        return Err(missing(
            server,
            format!(
                "program `{program}` is not installed (not on the PATH the server gets) and fetching launchers is off ({ENV_FETCH}): {install}, or unset {ENV_FETCH}"
            ),
        ));
    }
    let fetched = match launcher {
        Launcher::Uv => {
            let had = root
                .join(format!("uv-{}", crate::runtime::uv::UV_VERSION))
                .join("bin/uv")
                .is_file();
            crate::runtime::uv::ensure(root)
                .await
                .map(|bin| (bin, !had, format!("uv {}", crate::runtime::uv::UV_VERSION)))
        }
        Launcher::Node => {
            let major = crate::runtime::LTS_MAJORS[0];
            crate::runtime::ensure(root, major).await.map(|c| {
                (
                    c.bin_dir.clone().unwrap_or_default(),
                    c.fetched_now,
                    format!("Node.js {}", c.info.version),
                )
            })
        }
    };
    let (bin, now, label) = fetched.map_err(|e| {
        let how = match launcher {
            Launcher::Uv => "agent-discover fetches uv from the package index pip is configured with (PIP_INDEX_URL, pip.conf) or a find-links folder (PIP_FIND_LINKS)",
            Launcher::Node => "agent-discover fetches Node.js and npm from the npm registry npm is configured with (npm_config_registry, ~/.npmrc) or AGENT_DISCOVER_NPM_REGISTRY_URL",
        };
        missing(
            server,
            format!(
                "program `{program}` is not installed (not on the PATH the server gets) and {what} could not be fetched: {e}; {install} ({how})"
            ),
        )
    })?;
    let rest = child_path(env);
    env.insert("PATH".into(), format!("{}:{rest}", bin.display()));
    if !now {
        tracing::debug!(server, program, dir = %bin.display(), "using the launcher fetched earlier");
        return Ok(None);
    }
    let note = fetched_note(program, &label, &bin);
    tracing::info!(server, "{note}");
    Ok(Some(note))
}

/// What the user is told of a launcher fetched for `program` into `bin`'s folder.
pub fn fetched_note(program: &str, label: &str, bin: &Path) -> String {
    format!(
        "`{program}` was not installed: fetched {label} into {} (once; every server that needs it uses it from now on)",
        bin.parent().unwrap_or(bin).display()
    )
}

/// Whether `program args` runs a package it may have to download first (`npx`, `uvx`, `uv tool run`, `pipx run`,
/// `bunx`, `pnpm dlx`, `yarn dlx`, `npm exec`, `bun x`).
pub fn is_package_runner(program: &str, args: &[String]) -> bool {
    let mut words = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'));
    let first = words.next().unwrap_or("");
    match base_name(program) {
        "npx" | "uvx" | "bunx" | "pnpx" => true,
        "uv" => first == "tool" && words.next() == Some("run"),
        "pipx" => first == "run",
        "pnpm" | "yarn" => first == "dlx",
        "npm" => matches!(first, "exec" | "x"),
        "bun" => first == "x",
        _ => false,
    }
}

/// How long `server`'s start may take to answer the handshake: its own activation timeout when it sets one; else
/// `default`, raised to [`FIRST_START_TIMEOUT`] for the first start of a package runner (no handshake ever completed:
/// it has no recorded protocol). The flag says whether the first-start allowance applied.
pub fn start_timeout(server: &Server, default: Duration) -> (Duration, bool) {
    if let Some(ms) = server.activate_timeout_ms {
        return (Duration::from_millis(ms), false);
    }
    let first = server.protocol.is_none()
        && server
            .command
            .as_deref()
            .is_some_and(|c| is_package_runner(c, &server.args));
    if first && default < FIRST_START_TIMEOUT {
        (FIRST_START_TIMEOUT, true)
    } else {
        (default, false)
    }
}

/// A duration as errors show it: whole seconds, or milliseconds below ten seconds when not whole.
pub fn shown(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) || ms >= 10_000 {
        format!("{} s", ms / 1000)
    } else {
        format!("{ms} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn package_runners() {
        assert!(is_package_runner("npx", &args(&["-y", "@a/b"])));
        assert!(is_package_runner(
            "/usr/bin/uvx",
            &args(&["mcp-server-time"])
        ));
        assert!(is_package_runner("uv", &args(&["tool", "run", "x"])));
        assert!(!is_package_runner("uv", &args(&["run", "server.py"])));
        assert!(is_package_runner("pipx", &args(&["run", "x"])));
        assert!(is_package_runner("pnpm", &args(&["dlx", "x"])));
        assert!(!is_package_runner("node", &args(&["/srv/x/index.js"])));
        assert!(!is_package_runner("python3", &args(&["-m", "x"])));
    }

    #[test]
    fn durations_and_lookup() {
        assert_eq!(shown(Duration::from_millis(800)), "800 ms");
        assert_eq!(shown(Duration::from_secs(30)), "30 s");
        assert_eq!(shown(Duration::from_millis(12_500)), "12 s");
        let env = BTreeMap::from([("PATH".to_owned(), "/nonexistent-dir:/bin".to_owned())]);
        assert!(find("sh", &env).is_some());
        assert!(find("surely-not-a-program-here", &env).is_none());
        assert!(find("/bin/sh", &env).is_some());
        assert_eq!(absolute("npx"), "npx");
        assert_eq!(absolute("/bin/sh"), "/bin/sh");
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute("bin/x"), cwd.join("bin/x").to_string_lossy());
        assert_eq!(launcher_of("/opt/x/bin/uvx"), Some(Launcher::Uv));
        assert_eq!(launcher_of("npx"), Some(Launcher::Node));
        assert_eq!(launcher_of("python3"), None);
    }

    #[tokio::test]
    async fn a_missing_program_is_named_with_its_fix() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::from([("PATH".to_owned(), "/nonexistent-dir".to_owned())]);
        let e = prepare(dir.path(), "t", "surely-not-a-program-here", &mut env)
            .await
            .unwrap_err();
        assert!(
            matches!(
                &e,
                Error::StartFailed {
                    why: StartFailure::ProgramMissing,
                    ..
                }
            ),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.contains("`surely-not-a-program-here` is not installed")
                && text.contains("install it"),
            "{text}"
        );
        assert!(!text.contains("sandbox"), "{text}");
    }
}
