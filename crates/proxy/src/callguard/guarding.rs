//! The guards' state in a proxy, data only: what [`crate::state::Inner`] holds of them (settings, the per-server
//! cache, the counts `status` shows, the credentials results passed on). A leaf: `callguard.rs` acts on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde::Serialize;

use super::origins::Origins;
use ad_core::guards::{GuardSettings, Guards};

/// The guards' state in a proxy: the global settings, servers' own settings (cached while the store's fresh
/// marker stands) and the decisions counted since this process started.
#[derive(Default)]
pub(crate) struct Guarding {
    pub(super) global: Mutex<Guards>,
    pub(super) own: Mutex<OwnCache>,
    pub(super) counts: Mutex<BTreeMap<String, GuardCounts>>,
    /// Credentials results passed to the agent (`warn`), by the server they came from.
    pub(super) origins: Mutex<Origins>,
}

#[derive(Default)]
pub(super) struct OwnCache {
    pub(super) marker: Option<(i64, u64)>,
    pub(super) servers: HashMap<i64, GuardSettings>,
}

/// The guards' decisions for one server since this process started, as `status` shows them.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct GuardCounts {
    /// Calls refused for credentials in their arguments (`block`).
    pub arguments_blocked: u64,
    /// Calls let through with credentials in their arguments, reported (`warn`).
    pub arguments_warned: u64,
    /// Calls let through because the credentials were the server's own configured secrets.
    pub arguments_own: u64,
    /// Calls let through because the credentials came to the agent in this server's own results (`warn`).
    pub arguments_origin: u64,
    /// Results whose credentials were masked (`block`).
    pub result_secrets_masked: u64,
    /// Results with credentials passed on as they were, reported (`warn`).
    pub result_secrets_warned: u64,
    /// Results whose instructions to the agent were marked (`warn`).
    pub instructions_marked: u64,
    /// Results whose instructions to the agent were withheld (`block`).
    pub instructions_withheld: u64,
}
