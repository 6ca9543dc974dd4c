//! The McpRegistry lifecycle (seed 001): `add_server` and `apply_config` keep the registered set in step with a
//! config, per origin, idempotently; their results are `AddServerResult`s.
//!
//! The state machine of one server's stored status (`ServerStatus`):
//!
//! ```text
//!   (registered) ──▶ stopped ──activate──▶ connecting ──▶ ready ──deactivate──▶ stopped
//!                       ▲                      │   ╲                 │
//!                       │                      │    ╲─▶ authenticating (OAuth; AuthRequired)
//!                       │                      ▼                     ▼ crash: error (restarted on next use)
//!                       └──────deactivate──── error ◀──────────────────
//!   any ──disable──▶ disabled ──enable──▶ connecting ──▶ …
//! ```
//!
//! Each arrow is one stored change announced by one event; a changed config of a running server goes ready ─▶
//! connecting ─▶ ready (or error), its row staying in place throughout.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::app::App;
use crate::error::{Error, Result, ToolError};
use crate::events::Event;
use crate::model::{ServerSpec, ServerStatus, ServerSummary, validate_origin};
use crate::store::lifecycle::ApplyBatch;

/// What `add_server`, `apply_config`, `activate` and `enable` return for one server: its state afterwards.
///
/// `ready`, `authenticating` and `error` are seed 001's; a server that is registered but not running (agent-discover
/// starts servers on demand) is `stopped`, and a paused one `disabled`. `change` says what the call did to the
/// registered entry, when it was a config change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AddServerResult {
    /// The server's name.
    pub id: String,
    #[serde(flatten)]
    pub state: ServerState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum ServerState {
    Ready {
        #[serde(rename = "toolCount")]
        tool_count: usize,
    },
    Authenticating {
        #[serde(rename = "authUrl")]
        auth_url: String,
    },
    Error {
        error: ToolError,
    },
    Stopped {
        #[serde(rename = "toolCount")]
        tool_count: usize,
    },
    Disabled,
}

/// What a config change did to the registered entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Added,
    /// Stored fields changed (a running server was restarted if its launch identity did).
    Updated,
    Unchanged,
}

impl AddServerResult {
    /// The one mapping from a failure to a result: authorization needed is `authenticating`, anything else `error`.
    pub fn from_error(id: &str, e: &Error) -> AddServerResult {
        let state = match e {
            Error::AuthRequired { auth_url, .. } => ServerState::Authenticating {
                auth_url: auth_url.clone(),
            },
            other => ServerState::Error {
                error: other.to_tool_error(),
            },
        };
        AddServerResult {
            id: id.to_owned(),
            state,
            change: None,
        }
    }

    fn with_change(mut self, change: Change) -> AddServerResult {
        self.change = Some(change);
        self
    }
}

/// What to do with one server of an applied config.
enum Step {
    Add,
    /// Stored fields change; `restart` when the launch identity did.
    Update {
        id: i64,
        restart: bool,
    },
    Unchanged,
    /// Registered by another origin: left alone, reported.
    Foreign {
        origin: String,
    },
}

impl App {
    /// Registers or reconfigures one server under `origin` (`manual` for one-at-a-time registrations). Unchanged: nothing
    /// is written or restarted. Changed: stored, and restarted once if it runs here and its launch identity changed.
    /// Bad input is an error; everything else is the result.
    pub async fn add_server(&self, spec: ServerSpec, origin: &str) -> Result<AddServerResult> {
        validate_origin(origin)?;
        spec.validate()?;
        let _held = self.lifecycle_lock().lock().await;
        let current = match self.registry.store().server_by_name(&spec.name)? {
            Some(s) => {
                let tool_count = self.registry.store().count_tools_of(s.id)?;
                vec![ServerSummary {
                    server: s,
                    tool_count,
                    auth_url: None,
                }]
            }
            None => vec![],
        };
        let mut results = self.apply_locked(origin, &[spec], current, false).await?;
        Ok(results.remove(0))
    }

    /// Replaces the servers of `origin` with `specs`: adds new ones, reconfigures changed ones (a running one is
    /// restarted once), stops and removes those `specs` lacks, and leaves unchanged ones alone (no write, no event, no
    /// restart). Servers of other origins are never touched; a name another origin owns is reported as an error.
    /// Every spec is checked first: one invalid spec (or a name given twice) changes nothing. One result per spec, in
    /// input order.
    pub async fn apply_config(
        &self,
        origin: &str,
        specs: Vec<ServerSpec>,
    ) -> Result<Vec<AddServerResult>> {
        self.apply_specs(origin, specs, true).await
    }

    /// [`App::apply_config`] without the removals: adds and reconfigures `specs` under `origin`, leaving the origin's
    /// other servers registered (an inline config applied to `manual`, a client file rewritten by `connect`).
    pub async fn merge_config(
        &self,
        origin: &str,
        specs: Vec<ServerSpec>,
    ) -> Result<Vec<AddServerResult>> {
        self.apply_specs(origin, specs, false).await
    }

