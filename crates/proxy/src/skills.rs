//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`) through the proxy.
//!
//! Per-server endpoints pass a child's `skills/list`, `skills/get` and `resources/directory/read` on unchanged (the
//! front declares the extension exactly when the child does, with the child's own capabilities). The aggregated
//! front merges the skills of every running child that declares the extension and namespaces them as it namespaces
//! resources: every URI (the skill's `SKILL.md` and each manifest file) becomes `agent-discover://server/uri`, so
//! `skills/get`, `resources/read` and `resources/directory/read` route back to the owner by URI alone. A skill's
//! *name* cannot carry the prefix: the spec makes it the last path segment of its URI, restricted to lowercase
//! letters, digits and single hyphens, and the same name sits in the `SKILL.md` bytes the manifest's digest covers.
//!
//! As a client of children agent-discover follows the host rules: no skill file is read before someone asks for it
//! (listing reads nothing), and a skill file is verified before it is handed on. Every manifest entry handed on is
//! remembered (`Manifests`: size, digest, and for a `SKILL.md` its frontmatter); a read of a remembered file, on any
//! front, is checked against it: size, then sha256 digest, then the `SKILL.md` frontmatter field by field. A file
//! that fails is not handed on: the read fails with `Error::SkillUnverified`, which names the check. `load_skill` is
//! the host's own loading (CLI): the `SKILL.md` first, verified, then the other files, each verified, stopping at the
//! first failure.

mod frontmatter;
pub(crate) mod manifests;

use base64::Engine;
use rmcp::model::{
    GetSkillRequestParams, GetSkillResult, JsonObject, ListResourcesResult, ListSkillsResult,
    PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams,
    ResourceContents, ResultType, Skill, SkillResources, SkillsCapability, sha256_digest,
};
use rmcp::{ErrorData, ServiceError};
use serde::Serialize;

use ad_core::error::{Error, Result};

use self::manifests::Expected;
use crate::failure::child_error;
use crate::names;
use crate::single::ServerError;
use crate::state::{Child, Inner, Proxy};
use crate::sync::lock;

/// Skill files remembered at most; past it the memory starts over (reads of forgotten files pass unverified, as
/// reads of files whose manifest was never handed on do).
const MAX_FILES: usize = 16_384;
/// Pages of `skills/list` followed at most per child.
const MAX_PAGES: usize = 100;

/// A skill loaded and verified: its entry and every file's text (or base64 blob).
#[derive(Debug, Serialize)]
pub struct LoadedSkill {
    pub server: String,
    pub uri: String,
    pub frontmatter: JsonObject,
    pub files: Vec<LoadedFile>,
}

#[derive(Debug, Serialize)]
pub struct LoadedFile {
    pub uri: String,
    pub size: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// `-32602`, as SEP-2640 answers a URI that names no skill or directory served here.
fn invalid(what: &str, uri: &str) -> Error {
    Error::Child {
        server: String::new(),
        error: Box::new(ErrorData::invalid_params(
            format!(
                "{what}: {}; URIs here look like agent-discover://SERVER/URI",
                ad_core::model::truncate_for_message(uri)
            ),
            Some(serde_json::json!({"uri": uri})),
        )),
    }
}

fn frontmatter_object(skill: &Skill) -> JsonObject {
    match serde_json::to_value(&skill.frontmatter) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => JsonObject::new(),
    }
}

impl Child {
    fn serves_skills(&self) -> bool {
        self.capabilities.supports_skills()
    }
}

