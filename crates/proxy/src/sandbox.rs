//! Building a child's sandbox [`Plan`]: the paths it may read (system directories, its interpreter and package) and
//! write (its own state directory, and what its arguments and environment name), and the environment it gets (built,
//! not inherited). Applying the plan is `ad-sandbox`'s, in the child guard.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ad_core::error::{Error, Result};
use ad_core::sandbox::{Grant, GrantSource, Plan, SandboxSettings};
use ad_registry::config::SandboxConfig;

mod chain;
pub mod explain;
mod grants;
mod named;
#[cfg(unix)]
#[cfg(unix)]
pub mod netproxy;
/// Elsewhere there is no filtering proxy (the sandbox refuses such starts before one would be needed): it refuses
/// nothing.
#[cfg(not(unix))]
pub mod netproxy {
    /// A host a server was refused (see the Unix module).
    #[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
    pub struct Refused {
        pub host: String,
        pub count: u64,
        pub reason: String,
    }

    pub fn refused(_server: &str) -> Vec<Refused> {
        Vec::new()
    }
}
mod places;
mod project;
pub mod settings;

pub use grants::{Derived, derive};

/// Variables of our own environment a child gets (exact names).
const PASSED: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "TZ",
    "USER",
    "LOGNAME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "NVM_DIR",
];
/// Prefixes of variables a child gets: locale, and the package managers' own settings (registry addresses, certificate
/// paths: an `npx`/`uvx` server installs on its first start).
const PASSED_PREFIXES: &[&str] = &["LC_", "npm_config_", "NPM_CONFIG_", "PIP_", "UV_"];

/// The state directory of `server`: its HOME and TMPDIR, created on demand, private to it (and for a child started
/// with a user's own keys, private to that user's: `personal.rs`).
pub fn state_dir(config: &SandboxConfig, server: &str) -> PathBuf {
    config.state_root.join(crate::personal::state_name(server))
}

/// A state directory name for `label`: characters outside `[A-Za-z0-9_-]` become `_`, at most 64 of them.
pub fn dir_name(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

/// Whether children are confined at all (`AGENT_DISCOVER_SANDBOX` is not `off`).
pub fn globally_enabled(config: &SandboxConfig) -> bool {
    config.enabled
}

/// What the kernel offers.
pub fn kernel() -> ad_sandbox::Support {
    ad_sandbox::support()
}

/// Refuses to start a confined child where confinement is impossible, saying why and how to opt out.
pub fn check_support(server: &str) -> Result<()> {
    match kernel().missing() {
        None => Ok(()),
        Some(why) => Err(Error::SandboxDenied {
            server: server.to_owned(),
            message: format!("cannot confine the server: {why}; {}", ad_sandbox::OPT_OUT),
        }),
    }
}

/// The plan for one start of `server`, or `None` when it runs unconfined (globally off, or off for this server).
/// `env` is the server's configured environment with its secrets.
pub fn plan(
    config: &SandboxConfig,
    server: &str,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
) -> Result<Option<Plan>> {
    if !config.enabled || !settings.enabled {
        return Ok(None);
    }
    plan_in(
        config,
        server,
        &state_dir(config, server),
        program,
        args,
        env,
        settings,
    )
    .map(Some)
}

/// The plan for a run of an untrusted package in an introspection scratch directory `scratch` (its HOME and TMPDIR
/// are there, its working directory is `cwd`), or `None` when the sandbox is off (`AGENT_DISCOVER_SANDBOX=off`).
pub fn scratch_plan(
    config: &SandboxConfig,
    scratch: &Path,
    cwd: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    read: &[PathBuf],
) -> Result<Option<Plan>> {
    if !config.enabled {
        return Ok(None);
    }
    let name = scratch
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "introspection".into());
    let settings = SandboxSettings {
        write: vec![cwd.to_path_buf()],
        read: read.to_vec(),
        ..SandboxSettings::default()
    };
    let mut plan = plan_in(config, &name, scratch, program, args, env, &settings)?;
    plan.cwd = cwd.to_path_buf();
    Ok(Some(plan))
}

