//! Profiles, the use cases every front shares (CLI, REST, the `registry` tool, the dashboard): create, change,
//! show, remove, export and import; and a profile's search scope, the ids of its tools, kept while the tools stand.
//! What a profile holds is `ad_core::profile`'s rule; the MCP fronts serve a profile as a view (`mcp/view.rs`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::app::App;
use crate::error::{Error, Result};
use crate::search::Within;
pub use ad_core::profile::Profile;

pub(crate) mod scopes;

pub use scopes::Scopes;

/// A change to a profile: each field given replaces (`description`, `servers`, `tools`) or adds and removes entries.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileChange {
    pub description: Option<String>,
    pub servers: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub add_servers: Vec<String>,
    #[serde(default)]
    pub remove_servers: Vec<String>,
    #[serde(default)]
    pub add_tools: Vec<String>,
    #[serde(default)]
    pub remove_tools: Vec<String>,
}

/// The export file: every profile it carries, in JSON or TOML (`[[profiles]]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// The file format's version (1).
    pub version: u32,
    pub profiles: Vec<Profile>,
}

/// A file's format: JSON, or TOML for a `.toml` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Json,
    Toml,
}

impl FileFormat {
    /// TOML for a path ending in `.toml`, else JSON.
    pub fn of_path(path: &std::path::Path) -> FileFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("toml") => FileFormat::Toml,
            _ => FileFormat::Json,
        }
    }

    pub fn parse(s: &str) -> Result<FileFormat> {
        match s {
            "json" => Ok(FileFormat::Json),
            "toml" => Ok(FileFormat::Toml),
            _ => Err(Error::invalid("format", "json or toml")),
        }
    }
}

impl ProfileFile {
    pub fn render(&self, format: FileFormat) -> Result<String> {
        match format {
            FileFormat::Json => serde_json::to_string_pretty(self)
                .map(|s| s + "\n")
                .map_err(|e| Error::Internal(e.to_string())),
            FileFormat::Toml => toml::to_string(self)
                .map_err(|e| Error::invalid("profiles", format!("not expressible in TOML: {e}"))),
        }
    }

    pub fn parse(text: &str, format: FileFormat) -> Result<ProfileFile> {
        let file: ProfileFile = match format {
            FileFormat::Json => serde_json::from_str(text)
                .map_err(|e| Error::invalid("profiles file", e.to_string()))?,
            FileFormat::Toml => {
                toml::from_str(text).map_err(|e| Error::invalid("profiles file", e.to_string()))?
            }
        };
        if file.version != 1 {
            return Err(Error::invalid(
                "profiles file",
                format!(
                    "version {} (this agent-discover reads version 1)",
                    file.version
                ),
            ));
        }
        Ok(file)
    }
}

impl App {
    /// Every profile, by name.
    pub fn profiles(&self) -> Result<Vec<Profile>> {
        self.registry.store().profiles()
    }

    /// One profile by name; not found names the command that lists them.
    pub fn profile(&self, name: &str) -> Result<Profile> {
        ad_core::profile::check_name(name)?;
        self.registry.store().profile(name)?.ok_or_else(|| {
            Error::not_found(
                "profile",
                format!("{name} (`agent-discover profiles list` lists them)"),
            )
        })
    }

    /// Checks a profile and that every server it lists is registered (a typo would otherwise hold nothing).
    fn check_profile(&self, p: &Profile) -> Result<()> {
        p.validate()?;
        for s in &p.servers {
            if self.registry.get(s).is_err() {
                return Err(Error::not_found(
                    "server",
                    format!("{s} (a profile lists registered servers; install it first)"),
                ));
            }
        }
        self.check_profile_overrides(p)
    }

    /// Creates a profile; one of the same name is a conflict.
    pub fn create_profile(&self, p: Profile) -> Result<Profile> {
        self.check_profile(&p)?;
        if self.registry.store().profile(&p.name)?.is_some() {
            return Err(Error::Conflict {
                what: "profile",
                name: p.name,
            });
        }
        self.registry.store().put_profile(&p)?;
        self.profile_changed(None, Some(&p));
        Ok(p)
    }

