//! Tool overrides: what the agent sees of a server's tool instead of the child's own definition (a new name, title,
//! description or annotations; a parameter fixed to a value or hidden with its default), and how a call by the shown
//! name is turned back into the child's (its own name, the fixed and default values merged into the arguments).
//!
//! An override is keyed by the tool's own (upstream) name. The gate (`pinning/mod.rs`) applies it to every listing,
//! so the proxy keeps the shown tool and every front, the catalog and the search index see only that; the gate also
//! remembers, per server, how a shown name maps back ([`Inbound`]), which the call path reads.
//!
//! A profile (a named view of servers and tools) carries its own `BTreeMap<(server, tool), ToolOverride>`: its view
//! applies [`ToolOverride::layer`]ed over the server's override with the same [`ToolOverride::apply`] and
//! [`Inbound`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::registry::Registry;
use ad_core::error::{Error, Result};

/// The annotation keys an override may set (MCP's `ToolAnnotations`): `title` a string, the hints booleans.
pub const ANNOTATIONS: [&str; 5] = [
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// One tool's override. Every field is optional; an empty override is no override.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolOverride {
    /// The name the agent sees (its server's prefix is still added on the aggregated front).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Set over the child's own annotations, key by key (see [`ANNOTATIONS`]).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
    /// Parameters removed from the schema the agent sees and given this value on every call.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fixed: BTreeMap<String, Value>,
    /// Parameters removed from the schema the agent sees; their schema's `default`, when there is one, is given on
    /// every call (else the child's own default applies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<String>,
}

impl ToolOverride {
    pub fn is_empty(&self) -> bool {
        *self == ToolOverride::default()
    }

    /// A clear error for anything an override may not say.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = &self.name
            && (n.is_empty()
                || n.len() > 64
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
        {
            return Err(Error::invalid(
                "name",
                format!(
                    "{:?} must be 1-64 characters of letters, digits, `_`, `-` or `.`",
                    ad_core::model::truncate_for_message(n)
                ),
            ));
        }
        if self.title.as_ref().is_some_and(|t| t.len() > 200) {
            return Err(Error::invalid("title", "at most 200 characters"));
        }
        if self.description.as_ref().is_some_and(|d| d.len() > 8192) {
            return Err(Error::invalid("description", "at most 8192 characters"));
        }
        for (k, v) in &self.annotations {
            let ok = match k.as_str() {
                "title" => v.is_string(),
                k if ANNOTATIONS.contains(&k) => v.is_boolean(),
                _ => {
                    return Err(Error::invalid(
                        "annotations",
                        format!(
                            "unknown annotation `{k}` (one of {})",
                            ANNOTATIONS.join(", ")
                        ),
                    ));
                }
            };
            if !ok {
                return Err(Error::invalid(
                    "annotations",
                    format!(
                        "`{k}` must be a {}",
                        if k == "title" { "string" } else { "boolean" }
                    ),
                ));
            }
        }
        for p in self.fixed.keys().chain(&self.hidden) {
            if p.is_empty() || p.len() > 128 || p.chars().any(char::is_control) {
                return Err(Error::invalid(
                    "parameter",
                    format!(
                        "{:?} is not a parameter name",
                        ad_core::model::truncate_for_message(p)
                    ),
                ));
            }
        }
        if let Some(p) = self.hidden.iter().find(|p| self.fixed.contains_key(*p)) {
            return Err(Error::invalid(
                "hidden",
                format!("`{p}` is both fixed and hidden; give it one or the other"),
            ));
        }
        Ok(())
    }

