//! The pinning policy: whether tools never seen before are approved on sight or held for review.
//!
//! A leaf: the registry and the configuration hold a [`Policy`]; the gate that applies it is the parent module.

use ad_core::error::{Error, Result};

/// Environment variable: `approve` (default) or `hold` the tools of a server seen for the first time.
pub const ENV_NEW_SERVERS: &str = "AGENT_DISCOVER_PIN_NEW_SERVERS";
/// Environment variable: `approve` (default) or `hold` tools that an already pinned server adds later.
pub const ENV_NEW_TOOLS: &str = "AGENT_DISCOVER_PIN_NEW_TOOLS";

/// Whether unseen tools are approved on sight. A changed tool is always withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub approve_new_servers: bool,
    pub approve_new_tools: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            approve_new_servers: true,
            approve_new_tools: true,
        }
    }
}

impl Policy {
    /// Reads [`ENV_NEW_SERVERS`] and [`ENV_NEW_TOOLS`] (`approve` or `hold`; unset means `approve`).
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
        Ok(Policy {
            approve_new_servers: read(ENV_NEW_SERVERS)?,
            approve_new_tools: read(ENV_NEW_TOOLS)?,
        })
    }
}
