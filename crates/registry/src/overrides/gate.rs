//! The registry's side of tool overrides: each server's overrides read from the store, applied to a listing by the
//! gate (before its filters and pins) with the way back remembered per server ([`Inbound`]), and the questions the
//! call path and the use cases ask of them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rmcp::model::Tool;

use super::types::{Inbound, Overridden, ToolOverride};
use crate::pinning::digest::definition;
use crate::registry::Registry;
use ad_core::error::Result;

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
                    definition: definition(&upstream),
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
    use serde_json::{Value, json};

    fn tool(v: Value) -> Tool {
        serde_json::from_value(v).unwrap()
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
}
