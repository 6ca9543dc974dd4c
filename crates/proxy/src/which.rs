//! Where a program is on the PATH a child will get: the one lookup the launcher (before a start) and the runtime
//! fetch (is there an npm to install Node with?) share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The PATH a child with `env` gets: its own, else ours.
pub(crate) fn child_path(env: &BTreeMap<String, String>) -> String {
    env.get("PATH")
        .cloned()
        .or_else(|| std::env::var("PATH").ok())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into())
}

/// `program` as the child's PATH finds it (a name with a `/` is taken as it is).
pub(crate) fn find(program: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return p.is_file().then_some(p);
    }
    std::env::split_paths(&child_path(env))
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

fn executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    p.is_file()
}
