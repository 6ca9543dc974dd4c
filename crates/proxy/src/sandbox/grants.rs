//! The one grant engine: what a confined start may read and write, derived from what will actually run (the
//! program's chain, the code its arguments name and what its runtime resolves, the paths its arguments and
//! environment name, the user's own grants). Activation, `enable`, health checks, restarts, introspection and agent
//! workers all start children through [`derive`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ad_core::sandbox::{Grant, GrantSource, SandboxSettings};
use ad_registry::config::SandboxConfig;

use super::chain::{self, TOOLCHAINS_IN_HOME};
use super::project::{self, Runtime};
use super::{named, places};

/// Devices a process writes to or reads from without it being a grant of anything.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What a start is granted, and the variables the child needs for it (a version manager's root, git's identity).
#[derive(Debug, Default)]
pub struct Derived {
    pub grants: Vec<Grant>,
    pub env: BTreeMap<String, String>,
}

struct Acc<'a> {
    config: &'a SandboxConfig,
    out: Vec<Grant>,
}

impl Acc<'_> {
    fn add(&mut self, path: PathBuf, write: bool, source: GrantSource) {
        if let Some(g) = self.out.iter_mut().find(|g| g.path == path) {
            g.write |= write;
            return;
        }
        self.out.push(Grant {
            path,
            write,
            source,
        });
    }

    /// A derived read grant: never a private place, and nothing already inside a grant.
    fn read(&mut self, path: PathBuf, source: GrantSource) {
        if !path.is_absolute() || !path.exists() || places::covers_private(self.config, &path) {
            return;
        }
        if self.out.iter().any(|g| path.starts_with(&g.path)) {
            return;
        }
        self.add(path, false, source);
    }
}

