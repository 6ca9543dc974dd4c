//! Saved scripts: a code-mode script saved with a name, a description and an input schema is a tool of the built-in
//! server `scripts` (`scripts__NAME`), listed, searched and called like any tool from every front and from other
//! scripts. Its arguments are checked against its schema (a violation is an `isError` result naming each), then it
//! runs as `run_script` runs (`const args = ...;` ahead of its body), so its inner calls take the one call path
//! (filters, pins, the scanner, approvals, the call log, traces). The server's registry row is made with the first
//! saved script; its tools pass the registry's pins like a child's, and the script's body is part of the pinned
//! definition (its SHA-256 ends the description), so a changed body is a changed tool, withheld until approved when
//! the pin policy holds changes.

use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::codemode::{CODE_BYTES, MAX_CPU, Step, schema};
use crate::error::{Error, Result};
use crate::proxy::Caller;
use crate::proxy::local::LocalServer;
use crate::scripts::{RunRequest, answer_result};

/// The built-in server's name: its tools are `scripts__NAME`.
pub const SERVER: &str = "scripts";
/// The tag that marks the registry row as agent-discover's own.
const TAG: &str = "agent-discover:saved-scripts";
/// The longest description and schema (bytes).
const DESCRIPTION_BYTES: usize = 4096;
const SCHEMA_BYTES: usize = 64 * 1024;

/// A script to save, from any front.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaveRequest {
    pub name: String,
    pub code: String,
    #[serde(default)]
    pub description: Option<String>,
    /// A JSON Schema of `"type": "object"` (default: an object without properties).
    #[serde(default)]
    pub input_schema: Option<Value>,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// A saved script as the fronts show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SavedScript {
    pub name: String,
    /// The exposed tool name (`scripts__NAME`).
    pub tool: String,
    pub description: String,
    pub input_schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Hex SHA-256 of the body (what the pinned definition carries).
    pub sha256: String,
    /// Whether the tool is withheld (its definition changed since it was approved, or the scanner flagged it).
    pub withheld: bool,
    pub created_at: String,
    pub updated_at: String,
}

fn sha256(code: &str) -> String {
    schema::body_sha256(code)
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && name.as_bytes()[0].is_ascii_alphabetic();
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "name",
            "a saved script's name is 1 to 64 letters, digits, `_` or `-`, starting with a letter",
        ))
    }
}

/// The tool a saved script is: its description ends with its body's digest, so the pin covers the body.
fn tool_of(row: &ad_store::SavedScriptRow) -> Option<Tool> {
    let Ok(Value::Object(schema)) = serde_json::from_str::<Value>(&row.input_schema) else {
        return None;
    };
    let description = format!(
        "{}\n\n[saved script, sha256 {}]",
        row.description,
        &sha256(&row.code)[..16]
    );
    Some(Tool::new(row.name.clone(), description, Arc::new(schema)))
}

impl App {
    fn saved_view(&self, row: ad_store::SavedScriptRow, with_code: bool) -> SavedScript {
        let withheld = self.registry.tool_withheld(SERVER, &row.name);
        SavedScript {
            tool: crate::proxy::names::expose(SERVER, &row.name),
            description: row.description,
            input_schema: serde_json::from_str(&row.input_schema).unwrap_or(Value::Null),
            sha256: sha256(&row.code),
            code: with_code.then_some(row.code),
            timeout_ms: row.timeout_ms.map(|t| t.max(0) as u64),
            withheld,
            created_at: row.created_at,
            updated_at: row.updated_at,
            name: row.name,
        }
    }

