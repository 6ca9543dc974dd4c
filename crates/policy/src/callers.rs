//! Which of a slice's policies can hold for one caller, decided before Cedar sees the call: a policy whose principal
//! scope names another user or a group the caller is not in, or whose first condition tests the call's script flag
//! or client against what the call has, is left out of the set Cedar evaluates.
//!
//! Why the decision cannot change (as for slices, `slices.rs`): Cedar evaluates a policy as `principal && action &&
//! resource && conditions`, conditions in their order, `&&` stopping at the first false operand. A principal scope
//! that does not match is false before anything else is read; so is a first condition whose first conjunct is
//! `context.script`, `!context.script` or `context.client == "…"` (or an `unless` of exactly one of those) that the
//! call contradicts: the context always carries `script` and `client`, so those operands never fail to evaluate. The
//! policy is then neither satisfied nor in error, and leaving it out changes nothing Cedar reports.
//!
//! The caller's principal is `User::"<user>"` whose only parents are its groups, so `principal in Group::"g"` holds
//! exactly when `g` is one of the caller's groups and `principal in User::"u"` exactly when the caller is `u`. The
//! part of a slice a call is left with is a bit mask over its policies; each mask's `PolicySet` is made once and kept.
//! The policies are put to Cedar with their scopes dropped: each is in a call's part only when its whole scope matches
//! the call, so the scope would be true, and Cedar need not evaluate it (the hierarchy lookups it takes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cedar_policy::{Effect, EntityUid, Policy, PolicyId, PolicySet, PrincipalConstraint};
use serde_json::Value;

use crate::call::{Call, LOCAL_USER};
use crate::direct::{self, Cond};

/// Who a policy's principal scope can match.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Who {
    Anyone,
    /// No call: the principal is always a user (`principal == Group::"g"`, `principal is Group`).
    Nobody,
    User(String),
    Group(String),
}

/// A test of the call's context that a policy's conditions make before anything else.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Guard {
    /// `context.script` is this.
    Script(bool),
    /// `context.client` is (`true`) or is not (`false`) this.
    Client(bool, String),
}

/// One policy of a set with what must hold of a call for it to be evaluated at all: made once per load, shared by
/// every slice the policy is in.
#[derive(Clone)]
pub(crate) struct Member {
    policy: Policy,
    who: Who,
    guard: Option<Guard>,
    pub(crate) forbid: bool,
    /// Its conditions, when they can be decided without Cedar (`direct.rs`).
    direct: Option<Arc<Cond>>,
}

impl Member {
    pub(crate) fn of(policy: &Policy) -> Member {
        let est = policy.to_json().ok();
        Member {
            policy: est
                .as_ref()
                .and_then(|e| unscoped(policy, e))
                .unwrap_or_else(|| policy.clone()),
            who: who(&policy.principal_constraint()),
            guard: est.as_ref().and_then(guard),
            forbid: policy.effect() == Effect::Forbid,
            direct: est.as_ref().and_then(direct::compile).map(Arc::new),
        }
    }

    pub(crate) fn id(&self) -> &PolicyId {
        self.policy.id()
    }

    fn can_hold(&self, call: &Call<'_>) -> bool {
        let who = match &self.who {
            Who::Anyone => true,
            Who::Nobody => false,
            Who::User(u) => call.user.unwrap_or(LOCAL_USER) == u,
            Who::Group(g) => call.groups.iter().any(|x| x == g),
        };
        who && match &self.guard {
            None => true,
            Some(Guard::Script(s)) => call.script == *s,
            Some(Guard::Client(is, c)) => (call.client.unwrap_or_default() == c) == *is,
        }
    }
}

/// `policy` with its scope dropped (`principal, action, resource`), the same id, annotations and conditions: put to
/// Cedar only for calls its whole scope matches (its resource scope by the slice, its action by the set's checks, its
/// principal by [`Member::can_hold`]), where the scope is true and raises no error, so Cedar need not evaluate it.
fn unscoped(policy: &Policy, est: &Value) -> Option<Policy> {
    let mut est = est.clone();
    for part in ["principal", "action", "resource"] {
        est[part] = serde_json::json!({"op": "All"});
    }
    Policy::from_json(Some(policy.id().clone()), est).ok()
}

