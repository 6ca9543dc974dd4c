//! Why a confined server failed, read from what it printed: the paths the sandbox refused it (a runtime's `EACCES`
//! and `Permission denied` messages, Node's `ERR_MODULE_NOT_FOUND`, Python's tracebacks, a file it looked for in its
//! own HOME that the user's HOME has), each with the exact command that grants it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ad_core::error::Error;
use ad_core::sandbox::{Grant, SandboxSettings};
use ad_registry::config::SandboxConfig;
use serde::Serialize;

use super::settings;

/// One path a confined server was refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The path as the user knows it (a file the server looked for in its own HOME is named in the user's).
    pub path: PathBuf,
    /// `read` or `write`.
    pub access: &'static str,
    /// The credential it is, where it is one (`.aws/credentials`): never granted by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential: Option<&'static str>,
    /// The line that showed it.
    pub evidence: String,
}

/// Words of a line that reports a refused or missing path.
const MARKERS: &[&str] = &[
    "the sandbox refused to let it",
    "permission denied",
    "eacces",
    "errno 13",
    "operation not permitted",
    "unable to access jarfile",
    "err_module_not_found",
    "cannot find module",
    "cannot find package",
    "enoent",
    "errno 2]",
    "no such file or directory",
];

/// The paths the server's output (`lines`, its stderr's tail) shows it was refused, given the grants it ran with,
/// its own HOME (`state_home`) and the user's.
pub fn refusals(
    lines: &[String],
    grants: &[Grant],
    state_home: &Path,
    user_home: Option<&Path>,
) -> Vec<Refusal> {
    let mut out: Vec<Refusal> = Vec::new();
    // Node prints an error's fields on lines of their own (`code: 'ENOENT'`, then `path: '/x'`): a `path:` line within
    // a few lines of a marker counts, as missing when the marker said so.
    let mut recent: Option<(usize, bool)> = None;
    for (i, line) in lines.iter().enumerate() {
        let lower = line.to_ascii_lowercase();
        let marked = MARKERS.iter().any(|m| lower.contains(m));
        let missing = lower.contains("enoent")
            || lower.contains("errno 2]")
            || lower.contains("no such file")
            || lower.contains("cannot find");
        if marked {
            recent = Some((i, missing));
        }
        let field =
            lower.trim_start().starts_with("path:") && recent.is_some_and(|(at, _)| i - at <= 6);
        if !marked && !field {
            continue;
        }
        let missing = if marked {
            missing
        } else {
            recent.is_some_and(|(_, m)| m)
        };
        for candidate in paths_in(line) {
            let Some(r) = refusal_of(&candidate, missing, line, grants, state_home, user_home)
            else {
                continue;
            };
            if !out.iter().any(|o| o.path == r.path) {
                out.push(r);
            }
        }
        if let Some(r) = missing_package(line, grants)
            && !out.iter().any(|o| o.path == r.path)
        {
            out.push(r);
        }
    }
    out
}

fn refusal_of(
    candidate: &Path,
    missing: bool,
    line: &str,
    grants: &[Grant],
    state_home: &Path,
    user_home: Option<&Path>,
) -> Option<Refusal> {
    let evidence = line.chars().take(300).collect::<String>();
    // A file it looked for in its own HOME that the user has in theirs (`~/.aws/credentials`).
    if let (Ok(rest), Some(home)) = (candidate.strip_prefix(state_home), user_home) {
        let theirs = home.join(rest);
        if rest.as_os_str().is_empty() || !theirs.exists() {
            return None;
        }
        return Some(Refusal {
            path: theirs,
            access: "read",
            credential: settings::credential_of(rest),
            evidence,
        });
    }
    if missing && candidate.exists() {
        // A line about something missing names other paths too (`imported from /x/index.js`): not refused.
        return None;
    }
    if missing {
        // `Cannot find module '/x/y'` for a file that is `/x/y.js`.
        let js = PathBuf::from(format!("{}.js", candidate.display()));
        if !js.exists() || covered(grants, &js, false) {
            return None;
        }
        return Some(Refusal {
            path: js,
            access: "read",
            credential: None,
            evidence,
        });
    }
    if !candidate.exists() && !candidate.parent().is_some_and(Path::exists) {
        return None;
    }
    let credential = user_home
        .and_then(|h| candidate.strip_prefix(h).ok())
        .and_then(settings::credential_of);
    let access = if covered(grants, candidate, false) || !candidate.exists() {
        if covered(grants, candidate, true) {
            return None;
        }
        "write"
    } else {
        "read"
    };
    Some(Refusal {
        path: candidate.to_path_buf(),
        access,
        credential,
        evidence,
    })
}

