//! The Cedar side: policy files parsed and checked into one `PolicySet`, the scope index that tells which tools some
//! policy could apply to, and one call evaluated into a [`Decision`].
//!
//! The call as Cedar sees it: principal `User::"<sub>"` (or `User::"local"`) whose parents are its
//! `Group::"<group>"`s; action `Action::"call"`; resource `Tool::"<server>/<tool>"` whose parent is
//! `Server::"<server>"` and whose attributes are `server` and `name`; context `args` (the arguments as a record: JSON
//! strings, integers, booleans, arrays as sets, objects as records; `null` members left out, fractional numbers as
//! `decimal` where they fit and else left out), `client`, `script`.
//!
//! Outcomes: a `forbid` that holds denies; else a `permit` that holds allows, or asks when it carries `@ask`; a call of
//! a tool some `permit` is scoped to that no `permit` allows is denied (inside a permit's scope the set is
//! default-deny, as Cedar is); a tool no permit is scoped to is allowed. A policy that fails to evaluate (a missing
//! attribute without `has`, a type error) counts as holding when it is a `forbid`: a policy meant to refuse must not
//! let a call through because it could not be read.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision as CedarDecision, Effect, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet, Request, ResourceConstraint,
    RestrictedExpression,
};
use serde::Serialize;
use serde_json::Value;

use crate::call::{Call, Decision, LOCAL_USER, LoadError, Outcome};

/// A policy in force, as `policy list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PolicyInfo {
    pub id: String,
    pub effect: &'static str,
    /// A `permit` with `@ask`: a call it allows is put to a person first.
    pub ask: bool,
    pub file: String,
    /// The tools it is scoped to: `*` (every tool), `server/*` or `server/tool`.
    pub scope: String,
    pub text: String,
}

/// Which tools some policies are scoped to.
#[derive(Default)]
struct Scope {
    every: bool,
    servers: HashSet<String>,
    /// Tools by server.
    tools: HashMap<String, HashSet<String>>,
}

impl Scope {
    /// Whether a policy of these is scoped to the tool: a hash lookup or two, no allocation.
    fn covers(&self, server: &str, tool: &str) -> bool {
        self.every
            || (!self.servers.is_empty() && self.servers.contains(server))
            || self.tools.get(server).is_some_and(|t| t.contains(tool))
    }
}

struct Meta {
    forbid: bool,
    ask: bool,
}

/// A checked policy set with its scope index.
pub(crate) struct Set {
    set: PolicySet,
    meta: HashMap<PolicyId, Meta>,
    infos: Vec<PolicyInfo>,
    all: Scope,
    permits: Scope,
    text: String,
    authorizer: Authorizer,
    call: EntityUid,
}

impl Default for Set {
    fn default() -> Set {
        Set {
            set: PolicySet::new(),
            meta: HashMap::new(),
            infos: Vec::new(),
            all: Scope::default(),
            permits: Scope::default(),
            text: String::new(),
            authorizer: Authorizer::new(),
            call: uid("Action", "call"),
        }
    }
}

fn tool_id(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
}

fn uid(kind: &str, id: &str) -> EntityUid {
    EntityUid::from_type_name_and_id(
        EntityTypeName::from_str(kind).expect("a fixed entity type name"),
        EntityId::new(id),
    )
}

