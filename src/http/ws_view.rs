//! What a team's user who is not an admin sees of the `/ws` stream (issue 30): the servers their groups may see, no
//! waiting approvals (admins decide them), and only the call-log entries of their own calls. The hub builds one
//! stream for everyone; each such connection filters its copy.

use std::sync::Arc;

use axum::extract::ws::Utf8Bytes;
use serde_json::Value;

use ad_core::identity::Principal;

use crate::app::App;

/// `msg` as `viewer` may see it; `None` when nothing of it is theirs.
pub(crate) fn for_viewer(app: &App, viewer: &Arc<Principal>, msg: Utf8Bytes) -> Option<Utf8Bytes> {
    let Ok(mut v) = serde_json::from_str::<Value>(msg.as_str()) else {
        return None;
    };
    let visible = |s: &Value| {
        s["name"]
            .as_str()
            .is_some_and(|n| app.proxy.visible_to(Some(viewer), n, None))
    };
    match v["type"].as_str() {
        Some("state") => {
            for key in ["servers", "active"] {
                if let Some(list) = v[key].as_array_mut() {
                    list.retain(|s| visible(s));
                }
            }
            v["approvals"] = Value::Array(Vec::new());
        }
        Some("registry") => {
            if let Some(list) = v["servers"].as_array_mut() {
                list.retain(|s| visible(s));
            }
        }
        Some("log_entry") => {
            if v["entry"]["user"].as_str() != Some(viewer.user_key().as_str()) {
                return None;
            }
        }
        _ => return Some(msg),
    }
    Some(Utf8Bytes::from(v.to_string()))
}
