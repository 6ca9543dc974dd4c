//! The policy set in force (a handle every call path shares): loaded from its files, put in force only when it
//! loads, asked about calls, and described for `status`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde::Serialize;
use serde_json::{Value, json};

use crate::call::{Call, Decision, EXTENSION, LoadError, Outcome};
use crate::engine::{self, PolicyInfo};

/// The policy set in force and where it comes from; one per process, cheap to clone (a handle).
#[derive(Clone, Default)]
pub struct Policies {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// A directory of `*.cedar` files, or one file; `None`: no policies.
    source: Option<PathBuf>,
    /// Some policy is in force: one atomic load decides for every call while there is none.
    any: AtomicBool,
    set: RwLock<Arc<engine::Set>>,
    /// Bumped by every load attempt, good or bad, so a watcher can tell that a change was read.
    attempts: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default, Clone, Serialize)]
struct State {
    /// Bumped each time a set is put in force.
    generation: u64,
    loaded_at_ms: Option<u64>,
    files: Vec<String>,
    /// A fingerprint of the set in force (its files' names and texts), to tell whether replicas read the same.
    digest: String,
    /// The last load's failure, while the set in force is an older one.
    error: Option<LoadError>,
    error_at_ms: Option<u64>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("source", &self.shared.source)
            .field("count", &self.read().len())
            .finish()
    }
}

/// Milliseconds since the epoch (the application formats them).
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl Policies {
    /// The policies of `source` (a directory of `*.cedar` files or one file), loaded now; a source that does not load
    /// gives an empty set and says why in [`Policies::status`]. A missing directory is an empty set.
    pub fn open(source: PathBuf) -> Policies {
        let p = Policies {
            shared: Arc::new(Shared {
                source: Some(source),
                ..Default::default()
            }),
        };
        let _ = p.reload();
        p
    }

    /// Where the policies come from.
    pub fn source(&self) -> Option<PathBuf> {
        self.shared.source.clone()
    }

    fn read(&self) -> Arc<engine::Set> {
        self.shared
            .set
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether any policy is in force (one atomic load).
    pub fn active(&self) -> bool {
        self.shared.any.load(Ordering::Acquire)
    }

    /// Whether some policy could apply to a call of `tool` on `server` (by its scope, whatever its conditions): such
    /// calls are evaluated, the others go on untouched. Cheap: one atomic load while no policy is in force.
    pub fn covers(&self, server: &str, tool: &str) -> bool {
        self.active() && self.read().covers(server, tool)
    }

    /// The policies' outcome for `call`; `None` when no policy applies to the tool (the call is not policed).
    pub fn evaluate(&self, call: &Call<'_>) -> Option<Decision> {
        if !self.active() {
            return None;
        }
        self.read().decide(call)
    }

    /// [`Policies::evaluate`] for the call path: an allowed call's decision names no policy and gives no reason
    /// (nothing on the call path reads them for an allowed call; working them out costs a sort and a format).
    pub fn evaluate_call(&self, call: &Call<'_>) -> Option<Decision> {
        if !self.active() {
            return None;
        }
        self.read().decide_as(call, false)
    }

    /// A dry run of `call` against the set in force: the decision, or `allow` by no policy when none applies.
    pub fn test(&self, call: &Call<'_>) -> Value {
        let set = self.read();
        let covered = set.covers(call.server, call.tool);
        let decision = if self.active() {
            set.decide(call)
        } else {
            None
        };
        match decision {
            Some(d) => json!({
                "outcome": d.outcome,
                "policed": true,
                "decided_by": d.policies,
                "reason": d.reason,
            }),
            None => json!({
                "outcome": Outcome::Allow,
                "policed": covered,
                "decided_by": [],
                "reason": "no policy applies to this tool: the call is not policed",
            }),
        }
    }

    /// The policies in force.
    pub fn list(&self) -> Vec<PolicyInfo> {
        self.read().infos()
    }

    /// Reads the source again and puts the set in force when it loads; else keeps the one in force and records why.
    pub fn reload(&self) -> Result<usize, LoadError> {
        let Some(source) = &self.shared.source else {
            return Ok(0);
        };
        let loaded = load(source);
        let mut state = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.attempts.fetch_add(1, Ordering::AcqRel);
        match loaded {
            Ok((set, files)) => {
                let n = set.len();
                let changed = state.error.is_some() || state.files != files || {
                    let old = self.read();
                    old.text() != set.text()
                };
                state.error = None;
                state.error_at_ms = None;
                if changed || state.loaded_at_ms.is_none() {
                    state.generation += 1;
                    state.loaded_at_ms = Some(now());
                    state.digest = digest(&files, set.text());
                    state.files = files;
                    *self.shared.set.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(set);
                    self.shared.any.store(n > 0, Ordering::Release);
                    // Info only when there are policies: every CLI command opens the registry, and an empty set is
                    // the default, not news.
                    if n > 0 {
                        tracing::info!(policies = n, source = %source.display(), "policies loaded");
                    } else {
                        tracing::debug!(source = %source.display(), "no policies");
                    }
                }
                Ok(n)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the policy files do not load; the last good policies stay in force");
                state.error = Some(e.clone());
                state.error_at_ms = Some(now());
                Err(e)
            }
        }
    }

    /// What `status` shows: where the policies come from, how many are in force, since when (milliseconds since the
    /// epoch), and the last load's failure while an older set stays in force.
    pub fn status(&self) -> Value {
        let state = self
            .shared
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        json!({
            "source": self.shared.source,
            "policies": self.read().len(),
            "generation": state.generation,
            "loaded_at_ms": state.loaded_at_ms,
            "files": state.files,
            "digest": state.digest,
            "error": state.error,
            "error_at_ms": state.error_at_ms,
        })
    }

    /// Validates `file` (or every policy file of a directory) without putting anything in force.
    pub fn check(path: &Path) -> Result<Vec<PolicyInfo>, LoadError> {
        load(path).map(|(set, _)| set.infos())
    }

    /// Validates policy text as one file named `inline.cedar`.
    pub fn check_text(text: &str) -> Result<Vec<PolicyInfo>, LoadError> {
        engine::Set::compile(&[(PathBuf::from("inline.cedar"), text.to_owned())]).map(|s| s.infos())
    }
}

/// FNV-1a (64 bits) over the files' names (not their directories: replicas may mount them elsewhere) and the texts:
/// equal on every replica that reads the same files.
fn digest(files: &[String], text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let names = files.iter().map(|f| {
        Path::new(f)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    for part in names.chain([text.to_owned()]) {
        for b in part.bytes().chain([0]) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

/// The policy files of `source`, sorted by name: the file itself, or the directory's `*.cedar` files (a missing
/// directory has none).
fn files_of(source: &Path) -> Result<Vec<PathBuf>, LoadError> {
    if source.is_file() {
        return Ok(vec![source.to_path_buf()]);
    }
    let entries = match std::fs::read_dir(source) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(LoadError::new(Some(source), e.to_string())),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == EXTENSION) && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

fn load(source: &Path) -> Result<(engine::Set, Vec<String>), LoadError> {
    let mut texts = Vec::new();
    for f in files_of(source)? {
        let text =
            std::fs::read_to_string(&f).map_err(|e| LoadError::new(Some(&f), e.to_string()))?;
        texts.push((f, text));
    }
    let names = texts.iter().map(|(f, _)| f.display().to_string()).collect();
    Ok((engine::Set::compile(&texts)?, names))
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
