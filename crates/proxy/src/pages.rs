//! Large tool results in pages: a result whose text is over its limit reaches the agent as its head and a resource
//! link (`agent-discover://results/ID`) to the whole, which is kept here for a bounded time and size and read back in
//! pages (`resources/read` of the link with `?offset=N&limit=M`, or the registry's `read_result`). Offsets and
//! lengths are in bytes of the UTF-8 text; a page never ends inside a character, and `next_offset` says where the
//! next one starts, so pages put end to end are the whole, byte for byte.
//!
//! The limit is, in order: the call's own (`_meta["agent-discover/page_bytes"]`, or `page_bytes` of `proxy_call`;
//! 0 turns paging off for that call), the server's (`server_paging`), the process default
//! ([`PagingConfig::from_env`]). A script's inner calls are never paged (the script gets the whole; its own answer
//! has code mode's limit). `structuredContent` stays whole when the tool declared an `outputSchema` (a client that
//! validates results against it needs the whole), and is dropped otherwise: the spec has such a result carry the same
//! JSON as text, which is what is paged.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use serde_json::json;

use ad_core::error::{Error, Result};
use ad_core::identity::Principal;

use crate::state::{Inner, Proxy};
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
struct Kept {
    text: Arc<str>,
    /// Who may read it: the caller's user (`issuer#sub`), `None` for a caller without one.
    owner: Option<String>,
    made: Instant,
    used: Instant,
}

