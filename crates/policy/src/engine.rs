//! The Cedar side: policy files parsed and checked into one `PolicySet`, cut into per-tool slices (`slices.rs`: the
//! policies whose scope can match a tool), and one call evaluated by its tool's slice into a [`Decision`]. Per call:
//! two hash lookups find the slice (none: the call is not policed, no Cedar call); when every policy of it that can
//! hold for the caller is of the forms `direct.rs` decides and none would raise an error, the call is decided there,
//! with no Cedar request; else the request is built from entity types parsed once and only the arguments the slice's
//! policies read. Cedar's request for such a call could not have failed (every argument converts: strings, integers
//! and booleans as they are, fractions always to a valid `decimal` or left out), so the two paths refuse alike.
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
//! let a call through because it could not be read. Deciding policies are named in the set's order (files by name,
//! policies in file order).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use cedar_policy::{
    ActionConstraint, Authorizer, Context, Decision as CedarDecision, Effect, Entities, Entity,
    EntityId, EntityTypeName, EntityUid, Policy, PolicyId, PolicySet, Request, ResourceConstraint,
    RestrictedExpression,
};
use serde::Serialize;
use serde_json::Value;

use crate::call::{Call, Decision, LOCAL_USER, LoadError, Outcome};
use crate::callers::Part;
use crate::slices::{Entry, Index, Reads, Slice};

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

struct Meta {
    forbid: bool,
    ask: bool,
    /// Its place in the set (files in name order, policies in file order): deciding policies are named in it.
    order: usize,
    /// Its id as text (what a decision names).
    id: String,
}

/// The entity types of a call, parsed once.
struct Types {
    user: EntityTypeName,
    group: EntityTypeName,
    tool: EntityTypeName,
    server: EntityTypeName,
}

/// A checked policy set with its per-tool slices (`slices.rs`).
pub(crate) struct Set {
    /// The whole set: what the slices are cut from (and, in tests, what they are compared with).
    #[cfg_attr(not(test), allow(dead_code))]
    set: PolicySet,
    meta: HashMap<PolicyId, Meta>,
    infos: Vec<PolicyInfo>,
    index: Index,
    text: String,
    authorizer: Authorizer,
    call: EntityUid,
    types: Types,
    /// The entities of recent calls by their hash ([`Set::cached_entities`]).
    cache: Mutex<EntityCache>,
    /// For calls whose policies look up no entity.
    no_entities: Arc<Entities>,
}

/// Recent calls' entities by the hash of who calls what (several keys may share a hash).
type EntityCache = HashMap<u64, Vec<(CacheKey, Arc<Entities>)>>;

/// Who calls what: what a call's entities are made of.
struct CacheKey {
    user: Option<String>,
    groups: Vec<String>,
    server: String,
    tool: String,
    resource: bool,
}

/// Distinct callers and tools whose entities are kept before the cache starts again.
const CACHE_MAX: usize = 4096;

impl Default for Set {
    fn default() -> Set {
        let ty = |t: &str| EntityTypeName::from_str(t).expect("a fixed entity type name");
        Set {
            set: PolicySet::new(),
            meta: HashMap::new(),
            infos: Vec::new(),
            index: Index::default(),
            text: String::new(),
            authorizer: Authorizer::new(),
            call: EntityUid::from_type_name_and_id(ty("Action"), EntityId::new("call")),
            cache: Mutex::new(HashMap::new()),
            no_entities: Arc::new(Entities::empty()),
            types: Types {
                user: ty("User"),
                group: ty("Group"),
                tool: ty("Tool"),
                server: ty("Server"),
            },
        }
    }
}