    /// Changes a profile (see [`ProfileChange`]).
    pub fn change_profile(&self, name: &str, change: ProfileChange) -> Result<Profile> {
        let mut p = self.profile(name)?;
        if let Some(d) = change.description {
            p.description = d;
        }
        if let Some(s) = change.servers {
            p.servers = s;
        }
        if let Some(t) = change.tools {
            p.tools = t;
        }
        for s in change.add_servers {
            if !p.servers.contains(&s) {
                p.servers.push(s);
            }
        }
        for t in change.add_tools {
            if !p.tools.contains(&t) {
                p.tools.push(t);
            }
        }
        p.servers.retain(|s| !change.remove_servers.contains(s));
        p.tools.retain(|t| !change.remove_tools.contains(t));
        self.check_profile(&p)?;
        self.registry.store().put_profile(&p)?;
        Ok(p)
    }

    /// Removes a profile; false when there was none.
    pub fn remove_profile(&self, name: &str) -> Result<bool> {
        ad_core::profile::check_name(name)?;
        let before = self.registry.store().profile(name)?;
        let removed = self.registry.store().delete_profile(name)?;
        self.profile_changed(before.as_ref(), None);
        self.scopes
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        Ok(removed)
    }

    /// A profile as `show` gives it: its definition, the tools it holds now among the known ones (`call_as`), and
    /// its endpoints.
    pub fn show_profile(&self, name: &str) -> Result<Value> {
        let p = self.profile(name)?;
        let mut tools: Vec<String> = self
            .registry
            .store()
            .indexed_tool_names()?
            .into_iter()
            .filter(|(_, s, t)| p.allows(s, Some(t)))
            .map(|(_, s, t)| {
                // As the profile shows it, with its own overrides.
                let shown = self.shown_in_profile(&p, &s, &t);
                crate::proxy::names::expose(
                    &s,
                    shown.as_ref().map_or(t.as_str(), |x| x.tool.name.as_ref()),
                )
            })
            .collect();
        tools.sort();
        let mut v = serde_json::to_value(&p).map_err(|e| Error::Internal(e.to_string()))?;
        v["known_tools"] = json!(tools);
        v["endpoint"] = json!(format!("/mcp/profiles/{}", p.name));
        v["stdio"] = json!(["mcp", "--profile", p.name]);
        Ok(v)
    }

    /// The profiles named (every one without names), as an export file.
    pub fn export_profiles(&self, names: &[String]) -> Result<ProfileFile> {
        let profiles = if names.is_empty() {
            self.profiles()?
        } else {
            names
                .iter()
                .map(|n| self.profile(n))
                .collect::<Result<_>>()?
        };
        Ok(ProfileFile {
            version: 1,
            profiles,
        })
    }

    /// Imports an export file: every profile is checked first, then stored (one that exists is replaced only with
    /// `replace`, else the import is refused before anything is stored). Answers the names imported.
    pub fn import_profiles(&self, file: ProfileFile, replace: bool) -> Result<Vec<String>> {
        let mut seen = std::collections::HashSet::new();
        for p in &file.profiles {
            self.check_profile(p)?;
            if !seen.insert(p.name.clone()) {
                return Err(Error::invalid(
                    "profiles file",
                    format!("profile `{}` appears twice", p.name),
                ));
            }
            if !replace && self.registry.store().profile(&p.name)?.is_some() {
                return Err(Error::Conflict {
                    what: "profile",
                    name: format!("{} (import with replace to overwrite it)", p.name),
                });
            }
        }
        for p in &file.profiles {
            let before = self.registry.store().profile(&p.name)?;
            self.registry.store().put_profile(p)?;
            self.profile_changed(before.as_ref(), Some(p));
        }
        Ok(file.profiles.into_iter().map(|p| p.name).collect())
    }

    /// The ids of the indexed tools `profile` holds: its search scope, made again only when the tools or the
    /// profile change.
    pub fn profile_scope(&self, profile: &Profile) -> Result<Arc<Within>> {
        let version = self.search.tools_version()?;
        if let Some((p, v, w)) = self
            .scopes
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&profile.name)
            && p == profile
            && *v == version
        {
            return Ok(w.clone());
        }
        let ids = self
            .registry
            .store()
            .indexed_tool_names()?
            .into_iter()
            .filter(|(_, s, t)| profile.allows(s, Some(t)))
            .map(|(id, _, _)| id);
        let within = Arc::new(Within::new(ids));
        self.scopes
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                profile.name.clone(),
                (profile.clone(), version, within.clone()),
            );
        Ok(within)
    }
}