    /// The built-in server's registry row, made on first use; a server of that name registered by someone else is a
    /// conflict.
    fn scripts_server(&self) -> Result<()> {
        match self.registry.get(SERVER) {
            Ok(s) if s.tags.iter().any(|t| t == TAG) => Ok(()),
            Ok(_) => Err(Error::Conflict {
                what: "server",
                name: format!(
                    "{SERVER} (a registered server has the name saved scripts are served under; rename or remove it)"
                ),
            }),
            Err(Error::NotFound { .. }) => {
                let spec: crate::model::ServerSpec = serde_json::from_value(json!({
                    "name": SERVER,
                    "description": "Saved code-mode scripts, served by agent-discover itself",
                    "source": "local",
                    "command": "agent-discover",
                    "args": ["scripts", "list"],
                    "tags": [TAG],
                }))
                .map_err(|e| Error::Internal(e.to_string()))?;
                self.registry.register(spec)?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Saves (or replaces) a script as the tool `scripts__NAME`.
    pub fn save_script(&self, req: SaveRequest) -> Result<SavedScript> {
        check_name(&req.name)?;
        if req.code.trim().is_empty() {
            return Err(Error::invalid("code", "empty"));
        }
        if req.code.len() > CODE_BYTES {
            return Err(Error::invalid("code", format!("over {CODE_BYTES} bytes")));
        }
        let description = req.description.unwrap_or_default();
        if description.len() > DESCRIPTION_BYTES {
            return Err(Error::invalid(
                "description",
                format!("over {DESCRIPTION_BYTES} bytes"),
            ));
        }
        let schema = req
            .input_schema
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        schema::check_schema(&schema).map_err(|e| Error::invalid("input_schema", e))?;
        let schema_text = schema.to_string();
        if schema_text.len() > SCHEMA_BYTES {
            return Err(Error::invalid(
                "input_schema",
                format!("over {SCHEMA_BYTES} bytes"),
            ));
        }
        if let Some(ms) = req.timeout_ms
            && (ms == 0 || ms > MAX_CPU.as_millis() as u64)
        {
            return Err(Error::invalid(
                "timeout_ms",
                format!("from 1 to {}", MAX_CPU.as_millis()),
            ));
        }
        self.scripts_server()?;
        self.registry.store().save_script(
            &req.name,
            &description,
            &schema_text,
            &req.code,
            req.timeout_ms.map(|t| t as i64),
        )?;
        self.proxy.local_changed()?;
        self.show_script(&req.name)
    }

    /// Every saved script (without their bodies).
    pub fn list_scripts(&self) -> Result<Vec<SavedScript>> {
        Ok(self
            .registry
            .store()
            .saved_scripts()?
            .into_iter()
            .map(|r| self.saved_view(r, false))
            .collect())
    }

    /// One saved script, with its body.
    pub fn show_script(&self, name: &str) -> Result<SavedScript> {
        let row = self
            .registry
            .store()
            .saved_script(name)?
            .ok_or_else(|| Error::not_found("saved script", name))?;
        Ok(self.saved_view(row, true))
    }

    /// Removes a saved script (its tool goes with it).
    pub fn remove_script(&self, name: &str) -> Result<()> {
        if !self.registry.store().remove_script(name)? {
            return Err(Error::not_found("saved script", name));
        }
        self.proxy.local_changed()
    }

    /// Runs saved script `name` with `args` for `caller` (see the module comment).
    async fn call_saved(
        self: Arc<Self>,
        name: String,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> Result<CallToolResponse> {
        let row =
            self.registry.store().saved_script(&name)?.ok_or_else(|| {
                Error::not_found("tool", crate::proxy::names::expose(SERVER, &name))
            })?;
        let args = Value::Object(args.unwrap_or_default());
        let schema: Value = serde_json::from_str(&row.input_schema)
            .map_err(|e| Error::Internal(format!("stored schema of `{name}`: {e}")))?;
        let violations = schema::validate(&schema, &args);
        if !violations.is_empty() {
            return Ok(CallToolResult::error(vec![ContentBlock::text(
                json!({
                    "error": format!("the arguments do not match the input schema of `{}`", crate::proxy::names::expose(SERVER, &name)),
                    "code": "invalid_input",
                    "kind": "invalid_arguments",
                    "violations": violations,
                })
                .to_string(),
            )])
            .into());
        }
        // On one line with the body's first, so the script's line numbers stay its own.
        let code = format!("const args = {args}; {}", row.code);
        let takes_input = caller.takes_input_required();
        let req = RunRequest {
            code,
            timeout_ms: row.timeout_ms.map(|t| t.max(1) as u64),
        };
        match Box::pin(self.run_script(req, caller)).await? {
            Step::Done(outcome) => Ok(answer_result(&outcome).into()),
            Step::Asked(asked) if takes_input => Ok(CallToolResponse::InputRequired(asked)),
            Step::Asked(_) => Err(Error::InputRequired {
                server: SERVER.into(),
                what: "an answer this client cannot give".into(),
            }),
        }
    }
}

/// The built-in server's tools: the saved scripts (`local.rs` in the proxy).
struct Saved(Weak<App>);

impl LocalServer for Saved {
    fn tools(&self) -> Result<Vec<Tool>> {
        let Some(app) = self.0.upgrade() else {
            return Ok(Vec::new());
        };
        Ok(app
            .registry
            .store()
            .saved_scripts()?
            .iter()
            .filter_map(tool_of)
            .collect())
    }

    fn call(
        &self,
        tool: String,
        args: Option<Map<String, Value>>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<CallToolResponse>> {
        let app = self.0.upgrade();
        Box::pin(async move {
            let app =
                app.ok_or_else(|| Error::Unavailable("agent-discover is shutting down".into()))?;
            app.call_saved(tool, args, caller).await
        })
    }
}

/// Serves the saved scripts as the built-in server (the composition root, once).
pub fn serve(app: &Arc<App>) {
    app.proxy
        .set_local(SERVER, Arc::new(Saved(Arc::downgrade(app))));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("sum_files").is_ok());
        assert!(check_name("a-1").is_ok());
        for bad in ["", "1a", "a b", "a__b!", &"a".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_body_is_part_of_the_tool_definition() {
        let row = |code: &str| ad_store::SavedScriptRow {
            name: "s".into(),
            description: "d".into(),
            input_schema: "{\"type\":\"object\"}".into(),
            code: code.into(),
            timeout_ms: None,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let a = tool_of(&row("return 1")).unwrap();
        let b = tool_of(&row("return 2")).unwrap();
        let fp = |t: &Tool| ad_registry::pinning::fingerprint(&ad_registry::pinning::definition(t));
        assert_ne!(fp(&a), fp(&b));
        assert_eq!(fp(&a), fp(&tool_of(&row("return 1")).unwrap()));
    }
}
