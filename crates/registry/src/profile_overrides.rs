//! A profile's own tool overrides: what one profile's clients see of a server's tool, on top of what the server's
//! override (`overrides.rs`) shows everyone. A profile keeps them as `{SERVER: {TOOL: override}}`, `TOOL` being the
//! tool's own name (as for a server's override); each is applied to the tool as the server shows it, so a profile
//! renames, describes, annotates, fixes or hides what the server's override left.
//!
//! The gate (`pinning/mod.rs`) pins them with the tool: a tool's pinned definition carries `profile_overrides`
//! (`{PROFILE: override}`) beside its own definition and its server's `override`, so setting or changing a profile's
//! override is reviewed like any change, and the scanner reads each profile's shown tool. What a profile applies is
//! what was approved: [`ProfileLayer`] is made from the approved pins, never from the profile as stored.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rmcp::model::Tool;
use serde_json::{Map, Value};

use crate::overrides::{Applied, ToolOverride};
use crate::registry::Registry;
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
fn lenient(p: &Profile, server: &str) -> BTreeMap<String, ToolOverride> {
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
    by_server_name: HashMap<String, HashMap<String, Arc<Shown>>>,
    /// profile → the name the profile shows → the name the server shows.
    back: HashMap<String, HashMap<String, String>>,
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

/// By server name: the layers made ([`Registry::profile_layer`]), and the profiles' overrides the gate last pinned
/// (to tell when the store holds others).
#[derive(Debug, Default)]
pub(crate) struct LayerCache {
    layers: Mutex<HashMap<String, Arc<ProfileLayer>>>,
    gated: Mutex<HashMap<String, ByTool>>,
}

/// A tool from a pinned definition (its fields, nulls left out).
fn tool_of(def: &Value) -> Option<Tool> {
    let mut m: Map<String, Value> = def.as_object()?.clone();
    m.retain(|k, v| !v.is_null() && k != "override" && k != FIELD);
    serde_json::from_value(Value::Object(m)).ok()
}

impl Registry {
    /// The overrides every profile sets on `server`'s tools, by the tool's own name, then profile (as stored).
    pub fn profile_overrides_on(&self, server: &str) -> Result<ByTool> {
        let mut out = ByTool::new();
        for p in self.store().profiles()? {
            for (tool, o) in lenient(&p, server) {
                out.entry(tool).or_default().insert(p.name.clone(), o);
            }
        }
        Ok(out)
    }

    /// The approved profile overrides of `server`'s tools, made from its approved pins and kept until the gate lists
    /// the server again (or an approval forgets it, [`Registry::forget_profile_layer`]).
    pub fn profile_layer(&self, server: &str) -> Option<Arc<ProfileLayer>> {
        if let Some(l) = self
            .layers()
            .layers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(server)
        {
            return Some(l.clone());
        }
        let s = self.get(server).ok()?;
        let pins = self.store().pins_of(s.id).ok()?;
        let mut layer = ProfileLayer::default();
        // The names the server shows, which a profile's new name may not take.
        let mut approved = Vec::new();
        for pin in &pins {
            let Some(def) = pin.approved_definition.as_ref().filter(|_| !pin.pending()) else {
                continue;
            };
            if crate::pinning::scan::split_key(&pin.tool).0 != ad_scan::Kind::Tool {
                continue;
            }
            let own = tool_of(def);
            let server_override: Option<ToolOverride> = def
                .get("override")
                .and_then(|o| serde_json::from_value(o.clone()).ok());
            let server_tool = match (own, &server_override) {
                (Some(t), Some(o)) => Some(o.apply(&t).0),
                (t, None) => t,
                (None, Some(_)) => None,
            };
            if let Some(t) = server_tool {
                approved.push((t, def.get(FIELD).cloned()));
            }
        }
        let taken: HashSet<String> = approved.iter().map(|(t, _)| t.name.to_string()).collect();
        for (server_tool, profiles) in approved {
            let Some(Value::Object(profiles)) = profiles else {
                continue;
            };
            for (profile, body) in profiles {
                let Ok(mut o) = serde_json::from_value::<ToolOverride>(body) else {
                    continue;
                };
                if let Some(n) = &o.name
                    && *n != server_tool.name
                    && (taken.contains(n)
                        || layer.back.get(&profile).is_some_and(|b| b.contains_key(n)))
                {
                    tracing::warn!(server, profile = %profile, tool = %server_tool.name, name = %n, "a profile's new name is taken by another tool; not renamed");
                    o.name = None;
                }
                let (tool, mut applied) = o.apply(&server_tool);
                applied.tool = server_tool.name.to_string();
                layer
                    .back
                    .entry(profile.clone())
                    .or_default()
                    .insert(tool.name.to_string(), applied.tool.clone());
                layer
                    .by_server_name
                    .entry(profile)
                    .or_default()
                    .insert(applied.tool.clone(), Arc::new(Shown { tool, applied }));
            }
        }
        let layer = Arc::new(layer);
        self.layers()
            .layers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(server.to_owned(), layer.clone());
        Some(layer)
    }

    /// Drops `server`'s layer: the next use makes it again from the pins.
    pub fn forget_profile_layer(&self, server: &str) {
        self.layers()
            .layers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(server);
    }

    /// Notes the profiles' overrides the gate pins for `server` now (and forgets its layer).
    pub(crate) fn note_gated(&self, server: &str, by_tool: ByTool) {
        self.forget_profile_layer(server);
        self.layers()
            .gated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(server.to_owned(), by_tool);
    }

    /// Whether the store holds other profile overrides for `server` than its last listing here pinned (another
    /// process changed a profile: the listing is due again).
    pub fn profile_overrides_stale(&self, server: &str) -> bool {
        let gated = self
            .layers()
            .gated
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(server)
            .cloned()
            .unwrap_or_default();
        self.profile_overrides_on(server)
            .is_ok_and(|now| now != gated)
    }
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
    crate::pinning::canonical(&Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::events::EventBus;
    use ad_core::model::ServerSpec;
    use serde_json::json;

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_profile_override_is_pinned_with_the_tool_and_applied_once_approved() {
        let r = Registry::new(
            ad_store::Store::open_in_memory().unwrap(),
            EventBus::default(),
        );
        let s = r
            .register(ServerSpec {
                name: "fx".into(),
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let echo = || {
            tool(json!({"name": "echo", "description": "Echoes",
                "inputSchema": {"type": "object", "properties": {"text": {}, "mode": {}}}}))
        };
        assert_eq!(r.gate_tools(s.id, "fx", vec![echo()]).len(), 1);
        let mut p = Profile {
            name: "dev".into(),
            servers: vec!["fx".into()],
            ..Profile::default()
        };
        p.overrides = json!({"fx": {"echo": {"name": "say", "fixed": {"mode": "loud"}}}});
        assert!(parse(&p.overrides).is_ok());
        r.store().put_profile(&p).unwrap();
        assert!(r.profile_overrides_stale("fx"));
        // The tool with a new profile override is a change: withheld (everywhere) until approved.
        r.forget_profile_layer("fx");
        assert!(r.gate_tools(s.id, "fx", vec![echo()]).is_empty());
        let pin = r.store().pin("fx", "echo").unwrap().unwrap();
        assert!(pin.pending());
        assert_eq!(pin.current_definition[FIELD]["dev"]["name"], "say");
        assert!(
            !r.profile_layer("fx").unwrap().has("dev"),
            "nothing unapproved is applied"
        );
        r.store().approve_pins(s.id, Some("echo"), "test").unwrap();
        r.forget_profile_layer("fx");
        let shown = r.gate_tools(s.id, "fx", vec![echo()]);
        assert_eq!(
            shown[0].name, "echo",
            "the server's own listing is unchanged"
        );
        let layer = r.profile_layer("fx").unwrap();
        let said = layer.called("dev", "say").unwrap();
        assert_eq!(said.applied.tool, "echo");
        assert_eq!(
            said.tool.input_schema["properties"],
            json!({"text": {}}),
            "{:?}",
            said.tool
        );
        assert!(layer.called("dev", "echo").is_none());
        assert!(layer.called("other", "say").is_none());
        assert!(!r.profile_overrides_stale("fx"));
        // The profile removed: its override is gone with nothing new to review, the tool stays served.
        r.store().delete_profile("dev").unwrap();
        assert_eq!(r.gate_tools(s.id, "fx", vec![echo()]).len(), 1);
        assert!(!r.store().pin("fx", "echo").unwrap().unwrap().pending());
        for bad in [
            json!([1]),
            json!({"fx": 3}),
            json!({"fx": {"echo": {"nmae": "x"}}}),
            json!({"fx": {"echo": {"name": "has space"}}}),
        ] {
            assert!(parse(&bad).is_err(), "{bad}");
        }
    }
}
