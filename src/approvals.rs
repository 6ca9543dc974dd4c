//! The approval use cases (#27): show and set a server's approval policy rules, list the calls waiting for a person,
//! approve or deny one. Every front calls these (`agent-discover tools policy` and `approvals`, REST, the `registry`
//! tool's `tool_policy` action, the dashboard).
//!
//! The vocabulary and the resolution are `ad_registry::approval`; asking and waiting happen on the proxy's call path
//! (`ad_proxy::approval`). A person decides only calls that wait (`via: wait`): one asked of its MCP client (by
//! elicitation, or an input-required result) is answered by that client.

use serde_json::{Value, json};

use crate::app::App;
use ad_core::error::{Error, Result};
use ad_core::events::Event;
use ad_registry::approval::{Annotation, ApprovalPolicy, Rules, Scope, Target};
use ad_store::ApprovalRow;

/// How many approvals a list shows at most.
pub const LIST_LIMIT: usize = 200;

/// A rule as the surfaces show it.
fn rule_json(target: &Target, policy: ApprovalPolicy) -> Value {
    let mut v = target.to_json();
    v["policy"] = json!(policy.as_str());
    v
}

/// An approval as the surfaces show it: its arguments as JSON, its deadline as a time.
pub fn approval_json(row: &ApprovalRow) -> Value {
    json!({
        "id": row.id,
        "server": row.server,
        "tool": row.tool,
        "arguments": serde_json::from_str::<Value>(&row.arguments).unwrap_or_else(|_| Value::String(row.arguments.clone())),
        "digest": row.digest,
        "session": row.session,
        "via": row.via,
        "status": row.status,
        "scope": row.scope,
        "requested_at": row.requested_at,
        "deadline": ad_core::clock::rfc3339_signed(row.deadline_ms),
        "decided_at": row.decided_at,
        "decided_by": row.decided_by,
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The target a surface names: a tool, an annotation, or (neither) the whole server. Both is refused: an annotation
/// rule is a server-wide default for the tools that declare it.
pub fn target_of(tool: Option<&str>, annotation: Option<&str>) -> Result<Target> {
    match (tool.filter(|t| !t.is_empty()), annotation) {
        (Some(_), Some(_)) => Err(Error::invalid(
            "annotation",
            "a rule names a tool or an annotation, not both (an annotation rule applies to every tool of the server that declares it)",
        )),
        (Some(t), None) => Ok(Target::Tool(t.to_owned())),
        (None, Some(a)) => Ok(Target::Annotation(a.parse::<Annotation>()?)),
        (None, None) => Ok(Target::Server),
    }
}

/// A caller's session name (REST's `X-Agent-Discover-Session` header, the CLI's `--session`): 1-128 printable
/// characters. The caller's session is then `rest:NAME` or `cli:NAME`.
pub fn session_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty()
        || name.len() > 128
        || name.chars().any(|c| c.is_control() || c == '\u{fffd}')
    {
        return Err(Error::invalid(
            "session",
            "a session name is 1-128 printable characters",
        ));
    }
    Ok(name.to_owned())
}

impl App {
    /// A server's approval rules, and the policy each of its known tools resolves to (with the rule it comes from).
    pub fn tool_policy(&self, server: &str) -> Result<Value> {
        let s = self.registry.get(server)?;
        let rules = self.registry.approval_rules(s.id)?;
        let mut tools: Vec<Value> = Vec::new();
        // The tools' annotations are in their pinned definitions (the tool index keeps names and schemas only).
        let filter = self.registry.tool_filter(s.id)?;
        for pin in self.registry.store().pins_of(s.id)? {
            if !filter.allows(&pin.tool) {
                continue;
            }
            let declares = |a: Annotation| {
                let key = match a {
                    Annotation::Destructive => "destructiveHint",
                    Annotation::OpenWorld => "openWorldHint",
                };
                pin.current_definition["annotations"][key] == json!(true)
            };
            let resolved = rules.resolve_with(&pin.tool, declares);
            tools.push(json!({
                "tool": pin.tool,
                "policy": resolved.policy.as_str(),
                "rule": resolved.rule.as_ref().map(Target::to_json),
                "annotations": Annotation::ALL.iter().filter(|a| declares(**a)).map(|a| a.as_str()).collect::<Vec<_>>(),
            }));
        }
        Ok(json!({
            "server": s.name,
            "rules": rules_json(&rules),
            "tools": tools,
            "default": "allow",
        }))
    }

    /// Sets `server`'s rule for `target` (`None` removes it); a running child's fast lane follows at once.
    pub fn set_tool_policy(
        &self,
        server: &str,
        target: &Target,
        policy: Option<ApprovalPolicy>,
    ) -> Result<Value> {
        self.registry.set_approval_rule(server, target, policy)?;
        // The registry announced the change; the running child's fast lane follows it now.
        let _ = self.proxy.reload_approvals(Some(server));
        self.tool_policy(server)
    }

    /// [`App::set_tool_policy`] for an agent (the `registry` tool): only a change that makes the rule stricter
    /// (`allow` < `ask` < `deny`, no rule counting as `allow`). An agent could otherwise lift the rule that asks a
    /// person about its own calls; loosening one is for a person (CLI, REST, dashboard).
    pub fn tighten_tool_policy(
        &self,
        server: &str,
        target: &Target,
        policy: Option<ApprovalPolicy>,
    ) -> Result<Value> {
        let s = self.registry.get(server)?;
        let now = self.registry.approval_rules(s.id)?.get(target);
        let strictness = |p: Option<ApprovalPolicy>| p.unwrap_or(ApprovalPolicy::Allow);
        if strictness(policy) < strictness(now) {
            return Err(Error::invalid(
                "policy",
                format!(
                    "the registry tool cannot loosen an approval rule ({target} is {} now); a person can: `agent-discover tools policy {server}`, REST or the dashboard",
                    strictness(now)
                ),
            ));
        }
        self.set_tool_policy(server, target, policy)
    }

    /// Calls waiting for a person (or, with `all`, the recent approvals of every kind), newest first.
    pub fn approvals(&self, all: bool) -> Result<Vec<Value>> {
        Ok(self
            .registry
            .store()
            .approvals(!all, LIST_LIMIT, now_ms())?
            .iter()
            .map(approval_json)
            .collect())
    }

    /// A person approves (`Some(scope)`) or denies (`None`) a waiting call; `by` says who (`cli:USER`, `rest`,
    /// `dashboard`). "For the session" of a caller without a session is an approval once.
    pub fn decide_approval(&self, id: &str, approve: Option<Scope>, by: &str) -> Result<Value> {
        let store = self.registry.store();
        let row = store
            .approval(id)?
            .ok_or_else(|| Error::not_found("approval", id))?;
        if row.via != "wait" {
            return Err(Error::invalid(
                "approval",
                format!(
                    "`{id}` was asked of its MCP client ({}), which answers it",
                    row.via
                ),
            ));
        }
        let scope = approve.map(|s| match (s, &row.session) {
            (Scope::Session, None) => Scope::Once,
            (s, _) => s,
        });
        let status = if scope.is_some() {
            "approved"
        } else {
            "denied"
        };
        let (after, changed) =
            store.decide_approval(id, status, scope.map(Scope::as_str), by, now_ms())?;
        let after = after.ok_or_else(|| Error::not_found("approval", id))?;
        if !changed {
            let why = if after.status == "pending" {
                "expired".to_owned()
            } else {
                format!(
                    "{} by {}",
                    after.status,
                    after.decided_by.as_deref().unwrap_or("?")
                )
            };
            return Err(Error::invalid(
                "approval",
                format!("`{id}` is no longer pending: it was {why}"),
            ));
        }
        self.events.emit(Event::ApprovalDecided {
            id: id.to_owned(),
            server: after.server.clone(),
            tool: after.tool.clone(),
            decision: if scope.is_some() {
                "approved"
            } else {
                "denied"
            },
            scope: scope.map(Scope::as_str),
            by: by.to_owned(),
        });
        Ok(approval_json(&after))
    }
}

/// A server's rules as the surfaces show them.
pub fn rules_json(rules: &Rules) -> Vec<Value> {
    rules
        .0
        .iter()
        .map(|r| rule_json(&r.target, r.policy))
        .collect()
}