impl Inner {
    /// Remembers the files of skill entries about to be handed on.
    fn remember(&self, server: &str, skills: &[Skill]) {
        let mut m = lock(&self.skill_files);
        for skill in skills {
            if m.files.len() >= MAX_FILES {
                m.files.clear();
            }
            let fm = Some(frontmatter_object(skill));
            match &skill.resources {
                SkillResources::Files(files) => {
                    for f in files {
                        let expected = Expected {
                            digest: Some((f.digest.clone(), f.size)),
                            frontmatter: (f.uri == skill.uri).then(|| fm.clone()).flatten(),
                        };
                        m.files.insert((server.to_owned(), f.uri.clone()), expected);
                    }
                }
                // No digests; the `SKILL.md` frontmatter can still be compared.
                _ => {
                    let expected = Expected {
                        digest: None,
                        frontmatter: fm,
                    };
                    m.files
                        .insert((server.to_owned(), skill.uri.clone()), expected);
                }
            }
        }
    }

    /// Checks a read of `uri` (the child's own URI) against the manifest entry handed on for it, if any.
    pub(super) fn verify_skill_read(
        &self,
        server: &str,
        uri: &str,
        contents: &[ResourceContents],
    ) -> Result<()> {
        let expected = lock(&self.skill_files)
            .files
            .get(&(server.to_owned(), uri.to_owned()))
            .cloned();
        match expected {
            Some(e) => verify(server, uri, &e, contents).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// The bytes of a read: its first content (the one for `uri` if several), text as UTF-8 or the blob decoded.
fn bytes_of(server: &str, uri: &str, contents: &[ResourceContents]) -> Result<(Vec<u8>, bool)> {
    let content = contents
        .iter()
        .find(|c| content_uri(c) == uri)
        .or_else(|| contents.first());
    match content {
        Some(ResourceContents::TextResourceContents { text, .. }) => {
            Ok((text.clone().into_bytes(), true))
        }
        Some(ResourceContents::BlobResourceContents { blob, .. }) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|e| {
                    unverified(server, uri, "digest", format!("blob is not base64: {e}"))
                })?;
            Ok((bytes, false))
        }
        _ => Err(unverified(
            server,
            uri,
            "size",
            "the read returned no content".into(),
        )),
    }
}

fn content_uri(c: &ResourceContents) -> &str {
    match c {
        ResourceContents::TextResourceContents { uri, .. }
        | ResourceContents::BlobResourceContents { uri, .. } => uri,
        #[allow(unreachable_patterns)]
        _ => "",
    }
}

fn unverified(server: &str, uri: &str, check: &'static str, detail: String) -> Error {
    Error::SkillUnverified {
        server: server.to_owned(),
        uri: uri.to_owned(),
        check,
        detail,
    }
}

/// Size, then digest, then (for a `SKILL.md`) the frontmatter; the bytes (and whether they came as text) on success.
fn verify(
    server: &str,
    uri: &str,
    e: &Expected,
    contents: &[ResourceContents],
) -> Result<(Vec<u8>, bool)> {
    let (bytes, is_text) = bytes_of(server, uri, contents)?;
    if let Some((digest, size)) = &e.digest {
        if bytes.len() as u64 != *size {
            let detail = format!("{} bytes, the manifest says {size}", bytes.len());
            return Err(unverified(server, uri, "size", detail));
        }
        let actual = sha256_digest(&bytes);
        if actual != *digest {
            let detail = format!("digest {actual}, the manifest says {digest}");
            return Err(unverified(server, uri, "digest", detail));
        }
    }
    if let Some(expected) = &e.frontmatter {
        let text = String::from_utf8_lossy(&bytes);
        let found =
            frontmatter::parse(&text).map_err(|why| unverified(server, uri, "frontmatter", why))?;
        let mut differ: Vec<&str> = expected
            .keys()
            .chain(found.keys())
            .filter(|k| expected.get(*k) != found.get(*k))
            .map(String::as_str)
            .collect();
        differ.sort_unstable();
        differ.dedup();
        if !differ.is_empty() {
            let detail = format!(
                "the SKILL.md frontmatter differs from the manifest entry's in: {}",
                differ.join(", ")
            );
            return Err(unverified(server, uri, "frontmatter", detail));
        }
    }
    Ok((bytes, is_text))
}

/// Every page of a child's `skills/list`.
async fn list_all(child: &Child) -> std::result::Result<Vec<Skill>, ServiceError> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = child.peer.list_skills(params).await?;
        out.extend(page.skills);
        match page.next_cursor {
            Some(c) if !c.is_empty() => cursor = Some(c),
            _ => break,
        }
    }
    Ok(out)
}

