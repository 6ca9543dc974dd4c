//! Paging's vocabulary and its store, data only: the limits and settings, what paging did to a result, a page, the
//! counters, and the kept results themselves (bounded in time and bytes, the least recently read evicted). A leaf:
//! `pages.rs` pages results and reads them back through `Inner`, which holds the [`Pages`].

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use ad_core::error::{Error, Result};
use ad_core::identity::Principal;

use crate::sync::lock;

/// The default limit: 64 KiB of text. Claude Code refuses MCP tool output over 25,000 tokens by default
/// (`MAX_MCP_OUTPUT_TOKENS`) and warns from 10,000; text runs 3 to 4 bytes a token (JSON and code nearer 3), so 64 KiB
/// is 16k to 22k tokens: under that bound for any text, a small share of a 128k-200k context, and the size of code
/// mode's own result limit.
pub const DEFAULT_PAGE_BYTES: usize = 64 * 1024;
/// The smallest limit a server or a call may set (a smaller one would page ordinary answers).
pub const MIN_PAGE_BYTES: usize = 1024;
/// The largest page `read_result` and `resources/read` give at once.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// How long a kept result can be read after it was made.
pub const DEFAULT_KEEP: Duration = Duration::from_secs(3600);
/// How many bytes of kept results at most, together; the least recently read go first.
pub const DEFAULT_STORE_BYTES: usize = 256 * 1024 * 1024;
/// The scheme and authority of a kept result's URI.
pub const URI_PREFIX: &str = "agent-discover://results/";
/// The `_meta` key of a call's own limit.
pub const META_KEY: &str = "agent-discover/page_bytes";

/// The process-wide paging settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagingConfig {
    /// The default limit in bytes of text; 0 turns paging off (a server's or a call's own limit still applies).
    pub page_bytes: usize,
    pub keep: Duration,
    pub store_bytes: usize,
}

impl Default for PagingConfig {
    fn default() -> Self {
        PagingConfig {
            page_bytes: DEFAULT_PAGE_BYTES,
            keep: DEFAULT_KEEP,
            store_bytes: DEFAULT_STORE_BYTES,
        }
    }
}

impl PagingConfig {
    /// The defaults, overridden by `AGENT_DISCOVER_PAGE_BYTES` (0: off), `AGENT_DISCOVER_PAGE_KEEP_SECS` and
    /// `AGENT_DISCOVER_PAGE_STORE_BYTES`.
    pub fn from_env() -> Result<PagingConfig> {
        let mut c = PagingConfig::default();
        let read = |name: &'static str| -> Result<Option<u64>> {
            match std::env::var(name) {
                Ok(v) => v
                    .trim()
                    .parse::<u64>()
                    .map(Some)
                    .map_err(|_| Error::invalid(name, format!("`{v}` is not a whole number"))),
                Err(_) => Ok(None),
            }
        };
        if let Some(b) = read("AGENT_DISCOVER_PAGE_BYTES")? {
            c.page_bytes = check_limit(b, "AGENT_DISCOVER_PAGE_BYTES")?;
        }
        if let Some(s) = read("AGENT_DISCOVER_PAGE_KEEP_SECS")? {
            if s == 0 {
                return Err(Error::invalid(
                    "AGENT_DISCOVER_PAGE_KEEP_SECS",
                    "must be at least 1",
                ));
            }
            c.keep = Duration::from_secs(s);
        }
        if let Some(b) = read("AGENT_DISCOVER_PAGE_STORE_BYTES")? {
            c.store_bytes = b as usize;
        }
        Ok(c)
    }
}

/// A limit as given (by a server's setting, a call, the environment): 0 (off), or at least [`MIN_PAGE_BYTES`].
pub fn check_limit(bytes: u64, what: &'static str) -> Result<usize> {
    if bytes != 0 && bytes < MIN_PAGE_BYTES as u64 {
        return Err(Error::invalid(
            what,
            format!("a paging limit is 0 (off) or at least {MIN_PAGE_BYTES} bytes"),
        ));
    }
    Ok(bytes as usize)
}

/// One kept result.
pub(super) struct Kept {
    pub(super) text: Arc<str>,
    /// Who may read it: the caller's user (`issuer#sub`), `None` for a caller without one.
    pub(super) owner: Option<String>,
    pub(super) made: Instant,
    pub(super) used: Instant,
}

/// The kept results and their counters, in `Inner`.
#[derive(Default)]
pub(crate) struct Pages {
    pub(super) config: std::sync::Mutex<PagingConfig>,
    pub(super) kept: std::sync::Mutex<HashMap<String, Kept>>,
    pub(super) paged: AtomicU64,
    pub(super) saved: AtomicU64,
}

