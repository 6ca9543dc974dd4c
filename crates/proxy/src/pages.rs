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

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rmcp::model::{CallToolResult, ContentBlock, ReadResourceResult, Resource, ResourceContents};
use serde_json::json;

use ad_core::error::{Error, Result};
use ad_core::identity::Principal;

use crate::state::{Inner, Proxy};
use crate::sync::lock;

pub(crate) mod store;

pub(crate) use store::Pages;
pub use store::{
    DEFAULT_KEEP, DEFAULT_PAGE_BYTES, DEFAULT_STORE_BYTES, MAX_READ_BYTES, META_KEY,
    MIN_PAGE_BYTES, Page, Paged, PagingConfig, PagingStats, URI_PREFIX, check_limit,
};
use store::{floor_boundary, new_id, owner_of};

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