fn tool_id(server: &str, tool: &str) -> String {
    format!("{server}/{tool}")
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
        let mut entries = Vec::new();
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
                entries.push(Entry {
                    member: crate::callers::Member::of(&renamed),
                    scope: scope.clone(),
                    reads: Reads::of(&renamed),
                });
                let order = out.infos.len();
                out.meta.insert(
                    pid,
                    Meta {
                        forbid,
                        ask,
                        order,
                        id: id.clone(),
                    },
                );
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
        out.index = Index::build(&entries).map_err(|e| LoadError::new(None, e))?;
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

    /// Whether some policy's scope can match a call of `tool` on `server` (its tool has a slice).
    pub(crate) fn covers(&self, server: &str, tool: &str) -> bool {
        self.index.get(server, tool).is_some()
    }

    /// The decision for `call`, by the policies of its tool's slice; `None` when no policy is scoped to its tool.
    pub(crate) fn decide(&self, call: &Call<'_>) -> Option<Decision> {
        self.decide_as(call, true)
    }

    /// [`Set::decide`]; `explain` false: an allowed call's decision names no policy and gives no reason.
    pub(crate) fn decide_as(&self, call: &Call<'_>, explain: bool) -> Option<Decision> {
        let slice = self.index.get(call.server, call.tool)?;
        // Every policy that can hold of a form decided without Cedar, and none in error (`direct.rs`).
        if let Some(held) = slice.callers.direct(call) {
            return Some(self.verdict(slice.permits, held.forbids, held.permits, explain));
        }
        // Only the policies that can hold for this caller (`callers.rs`); none: Cedar would find nothing.
        let part = match slice.callers.part(call) {
            Ok(p) => p,
            Err(e) => return Some(unputtable(e)),
        };
        Some(match part {
            Part::Some(set) => self.decide_in(slice, &set, call, true, explain),
            Part::Nothing => none_hold(slice.permits),
        })
    }

    /// Ids in the set's order (Cedar reports deciding policies as a hash set).
    fn ordered<'a>(&self, ids: impl Iterator<Item = &'a PolicyId>) -> Vec<String> {
        let mut ids: Vec<(usize, &PolicyId, Option<&Meta>)> = ids
            .map(|p| {
                let m = self.meta.get(p);
                (m.map_or(usize::MAX, |m| m.order), p, m)
            })
            .collect();
        ids.sort_unstable_by_key(|(n, _, _)| *n);
        ids.into_iter()
            .map(|(_, p, m)| m.map_or_else(|| p.to_string(), |m| m.id.clone()))
            .collect()
    }

    /// `cached`: the call's entities may come from the cache (the tests' whole-set decision builds them afresh).
    /// `set`: the slice's policies, or the part of them that can hold for this caller.
    fn decide_in(
        &self,
        slice: &Slice,
        set: &PolicySet,
        call: &Call<'_>,
        cached: bool,
        explain: bool,
    ) -> Decision {
        let (req, entities) = match self.request(call, &slice.reads, cached) {
            Ok(r) => r,
            Err(e) => return unputtable(e),
        };
        let response = self.authorizer.is_authorized(&req, set, &entities);
        let diagnostics = response.diagnostics();
        // A forbid that could not be evaluated refuses (see the module comment).
        let mut broken: Vec<(usize, String, String)> = diagnostics
            .errors()
            .filter_map(|e| match e {
                cedar_policy::AuthorizationError::PolicyEvaluationError(e) => {
                    let id = e.policy_id();
                    self.meta
                        .get(id)
                        .filter(|m| m.forbid)
                        .map(|m| (m.order, id.to_string(), e.inner().to_string()))
                }
            })
            .collect();
        broken.sort_unstable_by_key(|(n, _, _)| *n);
        let reasons = || diagnostics.reason();
        match response.decision() {
            CedarDecision::Deny if reasons().next().is_some() => {
                self.verdict(slice.permits, reasons().collect(), vec![], explain)
            }
            _ if !broken.is_empty() => {
                let reason = broken
                    .iter()
                    .map(|(_, id, e)| format!("forbid policy {id} could not be evaluated ({e})"))
                    .collect::<Vec<_>>()
                    .join("; ");
                decided(
                    Outcome::Deny,
                    broken.into_iter().map(|(_, id, _)| id).collect(),
                    format!("{reason}: refused to be safe"),
                )
            }
            CedarDecision::Deny => none_hold(slice.permits),
            CedarDecision::Allow => {
                self.verdict(slice.permits, vec![], reasons().collect(), explain)
            }
        }
    }

    /// The decision when no policy failed to evaluate, from the forbids and the permits that hold (Cedar's deciding
    /// policies, or those `direct.rs` found); `permits`: some permit is scoped to the tool.
    fn verdict(
        &self,
        permits: bool,
        forbids: Vec<&PolicyId>,
        holding: Vec<&PolicyId>,
        explain: bool,
    ) -> Decision {
        if !forbids.is_empty() {
            let ids = self.ordered(forbids.into_iter());
            let reason = format!("forbidden by policy {}", ids.join(", "));
            return decided(Outcome::Deny, ids, reason);
        }
        if holding.is_empty() {
            return none_hold(permits);
        }
        let asks = |p: &&PolicyId| self.meta.get(*p).is_some_and(|m| m.ask);
        if !holding.iter().any(asks) {
            if !explain {
                return decided(Outcome::Allow, vec![], String::new());
            }
            let ids = self.ordered(holding.into_iter());
            let reason = format!("permitted by policy {}", ids.join(", "));
            decided(Outcome::Allow, ids, reason)
        } else {
            let asking = self.ordered(holding.into_iter().filter(asks));
            let reason = format!(
                "permitted by policy {} once a person approves",
                asking.join(", ")
            );
            decided(Outcome::Ask, asking, reason)
        }
    }

    /// The Cedar request and entities of `call`, with the arguments and the tool's attributes the policies read.
    /// The entities of `call`: the user in their groups, the tool (with its attributes when `resource`: some
    /// policy reads them) in its server, the server.
    fn entities(&self, call: &Call<'_>, resource_attrs: bool) -> Result<Entities, String> {
        let uid = |t: &EntityTypeName, id: &str| {
            EntityUid::from_type_name_and_id(t.clone(), EntityId::new(id))
        };
        let t = &self.types;
        let groups: HashSet<EntityUid> = call.groups.iter().map(|g| uid(&t.group, g)).collect();
        let principal = uid(&t.user, call.user.unwrap_or(LOCAL_USER));
        let server = uid(&t.server, call.server);
        let resource = uid(&t.tool, &tool_id(call.server, call.tool));
        let parents = HashSet::from([server.clone()]);
        let tool = if resource_attrs {
            Entity::new(
                resource,
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
                parents,
            )
            .map_err(|e| e.to_string())?
        } else {
            Entity::new_no_attrs(resource, parents)
        };
        Entities::from_entities(
            [
                Entity::new_no_attrs(principal, groups),
                tool,
                Entity::new_no_attrs(server, HashSet::new()),
            ],
            None,
        )
        .map_err(|e| e.to_string())
    }

    /// [`Set::entities`] from the cache of recent callers and tools, else made and kept: building them (Cedar
    /// computes the hierarchy's closure) was half of a policed call's cost, and a user calls the same tools again and
    /// again. The cache lives as long as the set; it is emptied when it holds [`CACHE_MAX`] entries.
    fn cached_entities(
        &self,
        call: &Call<'_>,
        resource_attrs: bool,
    ) -> Result<Arc<Entities>, String> {
        let mut h = std::hash::DefaultHasher::new();
        (
            call.user,
            call.groups,
            call.server,
            call.tool,
            resource_attrs,
        )
            .hash(&mut h);
        let hash = h.finish();
        let same = |k: &CacheKey| {
            k.user.as_deref() == call.user
                && k.groups == call.groups
                && k.server == call.server
                && k.tool == call.tool
                && k.resource == resource_attrs
        };
        {
            let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(hit) = cache
                .get(&hash)
                .and_then(|v| v.iter().find(|(k, _)| same(k)))
            {
                return Ok(hit.1.clone());
            }
        }
        let made = Arc::new(self.entities(call, resource_attrs)?);
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_MAX {
            cache.clear();
        }
        let key = CacheKey {
            user: call.user.map(str::to_owned),
            groups: call.groups.to_vec(),
            server: call.server.to_owned(),
            tool: call.tool.to_owned(),
            resource: resource_attrs,
        };
        cache.entry(hash).or_default().push((key, made.clone()));
        Ok(made)
    }

    fn request(
        &self,
        call: &Call<'_>,
        reads: &Reads,
        cached: bool,
    ) -> Result<(Request, Arc<Entities>), String> {
        let entities = if cached && !reads.entities {
            // No condition names an entity and the scopes were matched already: Cedar looks none up.
            self.no_entities.clone()
        } else if cached {
            self.cached_entities(call, reads.resource)?
        } else {
            Arc::new(self.entities(call, reads.resource)?)
        };
        let uid = |t: &EntityTypeName, id: &str| {
            EntityUid::from_type_name_and_id(t.clone(), EntityId::new(id))
        };
        let t = &self.types;
        let principal = uid(&t.user, call.user.unwrap_or(LOCAL_USER));
        let resource = uid(&t.tool, &tool_id(call.server, call.tool));
        let args = match call.args {
            Some(m) => RestrictedExpression::new_record(
                m.iter()
                    .filter(|(k, _)| reads.arg(k))
                    .filter_map(|(k, v)| value(v).map(|v| (k.clone(), v)))
                    .collect::<Vec<_>>(),
            )
            .map_err(|e| e.to_string())?,
            None => RestrictedExpression::new_record([]).map_err(|e| e.to_string())?,
        };
        // The client and the script flag only when some policy reads them (a read of one that is not there would
        // be an error, so a policy that reads it always finds it).
        let mut pairs = Vec::with_capacity(3);
        pairs.push(("args".to_owned(), args));
        if reads.client {
            pairs.push((
                "client".to_owned(),
                RestrictedExpression::new_string(call.client.unwrap_or_default().to_owned()),
            ));
        }
        if reads.script {
            pairs.push((
                "script".to_owned(),
                RestrictedExpression::new_bool(call.script),
            ));
        }
        let context = Context::from_pairs(pairs).map_err(|e| e.to_string())?;
        let req = Request::new(principal, self.call.clone(), resource, context, None)
            .map_err(|e| e.to_string())?;
        Ok((req, entities))
    }

    /// Whether `call` is put to only part of its slice (or to none of it) for its caller.
    #[cfg(test)]
    pub(crate) fn narrowed(&self, call: &Call<'_>) -> bool {
        self.index
            .get(call.server, call.tool)
            .is_some_and(|s| s.callers.narrowed(call))
    }

    /// Whether `call` is decided without Cedar (`direct.rs`).
    #[cfg(test)]
    pub(crate) fn direct(&self, call: &Call<'_>) -> bool {
        self.index
            .get(call.server, call.tool)
            .is_some_and(|s| s.callers.direct(call).is_some())
    }

    /// [`Set::decide`] by the whole set and every argument, the scope read from the policies' listing: what the
    /// slices must always agree with.
    #[cfg(test)]
    pub(crate) fn decide_whole(&self, call: &Call<'_>) -> Option<Decision> {
        let tool = tool_id(call.server, call.tool);
        let server = format!("{}/*", call.server);
        let scoped = |i: &&PolicyInfo| i.scope == "*" || i.scope == server || i.scope == tool;
        if !self.infos.iter().any(|i| scoped(&i)) {
            return None;
        }
        let whole = Slice {
            callers: crate::callers::Callers::of(std::iter::empty()).ok()?,
            permits: self
                .infos
                .iter()
                .filter(scoped)
                .any(|i| i.effect == "permit"),
            reads: Reads::everything(),
        };
        Some(self.decide_in(&whole, &self.set, call, false, true))
    }
}

fn decided(outcome: Outcome, policies: Vec<String>, reason: String) -> Decision {
    Decision {
        outcome,
        policies,
        reason,
    }
}

/// The call could not be made into a Cedar request: refused.
fn unputtable(e: String) -> Decision {
    decided(
        Outcome::Deny,
        vec![],
        format!("the call could not be put to the policies: {e}"),
    )
}

/// No policy holds (none satisfied, none in error): inside a permit's scope the set is default-deny, else allowed.
fn none_hold(permits: bool) -> Decision {
    if permits {
        decided(
            Outcome::Deny,
            vec![],
            "no policy permits this call (policies permit calls of this tool only under conditions or to others)"
                .into(),
        )
    } else {
        decided(
            Outcome::Allow,
            vec![],
            "no forbid policy holds and no permit policy is scoped to this tool".into(),
        )
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
