//! What a path that a server's arguments or environment name grants, after it is resolved (`..` and symlinks): a
//! directory is data (writable: a filesystem server's root, a repository, a database's folder); a database file (or
//! one still to be created) makes its folder writable (journals sit beside it); another file is writable, its folder
//! readable; code is read-only, with its project; a file or folder in a dot-folder of HOME is read-only, alone. Never
//! HOME or above, agent-discover's data, or a system directory for writing.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use ad_registry::config::SandboxConfig;

use super::{places, project};

/// Extensions of database files (their folder is written: journals, WAL, lock files).
const DATABASE_EXTENSIONS: &[&str] = &[
    "db", "sqlite", "sqlite3", "db3", "duckdb", "ddb", "mdb", "kuzu", "lance",
];

/// The grants a named path gives: `(path, write)` each. A program (`--python VENV/bin/python`) is followed like the
/// server's own program: its chain of interpreters and installs, read-only.
pub(super) fn grants(
    value: &str,
    config: &SandboxConfig,
    path_env: &BTreeMap<String, String>,
) -> Vec<(PathBuf, bool)> {
    let Some(named) = places::absolute(value, config) else {
        return Vec::new();
    };
    let p = places::resolved(&named);
    if p.is_file() && is_executable(&p) && places::home_dot_entry(config, &named).is_none() {
        let home = places::home(config);
        return super::chain::follow(&named.to_string_lossy(), path_env, home.as_deref())
            .read
            .into_iter()
            .filter(|r| !places::covers_private(config, r))
            .map(|r| (r, false))
            .collect();
    }
    let mut out: Vec<(PathBuf, bool)> = grant(value, config).into_iter().collect();
    // A plain file's folder, read-only: a loader lists the folder of the file it is given (esbuild, which bundles a
    // config file before loading it, reads its directory; configs import their neighbours). Not for a file of a
    // dot-folder of HOME, nor when the folder is HOME or above, agent-discover's data or a system directory.
    if let Some((file, _)) = out.first()
        && file.is_file()
        && places::home_dot_entry(config, file).is_none()
        && let Some(folder) = file.parent()
        && !places::covers_private(config, folder)
        && !places::is_system(folder)
    {
        let folder = folder.to_path_buf();
        out.push((folder, false));
    }
    out
}

pub(super) fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = p;
        false
    }
}

/// One grant a named path gives: `(path, write)`.
pub(super) fn grant(value: &str, config: &SandboxConfig) -> Option<(PathBuf, bool)> {
    let named = places::absolute(value, config)?;
    let p = places::resolved(&named);
    if !p.exists() && !p.parent().is_some_and(Path::is_dir) {
        return None;
    }
    if places::home_dot_entry(config, &p).is_some() {
        return (p.exists() && !places::covers_private(config, &p)).then_some((p, false));
    }
    if p.is_dir() {
        if places::covers_private(config, &p) {
            return None;
        }
        return Some((p.clone(), !places::is_system(&p)));
    }
    if p.is_file() && project::is_code_file(&p) {
        let root = project::project_root(&p, places::home(config).as_deref());
        let root = if places::covers_private(config, &root) {
            p
        } else {
            root
        };
        return Some((root, false));
    }
    let parent = p.parent()?;
    let folder_is_writable = !places::covers_private(config, parent)
        && !places::is_system(parent)
        && !is_code_project(parent, config);
    if (!p.exists() || is_database(&p)) && folder_is_writable {
        // A database or a file to be created: its folder (journals beside it, a file created by rename).
        // A program in a `bin` folder (`--python VENV/bin/python`) is code: its prefix, read-only.
        return Some((parent.to_path_buf(), true));
    }
    if p.is_file() && !places::covers_private(config, &p) {
        return Some((p.clone(), !places::is_system(&p)));
    }
    None
}

/// Whether `dir` is a code project's own folder (a file beside the project's marker is configuration of code).
fn is_code_project(dir: &Path, config: &SandboxConfig) -> bool {
    project::project_root(dir, places::home(config).as_deref()) == dir
        && [
            "package.json",
            "pyproject.toml",
            "setup.py",
            "go.mod",
            "Cargo.toml",
        ]
        .iter()
        .any(|m| dir.join(m).is_file())
}

/// Whether a file is a database: its extension, or SQLite's header.
fn is_database(p: &Path) -> bool {
    if p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| DATABASE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
    {
        return true;
    }
    let mut head = [0u8; 16];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|_| &head == b"SQLite format 3\0")
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sandbox::tests::config;

    fn touch(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn data_is_writable_code_and_dot_folders_are_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cfg = config(&root);
        let home = root.join("home");
        std::fs::create_dir_all(root.join("data")).unwrap();
        touch(&home.join(".kube/config"), "k");
        touch(&home.join("notes/a.md"), "");
        touch(&home.join("db/app.sqlite"), "");
        touch(&home.join("proj/package.json"), "{}");
        touch(&home.join("proj/build/index.js"), "");
        touch(&home.join("proj/config.json"), "{}");
        touch(&home.join("memory.json"), "{}");
        let s = |p: PathBuf| p.display().to_string();
        assert_eq!(
            grant(&s(home.join(".kube/config")), &cfg),
            Some((home.join(".kube/config"), false))
        );
        assert_eq!(
            grant("~/.kube/config", &cfg),
            Some((home.join(".kube/config"), false))
        );
        assert_eq!(
            grant(&s(home.join("notes")), &cfg),
            Some((home.join("notes"), true))
        );
        assert_eq!(
            grant(&s(home.join("db/app.sqlite")), &cfg),
            Some((home.join("db"), true))
        );
        assert_eq!(
            grant(&s(home.join("db/new.db")), &cfg),
            Some((home.join("db"), true))
        );
        assert_eq!(
            grant(&s(home.join("proj/build/index.js")), &cfg),
            Some((home.join("proj"), false)),
            "code: its project, read-only"
        );
        assert_eq!(
            grant(&s(home.join("proj/config.json")), &cfg),
            Some((home.join("proj/config.json"), true)),
            "a file beside a project's marker: that file alone"
        );
        assert_eq!(
            grant(&s(home.join("memory.json")), &cfg),
            Some((home.join("memory.json"), true)),
            "a file directly in HOME: alone"
        );
        assert_eq!(grant(&s(home.clone()), &cfg), None);
        assert_eq!(grant(&s(root.join("data")), &cfg), None);
        assert_eq!(
            grant(&s(home.join("notes/../notes/a.md")), &cfg),
            Some((home.join("notes/a.md"), true)),
            "`..` resolved"
        );
        assert_eq!(
            grant("/etc/hostname", &cfg),
            Some((PathBuf::from("/etc/hostname"), false))
        );
        assert_eq!(grant("/etc", &cfg), Some((PathBuf::from("/etc"), false)));
        // A plain file named in the arguments: the file, and its folder read-only (a loader lists beside it).
        let env = BTreeMap::new();
        assert_eq!(
            grants(&s(home.join("notes/a.md")), &cfg, &env),
            [(home.join("notes/a.md"), true), (home.join("notes"), false)]
        );
        assert_eq!(
            grants(&s(home.join("proj/config.json")), &cfg, &env),
            [
                (home.join("proj/config.json"), true),
                (home.join("proj"), false)
            ]
        );
        for alone in [home.join("memory.json"), home.join(".kube/config")] {
            assert_eq!(
                grants(&s(alone.clone()), &cfg, &env).len(),
                1,
                "{}",
                alone.display()
            );
        }
    }
}
