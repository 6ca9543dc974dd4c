//! The MCP resource `agent-discover://registry`: the registry snapshot (`{seq, servers}`, see `crate::feed`) as JSON.
//! `resources/subscribe` on it sends `notifications/resources/updated` after every change (the client reads the new
//! snapshot); a client that does not keep up gets one notification per change it can still read, never a backlog.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::{Peer, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::app::App;

pub const URI: &str = "agent-discover://registry";

/// Subscriptions by client (connection or session) id: cancelling one ends its notifier.
static WATCHES: LazyLock<Mutex<HashMap<u64, CancellationToken>>> = LazyLock::new(Default::default);

fn watches() -> std::sync::MutexGuard<'static, HashMap<u64, CancellationToken>> {
    WATCHES.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn resource() -> Resource {
    Resource::new(URI, "registry")
        .with_description(
            "The registered MCP servers as {seq, servers: [{name, status, toolCount, transport, authMode, authUrl?, \
             error?, tools, capabilities}]}; subscribe to hear of every change",
        )
        .with_mime_type("application/json")
}

/// The current snapshot.
pub fn read(app: &Arc<App>) -> ReadResourceResult {
    let snapshot = app.registry_snapshot();
    let text = serde_json::to_string(&*snapshot).unwrap_or_else(|_| "{}".into());
    ReadResourceResult::new(vec![
        ResourceContents::text(text, URI).with_mime_type("application/json"),
    ])
}

/// Starts notifying `client` of changes (again: replaces its previous subscription).
pub fn subscribe(app: &Arc<App>, client: u64, peer: Peer<RoleServer>) {
    let cancel = CancellationToken::new();
    if let Some(old) = watches().insert(client, cancel.clone()) {
        old.cancel();
    }
    let mut sub = app.subscribe_registry();
    tokio::spawn(async move {
        // The bootstrap is what the client reads now; notify from the next change on.
        let _ = sub.next().await;
        let cancelled = loop {
            tokio::select! {
                _ = cancel.cancelled() => break true,
                next = sub.next() => {
                    if next.is_none() || peer.is_transport_closed() {
                        break false;
                    }
                    let note = ResourceUpdatedNotificationParam::new(URI);
                    if peer.notify_resource_updated(note).await.is_err() {
                        break false;
                    }
                }
            }
        };
        if !cancelled {
            // Gone by itself (the client left): nobody replaced or removed the entry, so it is ours.
            watches().remove(&client);
        }
    });
}

/// Stops notifying `client`; returns whether it was subscribed.
pub fn unsubscribe(client: u64) -> bool {
    watches().remove(&client).map(|c| c.cancel()).is_some()
}
