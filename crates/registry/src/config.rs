//! Where agent-discover keeps its files and which limits apply, resolved once at start from flags and environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ad_core::error::{Error, Result};

/// Resolved at start-up and passed down; never a global.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory holding the database, the secrets key and other state.
    pub data_dir: PathBuf,
    /// The SQLite file (`AGENT_DISCOVER_DB` overrides `<data_dir>/agent-discover.db`).
    pub db_path: PathBuf,
    pub timeouts: Timeouts,
    /// How long call-log entries are kept (`AGENT_DISCOVER_LOG_RETENTION_DAYS`, default 30).
    pub log_retention_days: u32,
    /// The program that runs `child-guard` (see `guard`); `None` means this executable.
    pub guard_exe: Option<PathBuf>,
    /// Whether unseen tools are approved on sight (`AGENT_DISCOVER_PIN_NEW_SERVERS`, `AGENT_DISCOVER_PIN_NEW_TOOLS`).
    pub pinning: crate::pinning::policy::Policy,
    /// Seed 003's `defaultAgentId`: the agent a session goes to when the call names none
    /// (`AGENT_DISCOVER_DEFAULT_AGENT`; unset means the first in-process agent, else the first stored one).
    pub default_agent_id: Option<String>,
    /// A shared PostgreSQL registry (`--database-url` or `AGENT_DISCOVER_DATABASE_URL`, `postgres://…`); `None` is the
    /// embedded SQLite file at `db_path`.
    pub database_url: Option<String>,
    /// This process's name among replicas of one registry: the `replica` label of its Prometheus series and of the
    /// calls it logs (`AGENT_DISCOVER_REPLICA`; in team mode it defaults to `HOST:PID`, else there is none).
    pub replica: Option<String>,
    /// Team mode: this process is one of several replicas of one registry (on with a shared database;
    /// `AGENT_DISCOVER_TEAM=1` turns it on for replicas over one SQLite file). A replica runs every server the registry
    /// flags active, starting and stopping children as other replicas activate and deactivate them, and logs its calls
    /// to the shared call log. Off, a process runs what it activated and what was active when it started, and keeps
    /// its call log in memory.
    pub team: bool,
    /// How stdio children are confined (`AGENT_DISCOVER_SANDBOX`, `AGENT_DISCOVER_SANDBOX_PASS_ENV`).
    pub sandbox: SandboxConfig,
    /// The guards on calls, globally (`AGENT_DISCOVER_GUARDS`, `AGENT_DISCOVER_GUARD_ARGUMENTS`,
    /// `..._RESULT_SECRETS`, `..._RESULT_INSTRUCTIONS`); a server's own settings are stored with it.
    pub guards: ad_core::guards::Guards,
}

/// The sandbox's process-wide settings; a server's own are stored with it (`ad_core::sandbox::SandboxSettings`).
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// `false` when `AGENT_DISCOVER_SANDBOX=off`: every child runs unconfined.
    pub enabled: bool,
    /// Variables of our environment children get besides the sandbox's own selection.
    pub pass_env: Vec<String>,
    /// Where the servers' state directories are (`<data_dir>/sandbox/<server>`).
    pub state_root: PathBuf,
    /// agent-discover's data directory: never granted to a child.
    pub data_dir: PathBuf,
    /// The user's HOME: never granted whole (only the toolchains in it, read-only, and paths a server names).
    pub user_home: Option<PathBuf>,
    /// Directories inside the data directory that may still be granted: introspection's package cache, whose
    /// packages the servers being introspected run from, and the Node runtimes agent-discover installs (`runtimes`).
    pub grantable_in_data: Vec<PathBuf>,
}

impl SandboxConfig {
    /// Reads `AGENT_DISCOVER_SANDBOX` (`on`, the default, or `off`) and `AGENT_DISCOVER_SANDBOX_PASS_ENV`.
    pub fn from_env(data_dir: &Path) -> Result<SandboxConfig> {
        let enabled = match non_empty_env(ad_core::sandbox::ENV_SANDBOX)
            .as_deref()
            .map(str::trim)
        {
            None | Some("on" | "1" | "true") => true,
            Some("off" | "0" | "false") => false,
            Some(v) => {
                return Err(Error::invalid(
                    ad_core::sandbox::ENV_SANDBOX,
                    format!(
                        "{:?}: expected on or off",
                        ad_core::model::truncate_for_message(v)
                    ),
                ));
            }
        };
        let pass_env = non_empty_env(ad_core::sandbox::ENV_PASS_ENV)
            .map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(SandboxConfig {
            enabled,
            pass_env,
            state_root: data_dir.join("sandbox"),
            data_dir: data_dir.to_path_buf(),
            user_home: directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()),
            grantable_in_data: vec![data_dir.join("runtimes")],
        })
    }

    /// Lenient [`SandboxConfig::from_env`] (a bad `AGENT_DISCOVER_SANDBOX` confines), for embedders without a
    /// [`Config`].
    pub fn default_for(data_dir: &Path) -> SandboxConfig {
        SandboxConfig::from_env(data_dir).unwrap_or_else(|_| SandboxConfig {
            enabled: true,
            pass_env: Vec::new(),
            state_root: data_dir.join("sandbox"),
            data_dir: data_dir.to_path_buf(),
            user_home: directories::BaseDirs::new().map(|b| b.home_dir().to_path_buf()),
            grantable_in_data: vec![data_dir.join("runtimes")],
        })
    }
}