/// A child's failure on the aggregated front: its `data.uri` (SEP-2164's shape) under the URI clients know.
fn exposed_error(server: &str, e: ServiceError) -> Error {
    let mut err = child_error(server, e);
    if let Error::Child { error, .. } = &mut err
        && let Some(serde_json::Value::Object(data)) = &mut error.data
        && let Some(serde_json::Value::String(uri)) = data.get_mut("uri")
        && !uri.starts_with(names::URI_PREFIX)
    {
        *uri = names::expose_uri(server, uri);
    }
    err
}

fn expose(server: &str, mut skill: Skill) -> Skill {
    skill.uri = names::expose_uri(server, &skill.uri);
    if let SkillResources::Files(files) = &mut skill.resources {
        for f in files {
            f.uri = names::expose_uri(server, &f.uri);
        }
    }
    skill
}

impl Proxy {
    /// The skills capability the aggregated front declares: some running child declares the extension
    /// (`directoryRead` when some such child offers directory reads); `None` otherwise.
    pub fn skills_capability(&self) -> Option<SkillsCapability> {
        let children = self.inner.running_with(|c| c.supports_skills());
        if children.is_empty() {
            return None;
        }
        let cap = SkillsCapability::new();
        Some(
            if children
                .iter()
                .any(|c| c.capabilities.supports_directory_read())
            {
                cap.with_directory_read()
            } else {
                cap
            },
        )
    }

