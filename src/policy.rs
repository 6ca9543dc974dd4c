//! The policy use cases every front shares (the CLI's `policy`, REST's `/api/policy…`, the `registry` tool's
//! `policy_test`): where the policy files are, what is in force, a dry run of a call, a file checked. The policies
//! themselves are `ad_policy`'s; the proxy applies them to every call (`ad_proxy::policy`); `App::open` opens them
//! (`app::policies_source`).

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::app::App;
use crate::error::{Error, Result};

/// A call to try against the policies (`policy test`): who makes it and what it calls.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyTest {
    /// The user (`sub`); none is `local`, the user of a call without identity.
    pub user: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub client: Option<String>,
    #[serde(default)]
    pub script: bool,
    pub server: String,
    pub tool: String,
    pub arguments: Option<Map<String, Value>>,
}

impl App {
    /// [`ad_policy::Policies::status`] with its times as RFC 3339 text.
    fn policy_state(set: &ad_policy::Policies) -> Value {
        let mut v = set.status();
        for (ms, at) in [("loaded_at_ms", "loaded_at"), ("error_at_ms", "error_at")] {
            let t = v
                .get(ms)
                .and_then(Value::as_u64)
                .map(ad_core::clock::rfc3339);
            if let Some(o) = v.as_object_mut() {
                o.remove(ms);
                o.insert(at.into(), json!(t));
            }
        }
        v
    }

    fn policy_set(&self) -> Result<&ad_policy::Policies> {
        self.proxy
            .policies()
            .ok_or_else(|| Error::Unavailable("no policies are configured in this process".into()))
    }

    /// What is in force: where from, how many, since when, the last load's failure, and the policies.
    pub fn policy_list(&self) -> Result<Value> {
        let set = self.policy_set()?;
        let mut v = Self::policy_state(set);
        v["list"] = json!(set.list());
        Ok(v)
    }

    /// Where the policies come from and whether the last load failed (for `status`).
    pub fn policy_status(&self) -> Value {
        self.proxy
            .policies()
            .map(Self::policy_state)
            .unwrap_or(Value::Null)
    }

    /// A dry run of a call against the policies in force: the outcome and the policies that decided it.
    pub fn policy_test(&self, t: &PolicyTest) -> Result<Value> {
        if t.server.is_empty() || t.tool.is_empty() {
            return Err(Error::invalid("call", "give both a server and a tool"));
        }
        let set = self.policy_set()?;
        let call = ad_policy::Call {
            user: t.user.as_deref(),
            groups: &t.groups,
            client: t.client.as_deref(),
            script: t.script,
            server: &t.server,
            tool: &t.tool,
            args: t.arguments.as_ref(),
        };
        let mut v = set.test(&call);
        v["user"] = json!(t.user.as_deref().unwrap_or(ad_policy::LOCAL_USER));
        v["server"] = json!(t.server);
        v["tool"] = json!(t.tool);
        v["generation"] = set.status()["generation"].clone();
        Ok(v)
    }

    /// Reads the policy files again now (the watcher does it on change).
    pub fn policy_reload(&self) -> Result<Value> {
        let set = self.policy_set()?;
        let _ = set.reload();
        Ok(Self::policy_state(set))
    }
}

/// Validates a policy file (or directory) without putting it in force: its policies, or why it does not load.
pub fn check(path: &Path) -> std::result::Result<Vec<ad_policy::PolicyInfo>, ad_policy::LoadError> {
    ad_policy::Policies::check(path)
}

/// Validates policy text (REST's check): its policies, or why it does not load.
pub fn check_text(
    text: &str,
) -> std::result::Result<Vec<ad_policy::PolicyInfo>, ad_policy::LoadError> {
    ad_policy::Policies::check_text(text)
}
