//! A child's lists gated again: its tools listed again after a change (with no child here, reviewed as last seen),
//! stored and announced; its prompts and resource templates passed through the scanner's step of the registry's
//! gate before they are shown or used.

use serde_json::Value;

use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_core::model::ToolInfo;

use crate::state::{Child, Inner, Slot};
use crate::sync::lock;

impl Inner {
    /// Re-lists a child's tools after it said they changed, stores them and tells clients.
    pub(super) async fn refresh_tools(&self, name: &str) {
        let slot = match lock(&self.children).get(name) {
            Some(Slot::Running(c)) => Some(c.clone()),
            Some(_) => return,
            None => None,
        };
        let Some(child) = slot else {
            return self.gate_last_seen(name).await;
        };
        match child.peer.list_all_tools().await {
            Ok(tools) => {
                // The list is held while the pins are checked and written: a call that finds a tool's changed pin
                // pending in the database (another request may read it there) waits for the list that withholds it.
                {
                    let mut listed = lock(&child.tools);
                    *listed = self.registry.gate_tools(child.server_id, name, tools);
                }
                self.gate_approvals(&child);
                let _ = self
                    .registry
                    .save_tools(child.server_id, &child.tool_infos());
                self.events.emit(Event::ToolsChanged {
                    name: name.to_owned(),
                });
            }
            Err(e) => tracing::warn!(server = name, error = %e, "re-listing tools failed"),
        }
    }
}

impl Inner {
    /// No child of `name` runs in this process (a CLI command, or a server not started here): its tools are reviewed
    /// again as last seen, under the start lock, so a change of what the agent sees is in the pins at once.
    async fn gate_last_seen(&self, name: &str) {
        let start = self.lock_for(name);
        let _held = start.lock().await;
        if lock(&self.children).contains_key(name) {
            return;
        }
        let result = self
            .registry
            .get(name)
            .and_then(|s| self.registry.gate_last_seen(s.id, name));
        if let Err(e) = result {
            tracing::warn!(server = name, error = %e, "cannot review the tools as last seen");
        }
    }

    /// A child's prompts or resource templates that may be shown: the scanner's step of the registry's gate
    /// (`Registry::gate_definitions`); a flagged one is withheld until approved.
    pub(crate) fn gate<T: serde::Serialize>(
        &self,
        child: &Child,
        kind: ad_scan::Kind,
        items: Vec<T>,
    ) -> Vec<T> {
        let values: Vec<Value> = items
            .iter()
            .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
            .collect();
        let shown = self
            .registry
            .gate_definitions(child.server_id, &child.name, kind, &values);
        items
            .into_iter()
            .zip(shown)
            .filter_map(|(i, show)| show.then_some(i))
            .collect()
    }

    /// One prompt (or template) about to be used: refused with the scanner's reasons if it is withheld.
    pub(crate) fn gate_one<T: serde::Serialize>(
        &self,
        child: &Child,
        kind: ad_scan::Kind,
        item: &T,
    ) -> Result<()> {
        let value = serde_json::to_value(item).unwrap_or(Value::Null);
        let shown = self.registry.gate_definitions(
            child.server_id,
            &child.name,
            kind,
            std::slice::from_ref(&value),
        );
        if shown.first() == Some(&true) {
            return Ok(());
        }
        let name = value["name"].as_str().unwrap_or_default();
        let key = ad_registry::pinning::scan::pin_key(kind, name);
        let pin = self.registry.store().pin(&child.name, &key)?;
        Err(pin
            .and_then(|p| ad_registry::pinning::scan::flagged_error(&child.name, &p))
            .unwrap_or_else(|| Error::not_found(kind.as_str(), name)))
    }
}

impl Child {
    pub(super) fn tool_infos(&self) -> Vec<ToolInfo> {
        lock(&self.tools)
            .iter()
            .map(|t| ToolInfo {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect()
    }
}
