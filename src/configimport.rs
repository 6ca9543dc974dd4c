//! Applying a parsed client config file (see `crate::clientconfig`) to the registry: the domain step every surface shares.

use serde::Serialize;

use crate::app::App;
use crate::clientconfig::Imported;
use crate::error::{Error, Result};
use crate::lifecycle::{AddServerResult, Change};

/// What happened to one server of the file: `action` (`added`, `updated`, `unchanged`) and its state afterwards
/// (an `AddServerResult`: `ready`, `stopped`, `authenticating`, `error`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportResult {
    pub name: String,
    /// `added`, `updated`, `unchanged`, or `refused` (the name belongs to another origin).
    pub action: &'static str,
    #[serde(flatten)]
    pub result: AddServerResult,
}

/// The origin a parsed file is applied under: its canonical path, or `manual` for a config given inline.
pub enum Origin<'a> {
    File(&'a str),
    Manual,
}

impl App {
    /// Applies every server `imported` holds through the lifecycle (one transaction, idempotent), then stores the
    /// secret values it found in the environment (encrypted). Under [`Origin::File`] the file's servers are
    /// replaced: those that left the file are stopped and removed, other origins are untouched. A file that
    /// launches agent-discover itself (rewritten by `connect`) only adds: its servers now live here. Under
    /// [`Origin::Manual`] servers are added or reconfigured, never removed. One result per server, in file order.
    pub async fn import_client_config(
        &self,
        imported: &Imported,
        origin: Origin<'_>,
    ) -> Result<Vec<ImportResult>> {
        let servers: Vec<&crate::clientconfig::ImportedServer> = imported
            .servers
            .iter()
            .filter(|s| s.spec.name != crate::clientconfig::SELF_NAME)
            .collect();
        let connected = servers.len() != imported.servers.len();
        let specs: Vec<_> = servers.iter().map(|s| s.spec.clone()).collect();
        let results = match origin {
            Origin::File(path) if !connected => self.apply_config(path, specs).await?,
            Origin::File(path) => self.merge_config(path, specs).await?,
            Origin::Manual => {
                self.merge_config(crate::model::MANUAL_ORIGIN, specs)
                    .await?
            }
        };
        let mut out = Vec::with_capacity(results.len());
        for (s, mut r) in servers.into_iter().zip(results) {
            let action = match r.change.take() {
                Some(Change::Added) => "added",
                Some(Change::Updated) => "updated",
                Some(Change::Unchanged) => "unchanged",
                None => "refused",
            };
            if action != "refused" && !s.secrets.is_empty() {
                // Re-importing the same values writes nothing.
                let id = self.registry.get(&s.spec.name)?.id;
                let current = self.secrets.env_for(id)?;
                for (k, v) in &s.secrets {
                    if current.get(k) != Some(v) {
                        self.secrets.set(&s.spec.name, k, v)?;
                    }
                }
            }
            out.push(ImportResult {
                name: s.spec.name.clone(),
                action,
                result: r,
            });
        }
        Ok(out)
    }
}

/// `apply_config` on the MCP tool and REST: a client config given inline (`config` + `format`) or by `path`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplyConfigRequest {
    /// The file's content as a JSON object (Codex's TOML tables as the equivalent object).
    pub config: Option<serde_json::Value>,
    /// The client format; required with `config`, detected from the path otherwise.
    pub format: Option<String>,
    /// A client config file on this machine.
    pub path: Option<String>,
}

/// What `apply_config` did, and what it needs.
#[derive(Debug, Clone, Serialize)]
pub struct ApplyConfigReport {
    pub file: String,
    pub format: crate::clientconfig::Format,
    pub results: Vec<ImportResult>,
    pub renamed: Vec<crate::clientconfig::Renamed>,
    pub needs_input: Vec<crate::clientconfig::NeedsInput>,
    pub warnings: Vec<String>,
}

impl App {
    /// Parses a client config (inline or from a file) and applies it with [`App::import_client_config`]: a file under
    /// its canonical path as origin, an inline config under `manual`.
    pub async fn apply_client_config(&self, req: &ApplyConfigRequest) -> Result<ApplyConfigReport> {
        use crate::clientconfig::{self, Env, Format};
        let format = req
            .format
            .as_deref()
            .map(str::parse::<Format>)
            .transpose()?;
        let imported = match (&req.config, &req.path) {
            (Some(config), None) => {
                let format = format.ok_or_else(|| {
                    Error::invalid("format", "required with `config` (claude-desktop, claude-code, claude-user, cursor, vscode, windsurf, codex or gemini)")
                })?;
                if !config.is_object() {
                    return Err(Error::invalid(
                        "config",
                        "must be an object (the client file's content)",
                    ));
                }
                let text = if format == Format::Codex {
                    toml::to_string(config).map_err(|e| {
                        Error::invalid("config", format!("cannot be written as TOML: {e}"))
                    })?
                } else {
                    serde_json::to_string(config).map_err(|e| Error::Internal(e.to_string()))?
                };
                let here = std::env::current_dir().unwrap_or_default().join("request");
                clientconfig::parse(format, "config", &text, &Env::process(&here))?
            }
            (None, Some(path)) => {
                let path = std::fs::canonicalize(path)
                    .map_err(|e| Error::invalid("path", format!("{path}: {e}")))?;
                let text = clientconfig::read(&path)?;
                let format = match format {
                    Some(f) => f,
                    None => Format::detect(&path, &text).ok_or_else(|| {
                        Error::invalid(
                            "format",
                            format!(
                                "cannot tell which client {} belongs to; give `format`",
                                path.display()
                            ),
                        )
                    })?,
                };
                clientconfig::parse(
                    format,
                    &path.display().to_string(),
                    &text,
                    &Env::process(&path),
                )?
            }
            _ => {
                return Err(Error::invalid(
                    "config",
                    "give either `config` (with `format`) or `path`",
                ));
            }
        };
        let origin = match &req.path {
            Some(_) => Origin::File(&imported.file),
            None => Origin::Manual,
        };
        let results = self.import_client_config(&imported, origin).await?;
        Ok(ApplyConfigReport {
            file: imported.file,
            format: imported.format,
            results,
            renamed: imported.renamed,
            needs_input: imported.needs_input,
            warnings: imported.warnings,
        })
    }
}
