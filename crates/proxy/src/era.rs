//! Which connection of a child a request goes to. A Streamable HTTP child that speaks both eras has two: its own,
//! in the newest era it offers, and a [`LegacySession`] opened with `initialize`. A legacy client's calls, resource
//! subscriptions and log level go to the legacy session, so the child treats it as it treats a legacy client that
//! reaches it directly (its sampling, elicitation and roots requests, `resources/subscribe`, `logging/setLevel`: a
//! 2026-07-28 server may serve none of them on its 2026-07-28 path); everything else to its own connection. The
//! legacy session is connected on the first request that needs it, so a child no legacy client uses costs nothing more.
//! Which versions the child's `server/discover` lists does not matter: a server that lists only 2026-07-28 may still
//! serve `initialize` on the same URL, and only its refusal of `initialize` leaves legacy clients on its 2026-07-28
//! connection (where agent-discover turns its input-required results into their requests).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rmcp::model::{ProtocolVersion, ServerCapabilities};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient};

use crate::caller::Caller;
use crate::state::{Child, ChildClient, LegacyAttempt, LegacySession};
use crate::sync::lock;

/// How long a child whose legacy session could not be opened (no answer, as opposed to a refusal) is left on its own
/// connection before a legacy client's request tries again.
const LEGACY_RETRY: Duration = Duration::from_secs(5);

/// One connection of a child.
pub(super) struct Session<'a> {
    pub(super) peer: &'a Peer<RoleClient>,
    pub(super) capabilities: &'a ServerCapabilities,
    pub(super) protocol: &'a ProtocolVersion,
    /// The child's [`LegacySession`] (its progress tokens are keyed with `state::legacy_token`).
    pub(super) legacy_session: bool,
}

impl Child {
    /// The child's own connection.
    pub(super) fn own(&self) -> Session<'_> {
        Session {
            peer: &self.peer,
            capabilities: &self.capabilities,
            protocol: &self.protocol,
            legacy_session: false,
        }
    }

    /// The connection a legacy client's requests go to: the legacy session when the child has one, connected on the
    /// first request that needs it. The child's own connection while it has none: when it refused `initialize` (for
    /// good), or while an attempt gave no answer (each request that needs the session tries again, at most once per
    /// [`LEGACY_RETRY`]). An attempt cut short by its request's cancellation settles nothing: the next request makes
    /// its own.
    pub(super) async fn for_legacy_client(&self) -> Session<'_> {
        if let Some(connect) = &self.legacy_connect
            && self.legacy.get().is_none()
            && !self.stopping.load(Ordering::SeqCst)
            && lock(&self.legacy_retry).is_none_or(|at| Instant::now() >= at)
        {
            let _ = self
                .legacy
                .get_or_try_init(|| async {
                    // A request that waited on another's attempt which got no answer does not ask again at once.
                    if lock(&self.legacy_retry).is_some_and(|at| Instant::now() < at) {
                        return Err(());
                    }
                    match connect().await {
                        // A child stopped meanwhile keeps no session open.
                        LegacyAttempt::Connected(service) if self.stopping.load(Ordering::SeqCst) => {
                            let _ = service.cancel().await;
                            Ok(None)
                        }
                        LegacyAttempt::Connected(service) => Ok(Some(self.legacy_session(service))),
                        LegacyAttempt::Refused(why) => {
                            tracing::debug!(server = %self.name, why = %why, "no legacy session: initialize refused");
                            Ok(None)
                        }
                        LegacyAttempt::Failed(why) => {
                            tracing::debug!(server = %self.name, why = %why, "no legacy session yet: initialize failed");
                            *lock(&self.legacy_retry) = Some(Instant::now() + LEGACY_RETRY);
                            Err(())
                        }
                    }
                })
                .await;
        }
        match self.legacy.get() {
            Some(Some(LegacySession {
                peer,
                capabilities,
                protocol,
                ..
            })) => Session {
                peer,
                capabilities,
                protocol,
                legacy_session: true,
            },
            _ => self.own(),
        }
    }

    fn legacy_session(&self, service: RunningService<RoleClient, ChildClient>) -> LegacySession {
        let peer = service.peer().clone();
        let info = peer.peer_info();
        tracing::debug!(server = %self.name, "legacy session connected");
        LegacySession {
            capabilities: info
                .as_ref()
                .map(|i| i.capabilities.clone())
                .unwrap_or_default(),
            protocol: info
                .as_ref()
                .map(|i| i.protocol_version.clone())
                .unwrap_or_default(),
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
        }
    }

    /// The connection `caller`'s request goes to: the legacy session for a legacy client connected to us (whose
    /// questions may go to it as the child's own requests), the child's own connection for everyone else (2026-07-28
    /// clients; callers without a client or whose questions must stay theirs, `Caller::questions_to_caller`).
    pub(super) async fn session_for(&self, caller: &Caller) -> Session<'_> {
        let legacy_client = caller.peer.is_some()
            && !caller.questions_to_caller
            && caller.protocol.as_ref().is_some_and(|v| v.has_initialize());
        if legacy_client {
            self.for_legacy_client().await
        } else {
            self.own()
        }
    }
}
