//! Approval policies bound to arguments (#27): the vocabulary (a policy, what a rule targets, the scope of an
//! approval), how a server's rules resolve for one tool, and the digest an approval is bound to.
//!
//! A server's rules: at most one per target. The target is the whole server (`''`), one tool (`tool:NAME`), or the
//! tools that declare an annotation (`annotation:destructive` for `destructiveHint: true`, `annotation:open_world` for
//! `openWorldHint: true`; only an explicit `true` matches, so a server that says nothing is not asked about). For a
//! tool, a tool rule beats an annotation rule, which beats the server-wide rule; without any, the policy is `allow`.
//! When both annotation rules match, the stricter one applies (`deny` over `ask` over `allow`).
//!
//! The digest is SHA-256 over the JSON array `[server, tool, arguments]`, the arguments with object keys sorted at
//! every depth (no arguments count as `{}`): the same call made with keys in another order has the same digest, any
//! other argument value another one. What asking and waiting mean is the proxy's (`ad_proxy::approval`); the use
//! cases that list and decide approvals are the application's.

use std::fmt;
use std::str::FromStr;

use rmcp::model::Tool;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::registry::Registry;
use ad_core::error::{Error, Result};
use ad_core::events::Event;

/// What happens to a call: it runs (`allow`), a person is asked first (`ask`), or it is refused (`deny`). Ordered
/// by strictness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalPolicy {
    Allow,
    Ask,
    Deny,
}

impl ApprovalPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Allow => "allow",
            ApprovalPolicy::Ask => "ask",
            ApprovalPolicy::Deny => "deny",
        }
    }
}

impl FromStr for ApprovalPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<ApprovalPolicy> {
        match s {
            "allow" => Ok(ApprovalPolicy::Allow),
            "ask" => Ok(ApprovalPolicy::Ask),
            "deny" => Ok(ApprovalPolicy::Deny),
            other => Err(Error::invalid(
                "policy",
                format!(
                    "{:?} is not a policy: allow, ask or deny",
                    ad_core::model::truncate_for_message(other)
                ),
            )),
        }
    }
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tool annotation a rule can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Annotation {
    /// `destructiveHint: true`.
    Destructive,
    /// `openWorldHint: true`.
    OpenWorld,
}

impl Annotation {
    pub const ALL: [Annotation; 2] = [Annotation::Destructive, Annotation::OpenWorld];

    pub fn as_str(self) -> &'static str {
        match self {
            Annotation::Destructive => "destructive",
            Annotation::OpenWorld => "open_world",
        }
    }

    /// Whether `tool` declares this hint as `true`.
    pub fn declared_by(self, tool: &Tool) -> bool {
        let Some(a) = &tool.annotations else {
            return false;
        };
        match self {
            Annotation::Destructive => a.destructive_hint == Some(true),
            Annotation::OpenWorld => a.open_world_hint == Some(true),
        }
    }
}

impl FromStr for Annotation {
    type Err = Error;

    fn from_str(s: &str) -> Result<Annotation> {
        match s {
            "destructive" | "destructiveHint" => Ok(Annotation::Destructive),
            "open_world" | "open-world" | "openWorldHint" => Ok(Annotation::OpenWorld),
            other => Err(Error::invalid(
                "annotation",
                format!(
                    "{:?} is not an annotation rules can name: destructive or open_world",
                    ad_core::model::truncate_for_message(other)
                ),
            )),
        }
    }
}

/// What a rule applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Target {
    /// Every tool of the server (the server-wide default).
    Server,
    /// One tool, by its own name on the server.
    Tool(String),
    /// The server's tools that declare the annotation.
    Annotation(Annotation),
}

impl Target {
    /// The stored form: `''`, `tool:NAME`, `annotation:HINT`.
    pub fn key(&self) -> String {
        match self {
            Target::Server => String::new(),
            Target::Tool(t) => format!("tool:{t}"),
            Target::Annotation(a) => format!("annotation:{}", a.as_str()),
        }
    }

