//! The pinning and filter use cases: list, diff and approve withheld tools, read and set a server's tool filter.
//!
//! The rule itself (fingerprints, policies, the gate every listed tool passes) is `ad_registry::pinning`; this module
//! is what the fronts call.

use serde_json::{Value, json};

use crate::app::App;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_registry::pinning::{ToolFilter, diff, pending_view};

impl App {
    /// Tools withheld until approved (changed or new while held), then the ones served with a scanner warning
    /// (status `warning`: a `medium` finding, nothing to approve), optionally of one server.
    pub fn pending_tools(&self, server: Option<&str>) -> Result<Vec<Value>> {
        if let Some(s) = server {
            self.registry.get(s)?;
        }
        let store = self.registry.store();
        let warned = store.warned_pins(server)?.into_iter().filter(|p| {
            p.findings
                .as_ref()
                .is_some_and(ad_registry::pinning::scan::warning)
        });
        Ok(store
            .pending_pins(server)?
            .into_iter()
            .chain(warned)
            .filter(|p| self.registry.tool_allowed(&p.server, &p.tool))
            .map(|p| pending_view(&p))
            .collect())
    }

    /// The approved and the current definition of one tool, and the fields that differ.
    pub fn tool_diff(&self, server: &str, tool: &str) -> Result<Value> {
        self.registry.get(server)?;
        let pin = self
            .registry
            .store()
            .pin(server, tool)?
            .filter(|_| self.registry.tool_allowed(server, tool))
            .ok_or_else(|| Error::not_found("tool", format!("{server}__{tool}")))?;
        Ok(json!({
            "server": server, "tool": tool, "pending": pin.pending(),
            "approved": pin.approved_definition, "current": pin.current_definition,
            "approved_fingerprint": pin.approved_fingerprint, "current_fingerprint": pin.current_fingerprint,
            "approved_by": pin.approved_by, "approved_at": pin.approved_at,
            "findings": pin.findings.clone().unwrap_or(Value::Array(vec![])),
            "changes": diff(&pin),
        }))
    }

    /// Approves what `server` offers now for `tool` (or every pending tool of it), recording `by` (who approved:
    /// `cli:USER`, `rest`, `mcp`), announces each approval and, if the server runs here, lists its tools again so
    /// the approved ones appear. A flagged prompt or resource template is named `prompt:NAME` or
    /// `resource_template:NAME`.
    pub async fn approve_tools(&self, server: &str, tool: Option<&str>, by: &str) -> Result<Value> {
        let s = self.registry.get(server)?;
        if let Some(t) = tool
            && self.registry.store().pin(server, t)?.is_none()
        {
            return Err(Error::not_found("tool", format!("{server}__{t}")));
        }
        let approved = self.registry.store().approve_pins(s.id, tool, by)?;
        // What profiles apply is read again from the approved pins.
        self.registry.forget_profile_layer(server);
        for t in &approved {
            self.events.emit(Event::ToolApproved {
                name: server.to_owned(),
                tool: t.clone(),
                by: by.to_owned(),
            });
        }
        if !approved.is_empty() {
            self.proxy.relist_tools(server).await;
        }
        Ok(json!({"server": server, "approved": approved}))
    }

    pub fn tool_filter(&self, server: &str) -> Result<ToolFilter> {
        let s = self.registry.get(server)?;
        self.registry.tool_filter(s.id)
    }

    /// Replaces a server's allow/deny patterns; a running server's exposed tools follow at once.
    pub async fn set_tool_filter(&self, server: &str, filter: ToolFilter) -> Result<ToolFilter> {
        filter.validate()?;
        let s = self.registry.get(server)?;
        self.registry
            .store()
            .set_tool_filter(s.id, &filter.allow, &filter.deny)?;
        self.events.emit(Event::ServerUpdated {
            name: server.to_owned(),
        });
        self.proxy.relist_tools(server).await;
        Ok(filter)
    }
}
