//! The built-in server: tools the application serves itself (saved scripts, under the server name `scripts`) beside
//! the children's, on the same paths: listed with the children's tools (through the registry's pins and filters, so
//! a changed definition is withheld until approved, and the scanner sees it), resolved by the same names
//! (`scripts__NAME`), and called through [`Proxy::call_tool_response`], which records the call as any other. The
//! server has a registry row (so pins, filters, the call log and the search index have its id); it is never started
//! as a child: activating it answers at once.

use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{CallToolResponse, Tool};
use serde_json::{Map, Value};

use ad_core::error::{Error, Result};
use ad_core::events::Event;

use crate::caller::Caller;
use crate::state::Proxy;
use crate::sync::lock;

pub(crate) mod server;

pub(crate) use server::Local;
pub use server::LocalServer;

impl Proxy {
    /// Serves `server` as the built-in server `name` (the composition root, once).
    pub fn set_local(&self, name: &str, server: Arc<dyn LocalServer>) {
        *lock(&self.inner.local) = Some(Local {
            name: name.to_owned(),
            server,
        });
    }

    pub(crate) fn local_named(&self, name: &str) -> Option<Local> {
        lock(&self.inner.local)
            .as_ref()
            .filter(|l| l.name == name)
            .cloned()
    }

    /// Whether `name` is the built-in server.
    pub fn is_local(&self, name: &str) -> bool {
        self.local_named(name).is_some()
    }

    /// The built-in server's exposed tools (after pins and filters), when it has a registry row; its name too.
    pub(crate) fn local_tools(&self) -> Option<(String, Vec<Tool>)> {
        let local = lock(&self.inner.local).clone()?;
        let server = self.inner.registry.get(&local.name).ok()?;
        let tools = match local.server.tools() {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(server = %local.name, error = %e, "cannot list the built-in server's tools");
                return None;
            }
        };
        Some((
            local.name.clone(),
            self.inner
                .registry
                .gate_tools(server.id, &local.name, tools),
        ))
    }

    /// After the built-in server's tools changed (a script saved or removed): its pins and its search index
    /// refreshed, and clients told the tool list changed.
    pub fn local_changed(&self) -> Result<()> {
        let Some(local) = lock(&self.inner.local).clone() else {
            return Ok(());
        };
        let server = self.inner.registry.get(&local.name)?;
        let exposed = self
            .inner
            .registry
            .gate_tools(server.id, &local.name, local.server.tools()?);
        let infos: Vec<ad_core::model::ToolInfo> = exposed
            .iter()
            .map(|t| ad_core::model::ToolInfo {
                name: t.name.to_string(),
                description: t.description.as_deref().unwrap_or_default().to_owned(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect();
        self.inner.registry.save_tools(server.id, &infos)?;
        self.inner.events.emit(Event::ToolsChanged {
            name: local.name.clone(),
        });
        Ok(())
    }

    /// A call of the built-in server's `tool`: refused as a child's withheld or unknown tool would be, else carried
    /// out and recorded (metrics, the call log) as any proxied call.
    pub(crate) async fn call_local(
        &self,
        local: Local,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResponse> {
        let name = local.name.as_str();
        let server = self.inner.registry.get(name)?;
        let exposed = self
            .local_tools()
            .map(|(_, t)| t.iter().any(|t| t.name == tool))
            .unwrap_or(false);
        if !exposed {
            let registry = &self.inner.registry;
            return Err(match registry.store().pin(name, tool)? {
                Some(pin) if pin.pending() && registry.tool_allowed(name, tool) => {
                    ad_registry::pinning::scan::flagged_error(name, &pin).unwrap_or_else(|| {
                        Error::ToolChanged {
                            server: name.to_owned(),
                            tool: tool.to_owned(),
                        }
                    })
                }
                _ => Error::not_found("tool", format!("{name}__{tool}")),
            });
        }
        let started = Instant::now();
        let who = caller.principal.clone();
        let note = caller.script.then_some("[script] ");
        let res = local
            .server
            .call(tool.to_owned(), args.clone(), caller)
            .await;
        self.inner.account(
            name,
            server.id,
            tool,
            args,
            started.elapsed(),
            &res,
            note,
            who.as_deref(),
        );
        res
    }
}