fn plan_in(
    config: &SandboxConfig,
    server: &str,
    state: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
) -> Result<Plan> {
    check_support(server)?;
    let home = state.join("home");
    let tmp = state.join("tmp");
    for dir in [&home, &tmp] {
        create_private_dir(dir).map_err(|e| Error::SandboxDenied {
            server: server.to_owned(),
            message: format!("cannot create its state directory {}: {e}", dir.display()),
        })?;
    }
    let (child_env, grants) = layout(config, state, program, args, env, settings);
    if let Some(user_home) = &config.user_home {
        settings::mirror(&grants, user_home, &home);
    }
    Ok(Plan {
        server: server.to_owned(),
        network: settings.network,
        net_proxy: None,
        grants,
        env: child_env,
        cwd: home,
    })
}

/// The grants a start of `server` would get, for display (`sandbox show`): the same as [`plan`]'s.
pub fn grants(
    config: &SandboxConfig,
    server: &str,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
) -> Vec<Grant> {
    layout(
        config,
        &state_dir(config, server),
        program,
        args,
        env,
        settings,
    )
    .1
}

/// The child's environment and grants for a start with state directory `state` (its HOME and TMPDIR inside).
fn layout(
    config: &SandboxConfig,
    state: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
) -> (BTreeMap<String, String>, Vec<Grant>) {
    let mut child_env = environment(config, &state.join("home"), &state.join("tmp"), env);
    let derived = derive(config, program, args, env, settings, &child_env);
    let mut grants = derived.grants;
    grants.push(Grant {
        path: state.to_path_buf(),
        write: true,
        source: GrantSource::State,
    });
    // What the derivation found the child needs (a version manager's root, git's identity), under the server's own.
    for (k, v) in derived.env {
        if !env.contains_key(&k) {
            child_env.insert(k, v);
        }
    }
    (child_env, grants)
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// The child's whole environment: what [`PASSED`] and [`PASSED_PREFIXES`] name from ours (and the names the user
/// lists in `AGENT_DISCOVER_SANDBOX_PASS_ENV`), HOME, TMPDIR and the XDG directories in its state, the package
/// managers' user config files where HOME used to find them, then the server's own environment and secrets.
fn environment(
    config: &SandboxConfig,
    home: &Path,
    tmp: &Path,
    server_env: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| {
            PASSED.contains(&k.as_str())
                || chain::MANAGER_ROOTS.contains(&k.as_str())
                || settings::GIT_IDENTITY.contains(&k.as_str())
                || PASSED_PREFIXES.iter().any(|p| k.starts_with(p))
                || config.pass_env.iter().any(|n| n == k)
        })
        .filter(|(k, _)| {
            !k.starts_with("AGENT_DISCOVER_") || config.pass_env.iter().any(|n| n == k)
        })
        .collect();
    env.entry("PATH".into())
        .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
    let text = |p: &Path| p.to_string_lossy().into_owned();
    env.insert("HOME".into(), text(home));
    env.insert("TMPDIR".into(), text(tmp));
    env.insert("XDG_CACHE_HOME".into(), text(&home.join(".cache")));
    env.insert("XDG_CONFIG_HOME".into(), text(&home.join(".config")));
    env.insert("XDG_DATA_HOME".into(), text(&home.join(".local/share")));
    // With HOME moved, npm, pip and uv would no longer find the user's own settings (registry addresses,
    // certificates): point them at the files themselves, read-only (see `user_config_files`).
    for (var, file) in user_config_files(config) {
        env.entry(var.into()).or_insert_with(|| text(&file));
    }
    env.extend(server_env.iter().map(|(k, v)| (k.clone(), v.clone())));
    env
}

/// The package managers' per-user config files that exist: (the variable that names one, its path).
pub(crate) fn user_config_files(config: &SandboxConfig) -> Vec<(&'static str, PathBuf)> {
    let Some(home) = &config.user_home else {
        return vec![];
    };
    [
        ("NPM_CONFIG_USERCONFIG", home.join(".npmrc")),
        ("PIP_CONFIG_FILE", home.join(".config/pip/pip.conf")),
        ("UV_CONFIG_FILE", home.join(".config/uv/uv.toml")),
    ]
    .into_iter()
    .filter(|(_, p)| p.is_file())
    .collect()
}