    /// `over` set on top of `self`, field by field (a profile's override over its server's).
    pub fn layer(&self, over: &ToolOverride) -> ToolOverride {
        let mut out = self.clone();
        out.name = over.name.clone().or(out.name);
        out.title = over.title.clone().or(out.title);
        out.description = over.description.clone().or(out.description);
        out.annotations
            .extend(over.annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
        for (k, v) in &over.fixed {
            out.hidden.retain(|h| h != k);
            out.fixed.insert(k.clone(), v.clone());
        }
        for h in &over.hidden {
            if !out.fixed.contains_key(h) && !out.hidden.contains(h) {
                out.hidden.push(h.clone());
            }
        }
        out
    }

    /// The tool as the agent sees it, and how a call of it is turned back into the child's.
    pub fn apply(&self, upstream: &Tool) -> (Tool, Applied) {
        let mut shown = upstream.clone();
        if let Some(n) = &self.name {
            shown.name = n.clone().into();
        }
        if let Some(t) = &self.title {
            shown.title = Some(t.clone());
        }
        if let Some(d) = &self.description {
            shown.description = Some(d.clone().into());
        }
        if !self.annotations.is_empty() {
            let mut a = match serde_json::to_value(&upstream.annotations) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            a.extend(self.annotations.clone());
            shown.annotations = serde_json::from_value(Value::Object(a)).ok();
        }
        let mut inject: Map<String, Value> = self
            .fixed
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut schema = (*upstream.input_schema).clone();
        if let Some(Value::Object(props)) = schema.get("properties") {
            for h in &self.hidden {
                if let Some(d) = props.get(h).and_then(|p| p.get("default")) {
                    inject.insert(h.clone(), d.clone());
                }
            }
        }
        let removed: Vec<String> = self.fixed.keys().chain(&self.hidden).cloned().collect();
        if !removed.is_empty() {
            if let Some(Value::Object(props)) = schema.get_mut("properties") {
                props.retain(|k, _| !removed.contains(k));
            }
            if let Some(Value::Array(req)) = schema.get_mut("required") {
                req.retain(|r| !r.as_str().is_some_and(|r| removed.iter().any(|x| x == r)));
            }
            shown.input_schema = Arc::new(schema);
        }
        let applied = Applied {
            tool: upstream.name.to_string(),
            inject,
            removed,
        };
        (shown, applied)
    }
}

/// How a call of one overridden tool reaches the child.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Applied {
    /// The tool's own name.
    pub tool: String,
    /// Fixed values and hidden parameters' defaults, given on every call.
    pub inject: Map<String, Value>,
    /// The parameters the agent does not see (fixed and hidden): a call that passes one is refused.
    pub removed: Vec<String>,
}

impl Applied {
    /// The child's arguments for the agent's: refused when the agent passed a parameter it cannot see (named in the
    /// error), else its own with the injected values added.
    pub fn arguments(
        &self,
        args: Option<Map<String, Value>>,
    ) -> Result<Option<Map<String, Value>>> {
        let mut args = args.unwrap_or_default();
        if let Some(p) = self.removed.iter().find(|p| args.contains_key(*p)) {
            return Err(Error::invalid(
                "arguments",
                format!("`{p}` is set by this tool's override and may not be passed; leave it out"),
            ));
        }
        args.extend(self.inject.clone());
        Ok(Some(args))
    }
}

/// An overridden tool of a listing: its own name and definition (pinned with the override), the override applied.
#[derive(Debug, Clone)]
pub(crate) struct Overridden {
    pub tool: String,
    pub definition: Value,
    pub applied: ToolOverride,
}

/// A server's overrides as the gate last applied them: by shown name, the way back to the child's tool.
#[derive(Debug, Default)]
pub struct Inbound {
    /// The stored overrides this was made from (to tell when the store holds others).
    source: BTreeMap<String, ToolOverride>,
    by_shown: HashMap<String, Applied>,
}

impl Inbound {
    /// The way back for a shown name; `None` when the tool has no override.
    pub fn get(&self, shown: &str) -> Option<&Applied> {
        self.by_shown.get(shown)
    }

    /// The name a tool is shown under, given its own (`None`: no override renames it).
    pub fn shown_of(&self, own: &str) -> Option<&str> {
        self.by_shown
            .iter()
            .find(|(_, a)| a.tool == own)
            .map(|(s, _)| s.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.by_shown.is_empty()
    }
}

/// The gate's per-server record of applied overrides (`Registry::inbound`).
pub(crate) type InboundCache = std::sync::Mutex<HashMap<i64, Arc<Inbound>>>;

impl Registry {
    /// A server's stored overrides, by the tool's own name (an unreadable body is skipped with a warning).
    pub fn tool_overrides(&self, server_id: i64) -> Result<BTreeMap<String, ToolOverride>> {
        Ok(self
            .store()
            .tool_overrides(server_id)?
            .into_iter()
            .filter_map(|row| match serde_json::from_value(row.body) {
                Ok(o) => Some((row.tool, o)),
                Err(e) => {
                    tracing::warn!(server = %row.server, tool = %row.tool, error = %e, "unreadable tool override skipped");
                    None
                }
            })
            .collect())
    }

