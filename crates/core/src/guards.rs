//! The guards' vocabulary: how each guard on calls acts (`off`, `warn`, `block`), the settings a server may have of
//! its own (each unset one follows the global setting), the global settings from the environment, and one credential
//! found in a call's arguments as errors carry it. Pure data: finding secrets is the scanner's (`ad_scan::guard`),
//! applying the settings the proxy's (`ad_proxy::callguard`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;
pub use crate::error::SecretFound;

/// Environment variables: the global setting of each guard (`off`, `warn` or `block`).
pub const ENV_ARGUMENTS: &str = "AGENT_DISCOVER_GUARD_ARGUMENTS";
pub const ENV_RESULT_SECRETS: &str = "AGENT_DISCOVER_GUARD_RESULT_SECRETS";
pub const ENV_RESULT_INSTRUCTIONS: &str = "AGENT_DISCOVER_GUARD_RESULT_INSTRUCTIONS";
/// Environment variable: one setting for all three guards, under the three above.
pub const ENV_ALL: &str = "AGENT_DISCOVER_GUARDS";

/// How a guard acts on what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Not looked at.
    Off,
    /// Looked at and reported (call log, counts, span, a mark for the agent on instructions); nothing changed.
    Warn,
    /// Refused (arguments), masked (secrets in results) or withheld (instructions in results), and reported.
    Block,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Warn => "warn",
            Mode::Block => "block",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Mode, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" => Ok(Mode::Off),
            "warn" => Ok(Mode::Warn),
            "block" => Ok(Mode::Block),
            other => Err(Error::invalid(
                "guard",
                format!("`{other}` is not a guard setting: use off, warn or block"),
            )),
        }
    }
}

/// The three guards' settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guards {
    /// Credentials in a call's arguments (default `block`: the call is refused with `secret_in_arguments`).
    pub arguments: Mode,
    /// Credentials in a result's text (default `block`: masked before the agent sees them).
    pub result_secrets: Mode,
    /// Instructions aimed at the agent in a result's text (default `warn`: marked for the agent and reported).
    pub result_instructions: Mode,
}

impl Default for Guards {
    fn default() -> Guards {
        Guards {
            arguments: Mode::Block,
            result_secrets: Mode::Block,
            result_instructions: Mode::Warn,
        }
    }
}

impl Guards {
    /// The global settings: the defaults, then `AGENT_DISCOVER_GUARDS` for all three, then each guard's own
    /// variable. A value that is not `off`, `warn` or `block` is an error naming the variable.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Guards, Error> {
        let read = |name: &str| -> Result<Option<Mode>, Error> {
            get(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| {
                    v.parse::<Mode>().map_err(|_| {
                        Error::invalid(
                            "guard",
                            format!("{name}=`{v}` is not a guard setting: use off, warn or block"),
                        )
                    })
                })
                .transpose()
        };
        let mut g = Guards::default();
        if let Some(all) = read(ENV_ALL)? {
            g = Guards {
                arguments: all,
                result_secrets: all,
                result_instructions: all,
            };
        }
        if let Some(m) = read(ENV_ARGUMENTS)? {
            g.arguments = m;
        }
        if let Some(m) = read(ENV_RESULT_SECRETS)? {
            g.result_secrets = m;
        }
        if let Some(m) = read(ENV_RESULT_INSTRUCTIONS)? {
            g.result_instructions = m;
        }
        Ok(g)
    }

    /// These settings with a server's own over them.
    pub fn with(self, own: &GuardSettings) -> Guards {
        Guards {
            arguments: own.arguments.unwrap_or(self.arguments),
            result_secrets: own.result_secrets.unwrap_or(self.result_secrets),
            result_instructions: own.result_instructions.unwrap_or(self.result_instructions),
        }
    }

    /// Whether any guard looks at results.
    pub fn reads_results(&self) -> bool {
        self.result_secrets != Mode::Off || self.result_instructions != Mode::Off
    }
}

/// A server's own guard settings as a user set them; an unset one follows the global setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardSettings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_secrets: Option<Mode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_instructions: Option<Mode>,
}

impl GuardSettings {
    pub fn is_empty(&self) -> bool {
        *self == GuardSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_all_then_each() {
        assert_eq!(Guards::from_env(|_| None).unwrap(), Guards::default());
        fn env(
            all: Option<&'static str>,
            args: Option<&'static str>,
        ) -> impl Fn(&str) -> Option<String> {
            move |k: &str| match k {
                ENV_ALL => all.map(str::to_owned),
                ENV_ARGUMENTS => args.map(str::to_owned),
                _ => None,
            }
        }
        let g = Guards::from_env(env(Some("off"), Some("warn"))).unwrap();
        assert_eq!(
            (g.arguments, g.result_secrets, g.result_instructions),
            (Mode::Warn, Mode::Off, Mode::Off)
        );
        let e = Guards::from_env(env(None, Some("maybe"))).unwrap_err();
        assert!(e.to_string().contains(ENV_ARGUMENTS), "{e}");
        let own = GuardSettings {
            result_instructions: Some(Mode::Block),
            ..Default::default()
        };
        assert_eq!(
            Guards::default().with(&own).result_instructions,
            Mode::Block
        );
        assert_eq!(Guards::default().with(&own).arguments, Mode::Block);
    }
}