/// Starts a child confined by its plan, or unconfined when the sandbox is off for it: the one way the proxy and the
/// agent workers start a stdio process. `name` names its state directory (`<data>/sandbox/<name>`).
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    config: &SandboxConfig,
    guard_exe: &Path,
    name: &str,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    settings: &SandboxSettings,
    ring: std::sync::Arc<crate::spawn::StderrRing>,
) -> Result<crate::spawn::Spawned> {
    match plan(config, name, program, args, env, settings)? {
        Some(plan) => {
            #[cfg(unix)]
            let mut plan = plan;
            #[cfg(unix)]
            if plan.network == ad_core::sandbox::Network::Hosts {
                plan.net_proxy = Some(netproxy::prepare(name, &settings.hosts, ring.clone())?);
            }
            let spawned = crate::spawn::spawn_sandboxed(guard_exe, program, args, &plan, ring)?;
            #[cfg(unix)]
            if plan.network == ad_core::sandbox::Network::Hosts {
                netproxy::started(name, spawned.pgid);
            }
            Ok(spawned)
        }
        None => crate::spawn::spawn(guard_exe, program, args, env, ring),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A sandbox configuration over `dir`: `dir/data` the data directory, `dir/home` the user's HOME.
    pub(super) fn config(dir: &Path) -> SandboxConfig {
        SandboxConfig {
            enabled: true,
            pass_env: vec![],
            state_root: dir.join("data/sandbox"),
            data_dir: dir.join("data"),
            user_home: Some(dir.join("home")),
            grantable_in_data: vec![],
        }
    }

    #[test]
    fn arguments_naming_paths_are_granted_but_never_home_or_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for d in ["data", "home/.ssh", "home/projects", "elsewhere"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let cfg = config(&root);
        let args = vec![
            root.join("home/projects").to_string_lossy().into_owned(),
            format!("--root={}", root.join("elsewhere").display()),
            root.join("home").to_string_lossy().into_owned(),
            root.join("data").to_string_lossy().into_owned(),
            "relative/path".into(),
        ];
        let env = BTreeMap::from([("CACHE".to_string(), "~/.ssh".to_string())]);
        let g = grants(
            &cfg,
            "fs",
            "/bin/sh",
            &args,
            &env,
            &SandboxSettings::default(),
        );
        let find = |p: PathBuf| g.iter().find(|x| x.path == p).cloned();
        let projects = find(root.join("home/projects")).expect("argument path granted");
        assert!(projects.write);
        assert_eq!(projects.source, GrantSource::Arguments);
        assert!(
            find(root.join("elsewhere")).is_some(),
            "--flag=/path is read"
        );
        assert!(
            find(root.join("home")).is_none(),
            "HOME itself is never derived"
        );
        assert!(
            find(root.join("data")).is_none(),
            "the data directory is never derived"
        );
        let ssh =
            find(root.join("home/.ssh")).expect("env naming a path under HOME is the user's grant");
        assert_eq!(ssh.source, GrantSource::Env);
        let state = find(root.join("data/sandbox/fs")).expect("its state directory");
        assert!(state.write);
    }

    #[test]
    fn the_environment_is_built_not_inherited() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path());
        let server_env = BTreeMap::from([("API_KEY".to_string(), "k".to_string())]);
        let env = environment(
            &cfg,
            &dir.path().join("h"),
            &dir.path().join("t"),
            &server_env,
        );
        assert_eq!(env["API_KEY"], "k");
        assert_eq!(env["HOME"], dir.path().join("h").to_string_lossy());
        assert_eq!(env["TMPDIR"], dir.path().join("t").to_string_lossy());
        assert!(env.contains_key("PATH"));
        assert!(
            env.keys()
                .all(|k| !k.starts_with("AGENT_DISCOVER_") && k != "CARGO" && k != "RUSTUP_HOME"),
            "{env:?}"
        );
    }
}
