//! The visibility rules read again when the identity settings file changes (issue 30): a watch on the file's
//! directory (a save by rename replaces the file), debounced as `import --watch` is. A file that no longer reads
//! (bad TOML, an unknown default group, no issuer, gone) keeps the rules in force and says so on stderr. Only the
//! rules change: the issuer, audiences, scopes and introspection endpoint stay as they were at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;
use tokio_util::sync::CancellationToken;

use super::{Identity, IdentityConfig};

/// How long the file must stay quiet after a change before it is read: editors write twice and rename.
const DEBOUNCE: Duration = Duration::from_millis(150);

impl Identity {
    /// Watches the settings file the rules came from (nothing when they came from variables only) until `cancel`;
    /// `changed` runs after each change of the rules in force.
    pub fn watch_rules(
        self: &Arc<Self>,
        cancel: CancellationToken,
        changed: impl Fn() + Send + 'static,
    ) {
        let Some(file) = self.config.file.clone() else {
            return;
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let name = file.file_name().map(|n| n.to_os_string());
        let watched = name.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let ours = match &res {
                Ok(ev) => {
                    !matches!(ev.kind, notify::EventKind::Access(_))
                        && ev.paths.iter().any(|p| p.file_name() == watched.as_deref())
                }
                Err(_) => true,
            };
            if ours {
                let _ = tx.send(());
            }
        });
        let dir = dir_of(&file);
        let watcher = watcher.and_then(|mut w| {
            w.watch(&dir, notify::RecursiveMode::NonRecursive)
                .map(|()| w)
        });
        let watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                return tracing::warn!(error = %e, file = %file.display(), "cannot watch the identity settings; its rules are read at start only");
            }
        };
        let identity = Arc::downgrade(self);
        tokio::spawn(async move {
            let _watcher = watcher;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ev = rx.recv() => if ev.is_none() { return },
                }
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
                let Some(identity) = identity.upgrade() else {
                    return;
                };
                if identity.reload(&file) {
                    changed();
                }
            }
        });
    }

    /// Reads `file` again and puts its rules in force, or keeps the current ones (with a warning) when it does not
    /// read. Returns whether the rules changed.
    pub fn reload(&self, file: &Path) -> bool {
        match IdentityConfig::reread(file) {
            Ok(Some(c)) => {
                if *self.rules() == c.rules {
                    return false;
                }
                self.set_rules(c.rules);
                tracing::info!(file = %file.display(), "identity rules reloaded");
                true
            }
            Ok(None) => {
                tracing::warn!(file = %file.display(), "the identity settings name no issuer now; the previous rules stay");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "the identity settings do not read; the previous rules stay");
                false
            }
        }
    }
}

fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_file_replaces_the_rules_a_bad_one_keeps_them() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rules.toml");
        let text = |servers: &str| {
            format!("issuer = \"https://as.example\"\n[groups.dev]\nservers = [\"{servers}\"]\n")
        };
        std::fs::write(&file, text("one")).unwrap();
        let identity = Identity::new(IdentityConfig::reread(&file).unwrap().unwrap());
        assert_eq!(identity.config.file.as_deref(), Some(file.as_path()));
        let servers = |i: &Identity| i.rules().groups["dev"].servers.clone();
        assert!(!identity.reload(&file), "unchanged");
        std::fs::write(&file, text("two")).unwrap();
        assert!(identity.reload(&file));
        assert_eq!(servers(&identity), ["two"]);
        for bad in [
            "[groups.dev\n",
            "issuer = \"https://as.example\"\ndefault_group = \"nobody\"\n",
        ] {
            std::fs::write(&file, bad).unwrap();
            assert!(!identity.reload(&file), "{bad}");
            assert_eq!(servers(&identity), ["two"], "the rules in force stay");
        }
        std::fs::remove_file(&file).unwrap();
        assert!(!identity.reload(&file));
        assert_eq!(servers(&identity), ["two"]);
    }
}
