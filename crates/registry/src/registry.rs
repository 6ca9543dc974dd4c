//! The registry domain service: registering, updating, removing, finding and listing servers, and their tool metadata.
//!
//! Validates every input before it reaches storage and emits lifecycle events after each change.
//! Knows nothing about MCP, HTTP or the CLI; transports call these methods and render the results.

use ad_core::error::{Error, Result};
use ad_core::events::{Event, EventBus};
use ad_core::model::{
    ListFilter, Server, ServerName, ServerPatch, ServerSpec, ServerSummary, ToolInfo, ToolRecord,
};
use ad_store::Store;

#[derive(Clone, Debug)]
pub struct Registry {
    store: Store,
    events: EventBus,
    /// Whether unseen tools are approved on sight (`pinning.rs`).
    pin_policy: crate::pinning::policy::Policy,
    /// Servers' stored approval rules as last read, valid while the store's fresh marker stays (`approval.rs`).
    policies: std::sync::Arc<std::sync::Mutex<PolicyCache>>,
    /// How calls of overridden tools reach each server's child, as the gate last applied its overrides.
    inbound: std::sync::Arc<crate::overrides::InboundCache>,
    /// The approved profile overrides of each server's tools (`profile_overrides/`).
    layers: std::sync::Arc<crate::profile_overrides::LayerCache>,
    /// The scanner's semantic signal, when the application lends it a model (`pinning/scan.rs`).
    scan_model: Option<std::sync::Arc<ad_scan::Model>>,
}

/// Servers' stored approval rules read under one store marker ([`Store::fresh_marker`]): any commit, by this process
/// or another, moves the marker and empties the cache, so a rule is in force from its commit on.
#[derive(Debug, Default)]
struct PolicyCache {
    marker: Option<(i64, u64)>,
    servers: std::collections::HashMap<i64, Vec<ad_store::PolicyRow>>,
}

impl Registry {
    pub fn new(store: Store, events: EventBus) -> Registry {
        Registry {
            store,
            events,
            pin_policy: Default::default(),
            policies: Default::default(),
            inbound: Default::default(),
            layers: Default::default(),
            scan_model: None,
        }
    }

    /// Scans new and changed definitions with the semantic signal of `model` beside the rules.
    pub fn with_scan_model(mut self, model: Option<std::sync::Arc<ad_scan::Model>>) -> Registry {
        self.scan_model = model;
        self
    }

    /// The model the scanner's semantic signal uses, if the application lent one.
    pub fn scan_model(&self) -> Option<&std::sync::Arc<ad_scan::Model>> {
        self.scan_model.as_ref()
    }

    pub fn with_pin_policy(mut self, policy: crate::pinning::policy::Policy) -> Registry {
        self.pin_policy = policy;
        self
    }

    pub fn pin_policy(&self) -> crate::pinning::policy::Policy {
        self.pin_policy
    }

    /// The store's marker the approval rules are cached under: the same marker means no commit since, by anyone.
    /// `None` when the store cannot tell at once (PostgreSQL: rules are read on every use).
    pub fn rules_marker(&self) -> Option<(i64, u64)> {
        self.store.fresh_marker()
    }

    /// A server's stored approval rules, read from the store only after a commit since the last read (on every call
    /// where the store has no fresh marker: PostgreSQL).
    pub(crate) fn policy_rows(&self, server_id: i64) -> Result<Vec<ad_store::PolicyRow>> {
        // The marker is read before the rows: a commit in between moves it again, so the next call reads again.
        let Some(marker) = self.rules_marker() else {
            return self.store.tool_policies(server_id);
        };
        {
            let cache = self.policies.lock().unwrap_or_else(|p| p.into_inner());
            if cache.marker == Some(marker)
                && let Some(rows) = cache.servers.get(&server_id)
            {
                return Ok(rows.clone());
            }
        }
        let rows = self.store.tool_policies(server_id)?;
        let mut cache = self.policies.lock().unwrap_or_else(|p| p.into_inner());
        if cache.marker != Some(marker) {
            cache.servers.clear();
            cache.marker = Some(marker);
        }
        cache.servers.insert(server_id, rows.clone());
        Ok(rows)
    }

    pub(crate) fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    pub(crate) fn inbound_cache(&self) -> &crate::overrides::InboundCache {
        &self.inbound
    }