    /// Applies `overrides` to a listing (before the gate's filters and pins): each tool as shown, with, for an
    /// overridden one, its own definition and the override applied. A new name that another tool of the listing
    /// already shows is not applied (warned): two tools never share a name. Remembers the way back ([`Inbound`]).
    pub(crate) fn apply_overrides(
        &self,
        server_id: i64,
        server: &str,
        overrides: BTreeMap<String, ToolOverride>,
        listed: Vec<Tool>,
    ) -> Vec<(Tool, Option<Overridden>)> {
        let mut taken: std::collections::HashSet<String> = listed
            .iter()
            .filter(|t| {
                overrides
                    .get(t.name.as_ref())
                    .is_none_or(|o| o.name.is_none())
            })
            .map(|t| t.name.to_string())
            .collect();
        let mut by_shown = HashMap::new();
        let out = listed
            .into_iter()
            .map(|upstream| {
                let Some(o) = overrides.get(upstream.name.as_ref()) else {
                    return (upstream, None);
                };
                let mut o = o.clone();
                if let Some(n) = &o.name
                    && !taken.insert(n.clone())
                {
                    tracing::warn!(server, tool = %upstream.name, name = %n, "override's new name is taken by another tool; not renamed");
                    o.name = None;
                }
                let (shown, applied) = o.apply(&upstream);
                by_shown.insert(shown.name.to_string(), applied);
                let own = Overridden {
                    tool: upstream.name.to_string(),
                    definition: crate::pinning::definition(&upstream),
                    applied: o,
                };
                (shown, Some(own))
            })
            .collect();
        self.inbound_cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                server_id,
                Arc::new(Inbound {
                    source: overrides,
                    by_shown,
                }),
            );
        out
    }

