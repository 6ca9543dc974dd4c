//! The sandbox vocabulary: a server's confinement settings as a user sets them, the grants that follow from its
//! launch, and the plan the child guard applies before `exec`. Pure data: building a plan is the proxy's, applying it
//! the sandbox crate's.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::netallow::{AllowList, HOSTS_PREFIX};

/// Environment variable: `off` starts every stdio child unconfined (the global opt-out); `on` (default) confines.
pub const ENV_SANDBOX: &str = "AGENT_DISCOVER_SANDBOX";
/// Environment variable: names of variables (comma-separated) that children get from agent-discover's own
/// environment, beyond those the sandbox passes anyway.
pub const ENV_PASS_ENV: &str = "AGENT_DISCOVER_SANDBOX_PASS_ENV";
/// The variable the child guard reads its plan from (JSON); set on the guard only, never passed to the child.
pub const ENV_PLAN: &str = "AGENT_DISCOVER_SANDBOX_PLAN";
/// The exit code of a guard that refused to start its child because the sandbox could not be set up.
pub const REFUSED_EXIT: i32 = 125;
/// The first line a refusing guard writes to stderr starts with this.
pub const REFUSED_PREFIX: &str = "agent-discover sandbox:";

/// What a sandboxed child may reach on the network.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Any host (most servers call their API).
    #[default]
    Full,
    /// Nothing: a network namespace of its own (loopback only, down), and Landlock's TCP rules.
    None,
    /// Only the hosts of its allow-list ([`SandboxSettings::hosts`]): a network namespace of its own whose one way out
    /// is agent-discover's filtering proxy (`HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY`).
    Hosts,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Full => "full",
            Network::None => "none",
            Network::Hosts => "hosts",
        }
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Network {
    type Err = Error;
    fn from_str(s: &str) -> Result<Network, Error> {
        match s.trim() {
            "full" => Ok(Network::Full),
            "none" => Ok(Network::None),
            "hosts" => Ok(Network::Hosts),
            other => Err(Error::invalid(
                "network",
                format!(
                    "{:?}: expected full, none or hosts:HOST,... (e.g. hosts:api.github.com,*.slack.com:443)",
                    crate::model::truncate_for_message(other)
                ),
            )),
        }
    }
}

/// A server's sandbox settings as the user set them (`agent-discover sandbox set`, REST, the `registry` tool's
/// `sandbox` action). Stored with the server; the defaults confine with full network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSettings {
    /// `false`: this server runs unconfined (the user's explicit opt-out). `true` (default): confined.
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub network: Network,
    /// The allow-list when `network` is `hosts` (normalised entries: `api.github.com`, `*.slack.com`, `host:443`, IP
    /// literals); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Extra paths the server may read.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Extra paths the server may read and write.
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

fn yes() -> bool {
    true
}

/// The defaults: confined, full network, no extra paths.
impl Default for SandboxSettings {
    fn default() -> SandboxSettings {
        SandboxSettings {
            enabled: true,
            network: Network::Full,
            hosts: Vec::new(),
            read: Vec::new(),
            write: Vec::new(),
        }
    }
}

impl SandboxSettings {
    /// Relative paths and paths with `..` are refused: a grant names one place, as the user wrote it.
    pub fn validate(&self) -> Result<(), Error> {
        AllowList::parse(&self.hosts)?;
        if (self.network == Network::Hosts) == self.hosts.is_empty() {
            return Err(Error::invalid(
                "network",
                "an allow-list goes with `network: hosts` only, and `hosts` needs at least one host",
            ));
        }
        for (field, paths) in [("read", &self.read), ("write", &self.write)] {
            for p in paths {
                if !p.is_absolute() {
                    return Err(Error::invalid(
                        field,
                        format!("{}: a sandbox grant must be an absolute path", p.display()),
                    ));
                }
                if p.components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                {
                    return Err(Error::invalid(
                        field,
                        format!("{}: a sandbox grant must not contain `..`", p.display()),
                    ));
                }
                if p.as_os_str().len() > 4096 {
                    return Err(Error::invalid(
                        field,
                        "a sandbox grant is longer than 4096 bytes",
                    ));
                }
            }
        }
        if self.read.len() + self.write.len() > 256 {
            return Err(Error::invalid(
                "read",
                "at most 256 sandbox grants per server",
            ));
        }
        Ok(())
    }
}

/// Where a grant comes from, so a person can tell the user's own grants from derived ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantSource {
    /// What every child needs: system directories, the interpreter, certificates, devices.
    Runtime,
    /// The program's own install (its package directory or prefix).
    Package,
    /// The server's private state directory (its HOME and TMPDIR).
    State,
    /// A path named by the server's arguments (for a marketplace install: its server.json arguments).
    Arguments,
    /// A path named by the server's environment.
    Env,
    /// A path the user granted (`sandbox set --read/--write`).
    User,
}