    pub(crate) fn layers(&self) -> &crate::profile_overrides::LayerCache {
        &self.layers
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Adds a server; a taken name is [`Error::Conflict`].
    pub fn register(&self, spec: ServerSpec) -> Result<Server> {
        let name = spec.validate()?;
        // A catalog entry (introspected, never installed) gives way to a real registration of its name.
        if let Some(entry) = self.store.server_by_name(name.as_str())?
            && !entry.installed
        {
            self.remove(name.as_str())?;
        }
        let server = self.store.insert_server(&spec)?;
        self.events.emit(Event::ServerRegistered {
            name: name.to_string(),
        });
        Ok(server)
    }

    /// Changes a server's configuration; the result is validated as a whole.
    pub fn update(&self, name: &str, patch: &ServerPatch) -> Result<Server> {
        let current = self.get(name)?;
        let spec = patch.apply(&current);
        spec.validate()?;
        let activate = patch.activate_timeout_ms.or(current.activate_timeout_ms);
        let call = patch.call_timeout_ms.or(current.call_timeout_ms);
        for (what, v) in [("activate_timeout_ms", activate), ("call_timeout_ms", call)] {
            if v.is_some_and(|ms| ms == 0 || ms > 3_600_000) {
                return Err(Error::invalid(
                    what,
                    "must be between 1 and 3600000 milliseconds",
                ));
            }
        }
        let server = self
            .store
            .update_server(current.id, &spec, activate, call)?;
        self.events.emit(Event::ServerUpdated {
            name: server.name.clone(),
        });
        Ok(server)
    }

    /// Deletes a server with its tools, secrets and metrics. The caller stops it first if it runs.
    pub fn remove(&self, name: &str) -> Result<()> {
        let name = parse_name(name)?;
        if !self.store.delete_server(name.as_str())? {
            return Err(Error::not_found("server", name.as_str()));
        }
        self.events.emit(Event::ServerRemoved {
            name: name.to_string(),
        });
        Ok(())
    }

    pub fn get(&self, name: &str) -> Result<Server> {
        let name = parse_name(name)?;
        self.store
            .server_by_name(name.as_str())?
            .ok_or_else(|| Error::not_found("server", name.as_str()))
    }

    pub fn get_by_id(&self, id: i64) -> Result<Server> {
        self.store
            .server_by_id(id)?
            .ok_or_else(|| Error::not_found("server", format!("#{id}")))
    }

    pub fn list(&self, filter: &ListFilter) -> Result<Vec<ServerSummary>> {
        if let Some(q) = &filter.query
            && q.len() > ad_core::model::limits::QUERY
        {
            return Err(Error::invalid(
                "query",
                format!(
                    "{} bytes is over the limit of {}",
                    q.len(),
                    ad_core::model::limits::QUERY
                ),
            ));
        }
        let mut rows = self.store.list_servers(filter)?;
        // Servers waiting for an OAuth authorization show where to give it.
        let urls = self.store.pending_auth_urls()?;
        if !urls.is_empty() {
            for r in &mut rows {
                r.auth_url = urls.get(&r.server.id).cloned();
            }
        }
        Ok(rows)
    }

    pub fn tools(&self, server_id: i64) -> Result<Vec<ToolRecord>> {
        self.store.tools_of(server_id)
    }

    /// Stores the tools a server advertised (searchable afterwards), replacing its previous list.
    pub fn save_tools(&self, server_id: i64, tools: &[ToolInfo]) -> Result<()> {
        self.store.replace_tools(server_id, tools)
    }

    pub fn set_active(&self, server_id: i64, active: bool, last_error: Option<&str>) -> Result<()> {
        self.store.set_active(server_id, active, last_error)
    }
}

fn parse_name(name: &str) -> Result<ServerName> {
    name.parse()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ad_core::model::Transport;

    fn reg() -> Registry {
        Registry::new(Store::open_in_memory().unwrap(), EventBus::default())
    }

    fn spec(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            command: Some("node".into()),
            description: "files on disk".into(),
            tags: vec!["fs".into()],
            ..Default::default()
        }
    }

    #[test]
    fn register_list_update_remove() {
        let r = reg();
        r.register(spec("filesystem")).unwrap();
        r.register(spec("github")).unwrap();
        assert!(matches!(
            r.register(spec("github")),
            Err(Error::Conflict { .. })
        ));
        let hits = r
            .list(&ListFilter {
                query: Some("files".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(hits.len(), 2);
        let hits = r
            .list(&ListFilter {
                query: Some("githu".into()),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            hits.iter()
                .map(|s| s.server.name.as_str())
                .collect::<Vec<_>>(),
            ["github"]
        );
        let s = r
            .update(
                "github",
                &ServerPatch {
                    description: Some("code hosting".into()),
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(s.description, "code hosting");
        assert!(
            r.list(&ListFilter {
                query: Some("hosting".into()),
                ..Default::default()
            })
            .unwrap()
            .len()
                == 1
        );
        let bad = ServerPatch {
            transport: Some(Transport::Sse),
            ..Default::default()
        };
        assert!(matches!(
            r.update("github", &bad),
            Err(Error::Invalid { .. })
        ));
        r.remove("github").unwrap();
        assert!(matches!(r.remove("github"), Err(Error::NotFound { .. })));
        assert_eq!(r.list(&ListFilter::default()).unwrap().len(), 1);
    }

    #[test]
    fn tools_replace_and_cascade() {
        let r = reg();
        let s = r.register(spec("fs")).unwrap();
        let t = |n: &str| ToolInfo {
            name: n.into(),
            description: format!("{n} tool"),
            input_schema: serde_json::json!({"type":"object"}),
        };
        r.save_tools(s.id, &[t("read"), t("write")]).unwrap();
        r.save_tools(s.id, &[t("read"), t("list")]).unwrap();
        let names: Vec<_> = r.tools(s.id).unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["list", "read"]);
        r.remove("fs").unwrap();
        assert_eq!(r.store().count_tools().unwrap(), 0);
    }
}
