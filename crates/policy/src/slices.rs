//! The per-tool slices of a policy set, made once per load: for each tool some policy names (and each server, and
//! every other tool), the policies whose scope can match a call of it, as a Cedar `PolicySet` of their own, with what
//! those policies read of a call (which arguments, whether the tool's attributes). A call is put to its tool's slice
//! only: a policy whose scope cannot match the tool is never evaluated, a tool no policy can match has no slice (no
//! Cedar call at all), and only the arguments the slice's policies read are converted for Cedar.
//!
//! Why the decision cannot change: Cedar evaluates a policy as `principal && action && resource && conditions`, and
//! `&&` stops at the first false operand, so a policy whose resource scope does not match the call is not satisfied
//! and raises no error whatever its conditions say; leaving it out changes neither the outcome nor the deciding
//! policies nor the errors. An argument no policy reads (`context.args.<key>` or `context.args has <key>`) cannot
//! change what a policy evaluates to; a policy that reads `context.args` (or `context`) any other way (as a whole
//! record, passed on) gets every argument. `engine.rs`'s tests compare sliced and whole-set decisions over random
//! policies and calls.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cedar_policy::Policy;

use crate::callers::{Callers, Member};
use serde_json::Value;

/// What the policies of a slice read of a call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Every argument (a policy reads `context.args` as a whole), else only these keys.
    pub(crate) all_args: bool,
    pub(crate) args: BTreeSet<String>,
    /// A condition names `resource` (its attributes `server` and `name`, or anything else about it).
    pub(crate) resource: bool,
    /// A condition reads `context.client`, `context.script` (or the context as a whole).
    pub(crate) client: bool,
    pub(crate) script: bool,
    /// A condition names `principal`, `resource` or an entity: it needs the call's entities (the user in their
    /// groups, the tool in its server). Scopes need none: they are matched before Cedar sees the call (`callers.rs`).
    pub(crate) entities: bool,
}

impl Reads {
    fn merge(&mut self, other: &Reads) {
        self.all_args |= other.all_args;
        self.resource |= other.resource;
        self.client |= other.client;
        self.script |= other.script;
        self.entities |= other.entities;
        self.args.extend(other.args.iter().cloned());
    }

    /// Every argument, the tool's attributes, the client and the script flag.
    pub(crate) fn everything() -> Reads {
        Reads {
            all_args: true,
            resource: true,
            client: true,
            script: true,
            entities: true,
            args: BTreeSet::new(),
        }
    }

    /// Whether the argument `key` is put in the call's context.
    pub(crate) fn arg(&self, key: &str) -> bool {
        self.all_args || self.args.contains(key)
    }

    /// What `policy`'s conditions read (its scope is matched by the slice, not read from the call's context).
    pub(crate) fn of(policy: &Policy) -> Reads {
        let mut reads = Reads::default();
        match policy.to_json() {
            Ok(est) => {
                for c in est["conditions"].as_array().into_iter().flatten() {
                    reads.walk(&c["body"]);
                }
            }
            // Not expected for a parsed static policy; if it happens, read everything.
            Err(_) => reads = Reads::everything(),
        }
        reads
    }

    /// Walks one expression of Cedar's JSON form (EST): each node is an object whose one key names its kind.
    fn walk(&mut self, e: &Value) {
        match e {
            Value::Array(items) => items.iter().for_each(|i| self.walk(i)),
            Value::Object(node) => {
                for (kind, inner) in node {
                    match kind.as_str() {
                        // A literal: nothing of the call in it, but an entity literal is looked up in the call's
                        // entities (the caller may be the user it names).
                        "Value" => self.entities |= inner.to_string().contains("__entity"),
                        "Var" => match inner.as_str() {
                            // `context` as a whole (compared, passed on): all of it.
                            Some("context") => {
                                self.all_args = true;
                                self.client = true;
                                self.script = true;
                            }
                            Some("resource") => {
                                self.resource = true;
                                self.entities = true;
                            }
                            Some("principal") => self.entities = true,
                            _ => {}
                        },
                        // A record literal's keys are attribute names, not kinds.
                        "Record" => {
                            if let Some(fields) = inner.as_object() {
                                fields.values().for_each(|v| self.walk(v));
                            }
                        }
                        "." | "has" if inner.get("left").is_some() => self.access(kind, inner),
                        _ => self.walk(inner),
                    }
                }
            }
            _ => {}
        }
    }