fn named(u: &EntityUid) -> Who {
    let id = u.id().unescaped().to_owned();
    match u.type_name().to_string().as_str() {
        "User" => Who::User(id),
        "Group" => Who::Group(id),
        _ => Who::Nobody,
    }
}

fn who(c: &PrincipalConstraint) -> Who {
    let user = |t: &cedar_policy::EntityTypeName| t.to_string() == "User";
    match c {
        PrincipalConstraint::Any => Who::Anyone,
        PrincipalConstraint::Is(t) if user(t) => Who::Anyone,
        PrincipalConstraint::Is(_) => Who::Nobody,
        // `==` a group never matches: the principal is a user.
        PrincipalConstraint::Eq(u) => match named(u) {
            Who::Group(_) => Who::Nobody,
            w => w,
        },
        PrincipalConstraint::In(u) => named(u),
        PrincipalConstraint::IsIn(t, u) if user(t) => named(u),
        PrincipalConstraint::IsIn(..) => Who::Nobody,
    }
}

/// The guard of a policy's first condition, from its JSON form (EST): the leftmost operand of a `when`'s chain of
/// `&&`, or an `unless` whose whole body is one test.
fn guard(est: &Value) -> Option<Guard> {
    let first = est["conditions"].as_array()?.first()?;
    let mut body = &first["body"];
    match first["kind"].as_str()? {
        "when" => {
            while let Some(and) = body.get("&&") {
                body = &and["left"];
            }
            test(body)
        }
        "unless" => match test(body)? {
            Guard::Script(s) => Some(Guard::Script(!s)),
            Guard::Client(is, c) => Some(Guard::Client(!is, c)),
        },
        _ => None,
    }
}

/// `context.script`, `!context.script`, `context.client == "…"` (either way round).
fn test(e: &Value) -> Option<Guard> {
    let context = |e: &Value, attr: &str| {
        e.get(".").is_some_and(|d| {
            d["left"].get("Var").and_then(Value::as_str) == Some("context") && d["attr"] == attr
        })
    };
    if context(e, "script") {
        return Some(Guard::Script(true));
    }
    if let Some(not) = e.get("!") {
        return context(&not["arg"], "script").then_some(Guard::Script(false));
    }
    let eq = e.get("==")?;
    let (l, r) = (&eq["left"], &eq["right"]);
    let literal = |v: &Value| v.get("Value").and_then(Value::as_str).map(str::to_owned);
    if context(l, "client") {
        return literal(r).map(|c| Guard::Client(true, c));
    }
    if context(r, "client") {
        return literal(l).map(|c| Guard::Client(true, c));
    }
    None
}

/// The policies of a slice that hold for one call, decided without Cedar: forbids and permits, in the slice's order.
#[derive(Default)]
pub(crate) struct Held<'a> {
    pub(crate) forbids: Vec<&'a PolicyId>,
    pub(crate) permits: Vec<&'a PolicyId>,
}

/// What of a slice Cedar is to evaluate for one call.
pub(crate) enum Part {
    /// No policy of the slice can hold: Cedar would find none satisfied and none in error.
    Nothing,
    /// The policies that can, their scopes dropped.
    Some(Arc<PolicySet>),
}

/// Distinct parts of one slice kept before the slice's cache starts again.
const KEPT_MAX: usize = 256;

/// A slice's policies as callers narrow them.
pub(crate) struct Callers {
    members: Vec<Member>,
    /// Whether any member can be left out for some call (else every call gets all of them).
    narrows: bool,
    /// Every member, scopes dropped.
    all: Arc<PolicySet>,
    kept: Mutex<HashMap<Vec<u64>, Arc<PolicySet>>>,
}

impl Callers {
    /// `members` in the slice's order.
    pub(crate) fn of(members: impl Iterator<Item = Member>) -> Result<Callers, String> {
        let members: Vec<Member> = members.collect();
        let narrows = members
            .iter()
            .any(|m| m.who != Who::Anyone || m.guard.is_some());
        let all = PolicySet::from_policies(members.iter().map(|m| m.policy.clone()))
            .map_err(|e| e.to_string())?;
        Ok(Callers {
            members,
            narrows,
            all: Arc::new(all),
            kept: Mutex::new(HashMap::new()),
        })
    }