/// `Cannot find package 'x' imported from /p/build/index.js`: the `node_modules/x` above the importer that exists
/// but was not granted.
fn missing_package(line: &str, grants: &[Grant]) -> Option<Refusal> {
    let rest = &line[line.find("Cannot find package '")? + "Cannot find package '".len()..];
    let (package, after) = rest.split_once('\'')?;
    let importer = after.trim_start().strip_prefix("imported from")?.trim();
    let importer = Path::new(importer.trim_matches(['\'', '"']));
    importer.ancestors().find_map(|dir| {
        let p = dir.join("node_modules").join(package);
        (p.exists() && !covered(grants, &p, false)).then(|| Refusal {
            path: dir.join("node_modules"),
            access: "read",
            credential: None,
            evidence: line.chars().take(300).collect(),
        })
    })
}

/// Whether `p` is inside a grant (with write, when `write`).
fn covered(grants: &[Grant], p: &Path, write: bool) -> bool {
    grants
        .iter()
        .any(|g| p.starts_with(&g.path) && (g.write || !write))
}

/// The absolute paths a line names: quoted, or plain words starting with `/` (trailing punctuation cut).
fn paths_in(line: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut push = |s: &str| {
        let s = s.trim_end_matches([':', ',', '.', ')', ';', ']']);
        let s = s.strip_prefix("file://").unwrap_or(s);
        if s.starts_with('/') && s.len() > 1 && !out.iter().any(|p: &PathBuf| p == Path::new(s)) {
            out.push(PathBuf::from(s));
        }
    };
    for (i, part) in line.split(['\'', '"', '`']).enumerate() {
        if i % 2 == 1 {
            push(part);
        } else {
            for word in part.split([' ', '(', '\t']) {
                push(word);
            }
        }
    }
    out
}

/// A confined start, as the refusal reader needs it: the same inputs the plan was built from.
pub struct Start<'a> {
    pub config: &'a SandboxConfig,
    pub server: &'a str,
    pub program: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub settings: &'a SandboxSettings,
}

impl Start<'_> {
    /// A failed start explained, when what it printed (`lines`) shows the sandbox refused it something: a
    /// `sandbox_denied` error naming each path and the command that grants it, with its last stderr lines.
    pub fn failure(&self, lines: &[String]) -> Option<Error> {
        if !self.config.enabled || !self.settings.enabled {
            return None;
        }
        let found = self.refusals(lines);
        if found.is_empty() {
            return None;
        }
        let tail: Vec<&str> = lines
            .iter()
            .rev()
            .take(10)
            .rev()
            .map(String::as_str)
            .collect();
        Some(Error::SandboxDenied {
            server: self.server.to_owned(),
            message: format!(
                "it stopped after {}; last stderr lines:\n{}",
                advice(self.server, &found, self.settings),
                tail.join("\n")
            ),
        })
    }

    /// The refusals a start's output shows, against the grants that start had.
    pub fn refusals(&self, lines: &[String]) -> Vec<Refusal> {
        let grants = super::grants(
            self.config,
            self.server,
            self.program,
            self.args,
            self.env,
            self.settings,
        );
        let state_home = super::state_dir(self.config, self.server).join("home");
        refusals(
            lines,
            &grants,
            &state_home,
            self.config.user_home.as_deref(),
        )
    }
}

