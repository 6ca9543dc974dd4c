//! The policy files read again when they change: a watch on the policy directory (or on the directory of a single
//! policy file, since an editor's save by rename replaces the file), debounced so an editor's two writes and rename
//! are one reload. A set that no longer loads keeps the last good one in force ([`Policies::reload`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::Watcher;
use tokio_util::sync::CancellationToken;

use crate::policies::Policies;

/// How long the files must stay quiet after a change before they are read: editors write twice and rename.
const DEBOUNCE: Duration = Duration::from_millis(100);

impl Policies {
    /// Watches where the policies come from until `cancel`, reloading after each change. Must run inside a Tokio
    /// runtime. A directory that does not exist yet is created (it is the data directory's own), so policies
    /// dropped in later are noticed.
    pub fn watch(&self, cancel: CancellationToken) {
        let Some(source) = self.source() else {
            return;
        };
        let dir = if source.is_file() {
            dir_of(&source)
        } else {
            if !source.exists()
                && let Err(e) = std::fs::create_dir_all(&source)
            {
                return tracing::warn!(error = %e, dir = %source.display(), "cannot create the policy directory; policies are read at start only");
            }
            source.clone()
        };
        let only = source
            .is_file()
            .then(|| source.file_name().map(|n| n.to_os_string()))
            .flatten();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let ours = match &res {
                Ok(ev) => {
                    !matches!(ev.kind, notify::EventKind::Access(_))
                        && (only.is_none()
                            || ev.paths.iter().any(|p| p.file_name() == only.as_deref()))
                }
                Err(_) => true,
            };
            if ours {
                let _ = tx.send(());
            }
        });
        let watcher = watcher.and_then(|mut w| {
            w.watch(&dir, notify::RecursiveMode::NonRecursive)
                .map(|()| w)
        });
        let watcher = match watcher {
            Ok(w) => w,
            Err(e) => {
                return tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the policy files; they are read at start only");
            }
        };
        let policies = self.clone();
        tokio::spawn(async move {
            let _watcher = watcher;
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    ev = rx.recv() => if ev.is_none() { return },
                }
                while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
                let _ = policies.reload();
            }
        });
    }
}

fn dir_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}
