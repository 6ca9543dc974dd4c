//! Which connection of a child a request goes to. A Streamable HTTP child that speaks both eras has two: its own,
//! in the newest era it offers, and a [`LegacySession`] opened with `initialize`. A legacy client's calls, resource
//! subscriptions and log level go to the legacy session, so the child treats it as it treats a legacy client that
//! reaches it directly (its sampling, elicitation and roots requests, `resources/subscribe`, `logging/setLevel`: a
//! 2026-07-28 server may serve none of them on its 2026-07-28 path); everything else to its own connection. The
//! legacy session is connected on the first request that needs it, so a child no legacy client uses costs nothing more.

use rmcp::model::{ProtocolVersion, ServerCapabilities};
use rmcp::{Peer, RoleClient};

use crate::caller::Caller;
use crate::state::{Child, LegacySession};
use crate::sync::lock;

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
    /// first request that needs it.
    pub(super) async fn for_legacy_client(&self) -> Session<'_> {
        let legacy = self
            .legacy
            .get_or_init(|| async {
                let connect = lock(&self.legacy_connect).take();
                let service = connect?.await?;
                let peer = service.peer().clone();
                let info = peer.peer_info();
                tracing::debug!(server = %self.name, "legacy session connected");
                Some(LegacySession {
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
                })
            })
            .await;
        match legacy {
            Some(LegacySession {
                peer,
                capabilities,
                protocol,
                ..
            }) => Session {
                peer,
                capabilities,
                protocol,
                legacy_session: true,
            },
            None => self.own(),
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