/// The grants and extra variables for a start of `program args` with the server's configured `env`, the child's
/// built environment `child_env` (its `PATH`), and the user's `settings`.
pub fn derive(
    config: &SandboxConfig,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
    child_env: &BTreeMap<String, String>,
) -> Derived {
    let mut acc = Acc {
        config,
        out: Vec::new(),
    };
    let mut extra = BTreeMap::new();
    let home = places::home(config);
    for p in places::SYSTEM {
        acc.add(PathBuf::from(p), false, GrantSource::Runtime);
    }
    for p in DEVICES {
        acc.add(PathBuf::from(p), true, GrantSource::Runtime);
    }
    acc.add(PathBuf::from("/dev/shm"), true, GrantSource::Runtime);
    if let Some(h) = &home {
        for t in TOOLCHAINS_IN_HOME {
            acc.read(h.join(t), GrantSource::Runtime);
        }
    }
    for var in chain::MANAGER_ROOTS {
        if let Some(v) = child_env.get(*var).filter(|v| v.starts_with('/')) {
            acc.read(places::resolved(Path::new(v)), GrantSource::Runtime);
        }
    }
    for (_, file) in super::user_config_files(config) {
        acc.add(file, false, GrantSource::Runtime);
    }
    // Certificates and other files our own settings name (PIP_CERT, SSL_CERT_FILE, ...), read-only; a package
    // manager's cache the user pointed elsewhere (npm_config_cache, PIP_CACHE_DIR, UV_CACHE_DIR) is written to.
    for (k, v) in child_env {
        if env.contains_key(k) || k == "HOME" || k == "TMPDIR" || k.starts_with("XDG_") {
            continue;
        }
        if let Some(p) = places::absolute(v, config).filter(|p| p.exists())
            && !places::covers_private(config, &p)
        {
            if named::is_executable(&p) && p.is_file() {
                // A program our settings name (`UV_PYTHON`): its chain, as for an argument.
                for (r, _) in named::grants(v, config, child_env) {
                    acc.read(r, GrantSource::Runtime);
                }
                continue;
            }
            let cache = k.to_ascii_uppercase().contains("CACHE");
            acc.add(places::resolved(&p), cache, GrantSource::Runtime);
        }
    }
    for dir in child_env
        .get("PATH")
        .map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .unwrap_or_default()
    {
        // A `node_modules/.bin` (a Node runtime agent-discover installed) links into its prefix: grant the prefix.
        let dir = match dir.parent().and_then(Path::parent) {
            Some(prefix) if dir.ends_with("node_modules/.bin") && dir.is_dir() => {
                prefix.to_path_buf()
            }
            _ => dir,
        };
        if dir.is_absolute() && dir.is_dir() {
            acc.read(places::resolved(&dir), GrantSource::Runtime);
        }
    }
    // The program, its interpreters and their installs.
    let chain = chain::follow(program, child_env, home.as_deref());
    for p in &chain.read {
        acc.read(p.clone(), GrantSource::Package);
        for src in project::python_paths(p) {
            acc.read(src, GrantSource::Package);
        }
    }
    extra.extend(chain.env.clone());
    // The code its arguments name, and what its runtime resolves from there.
    // The runtime the arguments are for: the program as named (`node`, a `python3` shim) or where it leads; not an
    // interpreter further down the chain (a script with `#!/usr/bin/env node` takes its own arguments).
    let runtime = match Runtime::of(Path::new(program)) {
        Runtime::Other => chain
            .programs
            .first()
            .map_or(Runtime::Other, |p| Runtime::of(p)),
        r => r,
    };
    let code = project::code(runtime, args, &merged(child_env, env), config);
    for p in &code.read {
        acc.read(p.clone(), GrantSource::Package);
    }
    if runtime == Runtime::Uv {
        // `uv run` keeps the project's environment in step: it writes `.venv` and `uv.lock`.
        for root in &code.projects {
            for (p, exists) in [
                (root.join(".venv"), root.join(".venv").is_dir()),
                (root.join("uv.lock"), true),
            ] {
                if exists && p.exists() && !places::covers_private(config, &p) {
                    acc.add(p, true, GrantSource::Package);
                }
            }
        }
    }
    if matches!(runtime, Runtime::Python | Runtime::Uv)
        && let Some(h) = &home
        && has_user_site(h)
        && std::env::var_os("PYTHONUSERBASE").is_none()
    {
        // `pip install --user` packages: Python finds them from HOME, which moved.
        extra.insert(
            "PYTHONUSERBASE".into(),
            h.join(".local").to_string_lossy().into_owned(),
        );
        acc.read(h.join(".local/lib"), GrantSource::Runtime);
    }
    if (extra.contains_key("ASDF_DATA_DIR") || extra.contains_key("MISE_DATA_DIR"))
        && let Some(h) = &home
    {
        for f in [".tool-versions", ".config/mise/config.toml"] {
            let p = h.join(f);
            if p.is_file() {
                acc.add(p, false, GrantSource::Runtime);
            }
        }
    }
    // Paths its arguments and environment name (not those taken as code above).
    for (i, a) in args.iter().enumerate() {
        if code.consumed.contains(&i) {
            continue;
        }
        let value = a.split_once('=').map_or(a.as_str(), |(_, v)| v);
        for candidate in [a.as_str(), value] {
            for (p, write) in named::grants(candidate, config, child_env) {
                acc.add(p, write, GrantSource::Arguments);
            }
        }
    }
    for (k, v) in env {
        if k == "PATH" || k == "NODE_PATH" || k == "PYTHONPATH" {
            continue;
        }
        for part in v.split(if v.contains(':') && !v.contains("://") {
            ':'
        } else {
            '\n'
        }) {
            for (p, write) in named::grants(part, config, child_env) {
                acc.add(p, write, GrantSource::Env);
            }
        }
    }
    for p in &settings.read {
        acc.add(p.clone(), false, GrantSource::User);
    }
    for p in &settings.write {
        acc.add(p.clone(), true, GrantSource::User);
    }
    if let Some(h) = config.user_home.as_deref() {
        extra.extend(super::settings::git_identity(h));
    }
    Derived {
        grants: acc.out,
        env: extra,
    }
}

/// Whether HOME holds a `pip install --user` site (`~/.local/lib/pythonX.Y/site-packages`).
fn has_user_site(home: &Path) -> bool {
    std::fs::read_dir(home.join(".local/lib")).is_ok_and(|d| {
        d.flatten().any(|e| {
            e.file_name().to_string_lossy().starts_with("python")
                && e.path().join("site-packages").is_dir()
        })
    })
}

/// The child's environment with the server's own on top (for `NODE_PATH`, `PYTHONPATH`).
fn merged(
    child: &BTreeMap<String, String>,
    server: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut m = child.clone();
    m.extend(server.iter().map(|(k, v)| (k.clone(), v.clone())));
    m
}
