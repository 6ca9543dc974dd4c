//! The override vocabulary: a tool's override ([`ToolOverride`]), what it makes of the child's tool and how a call by
//! the shown name goes back ([`Applied`]), and a server's overrides as the gate last applied them ([`Inbound`]). A
//! leaf: the registry holds the per-server [`InboundCache`], the gate (`gate.rs`) fills it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
    pub(super) source: BTreeMap<String, ToolOverride>,
    pub(super) by_shown: HashMap<String, Applied>,
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