    pub fn parse_key(key: &str) -> Option<Target> {
        if key.is_empty() {
            return Some(Target::Server);
        }
        if let Some(t) = key.strip_prefix("tool:") {
            return (!t.is_empty()).then(|| Target::Tool(t.to_owned()));
        }
        key.strip_prefix("annotation:")
            .and_then(|a| a.parse().ok())
            .map(Target::Annotation)
    }

    /// The target as the surfaces show it: `{"tool": ..}`, `{"annotation": ..}` or `{}` (server-wide).
    pub fn to_json(&self) -> Value {
        match self {
            Target::Server => json!({"scope": "server"}),
            Target::Tool(t) => json!({"scope": "tool", "tool": t}),
            Target::Annotation(a) => json!({"scope": "annotation", "annotation": a.as_str()}),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Server => f.write_str("every tool"),
            Target::Tool(t) => write!(f, "tool `{t}`"),
            Target::Annotation(a) => write!(f, "tools annotated {}", a.as_str()),
        }
    }
}

/// One rule: a target and its policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub target: Target,
    pub policy: ApprovalPolicy,
}

/// A server's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules(pub Vec<Rule>);

/// The policy that applies to one tool and the rule it comes from (`None`: no rule, the default `allow`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub policy: ApprovalPolicy,
    pub rule: Option<Target>,
}

impl Rules {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The policy for `tool` (its own name and annotations): a tool rule, else the strictest matching annotation
    /// rule, else the server-wide rule, else `allow`.
    pub fn resolve(&self, tool: &Tool) -> Resolved {
        self.resolve_with(&tool.name, |a| a.declared_by(tool))
    }

    /// [`Rules::resolve`] for a tool known by its name and which hints it declares.
    pub fn resolve_with(&self, tool: &str, declares: impl Fn(Annotation) -> bool) -> Resolved {
        let found = |t: &Target| self.0.iter().find(|r| &r.target == t);
        if let Some(r) = found(&Target::Tool(tool.to_owned())) {
            return Resolved {
                policy: r.policy,
                rule: Some(r.target.clone()),
            };
        }
        let by_annotation = self
            .0
            .iter()
            .filter(|r| matches!(r.target, Target::Annotation(a) if declares(a)))
            .max_by_key(|r| r.policy);
        if let Some(r) = by_annotation.or_else(|| found(&Target::Server)) {
            return Resolved {
                policy: r.policy,
                rule: Some(r.target.clone()),
            };
        }
        Resolved {
            policy: ApprovalPolicy::Allow,
            rule: None,
        }
    }

    /// The rule set on `target`, if any.
    pub fn get(&self, target: &Target) -> Option<ApprovalPolicy> {
        self.0
            .iter()
            .find(|r| &r.target == target)
            .map(|r| r.policy)
    }

    /// Whether any rule could make a tool anything but `allow` (a server without such rules costs its calls nothing).
    pub fn restricts(&self) -> bool {
        self.0.iter().any(|r| r.policy != ApprovalPolicy::Allow)
    }
}

/// How long an approval holds: for this call (`once`), or for the same call (same digest) for the rest of the
/// caller's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Once,
    Session,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Session => "session",
        }
    }
}

impl FromStr for Scope {
    type Err = Error;

    fn from_str(s: &str) -> Result<Scope> {
        match s {
            "once" => Ok(Scope::Once),
            "session" => Ok(Scope::Session),
            other => Err(Error::invalid(
                "scope",
                format!(
                    "{:?} is not a scope: once or session",
                    ad_core::model::truncate_for_message(other)
                ),
            )),
        }
    }
}

/// The arguments as canonical JSON text: object keys sorted at every depth, compact; no arguments are `{}`.
pub fn canonical_arguments(args: Option<&Map<String, Value>>) -> String {
    match args {
        Some(m) => crate::pinning::canonical(&Value::Object(m.clone())).to_string(),
        None => "{}".to_owned(),
    }
}

