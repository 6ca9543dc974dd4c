//! Applying a parsed client config file (see `crate::clientconfig`) to the registry: the domain step every surface shares.

use serde::Serialize;

use crate::app::App;
use crate::clientconfig::Imported;
use crate::error::{Error, Result};
use crate::model::ServerPatch;

/// What happened to one server of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportResult {
    pub name: String,
    /// `added`, `updated` or `unchanged`.
    pub action: &'static str,
}

impl App {
    /// Registers (or reconfigures) every server `imported` holds, then stores the secret values it found in the
    /// environment (encrypted). Servers the file does not name are left alone. One result per server, in file order.
    pub fn import_client_config(&self, imported: &Imported) -> Result<Vec<ImportResult>> {
        let mut results = Vec::with_capacity(imported.servers.len());
        for s in &imported.servers {
            let spec = &s.spec;
            let action = match self.registry.get(&spec.name) {
                Ok(current) => {
                    let same = current.command == spec.command
                        && current.args == spec.args
                        && current.env == spec.env
                        && current.transport == spec.transport
                        && current.url == spec.url
                        && current.headers == spec.headers
                        && (spec.description.is_empty() || current.description == spec.description);
                    if same {
                        "unchanged"
                    } else {
                        let patch = ServerPatch {
                            description: (!spec.description.is_empty())
                                .then(|| spec.description.clone()),
                            command: spec.command.clone(),
                            args: Some(spec.args.clone()),
                            env: Some(spec.env.clone()),
                            transport: Some(spec.transport),
                            url: spec.url.clone(),
                            headers: Some(spec.headers.clone()),
                            ..ServerPatch::default()
                        };
                        self.registry.update(&spec.name, &patch)?;
                        "updated"
                    }
                }
                Err(Error::NotFound { .. }) => {
                    self.registry.register(spec.clone())?;
                    "added"
                }
                Err(e) => return Err(e),
            };
            if !s.secrets.is_empty() {
                // Re-importing the same values writes nothing.
                let id = self.registry.get(&spec.name)?.id;
                let current = self.secrets.env_for(id)?;
                for (k, v) in &s.secrets {
                    if current.get(k) != Some(v) {
                        self.secrets.set(&spec.name, k, v)?;
                    }
                }
            }
            results.push(ImportResult {
                name: spec.name.clone(),
                action,
            });
        }
        Ok(results)
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
    /// Parses a client config (inline or from a file) and applies it with [`App::import_client_config`].
    pub fn apply_client_config(&self, req: &ApplyConfigRequest) -> Result<ApplyConfigReport> {
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
        let results = self.import_client_config(&imported)?;
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
