//! Visibility per group: which servers and tools the members of a group may list and call. An admin group sees
//! everything (and everyone's call log); a user in no configured group gets the default group's rules, or sees no
//! server at all when none is configured.

use std::collections::BTreeMap;

use serde::Deserialize;

use ad_core::identity::Principal;

/// One group's rule: glob patterns (`*` any run of characters, `?` one) on server names and on exposed tool names
/// (`server__tool`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct GroupRule {
    #[serde(default)]
    pub servers: Vec<String>,
    /// Absent: every tool of the servers above.
    #[serde(default = "all")]
    pub tools: Vec<String>,
}

fn all() -> Vec<String> {
    vec!["*".to_owned()]
}

/// The rules of every group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub admin_groups: Vec<String>,
    pub groups: BTreeMap<String, GroupRule>,
    /// The group whose rule applies to a user in none of `groups` (and not an admin); `None`: no server at all.
    pub default_group: Option<String>,
}

impl Rules {
    pub fn is_admin(&self, p: &Principal) -> bool {
        p.groups.iter().any(|g| self.admin_groups.contains(g))
    }

    fn rules_of<'a>(&'a self, p: &'a Principal) -> impl Iterator<Item = &'a GroupRule> + 'a {
        let mine: Vec<&GroupRule> = p.groups.iter().filter_map(|g| self.groups.get(g)).collect();
        let fallback = if mine.is_empty() {
            self.default_group.as_ref().and_then(|d| self.groups.get(d))
        } else {
            None
        };
        mine.into_iter().chain(fallback)
    }

    /// Whether `p` may see `server` (and, when given, its `tool`).
    pub fn allows(&self, p: &Principal, server: &str, tool: Option<&str>) -> bool {
        if self.is_admin(p) {
            return true;
        }
        self.rules_of(p).any(|r| {
            r.servers.iter().any(|pat| glob(pat, server))
                && tool.is_none_or(|t| {
                    let exposed = format!("{server}__{t}");
                    r.tools
                        .iter()
                        .any(|pat| glob(pat, &exposed) || glob(pat, t))
                })
        })
    }
}

/// `*` matches any run of characters, `?` exactly one; everything else itself.
pub fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(groups: &[&str]) -> Principal {
        Principal {
            sub: "u".into(),
            issuer: "i".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            client_id: None,
            scopes: vec![],
            token: None,
        }
    }

    #[test]
    fn globs() {
        assert!(glob("*", ""));
        assert!(glob("git*", "github"));
        assert!(glob("fs__read_?", "fs__read_a"));
        assert!(!glob("fs__read_?", "fs__read_ab"));
        assert!(glob("*__echo", "one__echo"));
        assert!(!glob("git*", "agit"));
    }

    #[test]
    fn groups_admins_and_the_default() {
        let mut rules = Rules {
            admin_groups: vec!["admins".into()],
            ..Rules::default()
        };
        rules.groups.insert(
            "dev".into(),
            GroupRule {
                servers: vec!["one".into()],
                tools: vec!["one__echo".into()],
            },
        );
        rules.groups.insert(
            "ops".into(),
            GroupRule {
                servers: vec!["t*".into()],
                tools: all(),
            },
        );
        let dev = user(&["dev"]);
        assert!(rules.allows(&dev, "one", None));
        assert!(rules.allows(&dev, "one", Some("echo")));
        assert!(!rules.allows(&dev, "one", Some("add")));
        assert!(!rules.allows(&dev, "two", None));
        let both = user(&["dev", "ops"]);
        assert!(rules.allows(&both, "two", Some("x")));
        assert!(rules.allows(&user(&["admins"]), "anything", Some("x")));
        let nobody = user(&["visitors"]);
        assert!(!rules.allows(&nobody, "one", None));
        rules.default_group = Some("ops".into());
        assert!(rules.allows(&nobody, "two", None));
        assert!(
            !rules.allows(&dev, "two", None),
            "a member of a listed group does not get the default"
        );
    }
}
