//! What a team's user sees of the `/ws` stream (issue 30). One who is not an admin sees the servers their groups may
//! see, no waiting approvals (admins decide them), and only the call-log entries of their own calls. Everyone with
//! an identity, admins too, sees a server each user authorizes for themselves (`OAUTH_PER_USER=on`) in their own
//! state: `authenticating` with their own `authUrl`, or the server's state once they have authorized it, never
//! another user's URL (`App::apply_personal_auth`, as REST and the registry tool). The hub builds one stream for
//! everyone; each such connection adapts its copy.

use std::sync::Arc;

use axum::extract::ws::Utf8Bytes;
use serde_json::Value;

use ad_core::identity::Principal;

use crate::app::App;

/// A connection's viewer: who, and whether they see only their groups' part (not an admin).
pub(crate) struct Viewer {
    pub principal: Arc<Principal>,
    pub restricted: bool,
}

/// `msg` as `viewer` may see it; `None` when nothing of it is theirs.
pub(crate) async fn for_viewer(app: &App, viewer: &Viewer, msg: Utf8Bytes) -> Option<Utf8Bytes> {
    let Ok(mut v) = serde_json::from_str::<Value>(msg.as_str()) else {
        return None;
    };
    let p = viewer.principal.as_ref();
    let visible = |s: &Value| {
        !viewer.restricted
            || s["name"]
                .as_str()
                .is_some_and(|n| app.proxy.visible_to(Some(p), n, None))
    };
    let lists: &[&str] = match v["type"].as_str() {
        Some("state") => {
            if viewer.restricted {
                v["approvals"] = Value::Array(Vec::new());
            }
            &["servers", "active"]
        }
        Some("registry") => &["servers"],
        Some("log_entry") => {
            if viewer.restricted && v["entry"]["user"].as_str() != Some(p.user_key().as_str()) {
                return None;
            }
            return Some(msg);
        }
        _ => return Some(msg),
    };
    for key in lists {
        if let Some(list) = v[*key].as_array_mut() {
            list.retain(|s| visible(s));
        }
    }
    // The listed servers (the `active` children carry no authorization) in this viewer's own authorization state.
    if let Some(list) = v["servers"].as_array_mut() {
        for row in list {
            personal(app, p, row).await;
        }
    }
    Some(Utf8Bytes::from(v.to_string()))
}

/// `row` (a listed server) patched with `p`'s own authorization of it, when each user authorizes it for themselves.
async fn personal(app: &App, p: &Principal, row: &mut Value) {
    // Only a remote server can be authorized per user; a snapshot's stdio rows need no lookup.
    let remote = row["url"].is_string() || row["transport"] == "http";
    let Some(name) = row["name"].as_str().filter(|_| remote) else {
        return;
    };
    let Ok(server) = app.registry.get(name) else {
        return;
    };
    app.apply_personal_auth(row, &server, Some(p)).await;
}
