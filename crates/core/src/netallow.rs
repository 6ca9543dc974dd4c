//! Network allow-lists of confined servers: the `hosts:` entries a user sets (`api.github.com`, `*.slack.com`,
//! `api.github.com:443`, an IP literal such as `10.0.0.5` or `[::1]:8080`) and the match of one destination (a host
//! name as the child asked for it, and a port) against them. Pure data: the filtering proxy that enforces a list is
//! the proxy crate's, the network namespace the sandbox crate's.

use std::fmt;
use std::net::IpAddr;

use crate::error::Error;

/// At most this many entries in one server's allow-list.
pub const MAX_HOSTS: usize = 256;
/// The prefix of a `network` setting that carries an allow-list: `hosts:api.github.com,*.slack.com`.
pub const HOSTS_PREFIX: &str = "hosts:";

/// One entry: a host name, a `*.` wildcard over a domain's subdomains, or an IP literal, with an optional port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// Lowercase; without the `*.` of a wildcard and without brackets around an IPv6 literal.
    host: String,
    /// `*.slack.com`: any name that ends in `.slack.com` (at any depth), not `slack.com` itself.
    wildcard: bool,
    /// The parsed address when the entry is an IP literal.
    ip: Option<IpAddr>,
    /// `None`: any port.
    port: Option<u16>,
}

impl HostRule {
    /// Parses one entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostRule, Error> {
        let text = entry.trim().to_ascii_lowercase();
        let bad = |why: &str| {
            Error::invalid(
                "network",
                format!(
                    "{:?}: {why}",
                    crate::model::truncate_for_message(entry.trim())
                ),
            )
        };
        if text.is_empty() {
            return Err(bad("an empty host"));
        }
        let (host, port) = split_port(&text).map_err(&bad)?;
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(bad("the port must be a number from 1 to 65535")),
            },
        };
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(HostRule {
                host: ip.to_string(),
                wildcard: false,
                ip: Some(ip),
                port,
            });
        }
        let (wildcard, name) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        if !valid_name(name) {
            return Err(bad(
                "not a host name (letters, digits, `-` and `.`; `*.` only as a whole first label), nor an IP address",
            ));
        }
        Ok(HostRule {
            host: name.to_owned(),
            wildcard,
            ip: None,
            port,
        })
    }

    /// Whether a connection to `host` (a name or an IP literal, IPv6 without brackets) on `port` is allowed.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Some(ip) = self.ip {
            return host.parse::<IpAddr>().ok() == Some(ip);
        }
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.wildcard {
            f.write_str("*.")?;
        }
        match (self.ip, self.port) {
            (Some(IpAddr::V6(_)), Some(p)) => write!(f, "[{}]:{p}", self.host),
            (_, Some(p)) => write!(f, "{}:{p}", self.host),
            (_, None) => f.write_str(&self.host),
        }
    }
}

/// `host[:port]`, `[v6]`, `[v6]:port` or a bare IPv6 literal: the host and the port text, if any.
fn split_port(text: &str) -> Result<(&str, Option<&str>), &'static str> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest
            .split_once(']')
            .ok_or("an IPv6 address opened with `[` must be closed with `]`")?;
        return match after {
            "" => Ok((inside, None)),
            _ => after
                .strip_prefix(':')
                .map(|p| (inside, Some(p)))
                .ok_or("only `:PORT` may follow `]`"),
        };
    }
    if text.matches(':').count() > 1 {
        // A bare IPv6 literal (no port can be told apart without brackets).
        return Ok((text, None));
    }
    Ok(match text.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (text, None),
    })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// A parsed allow-list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowList(Vec<HostRule>);

impl AllowList {
    /// Parses the stored entries (each checked as [`HostRule::parse`] does).
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowList, Error> {
        if entries.len() > MAX_HOSTS {
            return Err(Error::invalid(
                "network",
                format!("at most {MAX_HOSTS} hosts in a network allow-list"),
            ));
        }
        entries
            .iter()
            .map(|e| HostRule::parse(e.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(AllowList)
    }

    /// Whether a connection to `host:port` is allowed by some entry.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        self.0.iter().any(|r| r.allows(host, port))
    }

    /// The entries in their normal form (lowercase, IPv6 ports in brackets), as stored.
    pub fn entries(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }

    /// Whether an entry names `host` as an IP literal (a connection to that address was asked for by address).
    pub fn names_ip(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|r| r.ip == Some(ip))
    }
}