    async fn apply_specs(
        &self,
        origin: &str,
        specs: Vec<ServerSpec>,
        remove_missing: bool,
    ) -> Result<Vec<AddServerResult>> {
        validate_origin(origin)?;
        if specs.len() > crate::clientconfig::MAX_SERVERS {
            return Err(Error::invalid(
                "config",
                format!(
                    "{} servers from {origin}: more than {} in one config",
                    specs.len(),
                    crate::clientconfig::MAX_SERVERS
                ),
            ));
        }
        let mut seen = HashSet::with_capacity(specs.len());
        for spec in &specs {
            spec.validate().map_err(|e| match e {
                Error::Invalid { what, reason } => Error::Invalid {
                    what,
                    reason: format!("server `{}`: {reason}", spec.name),
                },
                other => other,
            })?;
            if !seen.insert(spec.name.as_str()) {
                return Err(Error::invalid(
                    "config",
                    format!("server `{}` is given twice", spec.name),
                ));
            }
        }
        let _held = self.lifecycle_lock().lock().await;
        let current = self.registry.list(&Default::default())?;
        self.apply_locked(origin, &specs, current, remove_missing)
            .await
    }

    /// The pipeline both share. `current`: the registered servers that matter (all of them when `remove_missing`).
    async fn apply_locked(
        &self,
        origin: &str,
        specs: &[ServerSpec],
        current: Vec<ServerSummary>,
        remove_missing: bool,
    ) -> Result<Vec<AddServerResult>> {
        let by_name: HashMap<&str, &ServerSummary> = current
            .iter()
            .map(|s| (s.server.name.as_str(), s))
            .collect();
        let mut batch = ApplyBatch::default();
        let steps: Vec<Step> = specs
            .iter()
            .map(|spec| match by_name.get(spec.name.as_str()) {
                None => {
                    batch.inserts.push(spec);
                    Step::Add
                }
                Some(s) if s.server.origin != origin => Step::Foreign {
                    origin: s.server.origin.clone(),
                },
                Some(s) => {
                    let stored = s.server.to_spec();
                    if spec.same_stored(&stored) {
                        Step::Unchanged
                    } else {
                        batch.updates.push((s.server.id, spec));
                        Step::Update {
                            id: s.server.id,
                            restart: spec.launch_identity() != stored.launch_identity(),
                        }
                    }
                }
            })
            .collect();
        let wanted: HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let removed: Vec<&ServerSummary> = if remove_missing {
            current
                .iter()
                .filter(|s| s.server.origin == origin && !wanted.contains(s.server.name.as_str()))
                .collect()
        } else {
            vec![]
        };
        // Stop what goes before its row does (the child's owner must let go first).
        for s in &removed {
            self.proxy.deactivate(&s.server.name).await?;
            batch.deletes.push(s.server.id);
        }
        if !batch.is_empty() {
            self.registry.store().apply_batch(origin, &batch)?;
        }
        for spec in &batch.inserts {
            self.events.emit(Event::ServerRegistered {
                name: spec.name.clone(),
            });
        }
        for (_, spec) in &batch.updates {
            self.events.emit(Event::ServerUpdated {
                name: spec.name.clone(),
            });
        }
        for s in &removed {
            self.events.emit(Event::ServerRemoved {
                name: s.server.name.clone(),
            });
        }
        // Restarts run together; results keep the input order.
        let by_name = &by_name;
        let outcomes = specs.iter().zip(&steps).map(|(spec, step)| async move {
            let name = spec.name.as_str();
            match step {
                Step::Foreign { origin: owner } => AddServerResult {
                    id: name.to_owned(),
                    state: ServerState::Error {
                        error: ToolError {
                            kind: crate::error::ToolErrorKind::ServerError,
                            message: format!(
                                "server `{name}` is registered from {owner}; this config ({origin}) does not own it, so it was left as it is"
                            ),
                            details: Some(serde_json::json!({"code": "conflict", "origin": owner})),
                        },
                    },
                    change: None,
                },
                Step::Add => self.current_state(name, 0).with_change(Change::Added),
                Step::Unchanged => {
                    // The row read at the start is current (nothing wrote it since, under the lifecycle lock): no
                    // second read per server.
                    match by_name.get(name) {
                        Some(s) => self.state_of(&s.server, s.tool_count as usize),
                        None => self.current_state(name, 0),
                    }
                    .with_change(Change::Unchanged)
                }
                Step::Update { id, restart } => {
                    let known = self.registry.store().count_tools_of(*id).unwrap_or(0) as usize;
                    let result = if *restart {
                        match self.proxy.restart(name).await {
                            Ok(Some(a)) => AddServerResult {
                                id: name.to_owned(),
                                state: ServerState::Ready {
                                    tool_count: a.tools.len(),
                                },
                                change: None,
                            },
                            Ok(None) => self.current_state(name, known),
                            Err(e) => AddServerResult::from_error(name, &e),
                        }
                    } else {
                        self.current_state(name, known)
                    };
                    result.with_change(Change::Updated)
                }
            }
        });
        Ok(futures::future::join_all(outcomes).await)
    }

