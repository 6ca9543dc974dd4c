//! Node runtimes for npm servers. When a package's `engines.node` is not satisfied by the system's Node (or its start
//! fails the way an old Node fails), a Node that satisfies it is installed from the npm registry's `node` package into
//! `<data>/runtimes/node-<major>` (`npm install --prefix DIR node@<major>`, the smallest current LTS major the range
//! accepts), once, under a lock, shared by every server; the child then runs with that prefix's `node_modules/.bin`
//! first on its PATH, so `npx`, the package's bin and any script spawning `node` get the same Node.
//!
//! Where no npm is installed at all, Node.js and npm are fetched from the registry directly (`node_fetch.rs`).
//!
//! `AGENT_DISCOVER_NODE_RUNTIME=system` turns this off (always the system's Node); `AGENT_DISCOVER_SYSTEM_NODE`
//! names the binary to treat as the system's Node (tests use a stand-in that reports an old version).

pub mod node_fetch;
pub mod range;
pub mod uv;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use range::{major_satisfies, satisfies};

/// `auto` (the default: fetch a newer Node when a package needs one) or `system` (never).
pub const ENV_MODE: &str = "AGENT_DISCOVER_NODE_RUNTIME";
/// The Node binary treated as the system's (default `node` on PATH).
pub const ENV_SYSTEM_NODE: &str = "AGENT_DISCOVER_SYSTEM_NODE";
/// The Node majors a newer runtime is chosen among (the current LTS lines), smallest first.
pub const LTS_MAJORS: &[u64] = &[22, 24, 26];
/// How long installing a runtime may take.
const INSTALL_LIMIT: Duration = Duration::from_secs(300);

/// Which runtime ran a server: `{"kind":"node","version":"22.23.3","source":"cache"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    /// `node` (or `python` for uvx servers).
    pub kind: String,
    pub version: String,
    /// `system` (found on PATH), `cache` (installed by agent-discover under `<data>/runtimes`), or `venv` (a PyPI
    /// package's virtual environment).
    pub source: String,
}

/// The Node a child runs with: what to report, and the directory to put first on its PATH (`None`: leave PATH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeChoice {
    pub info: RuntimeInfo,
    pub bin_dir: Option<PathBuf>,
    /// Installed into the runtimes folder by this very choice (the user is told once).
    pub fetched_now: bool,
}

impl NodeChoice {
    /// Puts the runtime's bin directory first on the child's PATH (`env`'s, else ours).
    pub fn apply(&self, env: &mut BTreeMap<String, String>) {
        let Some(dir) = &self.bin_dir else { return };
        let rest = env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        env.insert("PATH".into(), format!("{}:{rest}", dir.display()));
    }
}

/// Whether newer runtimes may be fetched (`AGENT_DISCOVER_NODE_RUNTIME` is not `system`).
pub fn fetch_enabled() -> bool {
    !std::env::var(ENV_MODE).is_ok_and(|v| v.trim().eq_ignore_ascii_case("system"))
}

/// The runtimes folder of a data directory.
pub fn root_in(data_dir: &Path) -> PathBuf {
    data_dir.join("runtimes")
}