/// What paging did to one result.
#[derive(Debug, Clone)]
pub struct Paged {
    pub id: String,
    /// Bytes of text in the whole result.
    pub whole: usize,
    /// Bytes of text the agent got (the head).
    pub sent: usize,
}

impl Paged {
    /// The call log's note: how much of the result reached the agent.
    pub fn note(&self) -> String {
        format!(
            "[paged: {} of {} bytes sent, {} saved, {URI_PREFIX}{}] ",
            self.sent,
            self.whole,
            self.whole - self.sent,
            self.id
        )
    }
}

/// One page of a kept result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Page {
    pub id: String,
    pub offset: usize,
    pub total: usize,
    /// Where the next page starts; `None` after the last.
    pub next_offset: Option<usize>,
    pub text: String,
}

/// The paging counters, for `/metrics`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PagingStats {
    pub paged: u64,
    pub bytes_saved: u64,
    pub kept: usize,
    pub kept_bytes: usize,
}

impl PagingStats {
    /// Prometheus text lines.
    pub fn prometheus(&self) -> String {
        format!(
            "# HELP agent_discover_paged_results_total Tool results over their paging limit, sent as head and link.\n\
             # TYPE agent_discover_paged_results_total counter\n\
             agent_discover_paged_results_total {}\n\
             # HELP agent_discover_paged_bytes_saved_total Bytes of tool result text kept back from agents by paging.\n\
             # TYPE agent_discover_paged_bytes_saved_total counter\n\
             agent_discover_paged_bytes_saved_total {}\n\
             # HELP agent_discover_kept_results Large results kept to be read in pages.\n\
             # TYPE agent_discover_kept_results gauge\n\
             agent_discover_kept_results {}\n\
             # HELP agent_discover_kept_result_bytes Bytes of large results kept to be read in pages.\n\
             # TYPE agent_discover_kept_result_bytes gauge\n\
             agent_discover_kept_result_bytes {}\n",
            self.paged, self.bytes_saved, self.kept, self.kept_bytes
        )
    }
}

pub(super) fn owner_of(p: Option<&Principal>) -> Option<String> {
    p.map(|p| format!("{}#{}", p.issuer, p.sub))
}

pub(super) fn new_id() -> String {
    let seed = std::collections::hash_map::RandomState::new();
    let mut a = seed.build_hasher();
    a.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut b = std::collections::hash_map::RandomState::new().build_hasher();
    b.write_u64(a.finish());
    format!("r{:016x}{:016x}", a.finish(), b.finish())
}

/// The largest index `<= i` that is a character boundary of `s`.
pub(super) fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Pages {
    pub(super) fn sweep(kept: &mut HashMap<String, Kept>, keep: Duration) {
        kept.retain(|_, k| k.made.elapsed() < keep);
    }

    /// Keeps `text`; false when it is larger than the whole store.
    pub(super) fn keep(&self, id: &str, text: Arc<str>, owner: Option<String>) -> bool {
        let config = *lock(&self.config);
        if text.len() > config.store_bytes {
            return false;
        }
        let mut kept = lock(&self.kept);
        Self::sweep(&mut kept, config.keep);
        let mut total: usize = kept.values().map(|k| k.text.len()).sum();
        while total + text.len() > config.store_bytes {
            let Some(oldest) = kept
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            if let Some(k) = kept.remove(&oldest) {
                total -= k.text.len();
            }
        }
        let now = Instant::now();
        kept.insert(
            id.to_owned(),
            Kept {
                text,
                owner,
                made: now,
                used: now,
            },
        );
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_cut_a_character() {
        let s = "aé€😀";
        assert_eq!(floor_boundary(s, 2), 1);
        assert_eq!(floor_boundary(s, 3), 3);
        assert_eq!(floor_boundary(s, 5), 3);
        assert_eq!(floor_boundary(s, 99), s.len());
    }

    #[test]
    fn limits_are_zero_or_at_least_the_minimum() {
        assert_eq!(check_limit(0, "x").unwrap(), 0);
        assert!(check_limit(10, "x").is_err());
        assert_eq!(check_limit(4096, "x").unwrap(), 4096);
    }

    #[test]
    fn the_least_recently_read_go_first_when_the_store_is_full() {
        let pages = Pages::default();
        *lock(&pages.config) = PagingConfig {
            page_bytes: 1024,
            keep: Duration::from_secs(60),
            store_bytes: 10,
        };
        assert!(pages.keep("a", "aaaa".into(), None));
        assert!(pages.keep("b", "bbbb".into(), None));
        lock(&pages.kept).get_mut("a").unwrap().used = Instant::now();
        assert!(pages.keep("c", "cccc".into(), None));
        let kept = lock(&pages.kept);
        assert!(kept.contains_key("a") && kept.contains_key("c") && !kept.contains_key("b"));
        drop(kept);
        assert!(!pages.keep("d", "x".repeat(11).into(), None));
    }
}