    /// `left.attr` or `left has attr` (`attr` a string, or a path whose first step is the attribute of `left`).
    fn access(&mut self, kind: &str, inner: &Value) {
        let left = &inner["left"];
        let attr = match &inner["attr"] {
            Value::String(s) => Some(s.as_str()),
            Value::Array(path) => path.first().and_then(Value::as_str),
            _ => None,
        };
        let is_var = |e: &Value, v: &str| e.get("Var").and_then(Value::as_str) == Some(v);
        let context_args = left
            .get(".")
            .is_some_and(|l| is_var(&l["left"], "context") && l["attr"] == "args");
        match attr {
            // `context.args.KEY`, `context.args has KEY`.
            Some(key) if context_args => {
                self.args.insert(key.to_owned());
            }
            // `context.args` itself (as a whole): every argument. `context has args`, `context.client`,
            // `context.script` read nothing of the arguments.
            Some("args") if is_var(left, "context") && kind == "." => self.all_args = true,
            Some("client") if is_var(left, "context") => self.client = true,
            Some("script") if is_var(left, "context") => self.script = true,
            Some(_) if is_var(left, "context") => {}
            _ => self.walk(left),
        }
    }
}

/// The policies that can apply to one tool's calls (ids are unique in the whole set, checked when it was compiled,
/// so in any part of it).
pub(crate) struct Slice {
    /// Some permit is scoped to the tool: inside a permit's scope the set is default-deny.
    pub(crate) permits: bool,
    pub(crate) reads: Reads,
    /// Which of its policies can hold for a caller (`callers.rs`).
    pub(crate) callers: Callers,
}

/// One policy of the set, as the index files it.
pub(crate) struct Entry {
    /// The policy, with what a caller must be for it to be evaluated (`callers.rs`).
    pub(crate) member: Member,
    /// `None`: every tool; `Some((true, server))`: a server's tools; `Some((false, "server/tool"))`: one tool.
    pub(crate) scope: Option<(bool, String)>,
    pub(crate) reads: Reads,
}

struct ServerSlices {
    /// A tool of the server no policy names by itself.
    any: Option<Arc<Slice>>,
    tools: HashMap<String, Arc<Slice>>,
}

/// The slices by server and tool.
#[derive(Default)]
pub(crate) struct Index {
    /// A tool of a server no policy names.
    every: Option<Arc<Slice>>,
    servers: HashMap<String, ServerSlices>,
}

fn slice<'a>(entries: impl Iterator<Item = &'a Entry>) -> Result<Option<Arc<Slice>>, String> {
    let mut permits = false;
    let mut reads = Reads::default();
    let mut any = false;
    let mut members = Vec::new();
    for e in entries {
        members.push(e.member.clone());
        permits |= !e.member.forbid;
        reads.merge(&e.reads);
        any = true;
    }
    let callers = Callers::of(members.into_iter())?;
    Ok(any.then(|| {
        Arc::new(Slice {
            permits,
            reads,
            callers,
        })
    }))
}

/// The policies scoped to server `s`'s tools.
fn of_server<'a>(entries: &'a [Entry], s: &str) -> impl Iterator<Item = &'a Entry> {
    entries
        .iter()
        .filter(move |e| matches!(&e.scope, Some((true, x)) if x == s))
}