    /// A server's state as this process sees it: a running child's, else the stored status.
    fn current_state(&self, name: &str, stored_tools: usize) -> AddServerResult {
        if let Some(r) = self.child_state(name) {
            return r;
        }
        let state = match self.registry.store().server_by_name(name) {
            Ok(Some(s)) => stored_state(&s, stored_tools),
            Ok(None) => ServerState::Error {
                error: Error::not_found("server", name).to_tool_error(),
            },
            Err(e) => ServerState::Error {
                error: e.to_tool_error(),
            },
        };
        AddServerResult {
            id: name.to_owned(),
            state,
            change: None,
        }
    }

    /// [`App::current_state`] for a row the caller has just read.
    fn state_of(&self, server: &crate::model::Server, stored_tools: usize) -> AddServerResult {
        self.child_state(&server.name)
            .unwrap_or_else(|| AddServerResult {
                id: server.name.clone(),
                state: stored_state(server, stored_tools),
                change: None,
            })
    }

    /// The state of `name`'s child when it runs in this process.
    fn child_state(&self, name: &str) -> Option<AddServerResult> {
        if let Some(c) = self.proxy.child_status(name) {
            let state = if c.status == "ready" {
                ServerState::Ready {
                    tool_count: c.tool_count,
                }
            } else {
                ServerState::Error {
                    error: ToolError {
                        kind: crate::error::ToolErrorKind::TransportError,
                        message: c.last_error.unwrap_or_default(),
                        details: None,
                    },
                }
            };
            return Some(AddServerResult {
                id: name.to_owned(),
                state,
                change: None,
            });
        }
        None
    }
}

impl App {
    /// Starts a server (if it is not running) and reports its state: `ready` with its tool count, `authenticating`
    /// or `error`. An unknown or invalid name is an error.
    pub async fn activate_server(&self, name: &str) -> Result<AddServerResult> {
        self.registry.get(name)?;
        Ok(match self.proxy.activate(name).await {
            Ok(a) => AddServerResult {
                id: name.to_owned(),
                state: ServerState::Ready {
                    tool_count: a.tools.len(),
                },
                change: None,
            },
            Err(e) => AddServerResult::from_error(name, &e),
        })
    }

    /// Pauses a server: stops it if it runs here and marks it `disabled`, keeping its entry, secrets and tokens.
    /// Nothing starts a disabled server (restore at start, `find_tool`, health checks) until [`App::enable`].
    /// Returns false when it was disabled already (then nothing is written).
    pub async fn disable(&self, name: &str) -> Result<bool> {
        let _held = self.lifecycle_lock().lock().await;
        let server = self.registry.get(name)?;
        if server.status == ServerStatus::Disabled {
            return Ok(false);
        }
        self.proxy
            .deactivate_to(&server.name, ServerStatus::Disabled)
            .await?;
        Ok(true)
    }

    /// Restores a disabled server with its last configuration and starts it; reports like [`App::activate_server`].
    pub async fn enable(&self, name: &str) -> Result<AddServerResult> {
        let _held = self.lifecycle_lock().lock().await;
        let server = self.registry.get(name)?;
        if server.status == ServerStatus::Disabled {
            // Straight to `connecting` (announced by the start), never through `stopped`.
            self.registry.store().set_status(
                server.id,
                &crate::store::lifecycle::StatusChange {
                    status: ServerStatus::Connecting,
                    active: None,
                    error: None,
                    auth_url: None,
                },
            )?;
        }
        self.activate_server(&server.name).await
    }
}

/// The state a stored row shows when no child of this process runs it.
fn stored_state(s: &crate::model::Server, tool_count: usize) -> ServerState {
    match s.status {
        ServerStatus::Disabled => ServerState::Disabled,
        ServerStatus::Authenticating => ServerState::Authenticating {
            auth_url: s.auth_url.clone().unwrap_or_default(),
        },
        ServerStatus::Error => ServerState::Error {
            error: ToolError {
                kind: s
                    .error_kind
                    .unwrap_or(crate::error::ToolErrorKind::TransportError),
                message: s.last_error.clone().unwrap_or_default(),
                details: None,
            },
        },
        // Running in another process (the status is shared through the database).
        ServerStatus::Ready | ServerStatus::Connecting if s.active => {
            ServerState::Ready { tool_count }
        }
        _ => ServerState::Stopped { tool_count },
    }
}