/// Hex SHA-256 of `[server, tool, canonical arguments]` (see the module comment).
pub fn digest(server: &str, tool: &str, args: Option<&Map<String, Value>>) -> String {
    let args = match args {
        Some(m) => crate::pinning::canonical(&Value::Object(m.clone())),
        None => Value::Object(Map::new()),
    };
    let text = json!([server, tool, args]).to_string();
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Registry {
    /// A server's approval rules (a stored rule this build cannot read is skipped, with a warning), cached under the
    /// store's fresh marker ([`Registry::rules_marker`]).
    pub fn approval_rules(&self, server_id: i64) -> Result<Rules> {
        let mut rules = Vec::new();
        for row in self.policy_rows(server_id)? {
            match (Target::parse_key(&row.target), row.policy.parse()) {
                (Some(target), Ok(policy)) => rules.push(Rule { target, policy }),
                _ => tracing::warn!(
                    server_id,
                    target = %row.target,
                    policy = %row.policy,
                    "skipping an approval rule this build cannot read"
                ),
            }
        }
        Ok(Rules(rules))
    }

    /// Sets (or with `None` removes) `server`'s rule for `target`; announces a change with
    /// [`Event::ToolPolicyChanged`]. Whether anything changed.
    pub fn set_approval_rule(
        &self,
        server: &str,
        target: &Target,
        policy: Option<ApprovalPolicy>,
    ) -> Result<bool> {
        if let Target::Tool(t) = target
            && (t.is_empty() || t.len() > 128 || t.chars().any(char::is_control))
        {
            return Err(Error::invalid(
                "tool",
                "a tool name must be 1-128 printable characters",
            ));
        }
        let s = self.get(server)?;
        let changed = self.store().set_tool_policy(
            s.id,
            &target.key(),
            policy.map(ApprovalPolicy::as_str),
        )?;
        if changed {
            self.emit(Event::ToolPolicyChanged {
                name: server.to_owned(),
            });
        }
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;
    use std::sync::Arc;

    fn tool(name: &str, destructive: Option<bool>, open_world: Option<bool>) -> Tool {
        let mut t = Tool::new(name.to_owned(), "d", Arc::new(Map::new()));
        if destructive.is_some() || open_world.is_some() {
            let mut a = ToolAnnotations::default();
            a.destructive_hint = destructive;
            a.open_world_hint = open_world;
            t.annotations = Some(a);
        }
        t
    }

    fn rules(list: &[(Target, ApprovalPolicy)]) -> Rules {
        Rules(
            list.iter()
                .map(|(target, policy)| Rule {
                    target: target.clone(),
                    policy: *policy,
                })
                .collect(),
        )
    }

    use ApprovalPolicy::{Allow, Ask, Deny};

    #[test]
    fn a_tool_rule_beats_an_annotation_rule_which_beats_the_server_rule() {
        let destructive = tool("rm", Some(true), None);
        let plain = tool("ls", None, None);
        let none = Rules::default();
        assert_eq!(none.resolve(&destructive).policy, Allow);
        assert_eq!(none.resolve(&destructive).rule, None);

        let server_ask = rules(&[(Target::Server, Ask)]);
        assert_eq!(server_ask.resolve(&plain).policy, Ask);
        assert_eq!(server_ask.resolve(&plain).rule, Some(Target::Server));

        let r = rules(&[
            (Target::Server, Ask),
            (Target::Annotation(Annotation::Destructive), Deny),
            (Target::Tool("ls".into()), Allow),
        ]);
        assert_eq!(
            r.resolve(&destructive).policy,
            Deny,
            "annotation over server"
        );
        assert_eq!(r.resolve(&plain).policy, Allow, "tool over server");
        assert_eq!(
            r.resolve(&tool("cat", None, None)).policy,
            Ask,
            "server-wide"
        );

        let tool_over_annotation = rules(&[
            (Target::Annotation(Annotation::Destructive), Deny),
            (Target::Tool("rm".into()), Ask),
        ]);
        let res = tool_over_annotation.resolve(&destructive);
        assert_eq!(
            (res.policy, res.rule),
            (Ask, Some(Target::Tool("rm".into())))
        );

        // Annotation rules can also loosen a server-wide rule for the tools they match.
        let loosen = rules(&[
            (Target::Server, Deny),
            (Target::Annotation(Annotation::OpenWorld), Allow),
        ]);
        assert_eq!(loosen.resolve(&tool("web", None, Some(true))).policy, Allow);
        assert_eq!(loosen.resolve(&plain).policy, Deny);
    }

    #[test]
    fn only_an_explicit_true_hint_matches_and_the_stricter_annotation_wins() {
        let r = rules(&[
            (Target::Annotation(Annotation::Destructive), Ask),
            (Target::Annotation(Annotation::OpenWorld), Deny),
        ]);
        assert_eq!(
            r.resolve(&tool("a", Some(false), Some(false))).policy,
            Allow
        );
        assert_eq!(r.resolve(&tool("b", None, None)).policy, Allow);
        assert_eq!(r.resolve(&tool("c", Some(true), None)).policy, Ask);
        assert_eq!(r.resolve(&tool("d", Some(true), Some(true))).policy, Deny);
        let res = r.resolve(&tool("e", None, Some(true)));
        assert_eq!(res.rule, Some(Target::Annotation(Annotation::OpenWorld)));
        assert!(r.restricts());
        assert!(!rules(&[(Target::Server, Allow)]).restricts());
    }

    #[test]
    fn targets_round_trip_through_their_stored_keys() {
        for t in [
            Target::Server,
            Target::Tool("echo".into()),
            Target::Tool("a:b".into()),
            Target::Annotation(Annotation::Destructive),
            Target::Annotation(Annotation::OpenWorld),
        ] {
            assert_eq!(Target::parse_key(&t.key()), Some(t));
        }
        for bad in ["tool:", "annotation:", "annotation:readonly", "server", "x"] {
            assert_eq!(Target::parse_key(bad), None, "{bad}");
        }
        assert!("sometimes".parse::<ApprovalPolicy>().is_err());
        assert_eq!(
            "open-world".parse::<Annotation>().unwrap(),
            Annotation::OpenWorld
        );
    }

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    #[test]
    fn the_digest_ignores_key_order_and_sees_every_value() {
        let a =
            obj(json!({"path": "/tmp/x", "opts": {"force": true, "depth": [1, {"b": 2, "a": 1}]}}));
        let b =
            obj(json!({"opts": {"depth": [1, {"a": 1, "b": 2}], "force": true}, "path": "/tmp/x"}));
        assert_eq!(digest("fs", "rm", Some(&a)), digest("fs", "rm", Some(&b)));
        assert_eq!(canonical_arguments(Some(&a)), canonical_arguments(Some(&b)));
        assert_eq!(
            canonical_arguments(Some(&b)),
            r#"{"opts":{"depth":[1,{"a":1,"b":2}],"force":true},"path":"/tmp/x"}"#
        );
        let d = digest("fs", "rm", Some(&a));
        assert_eq!(d.len(), 64);
        // Any change: a value, a nested value, array order, a key, the tool, the server.
        for other in [
            json!({"path": "/tmp/y", "opts": {"force": true, "depth": [1, {"b": 2, "a": 1}]}}),
            json!({"path": "/tmp/x", "opts": {"force": false, "depth": [1, {"b": 2, "a": 1}]}}),
            json!({"path": "/tmp/x", "opts": {"force": true, "depth": [{"b": 2, "a": 1}, 1]}}),
            json!({"path": "/tmp/x", "opts": {"force": true, "depth": [1, {"b": 2, "a": 1}]}, "x": null}),
            json!({"path": "/tmp/x", "opts": {"force": "true", "depth": [1, {"b": 2, "a": 1}]}}),
        ] {
            assert_ne!(digest("fs", "rm", Some(&obj(other.clone()))), d, "{other}");
        }
        assert_ne!(digest("fs", "rmdir", Some(&a)), d);
        assert_ne!(digest("fs2", "rm", Some(&a)), d);
        // The parts cannot run into each other: ("a_b", "c") is not ("a", "b_c").
        assert_ne!(digest("a_b", "c", None), digest("a", "b_c", None));
        // No arguments are an empty object.
        assert_eq!(
            digest("fs", "ls", None),
            digest("fs", "ls", Some(&Map::new()))
        );
        assert_eq!(canonical_arguments(None), "{}");
    }
}
