//! Which connection of a child a request goes to. A Streamable HTTP child that speaks both eras has two: its own,
//! in the newest era it offers, and a [`LegacySession`] opened with `initialize`. A legacy client's calls, resource
//! subscriptions and log level go to the legacy session, so the child treats it as it treats a legacy client that
//! reaches it directly (its sampling, elicitation and roots requests, `resources/subscribe`, `logging/setLevel`: a
//! 2026-07-28 server may serve none of them on its 2026-07-28 path); everything else to its own connection.

use rmcp::model::{ProtocolVersion, ServerCapabilities};
use rmcp::{Peer, RoleClient};

use crate::caller::Caller;
use crate::state::{Child, LegacySession};

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

    /// The connection a legacy client's requests go to: the legacy session when the child has one.
    pub(super) fn for_legacy_client(&self) -> Session<'_> {
        match &self.legacy {
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
    pub(super) fn session_for(&self, caller: &Caller) -> Session<'_> {
        let legacy_client = caller.peer.is_some()
            && !caller.questions_to_caller
            && caller.protocol.as_ref().is_some_and(|v| v.has_initialize());
        if legacy_client {
            self.for_legacy_client()
        } else {
            self.own()
        }
    }
}
