//! The tool override use cases: list, show, set and clear what the agent sees of a server's tool instead of its own
//! definition. The rule itself (validation, how an override is applied, pinned and called) is
//! `ad_registry::overrides`; this module is what the fronts (CLI, REST, the registry tool, the dashboard) call.

use serde_json::{Value, json};

use crate::app::App;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_registry::overrides::ToolOverride;
use ad_store::PinRow;

impl App {
    /// Every override, optionally of one server: `{server, tool, override, shown_as, status}` (see
    /// [`App::tool_override`]).
    pub fn tool_overrides(&self, server: Option<&str>) -> Result<Vec<Value>> {
        let rows = match server {
            Some(s) => {
                let s = self.registry.get(s)?;
                self.registry.store().tool_overrides(s.id)?
            }
            None => self.registry.store().all_tool_overrides()?,
        };
        rows.into_iter()
            .map(|r| {
                let pin = self.registry.store().pin(&r.server, &r.tool)?;
                Ok(view(&r.server, &r.tool, &r.body, pin.as_ref()))
            })
            .collect()
    }

    /// One tool's override: the override, the name the agent calls it by (`shown_as`, `server__name` on the
    /// aggregated front) and `status`: `approved` (served as overridden), `pending` (withheld until someone approves
    /// the tool with its override), `unseen` (the server has not listed the tool since).
    pub fn tool_override(&self, server: &str, tool: &str) -> Result<Value> {
        let s = self.registry.get(server)?;
        let o = self
            .registry
            .tool_overrides(s.id)?
            .remove(tool)
            .ok_or_else(|| Error::not_found("tool override", format!("{server}__{tool}")))?;
        let pin = self.registry.store().pin(server, tool)?;
        Ok(view(server, tool, &to_value(&o), pin.as_ref()))
    }

    /// Sets (replaces) the override of `tool` (its own name) of `server`; an empty override clears it. The tool is
    /// pinned with its override, so a running server's tool is withheld until someone approves it as overridden.
    pub async fn set_tool_override(
        &self,
        server: &str,
        tool: &str,
        o: ToolOverride,
    ) -> Result<Value> {
        if o.is_empty() {
            return self.clear_tool_override(server, tool).await;
        }
        o.validate()?;
        let s = self.registry.get(server)?;
        let store = self.registry.store();
        let pins: Vec<PinRow> = store
            .pins_of(s.id)?
            .into_iter()
            .filter(|p| ad_registry::pinning::scan::split_key(&p.tool).0 == ad_scan::Kind::Tool)
            .collect();
        let own = pins.iter().find(|p| p.tool == tool);
        // A server that listed its tools names them: an override of a tool it does not have is a typo.
        if own.is_none() && !pins.is_empty() {
            let names: Vec<&str> = pins.iter().map(|p| p.tool.as_str()).collect();
            return Err(Error::invalid(
                "tool",
                format!(
                    "`{server}` has no tool `{tool}` (its tools: {}); name a tool by its own name",
                    names.join(", ")
                ),
            ));
        }
        if let Some(n) = &o.name {
            let others = self.registry.tool_overrides(s.id)?;
            let taken = pins.iter().any(|p| p.tool == *n && p.tool != tool)
                || others
                    .iter()
                    .any(|(t, x)| t != tool && x.name.as_deref() == Some(n));
            if taken {
                return Err(Error::Conflict {
                    what: "tool name",
                    name: format!("{server}__{n}"),
                });
            }
        }
        // The parameters fixed or hidden are the tool's own (the schema it was last seen with).
        if let Some(pin) = own {
            let props = pin.current_definition["inputSchema"]["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            check_parameters(&o, &props, &format!("of `{tool}`"))?;
        }
        store.set_tool_override(s.id, tool, &to_value(&o))?;
        self.events.emit(Event::ServerUpdated {
            name: server.to_owned(),
        });
        self.proxy.relist_tools(server).await;
        self.tool_override(server, tool)
    }

    /// Removes the override of `tool`; the tool is pinned as its own definition again (reviewed as a change).
    pub async fn clear_tool_override(&self, server: &str, tool: &str) -> Result<Value> {
        let s = self.registry.get(server)?;
        let cleared = self.registry.store().clear_tool_override(s.id, tool)?;
        if cleared {
            self.events.emit(Event::ServerUpdated {
                name: server.to_owned(),
            });
            self.proxy.relist_tools(server).await;
        }
        Ok(json!({"server": server, "tool": tool, "cleared": cleared}))
    }
}

/// Every parameter `o` fixes or hides is one of `props` (the parameters the tool shows); `of` says whose they are in
/// the error.
pub(crate) fn check_parameters(
    o: &ToolOverride,
    props: &serde_json::Map<String, Value>,
    of: &str,
) -> Result<()> {
    match o
        .fixed
        .keys()
        .chain(&o.hidden)
        .find(|p| !props.contains_key(*p))
    {
        Some(p) => {
            let known: Vec<&str> = props.keys().map(String::as_str).collect();
            Err(Error::invalid(
                "parameter",
                format!(
                    "`{p}` is not a parameter {of} (its parameters: {})",
                    known.join(", ")
                ),
            ))
        }
        None => Ok(()),
    }
}

fn to_value(o: &ToolOverride) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

fn view(server: &str, tool: &str, body: &Value, pin: Option<&PinRow>) -> Value {
    let shown = body["name"].as_str().unwrap_or(tool);
    // The pin covers the override when its current definition carries this very override.
    let status = match pin {
        Some(p) if p.current_definition.get("override") != Some(body) => "unseen",
        Some(p) if p.pending() => "pending",
        Some(_) => "approved",
        None => "unseen",
    };
    json!({
        "server": server, "tool": tool, "override": body,
        "shown_as": shown, "call_as": crate::proxy::names::expose(server, shown),
        "status": status,
    })
}

/// An override from the CLI's flags: `KEY=VALUE` annotations and `PARAM=VALUE` fixed values, each value JSON when it
/// parses as JSON, else a string.
pub fn from_flags(
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    annotations: &[String],
    fixed: &[String],
    hidden: Vec<String>,
) -> Result<ToolOverride> {
    let pairs = |what: &'static str, items: &[String]| -> Result<Vec<(String, Value)>> {
        items
            .iter()
            .map(|kv| {
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| Error::invalid(what, format!("`{kv}` is not KEY=VALUE")))?;
                let v = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_owned()));
                Ok((k.to_owned(), v))
            })
            .collect()
    };
    let o = ToolOverride {
        name,
        title,
        description,
        annotations: pairs("annotation", annotations)?.into_iter().collect(),
        fixed: pairs("fix", fixed)?.into_iter().collect(),
        hidden,
    };
    o.validate()?;
    Ok(o)
}
