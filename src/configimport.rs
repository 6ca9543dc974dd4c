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
            for (k, v) in &s.secrets {
                self.secrets.set(&spec.name, k, v)?;
            }
            results.push(ImportResult {
                name: spec.name.clone(),
                action,
            });
        }
        Ok(results)
    }
}
