//! The vocabulary of a profile's overrides: as a profile keeps them (read strictly by [`parse`]), as the gate pins
//! them ([`FIELD`], [`pinned_value`], [`only_dropped`]), and as a profile's clients see one server's tools once
//! approved ([`ProfileLayer`], kept per server in the registry's [`LayerCache`]). A leaf: `layers.rs` makes the
//! layers from the store.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::{Map, Value};

use crate::overrides::{Applied, ToolOverride};
use crate::pinning::digest::canonical;
use ad_core::error::{Error, Result};
use ad_core::profile::Profile;

/// The pinned definition's field holding the profiles' overrides of a tool.
pub const FIELD: &str = "profile_overrides";

/// A profile's overrides as kept: server → the tool's own name → override.
pub type Overrides = BTreeMap<String, BTreeMap<String, ToolOverride>>;

/// The overrides profiles set on one server's tools: the tool's own name → profile → override.
pub type ByTool = BTreeMap<String, BTreeMap<String, ToolOverride>>;

/// A profile's `overrides`, read strictly (for a profile being stored): an error names the server and tool.
pub fn parse(v: &Value) -> Result<Overrides> {
    let mut out = Overrides::new();
    let Some(servers) = v.as_object() else {
        return if v.is_null() {
            Ok(out)
        } else {
            Err(Error::invalid(
                "overrides",
                "an object {SERVER: {TOOL: override}}",
            ))
        };
    };
    for (server, tools) in servers {
        let Some(tools) = tools.as_object() else {
            return Err(Error::invalid(
                "overrides",
                format!("`{server}`: an object {{TOOL: override}} (TOOL the tool's own name)"),
            ));
        };
        for (tool, body) in tools {
            let o: ToolOverride = serde_json::from_value(body.clone())
                .map_err(|e| Error::invalid("overrides", format!("`{server}` `{tool}`: {e}")))?;
            o.validate()?;
            if !o.is_empty() {
                out.entry(server.clone())
                    .or_default()
                    .insert(tool.clone(), o);
            }
        }
    }
    Ok(out)
}

/// [`parse`] for a stored profile: what cannot be read is skipped with a warning.
pub(super) fn lenient(p: &Profile, server: &str) -> BTreeMap<String, ToolOverride> {
    let Some(tools) = p.overrides.get(server).and_then(Value::as_object) else {
        return BTreeMap::new();
    };
    tools
        .iter()
        .filter_map(|(tool, body)| match serde_json::from_value::<ToolOverride>(body.clone()) {
            Ok(o) if o.validate().is_ok() && !o.is_empty() => Some((tool.clone(), o)),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(profile = %p.name, server, tool, error = %e, "unreadable profile override skipped");
                None
            }
        })
        .collect()
}

/// One tool as a profile shows it: the tool, and how its call is turned back into the server's (`Applied::tool` is
/// the name the server's listing shows).
#[derive(Debug, Clone)]
pub struct Shown {
    pub tool: Tool,
    pub applied: Applied,
}

/// The approved profile overrides of one server's tools.
#[derive(Debug, Default)]
pub struct ProfileLayer {
    /// profile → the name the server shows → the tool as the profile shows it.
    pub(super) by_server_name: HashMap<String, HashMap<String, Arc<Shown>>>,
    /// profile → the name the profile shows → the name the server shows.
    pub(super) back: HashMap<String, HashMap<String, String>>,
}

impl ProfileLayer {
    /// The tool `server_name` (as the server shows it) as `profile` shows it; `None` when the profile does not
    /// override it.
    pub fn shown(&self, profile: &str, server_name: &str) -> Option<&Arc<Shown>> {
        self.by_server_name.get(profile)?.get(server_name)
    }

    /// The overridden tool `profile` shows as `name`.
    pub fn called(&self, profile: &str, name: &str) -> Option<&Arc<Shown>> {
        let server_name = self.back.get(profile)?.get(name)?;
        self.shown(profile, server_name)
    }

    /// Whether `profile` overrides any tool.
    pub fn has(&self, profile: &str) -> bool {
        self.by_server_name.contains_key(profile)
    }
}

/// By server name: the layers made (`Registry::profile_layer`), and the profiles' overrides the gate last pinned
/// (to tell when the store holds others).
#[derive(Debug, Default)]
pub(crate) struct LayerCache {
    pub(super) layers: Mutex<HashMap<String, Arc<ProfileLayer>>>,
    pub(super) gated: Mutex<HashMap<String, ByTool>>,
}

/// A tool from a pinned definition (its fields, nulls left out).
pub(super) fn tool_of(def: &Value) -> Option<Tool> {
    let mut m: Map<String, Value> = def.as_object()?.clone();
    m.retain(|k, v| !v.is_null() && k != "override" && k != FIELD);
    serde_json::from_value(Value::Object(m)).ok()
}

/// Whether `current` is the `approved` definition with some profiles' overrides taken away and none added or
/// changed: what is left was reviewed already.
pub fn only_dropped(approved: &Value, current: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove(FIELD);
        }
        v
    };
    if strip(approved) != strip(current) {
        return false;
    }
    let (Some(was), now) = (
        approved.get(FIELD).and_then(Value::as_object),
        current.get(FIELD),
    ) else {
        return false;
    };
    match now.and_then(Value::as_object) {
        None => !was.is_empty(),
        Some(now) => now.len() < was.len() && now.iter().all(|(p, o)| was.get(p) == Some(o)),
    }
}

/// The `profile_overrides` field a tool's pinned definition carries for these overrides (`Null`: none).
pub fn pinned_value(by_profile: &BTreeMap<String, ToolOverride>) -> Value {
    if by_profile.is_empty() {
        return Value::Null;
    }
    let m: Map<String, Value> = by_profile
        .iter()
        .map(|(p, o)| (p.clone(), serde_json::to_value(o).unwrap_or(Value::Null)))
        .collect();
    canonical(&Value::Object(m))
}