/// What a scope constraint names, checked: `Err` says why it can never match a call.
fn scoped(c: &ResourceConstraint) -> Result<Option<(bool, String)>, String> {
    // (true, server) for a server, (false, server/tool) for a tool; None for every tool.
    let of = |u: &EntityUid| -> Result<Option<(bool, String)>, String> {
        let id = u.id().unescaped().to_owned();
        match u.type_name().to_string().as_str() {
            "Server" => Ok(Some((true, id))),
            "Tool" if id.contains('/') => Ok(Some((false, id))),
            "Tool" => Err(format!("`{u}` names no tool: write Tool::\"server/tool\"")),
            t => Err(format!(
                "the resource is a Tool (in its Server); `{t}` never matches a call"
            )),
        }
    };
    match c {
        ResourceConstraint::Any => Ok(None),
        ResourceConstraint::Is(t) if t.to_string() == "Tool" => Ok(None),
        ResourceConstraint::Is(t) => Err(format!(
            "the resource is a Tool; `resource is {t}` never matches a call"
        )),
        ResourceConstraint::Eq(u) => match of(u)? {
            Some((true, _)) => Err(format!(
                "`resource == {u}` never matches a call (the resource is a tool): write `resource in {u}`"
            )),
            s => Ok(s),
        },
        ResourceConstraint::In(u) => of(u),
        ResourceConstraint::IsIn(t, u) if t.to_string() == "Tool" => of(u),
        ResourceConstraint::IsIn(t, _) => Err(format!(
            "the resource is a Tool; `resource is {t}` never matches a call"
        )),
    }
}

/// The checks Cedar's parser does not make: the action is `Action::"call"`, the principal a `User` or a `Group`, the
/// resource a tool or a server, `@ask` only on a permit.
fn check(p: &Policy) -> Result<Option<(bool, String)>, String> {
    let call =
        |u: &EntityUid| u.type_name().to_string() == "Action" && u.id().unescaped() == "call";
    match p.action_constraint() {
        ActionConstraint::Any => {}
        ActionConstraint::Eq(u) if call(&u) => {}
        ActionConstraint::In(us) if us.iter().any(call) => {}
        ActionConstraint::Eq(u) => {
            return Err(format!(
                "the only action is Action::\"call\"; `action == {u}` never matches a call"
            ));
        }
        ActionConstraint::In(_) => {
            return Err(
                "the only action is Action::\"call\"; this `action in [...]` never matches a call"
                    .into(),
            );
        }
    }
    let principal = p.principal_constraint();
    let named = match &principal {
        cedar_policy::PrincipalConstraint::Any => None,
        cedar_policy::PrincipalConstraint::Is(t) => Some(t.to_string()),
        cedar_policy::PrincipalConstraint::In(u) | cedar_policy::PrincipalConstraint::Eq(u) => {
            Some(u.type_name().to_string())
        }
        cedar_policy::PrincipalConstraint::IsIn(t, _) => Some(t.to_string()),
    };
    if let Some(t) = named
        && t != "User"
        && t != "Group"
    {
        return Err(format!(
            "the principal is a User (in its Groups); `{t}` never matches a call"
        ));
    }
    if p.annotation("ask").is_some() && p.effect() == Effect::Forbid {
        return Err("`@ask` goes on a permit policy (a forbid refuses)".into());
    }
    scoped(&p.resource_constraint())
}