/// What to tell the user: each refused path and the command that grants it (the user's other grants of that kind
/// kept, since `--read`/`--write` replace their list), or for a credential that it is one.
pub fn advice(server: &str, refusals: &[Refusal], settings: &SandboxSettings) -> String {
    let mut parts = Vec::new();
    for (access, flag, existing) in [
        ("read", "--read", &settings.read),
        ("write", "--write", &settings.write),
    ] {
        let new: Vec<&Refusal> = refusals.iter().filter(|r| r.access == access).collect();
        if new.is_empty() {
            continue;
        }
        let names: Vec<String> = new
            .iter()
            .map(|r| match r.credential {
                Some(c) => format!(
                    "{} (a credential, `~/{c}`: never granted by default)",
                    r.path.display()
                ),
                None => r.path.display().to_string(),
            })
            .collect();
        let mut cmd = format!("agent-discover sandbox set {}", shell_word(server));
        for p in existing.iter().chain(new.iter().map(|r| &r.path)) {
            cmd.push_str(&format!(" {flag} {}", shell_word(&p.display().to_string())));
        }
        parts.push(format!(
            "the sandbox refused to let it {access} {}; to grant it: `{cmd}`",
            names.join(", ")
        ));
    }
    parts.join("; ")
}

/// `s` quoted for a POSIX shell where it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:@%,~".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::sandbox::GrantSource;

    fn g(path: &Path, write: bool) -> Grant {
        Grant {
            path: path.to_path_buf(),
            write,
            source: GrantSource::Runtime,
        }
    }

    #[test]
    fn runtime_messages_name_the_refused_paths_and_the_grant() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let state = root.join("state/home");
        std::fs::create_dir_all(home.join(".aws")).unwrap();
        std::fs::write(home.join(".aws/credentials"), "x").unwrap();
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube/config"), "k").unwrap();
        std::fs::create_dir_all(root.join("proj/node_modules/@modelcontextprotocol/sdk")).unwrap();
        std::fs::create_dir_all(root.join("proj/build")).unwrap();
        std::fs::write(root.join("data.txt"), "").unwrap();
        std::fs::create_dir_all(root.join("out")).unwrap();
        let grants = vec![
            g(&root.join("proj/build"), false),
            g(&root.join("out"), false),
        ];
        let lines: Vec<String> = vec![
            format!(
                "Error [ERR_MODULE_NOT_FOUND]: Cannot find package '@modelcontextprotocol/sdk' imported from {}",
                root.join("proj/build/index.js").display()
            ),
            format!(
                "Error: ENOENT: no such file or directory, open '{}'",
                state.join(".aws/credentials").display()
            ),
            format!(
                "PermissionError: [Errno 13] Permission denied: '{}'",
                root.join("data.txt").display()
            ),
            format!(
                "Error: EACCES: permission denied, mkdir '{}'",
                root.join("out/cache").display()
            ),
            "an unrelated line /usr/lib/x".into(),
            "  errno: -2,".into(),
            "  code: 'ENOENT',".into(),
            format!("  path: '{}'", state.join(".kube/config").display()),
        ];
        let r = refusals(&lines, &grants, &state, Some(&home));
        let paths: Vec<_> = r.iter().map(|r| (r.path.clone(), r.access)).collect();
        assert!(
            paths.contains(&(root.join("proj/node_modules"), "read")),
            "{r:?}"
        );
        assert!(
            paths.contains(&(home.join(".aws/credentials"), "read")),
            "{r:?}"
        );
        assert!(paths.contains(&(root.join("data.txt"), "read")), "{r:?}");
        assert!(paths.contains(&(root.join("out/cache"), "write")), "{r:?}");
        assert!(
            paths.contains(&(home.join(".kube/config"), "read")),
            "Node's `path:` field: {r:?}"
        );
        assert_eq!(r.len(), 5, "{r:?}");
        let cred = r
            .iter()
            .find(|r| r.path.ends_with(".aws/credentials"))
            .unwrap();
        assert_eq!(cred.credential, Some(".aws/credentials"));
        let settings = SandboxSettings {
            read: vec![PathBuf::from("/already")],
            ..SandboxSettings::default()
        };
        let text = advice("w x", &r, &settings);
        assert!(
            text.contains(&format!(
                "`agent-discover sandbox set 'w x' --read /already --read {}",
                root.join("proj/node_modules").display()
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("--write {}", root.join("out/cache").display())),
            "{text}"
        );
        assert!(text.contains("a credential"), "{text}");
    }
}
