//! The manifest entries of skills agent-discover handed on (`skills.rs`), kept so that reads of their files can be
//! verified; a leaf (the proxy's state holds one).

use std::collections::HashMap;

use rmcp::model::JsonObject;

/// What a skill file must be, from the manifest entry that listed it.
#[derive(Clone)]
pub struct Expected {
    /// `None` for a `SKILL.md` of a skill with `"resources": "dynamic"` (no digests exist).
    pub digest: Option<(String, u64)>,
    /// The entry's frontmatter, for a skill's `SKILL.md`.
    pub frontmatter: Option<JsonObject>,
}

/// The manifest entries handed on, by (server, the child's own file URI).
#[derive(Default)]
pub struct Manifests {
    pub files: HashMap<(String, String), Expected>,
}
