//! Where the identity settings come from: `identity.toml` (in the data dir, or the file `AGENT_DISCOVER_AUTH_CONFIG`
//! names) and `AGENT_DISCOVER_AUTH_*` variables, which override the file. No issuer: identity is off.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::introspect::Endpoint;
use super::rules::{GroupRule, Rules};

pub const ENV_CONFIG: &str = "AGENT_DISCOVER_AUTH_CONFIG";
pub const ENV_ISSUER: &str = "AGENT_DISCOVER_AUTH_ISSUER";
pub const ENV_AUDIENCE: &str = "AGENT_DISCOVER_AUTH_AUDIENCE";
pub const ENV_GROUPS_CLAIM: &str = "AGENT_DISCOVER_AUTH_GROUPS_CLAIM";
pub const ENV_REQUIRED_SCOPES: &str = "AGENT_DISCOVER_AUTH_REQUIRED_SCOPES";
pub const ENV_JWKS_URI: &str = "AGENT_DISCOVER_AUTH_JWKS_URI";
pub const ENV_INTROSPECTION_URL: &str = "AGENT_DISCOVER_AUTH_INTROSPECTION_URL";
pub const ENV_INTROSPECTION_CLIENT_ID: &str = "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_ID";
pub const ENV_INTROSPECTION_CLIENT_SECRET: &str = "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_SECRET";
pub const ENV_ADMIN_GROUPS: &str = "AGENT_DISCOVER_AUTH_ADMIN_GROUPS";
pub const ENV_DEFAULT_GROUP: &str = "AGENT_DISCOVER_AUTH_DEFAULT_GROUP";
/// The file name looked for in the data dir.
pub const FILE: &str = "identity.toml";

/// The settings of a protected front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityConfig {
    pub issuer: String,
    /// Accepted `aud` values; empty: the endpoint's own canonical URI and the front's `/mcp`.
    pub audience: Vec<String>,
    pub groups_claim: String,
    pub required_scopes: Vec<String>,
    pub jwks_uri: Option<String>,
    pub introspection: Option<Endpoint>,
    pub rules: Rules,
    /// The file the settings were read from, if any: its visibility rules are read again when it changes
    /// (`super::reload`).
    pub file: Option<std::path::PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileIntrospection {
    url: String,
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// `identity.toml` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    issuer: Option<String>,
    #[serde(default)]
    audience: Vec<String>,
    groups_claim: Option<String>,
    #[serde(default)]
    required_scopes: Vec<String>,
    jwks_uri: Option<String>,
    introspection: Option<FileIntrospection>,
    #[serde(default)]
    admin_groups: Vec<String>,
    default_group: Option<String>,
    #[serde(default)]
    groups: BTreeMap<String, GroupRule>,
}

fn list(v: &str) -> Vec<String> {
    v.split([',', ' '])
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl IdentityConfig {
    /// The settings for a front whose data dir is `data_dir`, read through `env`; `Ok(None)` when no issuer is
    /// configured.
    pub fn load(
        data_dir: &Path,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<IdentityConfig>, String> {
        let env = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let path = match env(ENV_CONFIG) {
            Some(p) => Some(std::path::PathBuf::from(p)),
            None => Some(data_dir.join(FILE)).filter(|p| p.exists()),
        };
        let file: File = match &path {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .map_err(|e| format!("cannot read {}: {e}", p.display()))?;
                toml::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?
            }
            None => File::default(),
        };
        let Some(issuer) = env(ENV_ISSUER).or(file.issuer) else {
            return Ok(None);
        };
        let introspection = match env(ENV_INTROSPECTION_URL) {
            Some(url) => Some(Endpoint {
                url,
                client_id: env(ENV_INTROSPECTION_CLIENT_ID),
                client_secret: env(ENV_INTROSPECTION_CLIENT_SECRET),
            }),
            None => file.introspection.map(|i| Endpoint {
                url: i.url,
                client_id: env(ENV_INTROSPECTION_CLIENT_ID).or(i.client_id),
                client_secret: env(ENV_INTROSPECTION_CLIENT_SECRET).or(i.client_secret),
            }),
        };
        let default_group = env(ENV_DEFAULT_GROUP).or(file.default_group);
        if let Some(d) = &default_group
            && !file.groups.contains_key(d)
        {
            return Err(format!("the default group `{d}` has no rule in [groups]"));
        }
        Ok(Some(IdentityConfig {
            issuer,
            audience: env(ENV_AUDIENCE).map(|v| list(&v)).unwrap_or(file.audience),
            groups_claim: env(ENV_GROUPS_CLAIM)
                .or(file.groups_claim)
                .unwrap_or_else(|| "groups".into()),
            required_scopes: env(ENV_REQUIRED_SCOPES)
                .map(|v| list(&v))
                .unwrap_or(file.required_scopes),
            jwks_uri: env(ENV_JWKS_URI).or(file.jwks_uri),
            introspection,
            rules: Rules {
                admin_groups: env(ENV_ADMIN_GROUPS)
                    .map(|v| list(&v))
                    .unwrap_or(file.admin_groups),
                groups: file.groups,
                default_group,
            },
            file: path,
        }))
    }

    /// [`IdentityConfig::load`] from the process environment.
    pub fn from_env(data_dir: &Path) -> Result<Option<IdentityConfig>, String> {
        IdentityConfig::load(data_dir, |k| std::env::var(k).ok())
    }

    /// The settings read again from `file` (and the process environment, which still overrides it).
    pub fn reread(file: &Path) -> Result<Option<IdentityConfig>, String> {
        IdentityConfig::load(file.parent().unwrap_or(Path::new(".")), |k| {
            if k == ENV_CONFIG {
                Some(file.display().to_string())
            } else {
                std::env::var(k).ok()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_variables() {
        let dir = tempfile::tempdir().unwrap();
        let none = IdentityConfig::load(dir.path(), |_| None).unwrap();
        assert!(none.is_none(), "no issuer: identity off");
        std::fs::write(
            dir.path().join(FILE),
            r#"issuer = "https://as.example"
required_scopes = ["mcp"]
admin_groups = ["admins"]
default_group = "readers"
[introspection]
url = "https://as.example/introspect"
client_id = "rs"
[groups.readers]
servers = ["docs*"]
[groups.dev]
servers = ["*"]
tools = ["git__*"]
"#,
        )
        .unwrap();
        let c = IdentityConfig::load(dir.path(), |_| None).unwrap().unwrap();
        assert_eq!(c.issuer, "https://as.example");
        assert_eq!(c.groups_claim, "groups");
        assert_eq!(c.required_scopes, ["mcp"]);
        assert_eq!(c.rules.groups["readers"].tools, ["*"]);
        assert_eq!(
            c.introspection.as_ref().unwrap().client_id.as_deref(),
            Some("rs")
        );
        let c = IdentityConfig::load(dir.path(), |k| match k {
            ENV_ISSUER => Some("https://other".into()),
            ENV_REQUIRED_SCOPES => Some("a b".into()),
            ENV_GROUPS_CLAIM => Some("roles".into()),
            _ => None,
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.issuer.as_str(), c.groups_claim.as_str()),
            ("https://other", "roles")
        );
        assert_eq!(c.required_scopes, ["a", "b"]);
        std::fs::write(
            dir.path().join(FILE),
            "issuer = \"x\"\ndefault_group = \"none\"\n",
        )
        .unwrap();
        assert!(IdentityConfig::load(dir.path(), |_| None).is_err());
    }
}