/// Default time limits (seed 000); a server may override activation and call limits.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub activate: Duration,
    pub call: Duration,
    pub health: Duration,
    pub marketplace: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            activate: Duration::from_secs(30),
            call: Duration::from_secs(60),
            health: Duration::from_secs(5),
            marketplace: Duration::from_secs(15),
        }
    }
}

/// The default dashboard port (seed 000).
pub const DEFAULT_PORT: u16 = 3424;
pub const ENV_DATA_DIR: &str = "AGENT_DISCOVER_DATA_DIR";
pub const ENV_DB: &str = "AGENT_DISCOVER_DB";
pub const ENV_LOG_RETENTION_DAYS: &str = "AGENT_DISCOVER_LOG_RETENTION_DAYS";
pub const ENV_DEFAULT_AGENT: &str = "AGENT_DISCOVER_DEFAULT_AGENT";
pub const ENV_DATABASE_URL: &str = "AGENT_DISCOVER_DATABASE_URL";
pub const ENV_REPLICA: &str = "AGENT_DISCOVER_REPLICA";
pub const ENV_TEAM: &str = "AGENT_DISCOVER_TEAM";
pub const DB_FILE: &str = "agent-discover.db";

impl Config {
    /// Resolves paths: `--data-dir` flag, then `AGENT_DISCOVER_DATA_DIR`, then the platform data dir
    /// (`~/.local/share/agent-discover` on Linux). `AGENT_DISCOVER_DB` names the database file directly.
    pub fn resolve(
        data_dir_flag: Option<&Path>,
        database_url_flag: Option<&str>,
    ) -> Result<Config> {
        let data_dir = match data_dir_flag {
            Some(d) => d.to_path_buf(),
            None => match non_empty_env(ENV_DATA_DIR) {
                Some(d) => PathBuf::from(d),
                None => default_data_dir()?,
            },
        };
        let db_path = match non_empty_env(ENV_DB) {
            Some(p) => PathBuf::from(p),
            None => data_dir.join(DB_FILE),
        };
        let log_retention_days = match non_empty_env(ENV_LOG_RETENTION_DAYS) {
            Some(v) => v.parse().map_err(|_| {
                Error::invalid(
                    ENV_LOG_RETENTION_DAYS,
                    format!("{v:?} is not a whole number of days"),
                )
            })?,
            None => 30,
        };
        let database_url = database_url_flag
            .map(str::to_owned)
            .or_else(|| non_empty_env(ENV_DATABASE_URL))
            .map(|u| u.trim().to_owned());
        if let Some(u) = &database_url
            && !(u.starts_with("postgres://") || u.starts_with("postgresql://"))
        {
            return Err(Error::invalid(
                ENV_DATABASE_URL,
                "expected a postgres:// or postgresql:// URL (the embedded SQLite registry needs none)",
            ));
        }
        let team = match non_empty_env(ENV_TEAM).as_deref().map(str::trim) {
            None => database_url.is_some(),
            Some("1" | "true" | "on") => true,
            Some("0" | "false" | "off") => false,
            Some(v) => {
                return Err(Error::invalid(ENV_TEAM, format!("{v:?} is not 1 or 0")));
            }
        };
        let replica = non_empty_env(ENV_REPLICA)
            .map(|r| r.trim().to_owned())
            .or_else(|| team.then(|| format!("{}:{}", host_name(), std::process::id())));
        let sandbox = SandboxConfig::from_env(&data_dir)?;
        Ok(Config {
            team,
            data_dir,
            db_path,
            timeouts: Timeouts::default(),
            log_retention_days,
            guard_exe: None,
            pinning: crate::pinning::policy::Policy::from_env()?,
            default_agent_id: non_empty_env(ENV_DEFAULT_AGENT).map(|v| v.trim().to_owned()),
            sandbox,
            database_url,
            replica,
            guards: ad_core::guards::Guards::from_env(|k| std::env::var(k).ok())?,
        })
    }

    /// A configuration rooted in `dir`, for tests and embedders.
    pub fn in_dir(dir: &Path) -> Config {
        Config {
            data_dir: dir.to_path_buf(),
            db_path: dir.join(DB_FILE),
            timeouts: Timeouts::default(),
            log_retention_days: 30,
            guard_exe: None,
            pinning: Default::default(),
            default_agent_id: None,
            database_url: None,
            replica: None,
            team: false,
            sandbox: SandboxConfig::default_for(dir),
            guards: Default::default(),
        }
    }
}

fn non_empty_env(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.trim().is_empty())
}

/// The machine's host name (the pod name under Kubernetes), or `localhost` when it cannot be read.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn default_data_dir() -> Result<PathBuf> {
    directories::ProjectDirs::from("", "", "agent-discover")
        .map(|p| p.data_dir().to_path_buf())
        .ok_or_else(|| Error::Unavailable(format!("cannot find a home directory for the data dir; pass --data-dir or set {ENV_DATA_DIR}")))
}
