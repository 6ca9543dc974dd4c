//! Putting a call to a person: `elicitation/create` to a legacy client that declared elicitation, or a pending
//! approval the call waits on (decided from `agent-discover approvals`, REST or the dashboard, here or in another
//! process), until the call's deadline or its cancellation.

use super::*;

impl Proxy {
    /// Asks a legacy caller's client with `elicitation/create`, until the deadline.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn elicit(
        &self,
        peer: &Peer<RoleServer>,
        server: &str,
        tool: &str,
        arguments: &str,
        digest: &str,
        session: bool,
        deadline: std::time::Instant,
        caller: &Caller,
    ) -> Result<Decision> {
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message(server, tool, arguments, digest),
            requested_schema: form(session),
        };
        let timeout = deadline.saturating_duration_since(std::time::Instant::now());
        tokio::select! {
            answer = peer.create_elicitation(params) => Ok(match answer {
                Ok(result) => decision_of(&result, session, "elicitation"),
                // A client that fails to answer has not approved.
                Err(e) => {
                    tracing::debug!(server, tool, error = %e, "the approval elicitation failed");
                    Decision { approved: false, scope: Scope::Once, by: "elicitation".into() }
                }
            }),
            _ = ad_core::clock::sleep_until(deadline) => Err(Error::ApprovalTimeout {
                server: server.to_owned(),
                tool: tool.to_owned(),
                ms: timeout.as_millis() as u64,
                approval: None,
            }),
            _ = cancelled(caller) => Err(Error::Upstream {
                server: server.to_owned(),
                message: "cancelled by the client while waiting for approval".into(),
            }),
        }
    }

    /// A pending approval decided by a person (`agent-discover approvals`, REST, the dashboard; in any process), or
    /// expired at the deadline.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn wait(
        &self,
        id: &str,
        child: &Child,
        tool: &str,
        arguments: &str,
        digest: &str,
        caller: &Caller,
        deadline_ms: u64,
        deadline: std::time::Instant,
    ) -> Result<Decision> {
        let inner = &self.inner;
        let server = child.name.as_str();
        let store = inner.registry.store();
        // Both watches start before the row exists, so no decision can fall between them and the first read.
        let mut decided = inner.events.subscribe("approval:decided");
        let changed = Arc::new(tokio::sync::Notify::new());
        let stop = tokio_util::sync::CancellationToken::new();
        let _stop = stop.clone().drop_guard();
        let kick = changed.clone();
        ad_store::watch::spawn(
            store.clone(),
            &inner.db_path,
            move || kick.notify_one(),
            stop,
        );
        store.insert_approval(
            &NewApproval {
                id,
                server_id: child.server_id,
                tool,
                arguments,
                digest,
                session: caller.session.as_deref(),
                via: "wait",
                status: "pending",
                scope: None,
                deadline_ms: ms_i64(deadline_ms),
                decided_by: None,
            },
            ms_i64(now_ms()),
        )?;
        let mut guard = ExpireOnDrop {
            inner,
            id: id.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            armed: true,
        };
        inner.events.emit(Event::ApprovalRequested {
            id: id.to_owned(),
            server: server.to_owned(),
            tool: tool.to_owned(),
            via: "wait",
        });
        tracing::info!(
            server,
            tool,
            approval = id,
            "a call waits for approval: `agent-discover approvals approve {id}` (or deny)"
        );
        let timeout_ms = child.call_timeout.as_millis() as u64;
        let timed_out = |id: &str| Error::ApprovalTimeout {
            server: server.to_owned(),
            tool: tool.to_owned(),
            ms: timeout_ms,
            approval: Some(id.to_owned()),
        };
        loop {
            let row = store
                .approval(id)?
                .ok_or_else(|| Error::not_found("approval", id))?;
            match row.status.as_str() {
                "approved" => {
                    guard.armed = false;
                    let scope = match row.scope.as_deref() {
                        Some("session") => Scope::Session,
                        _ => Scope::Once,
                    };
                    if scope == Scope::Once && !store.use_approval(id)? {
                        return Err(Error::ApprovalDenied {
                            server: server.to_owned(),
                            tool: tool.to_owned(),
                            by: "another call (the approval was used already)".into(),
                            approval: Some(id.to_owned()),
                        });
                    }
                    return Ok(Decision {
                        approved: true,
                        scope,
                        by: row.decided_by.unwrap_or_default(),
                    });
                }
                "denied" => {
                    guard.armed = false;
                    return Ok(Decision {
                        approved: false,
                        scope: Scope::Once,
                        by: row.decided_by.unwrap_or_default(),
                    });
                }
                "pending" => {}
                _ => {
                    guard.armed = false;
                    return Err(timed_out(id));
                }
            }
            tokio::select! {
                // Any approval decided in this process (or a lag) wakes the loop, which re-reads its own row.
                r = decided.recv() => {
                    if r.is_none() {
                        return Err(Error::Internal("the event bus is gone".into()));
                    }
                }
                _ = changed.notified() => {}
                _ = ad_core::clock::sleep_until(deadline) => {
                    if store.expire_approval(id, "timeout")? {
                        guard.armed = false;
                        self.decided(id, server, tool, "expired", None, "timeout");
                        return Err(timed_out(id));
                    }
                }
                _ = cancelled(caller) => {
                    // The guard marks it expired (`cancelled`).
                    return Err(Error::Upstream {
                        server: server.to_owned(),
                        message: "cancelled by the client while waiting for approval".into(),
                    });
                }
            }
        }
    }
}

/// An approval's id put on an error that lacks it.
pub(super) fn with_id(e: Error, id: &str) -> Error {
    match e {
        Error::ApprovalTimeout {
            server,
            tool,
            ms,
            approval: None,
        } => Error::ApprovalTimeout {
            server,
            tool,
            ms,
            approval: Some(id.to_owned()),
        },
        e => e,
    }
}

async fn cancelled(caller: &Caller) {
    match &caller.cancel {
        Some(c) => c.cancelled().await,
        None => std::future::pending().await,
    }
}