    /// Per-server `skills/list`: the child's page, unchanged (its entries remembered for verification).
    pub async fn server_list_skills(
        &self,
        name: &str,
        params: Option<PaginatedRequestParams>,
    ) -> std::result::Result<ListSkillsResult, ServerError> {
        let child = self.inner.ready_child(name).await?;
        let params = params.map(|mut p| {
            p.meta = None;
            p
        });
        let mut res = child
            .peer
            .list_skills(params)
            .await
            .map_err(|e| child_error(name, e))?;
        self.inner.remember(name, &res.skills);
        // A legacy child's result has no resultType; a 2026-07-28 client requires one (rmcp drops it for others).
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// Per-server `skills/get`: the child's entry, unchanged.
    pub async fn server_get_skill(
        &self,
        name: &str,
        mut params: GetSkillRequestParams,
    ) -> std::result::Result<GetSkillResult, ServerError> {
        let child = self.inner.ready_child(name).await?;
        params.meta = None;
        let mut res = child
            .peer
            .get_skill(params)
            .await
            .map_err(|e| child_error(name, e))?;
        self.inner.remember(name, std::slice::from_ref(&res.skill));
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// Per-server `resources/directory/read`: the child's answer, unchanged.
    pub async fn server_read_directory(
        &self,
        name: &str,
        mut params: ReadResourceDirectoryRequestParams,
    ) -> std::result::Result<ListResourcesResult, ServerError> {
        let child = self.inner.ready_child(name).await?;
        params.meta = None;
        let mut res = child
            .peer
            .read_resource_directory(params)
            .await
            .map_err(|e| child_error(name, e))?;
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// The aggregated `skills/list`: every running child's skills, URIs namespaced; a child that fails to list is
    /// left out (as for resources).
    pub async fn list_skills(&self) -> Vec<Skill> {
        let mut out = Vec::new();
        for child in self.inner.running_with(|c| c.supports_skills()) {
            match list_all(&child).await {
                Ok(skills) => {
                    self.inner.remember(&child.name, &skills);
                    // One bad entry (a name the spec forbids, a digest malformed) would fail the whole listing.
                    out.extend(
                        skills
                            .into_iter()
                            .map(|s| expose(&child.name, s))
                            .filter(|s| match s.validate() {
                                Ok(()) => true,
                                Err(e) => {
                                    tracing::debug!(server = %child.name, "skill left out: {e}");
                                    false
                                }
                            }),
                    );
                }
                Err(e) => tracing::debug!(server = %child.name, "skills/list failed: {e}"),
            }
        }
        out
    }

    /// The aggregated `skills/get` of a namespaced `SKILL.md` URI, routed to its owner.
    pub async fn get_skill(&self, uri: &str) -> Result<GetSkillResult> {
        let (server, original) =
            names::split_uri(uri).ok_or_else(|| invalid("unknown skill", uri))?;
        let child = self
            .inner
            .running(server)
            .filter(|c| c.serves_skills())
            .ok_or_else(|| invalid("unknown skill", uri))?;
        let mut res = child
            .peer
            .get_skill(GetSkillRequestParams::new(original))
            .await
            .map_err(|e| exposed_error(server, e))?;
        self.inner
            .remember(server, std::slice::from_ref(&res.skill));
        res.skill = expose(server, res.skill);
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// The aggregated `resources/directory/read` of a namespaced directory URI, routed to its owner; the children
    /// it lists come back namespaced.
    pub async fn read_directory(
        &self,
        mut params: ReadResourceDirectoryRequestParams,
    ) -> Result<ListResourcesResult> {
        let uri = params.uri.clone();
        let (server, original) =
            names::split_uri(&uri).ok_or_else(|| invalid("not a directory", &uri))?;
        let child = self
            .inner
            .running(server)
            .filter(|c| c.capabilities.supports_directory_read())
            .ok_or_else(|| invalid("not a directory", &uri))?;
        params.uri = original.to_owned();
        params.meta = None;
        let mut res = child
            .peer
            .read_resource_directory(params)
            .await
            .map_err(|e| exposed_error(server, e))?;
        for r in &mut res.resources {
            r.uri = names::expose_uri(server, &r.uri);
        }
        res.result_type.get_or_insert(ResultType::COMPLETE);
        Ok(res)
    }

    /// A server's skills (every page), for the CLI; nothing is read but the listing.
    pub async fn server_skills(&self, name: &str) -> Result<Vec<Skill>> {
        let child = self.skills_child(name).await?;
        let skills = list_all(&child).await.map_err(|e| child_error(name, e))?;
        self.inner.remember(name, &skills);
        Ok(skills)
    }

    /// Loads one skill of `name` (by its name or its `SKILL.md` URI) as a host does: the listing's entry, then the
    /// `SKILL.md`, verified, then each other file of the manifest, verified; the first failure ends the load.
    pub async fn load_skill(&self, name: &str, skill: &str) -> Result<LoadedSkill> {
        let child = self.skills_child(name).await?;
        let skills = list_all(&child).await.map_err(|e| child_error(name, e))?;
        let entry = skills
            .into_iter()
            .find(|s| s.uri == skill || s.name() == skill)
            .ok_or_else(|| Error::not_found("skill", skill))?;
        self.inner.remember(name, std::slice::from_ref(&entry));
        let mut uris = vec![entry.uri.clone()];
        if let SkillResources::Files(files) = &entry.resources {
            uris.extend(
                files
                    .iter()
                    .filter(|f| f.uri != entry.uri)
                    .map(|f| f.uri.clone()),
            );
        }
        let mut files = Vec::new();
        for uri in uris {
            let read = child
                .peer
                .read_resource(ReadResourceRequestParams::new(&uri))
                .await
                .map_err(|e| child_error(name, e))?;
            let expected = lock(&self.inner.skill_files)
                .files
                .get(&(name.to_owned(), uri.clone()))
                .cloned()
                .ok_or_else(|| Error::Internal(format!("no manifest entry kept for {uri}")))?;
            let (bytes, is_text) = verify(name, &uri, &expected, &read.contents)?;
            let size = bytes.len();
            let (text, blob) = match String::from_utf8(bytes) {
                Ok(t) if is_text => (Some(t), None),
                Ok(t) => (
                    None,
                    Some(base64::engine::general_purpose::STANDARD.encode(t)),
                ),
                Err(e) => (
                    None,
                    Some(base64::engine::general_purpose::STANDARD.encode(e.into_bytes())),
                ),
            };
            files.push(LoadedFile {
                uri,
                size,
                text,
                blob,
            });
        }
        Ok(LoadedSkill {
            server: name.to_owned(),
            uri: entry.uri.clone(),
            frontmatter: frontmatter_object(&entry),
            files,
        })
    }

    async fn skills_child(&self, name: &str) -> Result<std::sync::Arc<Child>> {
        let child = self.inner.ready_child(name).await?;
        if !child.serves_skills() {
            return Err(Error::Invalid {
                what: "skills request",
                reason: format!("server `{name}` does not declare the skills extension (SEP-2640)"),
            });
        }
        Ok(child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{SkillFrontmatter, SkillResource};

    const MD: &str = "---\nname: billing\ndescription: Issue invoices\n---\n\nBody.\n";

    fn skill(md: &str) -> Skill {
        Skill::new(
            "skill://acme/billing/SKILL.md",
            SkillFrontmatter::new("billing", "Issue invoices"),
            SkillResources::Files(vec![SkillResource::from_bytes(
                "skill://acme/billing/SKILL.md",
                md.as_bytes(),
            )]),
        )
    }

    fn expected(s: &Skill) -> Expected {
        let SkillResources::Files(files) = &s.resources else {
            unreachable!()
        };
        Expected {
            digest: Some((files[0].digest.clone(), files[0].size)),
            frontmatter: Some(frontmatter_object(s)),
        }
    }

    fn text(t: &str) -> Vec<ResourceContents> {
        vec![ResourceContents::text(t, "skill://acme/billing/SKILL.md")]
    }

    fn check(e: &Expected, t: &str) -> std::result::Result<(), &'static str> {
        match verify("s", "skill://acme/billing/SKILL.md", e, &text(t)) {
            Ok(_) => Ok(()),
            Err(Error::SkillUnverified { check, .. }) => Err(check),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn each_check_fails_on_its_own() {
        let e = expected(&skill(MD));
        assert_eq!(check(&e, MD), Ok(()));
        assert_eq!(check(&e, &format!("{MD}more")), Err("size"));
        assert_eq!(check(&e, &MD.replace("Body", "Evil")), Err("digest"));
        // A SKILL.md whose bytes match its own (tampered) digest but not the entry's frontmatter.
        let tampered = MD.replace("Issue invoices", "Leak secrets!!");
        let mut e = expected(&skill(&tampered));
        assert_eq!(check(&e, &tampered), Err("frontmatter"));
        e.frontmatter = None;
        assert_eq!(
            check(&e, &tampered),
            Ok(()),
            "other files have no frontmatter to compare"
        );
    }

    #[test]
    fn blobs_are_checked_as_their_decoded_bytes() {
        let e = expected(&skill(MD));
        let blob = base64::engine::general_purpose::STANDARD.encode(MD);
        let contents = vec![ResourceContents::blob(
            blob,
            "skill://acme/billing/SKILL.md",
        )];
        let (bytes, is_text) = verify("s", "skill://acme/billing/SKILL.md", &e, &contents).unwrap();
        assert_eq!((bytes.as_slice(), is_text), (MD.as_bytes(), false));
    }

    #[test]
    fn exposed_skills_keep_a_valid_entry() {
        let s = expose("srv", skill(MD));
        assert_eq!(s.uri, "agent-discover://srv/skill://acme/billing/SKILL.md");
        s.validate()
            .expect("the namespaced entry is still a valid skill entry");
        assert_eq!(
            names::split_uri(&s.uri),
            Some(("srv", "skill://acme/billing/SKILL.md"))
        );
    }
}