impl Index {
    pub(crate) fn build(entries: &[Entry]) -> Result<Index, String> {
        let every = || entries.iter().filter(|e| e.scope.is_none());
        // Servers and their tools some policy names.
        let mut named: HashMap<String, BTreeSet<String>> = HashMap::new();
        for e in entries {
            match &e.scope {
                Some((true, server)) => {
                    named.entry(server.clone()).or_default();
                }
                Some((false, id)) => {
                    let (server, tool) = split(id);
                    named
                        .entry(server.to_owned())
                        .or_default()
                        .insert(tool.to_owned());
                }
                None => {}
            }
        }
        let mut servers = HashMap::with_capacity(named.len());
        for (server, names) in named {
            let mut tools = HashMap::with_capacity(names.len());
            for tool in names {
                let id = format!("{server}/{tool}");
                let own = entries
                    .iter()
                    .filter(|e| matches!(&e.scope, Some((false, x)) if *x == id));
                if let Some(s) = slice(every().chain(of_server(entries, &server)).chain(own))? {
                    tools.insert(tool, s);
                }
            }
            let any = slice(every().chain(of_server(entries, &server)))?;
            servers.insert(server, ServerSlices { any, tools });
        }
        Ok(Index {
            every: slice(every())?,
            servers,
        })
    }

    /// The slice of a call of `tool` on `server`: hash lookups, no allocation; `None` when no policy can apply.
    pub(crate) fn get(&self, server: &str, tool: &str) -> Option<&Arc<Slice>> {
        match self.servers.get(server) {
            Some(s) => s.tools.get(tool).or(s.any.as_ref()),
            None => self.every.as_ref(),
        }
    }
}

/// `server/tool` split at its first `/` (a server's name has none).
pub(crate) fn split(id: &str) -> (&str, &str) {
    id.split_once('/').unwrap_or((id, ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn reads(text: &str) -> Reads {
        Reads::of(&Policy::from_str(text).unwrap())
    }

    #[test]
    fn reads_names_the_arguments_a_policy_reads_and_only_those() {
        let r = reads(
            r#"forbid (principal, action, resource) when { context.args has path && context.args.path like "/etc/*" }
               unless { context.args.owner.name == "x" && context.client == "c" && context.script };"#,
        );
        assert!(!r.all_args && !r.resource, "{r:?}");
        assert_eq!(
            r.args.iter().map(String::as_str).collect::<Vec<_>>(),
            ["owner", "path"]
        );
        // `has` with a path, index syntax, a method on an argument.
        let r = reads(
            r#"permit (principal, action, resource) when { context.args has a.b && context["args"]["c"] == 1
               && context.args.d.greaterThan(decimal("1.0")) && context has args };"#,
        );
        assert_eq!(
            (
                r.all_args,
                r.args.iter().map(String::as_str).collect::<Vec<_>>()
            ),
            (false, vec!["a", "c", "d"])
        );
        // The arguments as a whole, the context as a whole, the resource's attributes.
        assert!(
            reads(r#"permit (principal, action, resource) when { context.args == {"a": 1} };"#)
                .all_args
        );
        assert!(
            reads(r#"permit (principal, action, resource) when { context == {"a": 1} };"#).all_args
        );
        assert!(
            reads(r#"permit (principal, action, resource) when { [context.args].isEmpty() };"#)
                .all_args
        );
        assert!(
            reads(r#"permit (principal, action, resource) when { resource.name == "x" };"#)
                .resource
        );
        assert!(!reads(r#"permit (principal, action, resource in Server::"s");"#).resource);
        // What needs the call's entities: the principal, the resource, an entity named in a condition.
        for (text, needs) in [
            (
                r#"permit (principal in Group::"g", action, resource in Server::"s");"#,
                false,
            ),
            (
                r#"permit (principal, action, resource) when { context.args.a == 1 };"#,
                false,
            ),
            (
                r#"permit (principal, action, resource) when { principal in Group::"g" };"#,
                true,
            ),
            (
                r#"permit (principal, action, resource) when { resource in Server::"s" };"#,
                true,
            ),
            (
                r#"permit (principal, action, resource) when { User::"u" in Group::"g" };"#,
                true,
            ),
        ] {
            assert_eq!(reads(text).entities, needs, "{text}");
        }
        // A record literal whose key looks like a kind reads nothing more than what it holds.
        let r = reads(
            r#"permit (principal, action, resource) when { {"Var": context.args.k, ".": 1} has Var };"#,
        );
        assert_eq!(
            (
                r.all_args,
                r.args.iter().map(String::as_str).collect::<Vec<_>>()
            ),
            (false, vec!["k"])
        );
    }
}