async fn version_of(program: &Path) -> Option<String> {
    let out = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches('v')
        .to_owned();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// The Node binary treated as the system's: `AGENT_DISCOVER_SYSTEM_NODE`, else `node` on PATH (`None`).
pub fn system_node_from_env() -> Option<PathBuf> {
    std::env::var_os(ENV_SYSTEM_NODE)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// The system's Node (`named`, else [`system_node_from_env`], else `node` on PATH): its version (asked once per
/// binary) and, for a named binary, its directory (put first on a child's PATH, so the child runs that Node).
pub async fn system_node(named: Option<&Path>) -> Option<NodeChoice> {
    static SEEN: std::sync::Mutex<BTreeMap<PathBuf, Option<NodeChoice>>> =
        std::sync::Mutex::new(BTreeMap::new());
    let named = named.map(Path::to_path_buf).or_else(system_node_from_env);
    let program = named.clone().unwrap_or_else(|| PathBuf::from("node"));
    if let Some(c) = SEEN.lock().ok().and_then(|m| m.get(&program).cloned()) {
        return c;
    }
    let choice = version_of(&program).await.map(|version| NodeChoice {
        info: RuntimeInfo {
            kind: "node".into(),
            version,
            source: "system".into(),
        },
        bin_dir: named.and_then(|p| p.parent().map(Path::to_path_buf)),
        fetched_now: false,
    });
    if let Ok(mut m) = SEEN.lock() {
        m.insert(program, choice.clone());
    }
    choice
}

/// The Python of a virtual environment whose `bin` folder holds `program` (`source: "venv"`), when it runs.
pub async fn python_beside(program: &Path) -> Option<RuntimeInfo> {
    let python = program.parent()?.join("python");
    let out = tokio::process::Command::new(&python)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("Python ")?.to_owned();
    Some(RuntimeInfo {
        kind: "python".into(),
        version,
        source: "venv".into(),
    })
}

/// The smallest LTS major that `range` accepts (with `above`: also newer than that major).
pub fn pick_major(range: Option<&str>, above: Option<u64>) -> Option<u64> {
    LTS_MAJORS
        .iter()
        .copied()
        .find(|m| above.is_none_or(|a| *m > a) && range.is_none_or(|r| major_satisfies(*m, r)))
}

fn major_of(version: &str) -> Option<u64> {
    version.split('.').next()?.parse().ok()
}

/// The Node a package with `engines.node` = `range` runs with: the system's when it satisfies the range (or fetching
/// is off, or nothing better can be had), else a cached one of the smallest LTS major that does. `force_newer`: the
/// system's Node failed the way an old Node fails, whatever the range says.
pub async fn choose(
    root: &Path,
    system_binary: Option<&Path>,
    range: Option<&str>,
    force_newer: bool,
) -> Option<NodeChoice> {
    let system = system_node(system_binary).await;
    let sys_ok =
        |s: &NodeChoice| range.is_none_or(|r| satisfies(&s.info.version, r) != Some(false));
    if !fetch_enabled() || (!force_newer && system.as_ref().is_some_and(sys_ok)) {
        return system;
    }
    let above = system
        .as_ref()
        .and_then(|s| major_of(&s.info.version))
        .filter(|_| force_newer);
    let major = pick_major(range, above).or_else(|| pick_major(None, above))?;
    match ensure(root, major).await {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(major, error = %e, "cannot install a newer Node; using the system's");
            system
        }
    }
}

/// `<root>/node-<major>` with a Node in it: installed now when missing (under a lock file, so concurrent processes
/// install it once), into a temporary folder renamed into place.
pub async fn ensure(root: &Path, major: u64) -> Result<NodeChoice, String> {
    static LOCAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let prefix = root.join(format!("node-{major}"));
    if let Some(c) = cached(&prefix).await {
        return Ok(c);
    }
    let _in_process = LOCAL.lock().await;
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let lock_path = root.join(format!("node-{major}.lock"));
    let lock_file = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    let lock_file = tokio::task::spawn_blocking(move || lock_exclusive(lock_file))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    // Another process may have installed it while we waited.
    if let Some(c) = cached(&prefix).await {
        return Ok(c);
    }
    let partial = root.join(format!("node-{major}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let _ = std::fs::write(partial.join("package.json"), "{\"private\": true}\n");
    if crate::which::find("npm", &BTreeMap::new()).is_none() {
        // No npm to install with: the platform package and npm fetched directly (`node_fetch.rs`).
        if let Err(e) = node_fetch::install(&partial, major).await {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(format!(
                "no npm is installed, and fetching Node.js {major} directly failed: {e}"
            ));
        }
        return finish(&partial, &prefix, lock_file, major).await;
    }
    tracing::info!(major, dir = %prefix.display(), "installing Node from the npm registry's `node` package");
    let mut cmd = tokio::process::Command::new("npm");
    cmd.args([
        "install",
        "--no-audit",
        "--no-fund",
        "--no-package-lock",
        "--loglevel=error",
        "--prefix",
    ])
    .arg(&partial)
    .arg(format!("node@{major}"))
    .current_dir(&partial)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .kill_on_drop(true);
    let out = tokio::time::timeout(INSTALL_LIMIT, cmd.output())
        .await
        .map_err(|_| {
            format!(
                "npm install node@{major} did not finish within {} s",
                INSTALL_LIMIT.as_secs()
            )
        })?
        .map_err(|e| format!("cannot run npm: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("npm install node@{major} failed: {line}"));
    }
    finish(&partial, &prefix, lock_file, major).await
}

/// Moves an installed `partial` prefix into place and checks its Node runs.
async fn finish(
    partial: &Path,
    prefix: &Path,
    lock_file: std::fs::File,
    major: u64,
) -> Result<NodeChoice, String> {
    let _ = std::fs::remove_dir_all(prefix);
    std::fs::rename(partial, prefix)
        .map_err(|e| format!("cannot move the runtime into {}: {e}", prefix.display()))?;
    drop(lock_file);
    let mut choice = cached(prefix).await.ok_or_else(|| {
        format!(
            "node@{major} installed in {} does not run",
            prefix.display()
        )
    })?;
    choice.fetched_now = true;
    Ok(choice)
}

/// Waits for an exclusive lock on `file` (released when it is closed).
pub(crate) fn lock_exclusive(file: std::fs::File) -> std::io::Result<std::fs::File> {
    file.lock()?;
    Ok(file)
}

/// The Node in an installed prefix, when it runs.
async fn cached(prefix: &Path) -> Option<NodeChoice> {
    let bin = prefix.join("node_modules").join(".bin");
    let version = version_of(&bin.join("node")).await?;
    Some(NodeChoice {
        info: RuntimeInfo {
            kind: "node".into(),
            version,
            source: "cache".into(),
        },
        bin_dir: Some(bin),
        fetched_now: false,
    })
}

/// Whether `command` starts a Node program (`npx`, `node`, `npm`, by name or path).
pub fn is_node_command(command: &str) -> bool {
    let base = Path::new(command)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    matches!(base.as_str(), "npx" | "node" | "npm")
}

/// The Node a server launched as `command args` runs with (`None`: not a Node launch, or no Node at all). Its
/// package is `package`@`version` when the registry knows it, else the package `npx` is told to run.
pub async fn for_command(
    root: &Path,
    command: &str,
    args: &[String],
    package: Option<(&str, Option<&str>)>,
    force_newer: bool,
) -> Option<NodeChoice> {
    if !is_node_command(command) {
        return None;
    }
    let spec = match package {
        Some((name, Some(v))) => Some(format!("{name}@{v}")),
        Some((name, None)) => Some(name.to_owned()),
        None if command.ends_with("npx") => npx_package(args).map(str::to_owned),
        // `node FILE`: the package FILE belongs to (the nearest folder above it with a package.json).
        None => args
            .iter()
            .find(|a| !a.starts_with('-'))
            .filter(|a| a.starts_with('/'))
            .and_then(|a| {
                Path::new(a)
                    .ancestors()
                    .skip(1)
                    .find(|d| d.join("package.json").is_file())
                    .map(|d| d.display().to_string())
            }),
    };
    let range = match &spec {
        Some(s) if fetch_enabled() => engines_of(root, s).await,
        _ => None,
    };
    choose(root, None, range.as_deref(), force_newer).await
}

/// What a failed start says when the Node that ran it was too old: the matching line, or `None`.
///
/// `ERR_REQUIRE_ESM` counts: Node 22.12 and later load ES modules with `require()`, so a CommonJS entry point
/// requiring an ES-only dependency starts there and fails on 20.
pub fn too_old_signature<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    const SIGNS: &[&str] = &[
        "please update node",
        "please upgrade node",
        "please upgrade your node",
        "please update your node",
        "requires node.js >=",
        "requires node.js version",
        "requires node >=",
        "requires node version",
        "node.js version is not supported",
        "unsupported node.js version",
        "markasuncloneable is not a function",
        "withresolvers is not a function",
        "getbuiltinmodule is not a function",
        "no such built-in module: node:sqlite",
        "err_require_esm",
        "the engine \"node\" is incompatible",
        "file is not defined",
    ];
    lines.into_iter().find_map(|l| {
        let low = l.to_ascii_lowercase();
        let hit = SIGNS.iter().any(|s| low.contains(s))
            || (low.contains("node") && low.contains("or higher") && low.contains("required"));
        hit.then(|| {
            let mut s = l.trim().to_owned();
            let mut end = s.len().min(200);
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s
        })
    })
}

/// The package an `npx` launch runs: the first argument that is not an option (`-y`, `--yes`, `--package=`).
pub fn npx_package(args: &[String]) -> Option<&str> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "-p" || a == "--package" {
            return it.next().map(String::as_str);
        }
        if let Some(p) = a.strip_prefix("--package=") {
            return Some(p);
        }
        if !a.starts_with('-') {
            return Some(a);
        }
    }
    None
}

/// The `engines.node` range of an npm package spec (`name`, `name@1.2.3`, or a local folder): read from the folder's
/// package.json, else from the registry's metadata for that version (`npm view SPEC engines.node --json`, through the
/// user's npm configuration), remembered in `<root>/engines/`. `None`: no range, or it cannot be read.
pub async fn engines_of(root: &Path, spec: &str) -> Option<String> {
    let local = spec.trim_start_matches("file:");
    if local.starts_with('/') || local.starts_with("./") {
        let text = std::fs::read_to_string(Path::new(local).join("package.json")).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        return v["engines"]["node"].as_str().map(str::to_owned);
    }
    let dir = root.join("engines");
    let file = dir.join(
        spec.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>(),
    );
    if let Ok(s) = std::fs::read_to_string(&file) {
        return (!s.trim().is_empty()).then(|| s.trim().to_owned());
    }
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::process::Command::new("npm")
            .args([
                "view",
                spec,
                "engines.node",
                "--json",
                "--prefer-offline",
                "--loglevel=error",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let range = match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(serde_json::Value::String(s)) => Some(s),
        // A range spec matching several versions: the newest (the last) is the one npx runs.
        Ok(serde_json::Value::Array(a)) => a.last().and_then(|v| v.as_str()).map(str::to_owned),
        _ => None,
    };
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(&file, range.as_deref().unwrap_or(""));
    }
    range
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majors_and_signatures() {
        assert_eq!(pick_major(Some(">=22"), None), Some(22));
        assert_eq!(pick_major(Some(">=22.12.0"), None), Some(22));
        assert_eq!(pick_major(Some(">=23"), None), Some(24));
        assert_eq!(pick_major(Some("^20.19.0 || >=22.12.0"), None), Some(22));
        assert_eq!(pick_major(Some(">=18"), Some(20)), Some(22));
        assert_eq!(pick_major(None, Some(22)), Some(24));
        assert_eq!(pick_major(Some("<20"), None), None);
        let sig = |l: &str| too_old_signature([l]).is_some();
        assert!(sig(
            "TypeError: webidl.util.markAsUncloneable is not a function"
        ));
        assert!(sig(
            "Error: This MCP server requires Node.js >= 22. Please update Node.js."
        ));
        assert!(sig("Node.js v22 or higher is required (found v20.20.2)"));
        assert!(sig(
            "Error [ERR_REQUIRE_ESM]: require() of ES Module /x/node_modules/y/index.js not supported."
        ));
        assert!(sig("TypeError: Promise.withResolvers is not a function"));
        assert!(sig("ReferenceError: File is not defined"));
        assert!(!sig("Error: API key required: set FIXTURE_API_KEY"));
        assert!(!sig("Node server listening on stdio"));
        assert_eq!(
            npx_package(&["-y".into(), "@a/b@1.0.0".into(), "--x".into()]),
            Some("@a/b@1.0.0")
        );
        assert_eq!(
            npx_package(&["--package=@a/b".into(), "b".into()]),
            Some("@a/b")
        );
    }

    #[test]
    fn path_first() {
        let c = NodeChoice {
            info: RuntimeInfo {
                kind: "node".into(),
                version: "22.1.0".into(),
                source: "cache".into(),
            },
            bin_dir: Some(PathBuf::from("/r/node-22/node_modules/.bin")),
            fetched_now: false,
        };
        let mut env = BTreeMap::from([("PATH".to_owned(), "/usr/bin".to_owned())]);
        c.apply(&mut env);
        assert_eq!(env["PATH"], "/r/node-22/node_modules/.bin:/usr/bin");
    }
}