    /// How calls of `server_id`'s overridden tools reach the child, as its last listing applied them.
    pub fn inbound(&self, server_id: i64) -> Option<Arc<Inbound>> {
        self.inbound_cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&server_id)
            .filter(|i| !i.is_empty())
            .cloned()
    }

    /// Whether the store holds other overrides for `server_id` than its last listing applied here (another process
    /// changed them: the listing is due again).
    pub fn overrides_stale(&self, server_id: i64) -> bool {
        let applied = self
            .inbound_cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&server_id)
            .map(|i| i.source.clone())
            .unwrap_or_default();
        self.tool_overrides(server_id)
            .is_ok_and(|now| now != applied)
    }

    /// Whether `tool` (a tool's own name) is shown under another name now (from the store).
    pub fn renamed(&self, server_id: i64, tool: &str) -> bool {
        self.tool_overrides(server_id).is_ok_and(|o| {
            o.get(tool)
                .is_some_and(|o| o.name.as_deref().is_some_and(|n| n != tool))
        })
    }

    /// The tool's own name for a name the agent may be shown (its override's new name), from the store.
    pub fn upstream_name(&self, server_id: i64, shown: &str) -> Option<String> {
        self.tool_overrides(server_id)
            .ok()?
            .into_iter()
            .find(|(_, o)| o.name.as_deref() == Some(shown))
            .map(|(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn apply_renames_describes_and_removes_fixed_and_hidden_parameters() {
        let t = tool(json!({"name": "echo", "description": "Echoes",
            "annotations": {"readOnlyHint": true},
            "inputSchema": {"type": "object", "required": ["text", "mode"], "properties": {
                "text": {"type": "string"}, "mode": {"type": "string"},
                "level": {"type": "integer", "default": 3}}}}));
        let o: ToolOverride = serde_json::from_value(json!({"name": "say", "description": "Says",
            "title": "Say", "annotations": {"destructiveHint": false},
            "fixed": {"mode": "loud"}, "hidden": ["level"]}))
        .unwrap();
        o.validate().unwrap();
        let (shown, applied) = o.apply(&t);
        let v = serde_json::to_value(&shown).unwrap();
        assert_eq!(v["name"], "say");
        assert_eq!(v["title"], "Say");
        assert_eq!(v["description"], "Says");
        assert_eq!(
            v["annotations"],
            json!({"readOnlyHint": true, "destructiveHint": false})
        );
        assert_eq!(
            v["inputSchema"]["properties"],
            json!({"text": {"type": "string"}})
        );
        assert_eq!(v["inputSchema"]["required"], json!(["text"]));
        assert_eq!(applied.tool, "echo");
        let args = applied
            .arguments(Some(json!({"text": "hi"}).as_object().unwrap().clone()))
            .unwrap()
            .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"text": "hi", "mode": "loud", "level": 3})
        );
        let refused = applied
            .arguments(Some(json!({"mode": "quiet"}).as_object().unwrap().clone()))
            .unwrap_err();
        assert!(refused.to_string().contains("`mode`"), "{refused}");
    }

    #[test]
    fn the_gate_shows_the_override_pins_it_with_the_tool_and_maps_calls_back() {
        use ad_core::events::EventBus;
        use ad_core::model::ServerSpec;
        let r = Registry::new(
            ad_store::Store::open_in_memory().unwrap(),
            EventBus::default(),
        );
        let s = r
            .register(ServerSpec {
                name: "calc".into(),
                command: Some("x".into()),
                ..Default::default()
            })
            .unwrap();
        let add = || {
            tool(json!({"name": "add", "description": "Adds",
                "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}}}}))
        };
        let names = |tools: &[Tool]| tools.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
        assert_eq!(names(&r.gate_tools(s.id, "calc", vec![add()])), ["add"]);
        // An override is a change of what was approved: withheld until approved with it.
        let o = json!({"name": "plus", "fixed": {"b": 1}});
        r.store().set_tool_override(s.id, "add", &o).unwrap();
        assert!(r.gate_tools(s.id, "calc", vec![add()]).is_empty());
        let pin = r.store().pin("calc", "add").unwrap().unwrap();
        assert!(pin.pending());
        assert_eq!(pin.current_definition["override"], o);
        assert_eq!(pin.current_definition["name"], "add");
        r.store().approve_pins(s.id, Some("add"), "test").unwrap();
        let shown = r.gate_tools(s.id, "calc", vec![add()]);
        assert_eq!(names(&shown), ["plus"]);
        let applied = r.inbound(s.id).unwrap().get("plus").cloned().unwrap();
        assert_eq!(applied.tool, "add");
        assert_eq!(
            applied.arguments(None).unwrap().map(Value::Object),
            Some(json!({"b": 1}))
        );
        // Filters match the tool's own name, whichever name it is asked by.
        r.store()
            .set_tool_filter(s.id, &["add".to_owned()], &[])
            .unwrap();
        assert!(r.tool_filter(s.id).unwrap().allows("plus"));
        assert!(!r.overrides_stale(s.id));
        r.store().clear_tool_override(s.id, "add").unwrap();
        assert!(r.overrides_stale(s.id));
        // Clearing an approved override is a change too: reviewed, then served as the child's own.
        assert!(r.gate_tools(s.id, "calc", vec![add()]).is_empty());
        assert!(r.inbound(s.id).is_none());
        r.store().approve_pins(s.id, Some("add"), "test").unwrap();
        assert_eq!(names(&r.gate_tools(s.id, "calc", vec![add()])), ["add"]);
    }

    #[test]
    fn bad_overrides_are_refused_and_layers_combine() {
        for bad in [
            json!({"name": "has space"}),
            json!({"annotations": {"readOnlyHint": "yes"}}),
            json!({"annotations": {"madeUp": true}}),
            json!({"fixed": {"a": 1}, "hidden": ["a"]}),
        ] {
            let o: ToolOverride = serde_json::from_value(bad.clone()).unwrap();
            assert!(o.validate().is_err(), "{bad}");
        }
        assert!(serde_json::from_value::<ToolOverride>(json!({"nmae": "x"})).is_err());
        let base: ToolOverride =
            serde_json::from_value(json!({"name": "a", "hidden": ["p"], "description": "d"}))
                .unwrap();
        let over: ToolOverride =
            serde_json::from_value(json!({"name": "b", "fixed": {"p": 1}})).unwrap();
        let l = base.layer(&over);
        assert_eq!(l.name.as_deref(), Some("b"));
        assert_eq!(l.description.as_deref(), Some("d"));
        assert!(l.hidden.is_empty());
        assert_eq!(l.fixed.get("p"), Some(&json!(1)));
    }
}
