//! The network side of a server's sandbox view: its allow-list (`network: hosts`), the hosts its filtering proxy
//! refused since its last start, and hosts suggested from what the package declares (URLs in its configured arguments
//! and environment, the `remotes` of the server.json and the links of the README its installed package ships). Suggestions
//! are shown, never applied: the user sets the list with `sandbox set NAME --network hosts:...`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::app::App;
use crate::model::Server;
use ad_core::netallow::AllowList;
use ad_core::sandbox::network_text;
use ad_core::sandbox::{Grant, GrantSource, Network, SandboxSettings};

/// At most this many suggestions are shown.
const MAX_SUGGESTIONS: usize = 20;
/// README files larger than this are not read for suggestions.
const MAX_README: u64 = 512 * 1024;

impl App {
    /// Adds `hosts`, `refused_hosts` and `suggested_hosts` (`[{host, source}]`) to a stdio server's view.
    pub(super) fn add_network_view(
        &self,
        view: &mut Value,
        s: &Server,
        settings: &SandboxSettings,
        grants: &[Grant],
    ) {
        view["hosts"] = json!(settings.hosts);
        view["network_setting"] = json!(network_text(settings.network, &settings.hosts));
        view["refused_hosts"] = json!(refused_hosts(&s.name));
        view["suggested_hosts"] = json!(self.suggested_hosts(s, settings, grants));
    }

    /// Hosts the package declares, with where each was found; those the allow-list already admits are left out.
    pub fn suggested_hosts(
        &self,
        s: &Server,
        settings: &SandboxSettings,
        grants: &[Grant],
    ) -> Vec<Value> {
        let allow = AllowList::parse(&settings.hosts).unwrap_or_default();
        let mut found: BTreeMap<String, &'static str> = BTreeMap::new();
        let mut add = |host: String, source: &'static str| {
            if found.len() < MAX_SUGGESTIONS
                && !allow.allows(&host, 443)
                && !allow.allows(&host, 80)
            {
                found.entry(host).or_insert(source);
            }
        };
        for text in s.args.iter() {
            for h in hosts_in(text) {
                add(h, "arguments");
            }
        }
        for value in s.env.values() {
            for h in hosts_in(value) {
                add(h, "env");
            }
        }
        for g in grants.iter().filter(|g| g.source == GrantSource::Package) {
            if let Some(doc) = std::fs::read(g.path.join("server.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            {
                for remote in doc["remotes"].as_array().into_iter().flatten() {
                    for h in hosts_in(remote["url"].as_str().unwrap_or_default()) {
                        add(h, "server.json remotes");
                    }
                }
            }
            for name in ["README.md", "README", "readme.md", "README.rst"] {
                let file = g.path.join(name);
                let Ok(meta) = std::fs::metadata(&file) else {
                    continue;
                };
                if meta.len() > MAX_README {
                    continue;
                }
                if let Ok(text) = std::fs::read_to_string(&file) {
                    for h in hosts_in(&text) {
                        add(h, "readme");
                    }
                }
            }
        }
        found
            .into_iter()
            .map(|(host, source)| json!({"host": host, "source": source}))
            .collect()
    }
}

/// The hosts `server`'s filtering proxy refused since its last start (`[{host, count, reason}]`).
pub fn refused_hosts(server: &str) -> Vec<ad_proxy::sandbox::netproxy::Refused> {
    ad_proxy::sandbox::netproxy::refused(server)
}

/// The command that allows the refused hosts too, when the server has an allow-list and was refused some.
pub fn advice(server: &str, settings: &SandboxSettings) -> Option<String> {
    let refused = refused_hosts(server);
    if settings.network != Network::Hosts || refused.is_empty() {
        return None;
    }
    let mut hosts = settings.hosts.clone();
    for r in &refused {
        let host = r.host.rsplit_once(':').map_or(r.host.as_str(), |(h, _)| h);
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    Some(format!(
        "its network allow-list refused {}; to allow them: `agent-discover sandbox set {server} --network {}`",
        refused
            .iter()
            .map(|r| r.host.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        network_text(Network::Hosts, &hosts)
    ))
}

/// The host names of the `http://` and `https://` URLs in `text` (lowercase, without ports and user info), skipping
/// loopback names and placeholders.
pub fn hosts_in(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(i) = rest.find("http") {
        rest = &rest[i + 4..];
        let after = rest
            .strip_prefix("s://")
            .or_else(|| rest.strip_prefix("://"));
        let Some(after) = after else {
            continue;
        };
        let end = after
            .find(|c: char| {
                !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '@' | '_'))
            })
            .unwrap_or(after.len());
        let auth = &after[..end];
        let auth = auth.rsplit('@').next().unwrap_or(auth);
        let host = auth
            .split(':')
            .next()
            .unwrap_or_default()
            .trim_end_matches('.');
        if host.contains('.')
            && !host.starts_with('.')
            && host
                .rsplit('.')
                .next()
                .is_some_and(|tld| tld.len() >= 2 && tld.bytes().all(|b| b.is_ascii_alphabetic()))
            && !["localhost", "example.com", "example.org", "example.net"]
                .iter()
                .any(|p| host == *p || host.ends_with(&format!(".{p}")))
            && ad_core::netallow::HostRule::parse(host).is_ok()
            && !out.iter().any(|h| h == host)
        {
            out.push(host.to_owned());
        }
        rest = &after[end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_from_urls_only() {
        let text = "Set GITHUB_API_URL=https://api.github.com/v3 or see [docs](https://docs.slack.com:443/x). \
                    Not http://localhost:8080, nor https://your-server.example.com, nor http_proxy, nor \
                    https://user@Hooks.Slack.com/a, nor https://127.0.0.1/x";
        assert_eq!(
            hosts_in(text),
            ["api.github.com", "docs.slack.com", "hooks.slack.com"]
        );
    }
}
