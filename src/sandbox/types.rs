//! The sandbox use case's plain data: a change to a server's settings as the fronts receive it ([`SandboxPatch`]),
//! the one-line summary listings carry ([`SandboxBrief`]), and the JSON a grant is shown as. A leaf: it knows the
//! vocabulary of `ad_core::sandbox` and nothing of `App`, so the feed's snapshot types can use it.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use ad_core::error::Result;
use ad_core::sandbox::{Grant, Network, SandboxSettings};

/// What a server's listing says of its sandbox (stdio servers only: a remote server starts no process here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SandboxBrief {
    /// The server's own setting (`sandbox set --off` clears it).
    pub enabled: bool,
    /// Whether its next start is confined: its setting, and `AGENT_DISCOVER_SANDBOX` is not `off`.
    pub effective: bool,
    pub network: Network,
}

/// A change to a server's sandbox settings (`sandbox set`, `PUT /api/servers/{id}/sandbox`, the `registry` tool's
/// `sandbox` action): each field present replaces that setting; absent ones stay as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxPatch {
    pub enabled: Option<bool>,
    /// `full`, `none` or `hosts:HOST,...` (parsed here, so a wrong value is an `invalid_input` naming `network`).
    pub network: Option<String>,
    /// Extra paths the server may read (absolute, without `..`): the whole list.
    pub read: Option<Vec<PathBuf>>,
    /// Extra paths the server may read and write (absolute, without `..`): the whole list.
    pub write: Option<Vec<PathBuf>>,
}

impl SandboxPatch {
    /// Changes nothing: a show, not a set.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_none()
            && self.network.is_none()
            && self.read.is_none()
            && self.write.is_none()
    }

    /// `current` with this patch's fields replaced (not yet validated: the registry validates what it stores).
    pub fn apply(self, current: SandboxSettings) -> Result<SandboxSettings> {
        let (network, hosts) = match self.network {
            Some(n) => ad_core::sandbox::parse_network(&n)?,
            None => (current.network, current.hosts),
        };
        Ok(SandboxSettings {
            enabled: self.enabled.unwrap_or(current.enabled),
            network,
            hosts,
            read: self.read.unwrap_or(current.read),
            write: self.write.unwrap_or(current.write),
        })
    }
}

/// A grant as the view shows it: `{path, access: "read"|"write", source}`.
pub fn grant_json(g: &Grant) -> Value {
    json!({
        "path": g.path,
        "access": if g.write { "write" } else { "read" },
        "source": g.source.as_str(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::error::Error;

    #[test]
    fn a_patch_replaces_only_what_it_names() {
        let current = SandboxSettings {
            read: vec![PathBuf::from("/srv/a")],
            write: vec![PathBuf::from("/srv/b")],
            ..SandboxSettings::default()
        };
        assert!(SandboxPatch::default().is_empty());
        let same = SandboxPatch::default().apply(current.clone()).unwrap();
        assert_eq!(same, current);
        let patch = SandboxPatch {
            network: Some("none".into()),
            read: Some(vec![]),
            ..SandboxPatch::default()
        };
        assert!(!patch.is_empty());
        let changed = patch.apply(current.clone()).unwrap();
        assert_eq!(changed.network, Network::None);
        assert!(changed.read.is_empty());
        assert_eq!(changed.write, current.write);
        assert!(changed.enabled);
        let bad = SandboxPatch {
            network: Some("some".into()),
            ..SandboxPatch::default()
        };
        assert!(matches!(
            bad.apply(current),
            Err(Error::Invalid {
                what: "network",
                ..
            })
        ));
    }
}
