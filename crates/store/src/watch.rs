//! Notices commits that other agent-discover processes make to the shared database, so the dashboard updates when an
//! agent activates a server over stdio in another process. On a shared PostgreSQL registry the store's `LISTEN`
//! connection says so (every write transaction notifies); what follows is about the SQLite file.
//!
//! Why a file watch plus `PRAGMA data_version`, not a timer: every process writes the same SQLite file in WAL mode, and
//! a commit appends to `<db>-wal` (a checkpoint rewrites `<db>`), which the OS reports at once (inotify on Linux,
//! FSEvents on macOS). A file event alone is not proof of a foreign commit: our own writes and uncommitted pages
//! trigger it too. So each burst of events is followed by one `PRAGMA data_version` on our connection, a counter SQLite
//! changes only when *another* connection committed. Idle cost: zero wake-ups (a 2-second fingerprint poll, as the
//! TypeScript original does, wakes forever and still lags by up to 2 s). If the platform cannot watch files, we fall
//! back to checking `data_version` every [`FALLBACK_EVERY`], and say so in the log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::Watcher;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::Store;

pub const FALLBACK_EVERY: Duration = Duration::from_secs(5);
/// The trailing check after a burst of file events.
const SETTLE: Duration = Duration::from_millis(150);

/// Calls `changed` whenever another process has committed to `db_path` after this call, until `cancel`.
pub fn spawn(
    store: Store,
    db_path: &Path,
    changed: impl Fn() + Send + 'static,
    cancel: CancellationToken,
) {
    // A shared PostgreSQL registry says itself when any replica commits (LISTEN/NOTIFY): no file to watch.
    if let Some(mut changes) = store.remote_changes() {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = cancel.cancelled() => break,
                    r = changes.changed() => match r {
                        Ok(()) => changed(),
                        Err(_) => break,
                    },
                }
            }
        });
        return;
    }
    let kick = Arc::new(Notify::new());
    let watcher = start_watcher(db_path, kick.clone());
    if let Err(e) = &watcher {
        tracing::warn!(error = %e, every = ?FALLBACK_EVERY, "cannot watch the database for changes by other processes; checking on a timer instead");
    }
    // Read before returning, not in the task: a commit made after `spawn` returns is one the caller hears of (a call
    // waiting for an approval starts the watch, then records what it waits for).
    let mut seen = store.data_version().unwrap_or(0);
    tokio::spawn(async move {
        // Kept alive for as long as this task runs; dropping it stops the watch.
        let watcher = watcher.ok();
        // A commit's last step (the wal-index in `-shm`, written through mmap) makes no file event, so the check right
        // after the last event of a burst can be too early; one more check shortly after the burst settles catches it.
        // The settle deadline is the clock thread's, not a tokio timer: our own writes (the call metrics, every few
        // hundred milliseconds while calls flow) make events too, and a pending tokio timer costs every proxied
        // call (`clock.rs`).
        let mut settle: Option<std::time::Instant> = None;
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = kick.notified(), if watcher.is_some() => {
                    settle = Some(std::time::Instant::now() + SETTLE);
                }
                _ = ad_core::clock::sleep_until(settle.unwrap_or_else(std::time::Instant::now)), if settle.is_some() => {
                    settle = None;
                }
                _ = tokio::time::sleep(FALLBACK_EVERY), if watcher.is_none() => {}
            }
            match store.data_version() {
                Ok(v) if v != seen => {
                    seen = v;
                    changed();
                }
                Ok(_) => {}
                Err(e) => tracing::debug!(error = %e, "reading data_version failed"),
            }
        }
        drop(watcher);
    });
}

/// Watches the database's directory (the `-wal` file comes and goes, so the file itself cannot be watched) and kicks
/// for any event on a file whose name starts with the database's.
fn start_watcher(db_path: &Path, kick: Arc<Notify>) -> notify::Result<notify::RecommendedWatcher> {
    let dir: PathBuf = match db_path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let prefix = db_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(event) = res else { return };
        if matches!(event.kind, notify::EventKind::Access(_)) {
            return;
        }
        let ours = event.paths.iter().any(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
        });
        if ours {
            // A permit is stored if the task is busy, so a burst costs one check, and none is lost.
            kick.notify_one();
        }
    })?;
    watcher.watch(&dir, notify::RecursiveMode::NonRecursive)?;
    Ok(watcher)
}