impl GrantSource {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantSource::Runtime => "runtime",
            GrantSource::Package => "package",
            GrantSource::State => "state",
            GrantSource::Arguments => "arguments",
            GrantSource::Env => "env",
            GrantSource::User => "user",
        }
    }
}

/// One path a sandboxed child may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub path: PathBuf,
    /// Read and write; otherwise read (and execute) only.
    pub write: bool,
    pub source: GrantSource,
}

/// What the child guard applies before `exec`: built by agent-discover for one start of one child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The server, for messages.
    pub server: String,
    pub network: Network,
    /// With `network: hosts`: the Unix socket of agent-discover's filtering proxy for this child, the one way out of
    /// its network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net_proxy: Option<PathBuf>,
    /// Every path the child may use; nothing else is reachable.
    pub grants: Vec<Grant>,
    /// The child's whole environment (built, not inherited).
    pub env: BTreeMap<String, String>,
    /// The child's working directory (its state directory).
    pub cwd: PathBuf,
}

/// Parses a `network` setting as the fronts take it: `full`, `none`, or `hosts:ENTRY,ENTRY,...` (entries separated
/// by commas or spaces). Answers the mode and the normalised entries (empty unless `hosts`).
pub fn parse_network(text: &str) -> Result<(Network, Vec<String>), Error> {
    let text = text.trim();
    let Some(rest) = text
        .get(..HOSTS_PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(HOSTS_PREFIX))
        .map(|_| &text[HOSTS_PREFIX.len()..])
    else {
        return match text.parse::<Network>()? {
            Network::Hosts => Err(Error::invalid(
                "network",
                "`hosts` needs its list: hosts:api.example.com,*.example.org[:PORT]",
            )),
            n => Ok((n, Vec::new())),
        };
    };
    let entries: Vec<&str> = rest
        .split([',', ' '])
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(Error::invalid(
            "network",
            "hosts: needs at least one host (use `none` for no network at all)",
        ));
    }
    let list = AllowList::parse(&entries)?;
    let mut out = list.entries();
    out.dedup();
    Ok((Network::Hosts, out))
}

/// The `network` setting as text: `full`, `none` or `hosts:a,b`.
pub fn network_text(network: Network, hosts: &[String]) -> String {
    match network {
        Network::Hosts => format!("{HOSTS_PREFIX}{}", hosts.join(",")),
        n => n.as_str().to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netallow::MAX_HOSTS;

    #[test]
    fn names_wildcards_ports_and_literals_match_as_documented() {
        let (mode, hosts) = parse_network(
            "hosts:API.github.com, *.slack.com,10.0.0.5:8443,[::1]:9000,db.local:5432",
        )
        .unwrap();
        assert_eq!(mode, Network::Hosts);
        assert_eq!(
            hosts,
            [
                "api.github.com",
                "*.slack.com",
                "10.0.0.5:8443",
                "[::1]:9000",
                "db.local:5432"
            ]
        );
        let list = AllowList::parse(&hosts).unwrap();
        assert!(list.allows("api.github.com", 443));
        assert!(list.allows("API.GitHub.com.", 80), "case and a final dot");
        assert!(!list.allows("github.com", 443));
        assert!(list.allows("hooks.slack.com", 443));
        assert!(list.allows("a.b.slack.com", 443));
        assert!(
            !list.allows("slack.com", 443),
            "a wildcard is subdomains only"
        );
        assert!(!list.allows("evilslack.com", 443));
        assert!(list.allows("10.0.0.5", 8443));
        assert!(
            !list.allows("10.0.0.5", 443),
            "the port is part of the entry"
        );
        assert!(list.allows("[::1]", 9000));
        assert!(list.allows("::1", 9000));
        assert!(!list.allows("127.0.0.1", 9000));
        assert!(list.allows("db.local", 5432));
        assert!(!list.allows("db.local", 5433));
        assert!(list.names_ip("10.0.0.5".parse().unwrap()));
        assert_eq!(
            network_text(mode, &hosts[..2]),
            "hosts:api.github.com,*.slack.com"
        );
    }

    #[test]
    fn bad_entries_are_refused_naming_the_entry() {
        for bad in [
            "hosts:",
            "hosts",
            "hosts:exa mple..com",
            "hosts:a.com:0",
            "hosts:a.com:99999",
            "hosts:*",
            "hosts:foo.*.com",
            "hosts:[::1",
            "hosts:-a.com",
            "wide",
        ] {
            let e = parse_network(bad).unwrap_err();
            assert!(e.to_string().contains("network"), "{bad}: {e}");
        }
        assert_eq!(parse_network("none").unwrap(), (Network::None, vec![]));
        assert_eq!(parse_network(" full ").unwrap(), (Network::Full, vec![]));
        let many: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}.example")).collect();
        assert!(AllowList::parse(&many).is_err());
    }
}
