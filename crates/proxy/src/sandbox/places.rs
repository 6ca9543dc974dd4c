//! Where a path stands for the sandbox: made absolute and resolved (`..` and symlinks), then told apart as private
//! (the user's HOME or above, agent-discover's data), system (read-only for everyone), or a dot-folder of HOME.

use std::path::{Component, Path, PathBuf};

use ad_registry::config::SandboxConfig;

/// System locations every runtime reads (absent ones grant nothing). `/etc` is whole: runtimes read many files there
/// (certificates, resolver, users, alternatives), and what is secret in it is readable by root only.
pub(super) const SYSTEM: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix/store",
    "/sys",
];

/// `value` as an absolute path (`~/` expanded to the user's HOME), or nothing for a relative one.
pub(super) fn absolute(value: &str, config: &SandboxConfig) -> Option<PathBuf> {
    let p = match value.strip_prefix("~/") {
        Some(rest) => config.user_home.as_ref()?.join(rest),
        None if value.starts_with('/') => PathBuf::from(value),
        None => return None,
    };
    (p.as_os_str().len() <= 4096).then_some(p)
}

/// `p` with `..` and symlinks resolved: the path itself where it exists, else its nearest existing ancestor's
/// resolved path with the rest appended (`..` taken lexically there).
pub(super) fn resolved(p: &Path) -> PathBuf {
    if let Ok(c) = p.canonicalize() {
        return c;
    }
    let lexical = lexical(p);
    let mut base = lexical.as_path();
    let mut rest = Vec::new();
    while let Some(parent) = base.parent() {
        rest.push(base.file_name().unwrap_or_default().to_owned());
        if let Ok(c) = parent.canonicalize() {
            return rest.iter().rev().fold(c, |acc, n| acc.join(n));
        }
        base = parent;
    }
    lexical
}

/// `p` with `.` dropped and `..` taken against the part before it (never above `/`).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether granting `p` would expose agent-discover's own files or every user file: `/`, the user's HOME or an
/// ancestor of it, the data directory or anything holding it, or anything inside the data directory (but the
/// directories it may lend: the runtimes and introspection's cache).
pub(super) fn covers_private(config: &SandboxConfig, p: &Path) -> bool {
    let p = p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    if p == Path::new("/") {
        return true;
    }
    let data = config
        .data_dir
        .canonicalize()
        .unwrap_or_else(|_| config.data_dir.clone());
    if data.starts_with(&p) {
        return true;
    }
    if p.starts_with(&data)
        && !config
            .grantable_in_data
            .iter()
            .any(|g| p.starts_with(g.canonicalize().unwrap_or_else(|_| g.clone())))
    {
        return true;
    }
    home(config).is_some_and(|h| h.starts_with(&p))
}

/// The user's HOME, resolved.
pub(super) fn home(config: &SandboxConfig) -> Option<PathBuf> {
    let h = config.user_home.as_ref()?;
    Some(h.canonicalize().unwrap_or_else(|_| h.clone()))
}

/// Whether `p` is in a system directory (never made writable by a derived grant).
pub(super) fn is_system(p: &Path) -> bool {
    SYSTEM.iter().any(|s| p.starts_with(s)) || p.starts_with("/proc") || p.starts_with("/dev")
}

/// The dot-folder of HOME holding `p` (`~/.kube` for `~/.kube/config`), or `p` itself for a dot-file of HOME.
pub(super) fn home_dot_entry(config: &SandboxConfig, p: &Path) -> Option<PathBuf> {
    let home = home(config)?;
    let rest = p.strip_prefix(&home).ok()?;
    let first = rest.components().next()?;
    first
        .as_os_str()
        .to_str()
        .is_some_and(|n| n.starts_with('.'))
        .then(|| home.join(first))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_takes_dot_dot_and_symlinks_even_for_a_path_not_yet_there() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("srv/mcp/bin")).unwrap();
        std::fs::create_dir_all(root.join("srv/mcp/servers")).unwrap();
        std::fs::write(root.join("srv/mcp/servers/x.py"), "").unwrap();
        std::os::unix::fs::symlink(root.join("srv/mcp"), root.join("link")).unwrap();
        assert_eq!(
            resolved(&root.join("srv/mcp/bin/../servers/x.py")),
            root.join("srv/mcp/servers/x.py")
        );
        assert_eq!(
            resolved(&root.join("link/servers/new.db")),
            root.join("srv/mcp/servers/new.db")
        );
        assert_eq!(
            resolved(&root.join("link/nothing/../servers/new.db")),
            root.join("srv/mcp/servers/new.db")
        );
    }
}