impl Set {
    /// Parses and checks `files` (path, text) into one set. Each policy's id is its `@id("…")` annotation, else
    /// `<file stem>:<n>` (its place in the file, from 0); ids must be unique across the files.
    pub(crate) fn compile(files: &[(PathBuf, String)]) -> Result<Set, LoadError> {
        let mut out = Set::default();
        for (path, text) in files {
            let parsed = PolicySet::from_str(text)
                .map_err(|e| LoadError::new(Some(path), parse_errors(&e)))?;
            if parsed.templates().next().is_some() {
                return Err(LoadError::new(
                    Some(path),
                    "policy templates (with ?principal or ?resource slots) are not supported",
                ));
            }
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Cedar numbers a file's policies policy0, policy1, … in order of appearance.
            let mut policies: Vec<&Policy> = parsed.policies().collect();
            policies.sort_by_key(|p| {
                p.id()
                    .to_string()
                    .trim_start_matches("policy")
                    .parse::<usize>()
                    .unwrap_or(usize::MAX)
            });
            for (n, p) in policies.into_iter().enumerate() {
                let id = p
                    .annotation("id")
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{stem}:{n}"));
                let scope = check(p)
                    .map_err(|e| LoadError::new(Some(path), format!("policy `{id}`: {e}")))?;
                let forbid = p.effect() == Effect::Forbid;
                let ask = p.annotation("ask").is_some();
                let pid = PolicyId::new(&id);
                let renamed = p.new_id(pid.clone());
                out.set.add(renamed.clone()).map_err(|e| {
                    LoadError::new(
                        Some(path),
                        format!("policy `{id}`: {e} (ids must be unique)"),
                    )
                })?;
                for s in [&mut out.all]
                    .into_iter()
                    .chain((!forbid).then_some(&mut out.permits))
                {
                    match &scope {
                        None => s.every = true,
                        Some((true, server)) => {
                            s.servers.insert(server.clone());
                        }
                        Some((false, id)) => {
                            let (server, tool) = id.split_once('/').unwrap_or((id, ""));
                            s.tools
                                .entry(server.to_owned())
                                .or_default()
                                .insert(tool.to_owned());
                        }
                    }
                }
                out.meta.insert(pid, Meta { forbid, ask });
                out.infos.push(PolicyInfo {
                    id,
                    effect: if forbid { "forbid" } else { "permit" },
                    ask,
                    file: path.display().to_string(),
                    scope: match &scope {
                        None => "*".into(),
                        Some((true, server)) => format!("{server}/*"),
                        Some((false, tool)) => tool.clone(),
                    },
                    text: renamed.to_string(),
                });
            }
            out.text.push_str(text);
            out.text.push('\0');
        }
        Ok(out)
    }

