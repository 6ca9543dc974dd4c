//! The user's own settings a confined server still sees although its HOME is its state directory: git's identity
//! (name and e-mail, passed as `GIT_AUTHOR_*`/`GIT_COMMITTER_*`, nothing else of the user's git config), and files
//! under HOME a grant names (`~/.kube/config`, `~/.tool-versions`), linked at the same place in the server's HOME so
//! that `$HOME/...` finds them. Credentials are never among them unless a grant names them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ad_core::sandbox::Grant;

/// The variables git and GitPython take an author and committer from.
pub(super) const GIT_IDENTITY: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// Files under HOME that hold credentials or keys: never granted by derivation (a server's arguments naming one, or
/// the user's own grant, still do). Listed so a refusal can say what it was.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws/credentials",
    ".aws/config",
    ".kube/config",
    ".config/gh",
    ".docker/config.json",
    ".git-credentials",
    ".netrc",
    ".gnupg",
    ".config/gcloud",
    ".azure",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
];

/// Git's identity from the user's config (`~/.gitconfig`, then `$XDG_CONFIG_HOME/git/config` or
/// `~/.config/git/config`), as the four variables, where the user set it and our environment does not already.
pub(super) fn git_identity(home: &Path) -> BTreeMap<String, String> {
    let mut name = None;
    let mut email = None;
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".config"));
    // The first file that sets a key wins, as git reads `~/.gitconfig` after the XDG file (later wins).
    for file in [home.join(".gitconfig"), xdg.join("git/config")] {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let (n, e) = user_section(&text);
        name = name.or(n);
        email = email.or(e);
    }
    let mut out = BTreeMap::new();
    for (var, value) in [
        ("GIT_AUTHOR_NAME", &name),
        ("GIT_COMMITTER_NAME", &name),
        ("GIT_AUTHOR_EMAIL", &email),
        ("GIT_COMMITTER_EMAIL", &email),
    ] {
        if let Some(v) = value
            && std::env::var_os(var).is_none()
        {
            out.insert(var.to_owned(), v.clone());
        }
    }
    out
}

/// `user.name` and `user.email` of a git config file's text (the last of each wins).
fn user_section(text: &str) -> (Option<String>, Option<String>) {
    let mut in_user = false;
    let (mut name, mut email) = (None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_user = line
                .trim_start_matches('[')
                .trim_end_matches(']')
                .trim()
                .eq_ignore_ascii_case("user");
            continue;
        }
        if !in_user || line.starts_with(['#', ';']) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value
            .split([';', '#'])
            .next()
            .unwrap_or("")
            .trim()
            .trim_matches('"')
            .to_owned();
        if value.is_empty() {
            continue;
        }
        match key.trim().to_ascii_lowercase().as_str() {
            "name" => name = Some(value),
            "email" => email = Some(value),
            _ => {}
        }
    }
    (name, email)
}

/// Links each granted file or folder under the user's HOME at the same place in the server's HOME (`state_home`),
/// where nothing is there yet: `$HOME/.kube/config` then reaches the user's file, read as granted.
pub(super) fn mirror(grants: &[Grant], user_home: &Path, state_home: &Path) {
    for g in grants {
        let Ok(rest) = g.path.strip_prefix(user_home) else {
            continue;
        };
        if rest.as_os_str().is_empty() || !g.path.exists() {
            continue;
        }
        let link = state_home.join(rest);
        if link.symlink_metadata().is_ok() {
            continue;
        }
        if let Some(parent) = link.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        #[cfg(unix)]
        let _ = std::os::unix::fs::symlink(&g.path, &link);
    }
}

/// Which credential file of HOME `path` (in the user's HOME or the server's) is, if any: `~/.aws/credentials`.
pub fn credential_of(rest: &Path) -> Option<&'static str> {
    CREDENTIALS.iter().copied().find(|c| rest.starts_with(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_identity_is_read_from_the_user_section_only() {
        let text = "[core]\n\tname = not-this\n[user]\n\tname = Ada Lovelace ; comment\n\temail = \"ada@example.org\"\n[credential]\n\thelper = store\n";
        let (n, e) = user_section(text);
        assert_eq!(n.as_deref(), Some("Ada Lovelace"));
        assert_eq!(e.as_deref(), Some("ada@example.org"));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitconfig"), text).unwrap();
        let env = git_identity(dir.path());
        if std::env::var_os("GIT_AUTHOR_NAME").is_none() {
            assert_eq!(env["GIT_AUTHOR_NAME"], "Ada Lovelace");
        }
        if std::env::var_os("GIT_COMMITTER_EMAIL").is_none() {
            assert_eq!(env["GIT_COMMITTER_EMAIL"], "ada@example.org");
        }
    }

    #[test]
    fn granted_files_under_home_appear_in_the_servers_home() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let state = dir.path().join("state");
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube/config"), "k").unwrap();
        std::fs::create_dir_all(&state).unwrap();
        let g = Grant {
            path: home.join(".kube/config"),
            write: false,
            source: ad_core::sandbox::GrantSource::User,
        };
        mirror(&[g], &home, &state);
        assert_eq!(
            std::fs::read_to_string(state.join(".kube/config")).unwrap(),
            "k"
        );
        assert_eq!(
            credential_of(Path::new(".aws/credentials")),
            Some(".aws/credentials")
        );
        assert_eq!(
            credential_of(Path::new(".config/gh/hosts.yml")),
            Some(".config/gh")
        );
    }
}
