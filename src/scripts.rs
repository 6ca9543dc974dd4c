//! Code mode's use cases (issue 28): run a script (`run_script`, `POST /api/scripts/run`, `agent-discover run`) and
//! declare what a script can call (`script_api`). The engine, its limits and the host API are `ad-codemode`'s; this
//! file gives it the application's `find_tool` and `find_tools` (as the registry actions answer them) and chooses
//! the tools to declare.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde_json::Value;

use crate::app::App;
use crate::codemode::{ApiTool, Catalog, Script, Step};
use crate::error::{Error, Result};
use crate::proxy::Caller;

/// How many tools `script_api` declares at most (ask by server or by query for others).
pub const API_TOOLS: usize = 200;
/// How many tools a `script_api` query declares.
const QUERY_TOOLS: usize = 10;

/// `find_tool` and `find_tools` for scripts: the registry actions' answers (with auto-activation, and a catalog
/// entry offered for install to a client that can consent).
struct AppCatalog(Weak<App>);

impl AppCatalog {
    fn app(&self) -> Result<Arc<App>> {
        self.0
            .upgrade()
            .ok_or_else(|| Error::Unavailable("agent-discover is shutting down".into()))
    }
}

impl Catalog for AppCatalog {
    fn find_tool(&self, query: String, caller: Caller) -> BoxFuture<'static, Result<Value>> {
        let app = self.app();
        Box::pin(async move {
            let app = app?;
            crate::consent::find_tool_answer(&app, &query, 5, true, &caller).await
        })
    }

    fn find_tools(
        &self,
        intents: Vec<String>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<Value>> {
        let app = self.app();
        Box::pin(async move {
            let app = app?;
            if intents.is_empty() || intents.len() > 20 {
                return Err(Error::invalid("intents", "1 to 20 intents"));
            }
            Ok(crate::consent::find_tools_answer(&app, &intents, 5, true, &caller).await)
        })
    }
}

/// The arguments of `run_script`, from any front.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// JavaScript: the body of an async function (`return` gives the result).
    pub code: String,
    /// The script's CPU time limit in ms (default 5000, at most 60000); waiting for tools does not count.
    pub timeout_ms: Option<u64>,
}

impl App {
    /// Runs a script for `caller`, or answers a paused run's questions (the caller's `requestState` names it).
    pub async fn run_script(self: &Arc<Self>, request: RunRequest, caller: Caller) -> Result<Step> {
        if request.code.trim().is_empty() && caller.request_state.is_none() {
            return Err(Error::invalid("code", "empty"));
        }
        self.scripts
            .run(
                Script {
                    code: request.code,
                    timeout_ms: request.timeout_ms,
                },
                caller,
                Arc::new(AppCatalog(Arc::downgrade(self))),
            )
            .await
    }

    /// TypeScript declarations of what a script can call: the tools of `servers`, or those `query` finds, or (with
    /// neither) every tool of the running servers; at most [`API_TOOLS`].
    pub async fn script_api(
        &self,
        servers: Option<Vec<String>>,
        query: Option<String>,
        principal: Option<&ad_core::identity::Principal>,
    ) -> Result<String> {
        self.script_api_in(servers, query, principal, None).await
    }