    pub(crate) fn len(&self) -> usize {
        self.infos.len()
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    pub(crate) fn infos(&self) -> Vec<PolicyInfo> {
        self.infos.clone()
    }

    pub(crate) fn covers(&self, server: &str, tool: &str) -> bool {
        self.all.covers(server, tool)
    }

    /// The decision for `call`; `None` when no policy is scoped to its tool.
    pub(crate) fn decide(&self, call: &Call<'_>) -> Option<Decision> {
        if !self.covers(call.server, call.tool) {
            return None;
        }
        let decided = |outcome, policies: Vec<String>, reason: String| {
            Some(Decision {
                outcome,
                policies,
                reason,
            })
        };
        let request = match self.request(call) {
            Ok(r) => r,
            Err(e) => {
                return decided(
                    Outcome::Deny,
                    vec![],
                    format!("the call could not be put to the policies: {e}"),
                );
            }
        };
        let (req, entities) = request;
        let response = self.authorizer.is_authorized(&req, &self.set, &entities);
        let diagnostics = response.diagnostics();
        let reasons: Vec<&PolicyId> = diagnostics.reason().collect();
        // A forbid that could not be evaluated refuses (see the module comment).
        let broken: Vec<(String, String)> = diagnostics
            .errors()
            .filter_map(|e| match e {
                cedar_policy::AuthorizationError::PolicyEvaluationError(e) => {
                    let id = e.policy_id();
                    self.meta
                        .get(id)
                        .is_some_and(|m| m.forbid)
                        .then(|| (id.to_string(), e.inner().to_string()))
                }
            })
            .collect();
        match response.decision() {
            CedarDecision::Deny if !reasons.is_empty() => {
                let ids: Vec<String> = reasons.iter().map(|p| p.to_string()).collect();
                let reason = format!("forbidden by policy {}", ids.join(", "));
                decided(Outcome::Deny, ids, reason)
            }
            _ if !broken.is_empty() => {
                let reason = broken
                    .iter()
                    .map(|(id, e)| format!("forbid policy {id} could not be evaluated ({e})"))
                    .collect::<Vec<_>>()
                    .join("; ");
                decided(
                    Outcome::Deny,
                    broken.into_iter().map(|(id, _)| id).collect(),
                    format!("{reason}: refused to be safe"),
                )
            }
            CedarDecision::Deny if self.permits.covers(call.server, call.tool) => decided(
                Outcome::Deny,
                vec![],
                "no policy permits this call (policies permit calls of this tool only under conditions or to others)"
                    .into(),
            ),
            CedarDecision::Deny => decided(
                Outcome::Allow,
                vec![],
                "no forbid policy holds and no permit policy is scoped to this tool".into(),
            ),
            CedarDecision::Allow => {
                let asking: Vec<String> = reasons
                    .iter()
                    .filter(|p| self.meta.get(**p).is_some_and(|m| m.ask))
                    .map(|p| p.to_string())
                    .collect();
                if asking.is_empty() {
                    let ids: Vec<String> = reasons.iter().map(|p| p.to_string()).collect();
                    let reason = format!("permitted by policy {}", ids.join(", "));
                    decided(Outcome::Allow, ids, reason)
                } else {
                    let reason = format!(
                        "permitted by policy {} once a person approves",
                        asking.join(", ")
                    );
                    decided(Outcome::Ask, asking, reason)
                }
            }
        }
    }

    /// The Cedar request and entities of `call`.
    fn request(&self, call: &Call<'_>) -> Result<(Request, Entities), String> {
        let groups: HashSet<EntityUid> = call.groups.iter().map(|g| uid("Group", g)).collect();
        let principal = uid("User", call.user.unwrap_or(LOCAL_USER));
        let server = uid("Server", call.server);
        let resource = uid("Tool", &tool_id(call.server, call.tool));
        let tool = Entity::new(
            resource.clone(),
            HashMap::from([
                (
                    "server".to_owned(),
                    RestrictedExpression::new_string(call.server.to_owned()),
                ),
                (
                    "name".to_owned(),
                    RestrictedExpression::new_string(call.tool.to_owned()),
                ),
            ]),
            HashSet::from([server.clone()]),
        )
        .map_err(|e| e.to_string())?;
        let entities = Entities::from_entities(
            [
                Entity::new_no_attrs(principal.clone(), groups),
                tool,
                Entity::new_no_attrs(server, HashSet::new()),
            ],
            None,
        )
        .map_err(|e| e.to_string())?;
        let args = match call.args {
            Some(m) => record(m)?,
            None => RestrictedExpression::new_record([]).map_err(|e| e.to_string())?,
        };
        let context = Context::from_pairs([
            ("args".to_owned(), args),
            (
                "client".to_owned(),
                RestrictedExpression::new_string(call.client.unwrap_or_default().to_owned()),
            ),
            (
                "script".to_owned(),
                RestrictedExpression::new_bool(call.script),
            ),
        ])
        .map_err(|e| e.to_string())?;
        let req = Request::new(principal, self.call.clone(), resource, context, None)
            .map_err(|e| e.to_string())?;
        Ok((req, entities))
    }
}

/// A JSON object as a Cedar record (see the module comment for how values map).
fn record(m: &serde_json::Map<String, Value>) -> Result<RestrictedExpression, String> {
    RestrictedExpression::new_record(
        m.iter()
            .filter_map(|(k, v)| value(v).map(|v| (k.clone(), v)))
            .collect::<Vec<_>>(),
    )
    .map_err(|e| e.to_string())
}

fn value(v: &Value) -> Option<RestrictedExpression> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => RestrictedExpression::new_bool(*b),
        Value::String(s) => RestrictedExpression::new_string(s.clone()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => RestrictedExpression::new_long(i),
            None => {
                // Cedar's decimal: at most four fractional digits, within i64 / 10^4.
                let f = n.as_f64()?;
                if !f.is_finite() || f.abs() >= 9.0e14 {
                    return None;
                }
                let text = format!("{f:.4}");
                RestrictedExpression::new_decimal(text)
            }
        },
        Value::Array(a) => RestrictedExpression::new_set(a.iter().filter_map(value)),
        Value::Object(m) => record(m).ok()?,
    })
}

/// Cedar's parse errors as one readable text: each error with its help and where it is (line:column).
fn parse_errors(e: &cedar_policy::ParseErrors) -> String {
    e.iter()
        .map(|err| {
            let mut s = err.to_string();
            if let Some(help) = miette::Diagnostic::help(err) {
                s.push_str(&format!(" (help: {help})"));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}