    /// Whether some policy of the slice is left out for `call`.
    #[cfg(test)]
    pub(crate) fn narrowed(&self, call: &Call<'_>) -> bool {
        self.members.iter().any(|m| !m.can_hold(call))
    }

    /// The policies of the slice that hold for `call`, when each one that can hold for its caller is decided
    /// without Cedar and without an error (`direct.rs`); `None`: the call is Cedar's.
    pub(crate) fn direct(&self, call: &Call<'_>) -> Option<Held<'_>> {
        let mut held = Held::default();
        for m in &self.members {
            if !m.can_hold(call) {
                continue;
            }
            if m.direct.as_ref()?.holds(call).ok()? {
                if m.forbid {
                    held.forbids.push(m.id());
                } else {
                    held.permits.push(m.id());
                }
            }
        }
        Some(held)
    }

    /// The part of the slice `call` is to be put to.
    pub(crate) fn part(&self, call: &Call<'_>) -> Result<Part, String> {
        if !self.narrows {
            return Ok(Part::Some(self.all.clone()));
        }
        let mut mask = vec![0u64; self.members.len().div_ceil(64)];
        let mut all = true;
        let mut none = true;
        for (i, m) in self.members.iter().enumerate() {
            if m.can_hold(call) {
                mask[i / 64] |= 1 << (i % 64);
                none = false;
            } else {
                all = false;
            }
        }
        if all {
            return Ok(Part::Some(self.all.clone()));
        }
        if none {
            return Ok(Part::Nothing);
        }
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(set) = kept.get(&mask) {
            return Ok(Part::Some(set.clone()));
        }
        let mut set = PolicySet::new();
        for (i, m) in self.members.iter().enumerate() {
            if mask[i / 64] & (1 << (i % 64)) != 0 {
                set.add(m.policy.clone()).map_err(|e| e.to_string())?;
            }
        }
        let set = Arc::new(set);
        if kept.len() >= KEPT_MAX {
            kept.clear();
        }
        kept.insert(mask, set.clone());
        Ok(Part::Some(set))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn member(text: &str) -> Member {
        Member::of(&Policy::from_str(text).unwrap())
    }

    #[test]
    fn principal_scopes_and_first_conditions_are_read() {
        let m = member(r#"forbid (principal in Group::"g", action, resource);"#);
        assert_eq!((m.who, m.guard), (Who::Group("g".into()), None));
        let m = member(r#"permit (principal is User in User::"u", action, resource);"#);
        assert_eq!(m.who, Who::User("u".into()));
        assert_eq!(
            member(r#"permit (principal == Group::"g", action, resource);"#).who,
            Who::Nobody
        );
        let m = member(
            r#"forbid (principal, action, resource) when { context.script && context.args.a > 1 && true };"#,
        );
        assert_eq!(m.guard, Some(Guard::Script(true)));
        let m = member(r#"forbid (principal, action, resource) unless { context.script };"#);
        assert_eq!(m.guard, Some(Guard::Script(false)));
        let m = member(r#"forbid (principal, action, resource) when { "c" == context.client };"#);
        assert_eq!(m.guard, Some(Guard::Client(true, "c".into())));
        let m =
            member(r#"forbid (principal, action, resource) unless { context["client"] == "c" };"#);
        assert_eq!(m.guard, Some(Guard::Client(false, "c".into())));
        // Not first, or not alone in an `unless`, or behind an `||`: evaluated by Cedar as written.
        for text in [
            r#"forbid (principal, action, resource) when { context.args.a > 1 && context.script };"#,
            r#"forbid (principal, action, resource) unless { context.script && context.args.a > 1 };"#,
            r#"forbid (principal, action, resource) when { context.script || context.args.a > 1 };"#,
            r#"forbid (principal, action, resource) when { true } when { context.script };"#,
            r#"forbid (principal, action, resource) when { context.client == context.client };"#,
        ] {
            assert_eq!(member(text).guard, None, "{text}");
        }
    }
}