    /// [`App::script_api`] within a profile: only the profile's tools are declared.
    pub async fn script_api_in(
        &self,
        servers: Option<Vec<String>>,
        query: Option<String>,
        principal: Option<&ad_core::identity::Principal>,
        profile: Option<&ad_core::profile::Profile>,
    ) -> Result<String> {
        let mut notes = Vec::new();
        let mut tools = Vec::new();
        match (servers, query) {
            (Some(servers), _) if !servers.is_empty() => {
                for server in servers {
                    self.server_api(&server, &mut tools, &mut notes)?;
                }
            }
            (_, Some(query)) if !query.trim().is_empty() => {
                if query.len() > crate::model::limits::QUERY {
                    return Err(Error::invalid("query", "too long"));
                }
                let ranking = self.search.rank(&query, QUERY_TOOLS).await?;
                for hit in ranking.hits {
                    let Ok(server) = self.registry.get(&hit.tool.server) else {
                        continue;
                    };
                    let allowed = self
                        .registry
                        .tool_filter(server.id)
                        .is_ok_and(|f| f.allows(&hit.tool.name));
                    if !server.installed || !allowed {
                        continue;
                    }
                    match self.proxy.server_tool(&server.name, &hit.tool.name) {
                        Some(live) => tools.push(api_tool(&server.name, &live)),
                        None => {
                            note_inactive(&server.name, &mut notes);
                            tools.push(stored_tool(&server.name, &hit.tool));
                        }
                    }
                }
            }
            _ => {
                for (server, tool, _) in self.proxy.exposed_tools() {
                    if let Some(live) = self.proxy.server_tool(&server, &tool) {
                        tools.push(api_tool(&server, &live));
                    }
                }
            }
        }
        // Only what the caller may see (issue 30), as its profile shows it.
        tools.retain(|t| {
            profile.is_none_or(|p| p.allows(&t.server, Some(&t.tool)))
                && self.proxy.visible_to(principal, &t.server, Some(&t.tool))
        });
        if let Some(p) = profile.filter(|p| !p.overrides.is_null()) {
            for t in &mut tools {
                self.api_tool_in_profile(p, t);
            }
        }
        if tools.len() > API_TOOLS {
            notes.push(format!(
                "{} tools found; the first {API_TOOLS} are declared: ask by server or by query for the others",
                tools.len()
            ));
            tools.truncate(API_TOOLS);
        }
        if tools.is_empty() {
            notes.push(
                "no callable tool matched: start a server (registry activate, or find_tool) or ask by server"
                    .into(),
            );
        }
        let mut out = String::new();
        for n in &notes {
            out.push_str(&format!("// NOTE: {n}\n"));
        }
        out.push_str(&crate::codemode::declarations(&tools));
        Ok(out)
    }

    /// One server's tools: live when it runs, else as stored (and a note that it must be started).
    fn server_api(
        &self,
        name: &str,
        tools: &mut Vec<ApiTool>,
        notes: &mut Vec<String>,
    ) -> Result<()> {
        let server = self.registry.get(name)?;
        let live: Vec<_> = self
            .proxy
            .exposed_tools()
            .into_iter()
            .filter(|(s, _, _)| s == &server.name)
            .filter_map(|(s, t, _)| self.proxy.server_tool(&s, &t))
            .collect();
        if !live.is_empty() {
            tools.extend(live.iter().map(|t| api_tool(&server.name, t)));
            return Ok(());
        }
        let filter = self.registry.tool_filter(server.id)?;
        let stored = self.registry.tools(server.id)?;
        note_inactive(&server.name, notes);
        tools.extend(
            stored
                .iter()
                .filter(|t| filter.allows(&t.name))
                .map(|t| stored_tool(&server.name, t)),
        );
        Ok(())
    }
}

fn note_inactive(server: &str, notes: &mut Vec<String>) {
    let note = format!(
        "`{server}` is not running: its tools are declared as last listed; start it (registry activate, or find_tool) \
         before calling them"
    );
    if !notes.contains(&note) {
        notes.push(note);
    }
}

fn api_tool(server: &str, t: &rmcp::model::Tool) -> ApiTool {
    ApiTool {
        server: server.to_owned(),
        tool: t.name.to_string(),
        exposed: crate::proxy::names::expose(server, &t.name),
        description: t.description.as_deref().map(str::to_owned),
        input_schema: Value::Object((*t.input_schema).clone()),
        output_schema: t
            .output_schema
            .as_ref()
            .map(|o| Value::Object((**o).clone())),
    }
}

fn stored_tool(server: &str, t: &crate::model::ToolRecord) -> ApiTool {
    ApiTool {
        server: server.to_owned(),
        tool: t.name.clone(),
        exposed: crate::proxy::names::expose(server, &t.name),
        description: Some(t.description.clone()).filter(|d| !d.is_empty()),
        input_schema: t.input_schema.clone(),
        output_schema: None,
    }
}

/// A run's answer as a tool result: its JSON as text, `isError` when the script failed or was stopped.
pub fn answer_result(outcome: &crate::codemode::Outcome) -> rmcp::model::CallToolResult {
    let text = outcome.to_json().to_string();
    let block = vec![rmcp::model::ContentBlock::text(text)];
    if outcome.failed() {
        rmcp::model::CallToolResult::error(block)
    } else {
        rmcp::model::CallToolResult::success(block)
    }
}
