//! Profiles: a named set of servers and tools (globs) that one client sees, with its own search scope. The rule of
//! what a profile holds lives here, once; the fronts, the search and the proxy ask [`Profile::allows`].
//!
//! A profile holds every tool of the servers it lists, plus every tool whose `SERVER__TOOL` name matches one of its
//! tool globs (`*` any run of characters, `?` any one). A server is in the profile when it is listed or a tool glob
//! can name one of its tools; its resources and prompts follow it.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Longest profile name; names are `[A-Za-z0-9_-]`, as they appear in URLs (`/mcp/profiles/NAME`) and on command lines.
pub const NAME_MAX: usize = 64;
/// Most servers and most tool globs a profile holds (each).
pub const ENTRIES_MAX: usize = 500;
/// Longest tool glob and longest description.
pub const GLOB_MAX: usize = 256;
pub const DESCRIPTION_MAX: usize = 2000;

/// One profile as stored, exported and shown.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Servers whose every tool, resource and prompt the profile holds.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Globs over `SERVER__TOOL` names: tools the profile holds besides its servers' (`github__*_issue`, `*search*`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// The profile's own tool overrides, `{SERVER: {TOOL: override}}` with `TOOL` the tool's own name (new name,
    /// title, description, annotations, fixed or hidden parameters), applied over the server's own override to what
    /// the profile's clients see and call (`ad_registry::profile_overrides`); carried through export and import.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub overrides: serde_json::Value,
}

impl Profile {
    /// Checks the name, the sizes and the globs; a bad profile is refused with what to fix.
    pub fn validate(&self) -> Result<()> {
        check_name(&self.name)?;
        if self.description.len() > DESCRIPTION_MAX {
            return Err(Error::invalid(
                "description",
                format!("longer than {DESCRIPTION_MAX} bytes"),
            ));
        }
        if self.servers.len() > ENTRIES_MAX || self.tools.len() > ENTRIES_MAX {
            return Err(Error::invalid(
                "profile",
                format!("at most {ENTRIES_MAX} servers and {ENTRIES_MAX} tool globs"),
            ));
        }
        if self.servers.is_empty() && self.tools.is_empty() {
            return Err(Error::invalid(
                "profile",
                "it holds nothing: give at least one server or one tool glob (SERVER__TOOL, `*` and `?` allowed)",
            ));
        }
        for s in &self.servers {
            if s.is_empty()
                || s.len() > 128
                || s.chars().any(|c| c.is_control() || c == '*' || c == '?')
            {
                return Err(Error::invalid(
                    "server",
                    format!("`{s}` is not a server name (globs go in tools)"),
                ));
            }
        }
        for g in &self.tools {
            if g.trim().is_empty() || g.len() > GLOB_MAX || g.chars().any(char::is_control) {
                return Err(Error::invalid(
                    "tool glob",
                    format!("`{g}`: empty, control characters or over {GLOB_MAX} bytes"),
                ));
            }
        }
        if !self.overrides.is_null() && !self.overrides.is_object() {
            return Err(Error::invalid(
                "overrides",
                "an object (per tool), or absent",
            ));
        }
        Ok(())
    }

    /// Whether the profile holds `server` (with `tool`: that tool of it).
    pub fn allows(&self, server: &str, tool: Option<&str>) -> bool {
        if self.servers.iter().any(|s| s == server) {
            return true;
        }
        match tool {
            Some(tool) => self.tools.iter().any(|g| matches_tool(g, server, tool)),
            None => self.tools.iter().any(|g| may_name_server(g, server)),
        }
    }
}

/// `[A-Za-z0-9_-]`, 1 to [`NAME_MAX`] characters.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.len() > NAME_MAX
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(Error::invalid(
            "profile name",
            format!(
                "`{}`: 1 to {NAME_MAX} of A-Z a-z 0-9 _ -",
                name.chars().take(80).collect::<String>()
            ),
        ));
    }
    Ok(())
}

/// Whether `glob` matches `server__tool` (without building the string).
fn matches_tool(glob: &str, server: &str, tool: &str) -> bool {
    let name: Vec<char> = server
        .chars()
        .chain("__".chars())
        .chain(tool.chars())
        .collect();
    glob_chars(&glob.chars().collect::<Vec<_>>(), &name)
}

/// Whether `glob` can match some tool of `server`: its part before the first `__` matches the server name, or it
/// begins with a wildcard that can stand for any server.
fn may_name_server(glob: &str, server: &str) -> bool {
    match glob.split_once("__") {
        Some((head, _)) => {
            let head: Vec<char> = head.chars().collect();
            // `*foo__bar`: the star may stand for `server__foo`'s start too.
            glob_chars(&head, &server.chars().collect::<Vec<_>>()) || head.first() == Some(&'*')
        }
        None => glob.starts_with('*') || glob.starts_with('?'),
    }
}

/// `*` matches any run of characters, `?` any one; everything else matches itself.
pub fn glob_matches(pattern: &str, name: &str) -> bool {
    glob_chars(
        &pattern.chars().collect::<Vec<_>>(),
        &name.chars().collect::<Vec<_>>(),
    )
}

fn glob_chars(p: &[char], n: &[char]) -> bool {
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(servers: &[&str], tools: &[&str]) -> Profile {
        Profile {
            name: "dev".into(),
            servers: servers.iter().map(|s| s.to_string()).collect(),
            tools: tools.iter().map(|s| s.to_string()).collect(),
            ..Profile::default()
        }
    }

    #[test]
    fn servers_and_tool_globs_decide_what_a_profile_holds() {
        let p = profile(&["fs"], &["github__*_issue", "crm__get_?"]);
        assert!(p.allows("fs", Some("read_file")));
        assert!(p.allows("fs", None));
        assert!(p.allows("github", Some("create_issue")));
        assert!(!p.allows("github", Some("create_pull_request")));
        assert!(
            p.allows("github", None),
            "a glob naming the server puts it in the profile"
        );
        assert!(p.allows("crm", Some("get_a")));
        assert!(!p.allows("crm", Some("get_ab")));
        assert!(!p.allows("slack", None));
        assert!(!p.allows("slack", Some("post")));
        let any = profile(&[], &["*search*"]);
        assert!(any.allows("web", Some("web_search")));
        assert!(any.allows("web", None));
        assert!(!any.allows("web", Some("fetch")));
    }

    #[test]
    fn bad_profiles_are_refused_with_what_to_fix() {
        assert!(profile(&["fs"], &[]).validate().is_ok());
        let mut p = profile(&[], &[]);
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("holds nothing")
        );
        p = profile(&["fs"], &[]);
        p.name = "a b".into();
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("profile name")
        );
        p.name = "x".repeat(NAME_MAX + 1);
        assert!(p.validate().is_err());
        let p = profile(&["f*"], &[]);
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("globs go in tools")
        );
        let mut p = profile(&["fs"], &[]);
        p.overrides = serde_json::json!([1]);
        assert!(p.validate().is_err());
        assert!(glob_matches("a*c", "abbbc") && !glob_matches("a*c", "abd"));
    }
}
