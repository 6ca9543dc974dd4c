//! The registry's side of profile overrides: what every profile sets on a server's tools (as stored), the approved
//! layer of each server made from its pins and kept until the gate lists the server again, and whether another
//! process changed a profile since.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::types::{ByTool, FIELD, ProfileLayer, Shown, lenient, tool_of};
use crate::overrides::ToolOverride;
use crate::pinning::scan::split_key;
use crate::registry::Registry;
use ad_core::error::Result;

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
            if split_key(&pin.tool).0 != ad_scan::Kind::Tool {
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

#[cfg(test)]
mod tests {
    use super::super::types::parse;
    use super::*;
    use ad_core::events::EventBus;
    use ad_core::model::ServerSpec;
    use ad_core::profile::Profile;
    use rmcp::model::Tool;
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
