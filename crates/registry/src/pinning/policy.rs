//! The pinning policy: whether tools never seen before are approved on sight or held for review.
//!
//! A leaf: the registry and the configuration hold a [`Policy`]; the gate that applies it is the parent module.

use ad_core::error::{Error, Result};

/// Environment variable: `approve` (default) or `hold` the tools of a server seen for the first time.
pub const ENV_NEW_SERVERS: &str = "AGENT_DISCOVER_PIN_NEW_SERVERS";
/// Environment variable: `approve` (default) or `hold` tools that an already pinned server adds later.
pub const ENV_NEW_TOOLS: &str = "AGENT_DISCOVER_PIN_NEW_TOOLS";

/// Environment variable: what the tool scanner does with a definition it flags: `on` (default: withhold it until a
/// person approves), `warn` (log and record the findings, withhold nothing), `off` (do not scan).
pub const ENV_SCAN: &str = "AGENT_DISCOVER_SCAN";

/// The tool scanner's mode (see [`ENV_SCAN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScanMode {
    #[default]
    On,
    Warn,
    Off,
}

impl ScanMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ScanMode::On => "on",
            ScanMode::Warn => "warn",
            ScanMode::Off => "off",
        }
    }
}

/// Whether unseen tools are approved on sight (a changed tool is always withheld), and what the scanner does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub approve_new_servers: bool,
    pub approve_new_tools: bool,
    pub scan: ScanMode,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            approve_new_servers: true,
            approve_new_tools: true,
            scan: ScanMode::On,
        }
    }
}

impl Policy {
    /// Reads [`ENV_NEW_SERVERS`], [`ENV_NEW_TOOLS`] and [`ENV_SCAN`] (`approve` or `hold`; unset means `approve`).
    pub fn from_env() -> Result<Policy> {
        let read = |key: &'static str| -> Result<bool> {
            match std::env::var(key).ok().as_deref().map(str::trim) {
                None | Some("") | Some("approve") => Ok(true),
                Some("hold") => Ok(false),
                Some(other) => Err(Error::invalid(
                    key,
                    format!(
                        "{:?}: expected approve or hold",
                        ad_core::model::truncate_for_message(other)
                    ),
                )),
            }
        };
        let scan = match std::env::var(ENV_SCAN).ok().as_deref().map(str::trim) {
            None | Some("") | Some("on") => ScanMode::On,
            Some("warn") => ScanMode::Warn,
            Some("off") => ScanMode::Off,
            Some(other) => {
                return Err(Error::invalid(
                    ENV_SCAN,
                    format!(
                        "{:?}: expected on, warn or off",
                        ad_core::model::truncate_for_message(other)
                    ),
                ));
            }
        };
        Ok(Policy {
            approve_new_servers: read(ENV_NEW_SERVERS)?,
            approve_new_tools: read(ENV_NEW_TOOLS)?,
            scan,
        })
    }
}