/// The kept results and their counters, in [`Inner`].
#[derive(Default)]
pub(crate) struct Pages {
    config: std::sync::Mutex<PagingConfig>,
    kept: std::sync::Mutex<HashMap<String, Kept>>,
    paged: AtomicU64,
    saved: AtomicU64,
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

fn owner_of(p: Option<&Principal>) -> Option<String> {
    p.map(|p| format!("{}#{}", p.issuer, p.sub))
}

fn new_id() -> String {
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
fn floor_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl Pages {
    fn sweep(kept: &mut HashMap<String, Kept>, keep: Duration) {
        kept.retain(|_, k| k.made.elapsed() < keep);
    }

    /// Keeps `text`; false when it is larger than the whole store.
    fn keep(&self, id: &str, text: Arc<str>, owner: Option<String>) -> bool {
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

impl Inner {
    /// Whether `server`'s running child declares an `outputSchema` for `tool` (its structured content stays whole).
    pub(crate) fn tool_has_output_schema(&self, server: &str, tool: &str) -> bool {
        match lock(&self.children).get(server) {
            Some(crate::state::Slot::Running(c)) => lock(&c.tools)
                .iter()
                .any(|t| t.name == tool && t.output_schema.is_some()),
            _ => false,
        }
    }

    /// The limit for a call of `server_id`: the call's own, else the server's, else the default; `None` when off.
    /// The server's setting is read only for a text already over [`MIN_PAGE_BYTES`] (smaller ones pass anyway).
    pub(crate) fn page_limit(
        &self,
        server_id: i64,
        call: Option<usize>,
        text_bytes: usize,
    ) -> Option<usize> {
        if text_bytes <= MIN_PAGE_BYTES {
            return None;
        }
        let limit = match call {
            Some(b) => b,
            None => match self.registry.store().page_bytes(server_id) {
                Ok(Some(b)) => b.max(0) as usize,
                _ => lock(&self.pages.config).page_bytes,
            },
        };
        (limit > 0 && text_bytes > limit).then_some(limit)
    }

    /// Pages `result` when its text is over the limit (see the module comment): its text becomes the head, followed
    /// by a resource link to the whole, which is kept. `None` when the result passes as it is.
    pub(crate) fn page_result(
        &self,
        server_id: i64,
        call_limit: Option<usize>,
        keep_structured: bool,
        principal: Option<&Principal>,
        result: &mut CallToolResult,
    ) -> Option<Paged> {
        let texts: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect();
        let bytes = texts.iter().map(|t| t.len()).sum::<usize>() + texts.len().saturating_sub(1);
        let limit = self.page_limit(server_id, call_limit, bytes)?;
        let whole: Arc<str> = texts.join("\n").into();
        let id = new_id();
        if !self.pages.keep(&id, whole.clone(), owner_of(principal)) {
            tracing::warn!(
                bytes,
                "a tool result larger than the paging store is passed whole"
            );
            return None;
        }
        let head = &whole[..floor_boundary(&whole, limit)];
        let paged = Paged {
            id: id.clone(),
            whole: whole.len(),
            sent: head.len(),
        };
        let link = Resource::new(format!("{URI_PREFIX}{id}"), format!("result {id}"))
            .with_mime_type("text/plain")
            .with_size(whole.len() as u64)
            .with_description(format!(
                "The whole result: {} bytes of text, of which the first {} are above. Read the rest in pages: \
                 resources/read of this URI with ?offset={}&limit=BYTES, or registry read_result {{id: \"{id}\", \
                 offset: {}}}. Kept {} min.",
                whole.len(),
                head.len(),
                head.len(),
                head.len(),
                lock(&self.pages.config).keep.as_secs() / 60
            ));
        let mut content = vec![ContentBlock::text(head), ContentBlock::resource_link(link)];
        content.extend(result.content.drain(..).filter(|c| c.as_text().is_none()));
        result.content = content;
        if !keep_structured {
            result.structured_content = None;
        }
        self.pages.paged.fetch_add(1, Ordering::Relaxed);
        self.pages
            .saved
            .fetch_add((paged.whole - paged.sent) as u64, Ordering::Relaxed);
        Some(paged)
    }
}

impl Proxy {
    /// Sets the process-wide paging settings (the composition root, from the environment).
    pub fn set_paging(&self, config: PagingConfig) {
        *lock(&self.inner.pages.config) = config;
    }

    pub fn paging(&self) -> PagingConfig {
        *lock(&self.inner.pages.config)
    }

    /// A server's own limit (`None`: the default applies); 0 turns paging off for it.
    pub fn set_server_page_bytes(&self, server: &str, bytes: Option<u64>) -> Result<()> {
        let id = self.inner.registry.get(server)?.id;
        let bytes = bytes
            .map(|b| check_limit(b, "page_bytes").map(|b| b as i64))
            .transpose()?;
        self.inner.registry.store().set_page_bytes(id, bytes)
    }

    /// A server's own limit, when it has one.
    pub fn server_page_bytes(&self, server: &str) -> Result<Option<u64>> {
        let id = self.inner.registry.get(server)?.id;
        Ok(self
            .inner
            .registry
            .store()
            .page_bytes(id)?
            .map(|b| b.max(0) as u64))
    }

    /// One page of a kept result: `limit` bytes (at most [`MAX_READ_BYTES`]; default the process's limit, or 64 KiB
    /// when paging is off) from `offset`, ending before a character that would be cut. A result that expired, was
    /// evicted, never existed or belongs to another user is not found.
    pub fn read_result(
        &self,
        id: &str,
        offset: usize,
        limit: Option<usize>,
        principal: Option<&Principal>,
    ) -> Result<Page> {
        let pages = &self.inner.pages;
        let config = *lock(&pages.config);
        let text = {
            let mut kept = lock(&pages.kept);
            Pages::sweep(&mut kept, config.keep);
            match kept.get_mut(id) {
                Some(k) if k.owner == owner_of(principal) => {
                    k.used = Instant::now();
                    k.text.clone()
                }
                _ => {
                    return Err(Error::not_found(
                        "result",
                        format!(
                            "{id} (results are kept {} s, and only for their caller)",
                            config.keep.as_secs()
                        ),
                    ));
                }
            }
        };
        if offset > text.len() {
            return Err(Error::invalid(
                "offset",
                format!("past the end of the result ({} bytes)", text.len()),
            ));
        }
        if !text.is_char_boundary(offset) {
            return Err(Error::invalid(
                "offset",
                "inside a character: start at 0 or at a page's next_offset",
            ));
        }
        let default = if config.page_bytes > 0 {
            config.page_bytes
        } else {
            DEFAULT_PAGE_BYTES
        };
        let limit = limit.unwrap_or(default);
        if limit == 0 || limit > MAX_READ_BYTES {
            return Err(Error::invalid(
                "limit",
                format!("from 1 to {MAX_READ_BYTES} bytes"),
            ));
        }
        let mut end = floor_boundary(&text, offset.saturating_add(limit));
        if end == offset && offset < text.len() {
            // A limit smaller than the next character: give that character whole.
            end = (offset + 1..=text.len())
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(text.len());
        }
        Ok(Page {
            id: id.to_owned(),
            offset,
            total: text.len(),
            next_offset: (end < text.len()).then_some(end),
            text: text[offset..end].to_owned(),
        })
    }

    /// `resources/read` of a kept result's URI (`agent-discover://results/ID?offset=N&limit=M`); `None` for any other
    /// URI. The page's `_meta` says `offset`, `total` and `next_offset`.
    pub fn read_result_uri(
        &self,
        uri: &str,
        principal: Option<&Principal>,
    ) -> Option<Result<ReadResourceResult>> {
        let rest = uri.strip_prefix(URI_PREFIX)?;
        let (id, query) = rest.split_once('?').unwrap_or((rest, ""));
        // Only this module's ids: a server named `results` keeps its own resources.
        if !(id.len() == 33
            && id.starts_with('r')
            && id[1..].bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return None;
        }
        Some((|| {
            let (mut offset, mut limit) = (0usize, None);
            for pair in query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                let what = match k {
                    "offset" => "offset",
                    "limit" => "limit",
                    _ => {
                        return Err(Error::invalid(
                            "uri",
                            format!(
                                "unknown parameter `{k}`: a result's URI takes offset and limit"
                            ),
                        ));
                    }
                };
                let n: usize = v
                    .parse()
                    .map_err(|_| Error::invalid(what, format!("`{v}` is not a whole number")))?;
                match what {
                    "offset" => offset = n,
                    _ => limit = Some(n),
                }
            }
            let page = self.read_result(id, offset, limit, principal)?;
            let mut meta = rmcp::model::MetaObject::default();
            meta.0.insert("offset".into(), json!(page.offset));
            meta.0.insert("total".into(), json!(page.total));
            meta.0.insert("next_offset".into(), json!(page.next_offset));
            Ok(ReadResourceResult::new(vec![
                ResourceContents::TextResourceContents {
                    uri: uri.to_owned(),
                    mime_type: Some("text/plain".into()),
                    text: page.text,
                    meta: Some(meta),
                },
            ]))
        })())
    }

    /// The paging counters, for `/metrics`.
    pub fn paging_stats(&self) -> PagingStats {
        let pages = &self.inner.pages;
        let kept = lock(&pages.kept);
        PagingStats {
            paged: pages.paged.load(Ordering::Relaxed),
            bytes_saved: pages.saved.load(Ordering::Relaxed),
            kept: kept.len(),
            kept_bytes: kept.values().map(|k| k.text.len()).sum(),
        }
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
