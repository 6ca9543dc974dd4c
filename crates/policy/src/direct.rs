//! A policy's conditions decided without a Cedar request, for the forms policies are mostly written in: tests of
//! arguments (`has`, `==`, `!=`, `<`, `<=`, `>`, `>=`, `like`) against literals, of the client and the script flag,
//! `principal in Group::"g"` / `principal == User::"u"`, joined by `&&`, `||` and `!`. Cedar parses and checks every
//! policy, and stays the evaluator of every call this cannot decide exactly; this only spares a call Cedar's per-call
//! work (the context record, the evaluator, each policy's condition rebuilt) when every policy it is put to is of
//! these forms and evaluates without an error.
//!
//! Exactness (what `equivalence.rs` checks against the whole set on Cedar, over random policies and calls): values are
//! Cedar's as `engine.rs` builds them (a string, an integer that fits an `i64`, a boolean; `null` members absent);
//! `&&` and `||` stop at the operand Cedar stops at; `==` of different kinds is false, as in Cedar; `like` is Cedar's
//! glob (`*` any run of characters, matched by character). Wherever Cedar would raise an error (a missing
//! argument read without `has`, an operand of the wrong kind) or sees a value this does not model (a fractional
//! number, an array, an object), the evaluation gives up ([`Unknown`]) and the call goes to Cedar, which then decides
//! and reports as always: nothing here ever stands in for an error.

use serde_json::Value;

use crate::call::{Call, LOCAL_USER};

/// A condition, or an operand of one, compiled from Cedar's JSON form (EST) of a parsed policy.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cond {
    Str(String),
    Long(i64),
    Bool(bool),
    /// `context.args.NAME`.
    Arg(String),
    /// `context.args has NAME`.
    Has(String),
    Client,
    Script,
    /// `principal in Group::"g"`.
    InGroup(String),
    /// `principal == User::"u"` (or `in`).
    IsUser(String),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    Eq(Box<Cond>, Box<Cond>),
    /// `left < right` (`true`: `<=`).
    Less(Box<Cond>, Box<Cond>, bool),
    Like(Box<Cond>, Vec<Elem>),
}

/// An element of a `like` pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Elem {
    Any,
    Char(char),
}

/// Cedar would raise an error here, or sees a value not modelled: the call is Cedar's to decide.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unknown;

/// A value as Cedar would have it.
#[derive(Debug, PartialEq, Eq)]
enum V<'a> {
    Str(&'a str),
    Long(i64),
    Bool(bool),
}

/// The conjunction of a policy's `when` and `unless` conditions (its scope is matched before: `callers.rs`), or
/// `None` when some part is not of the forms above.
pub(crate) fn compile(est: &Value) -> Option<Cond> {
    let mut all: Option<Cond> = None;
    for c in est["conditions"].as_array()? {
        let body = expr(&c["body"])?;
        let c = match c["kind"].as_str()? {
            "when" => body,
            "unless" => Cond::Not(Box::new(body)),
            _ => return None,
        };
        all = Some(match all {
            None => c,
            Some(a) => Cond::And(Box::new(a), Box::new(c)),
        });
    }
    Some(all.unwrap_or(Cond::Bool(true)))
}

fn boxed(e: &Value) -> Option<Box<Cond>> {
    expr(e).map(Box::new)
}

/// An entity literal's type and id.
fn entity(e: &Value) -> Option<(&str, &str)> {
    let u = e.get("Value")?.get("__entity")?;
    Some((u["type"].as_str()?, u["id"].as_str()?))
}

fn is_var(e: &Value, v: &str) -> bool {
    e.get("Var").and_then(Value::as_str) == Some(v)
}

/// `principal == E` or `principal in E` (`eq`: `==`).
fn principal_test(l: &Value, r: &Value, eq: bool) -> Option<Cond> {
    let (t, id) = entity(r).filter(|_| is_var(l, "principal"))?;
    match t {
        "User" => Some(Cond::IsUser(id.to_owned())),
        // The principal is always a user: never `==` a group; `in` one when the caller is in it.
        "Group" if eq => Some(Cond::Bool(false)),
        "Group" => Some(Cond::InGroup(id.to_owned())),
        _ => None,
    }
}

fn expr(e: &Value) -> Option<Cond> {
    let node = e.as_object()?;
    if node.len() != 1 {
        return None;
    }
    let (kind, inner) = node.iter().next()?;
    let pair = || Some((&inner["left"], &inner["right"]));
    Some(match kind.as_str() {
        "Value" => match inner {
            Value::String(s) => Cond::Str(s.clone()),
            Value::Bool(b) => Cond::Bool(*b),
            Value::Number(n) => Cond::Long(n.as_i64()?),
            _ => return None,
        },
        "." => {
            let (left, attr) = (&inner["left"], inner["attr"].as_str()?);
            if is_var(left, "context") {
                match attr {
                    "client" => Cond::Client,
                    "script" => Cond::Script,
                    _ => return None,
                }
            } else if context_args(left) {
                Cond::Arg(attr.to_owned())
            } else {
                return None;
            }
        }
        "has" if context_args(&inner["left"]) => Cond::Has(inner["attr"].as_str()?.to_owned()),
        "&&" => Cond::And(boxed(&inner["left"])?, boxed(&inner["right"])?),
        "||" => Cond::Or(boxed(&inner["left"])?, boxed(&inner["right"])?),
        "!" => Cond::Not(boxed(&inner["arg"])?),
        "==" | "!=" => {
            let (l, r) = pair()?;
            let eq = principal_test(l, r, true)
                .or_else(|| principal_test(r, l, true))
                .or_else(|| Some(Cond::Eq(boxed(l)?, boxed(r)?)))?;
            if kind == "!=" {
                Cond::Not(Box::new(eq))
            } else {
                eq
            }
        }
        "in" => {
            let (l, r) = pair()?;
            principal_test(l, r, false)?
        }
        "<" | "<=" => {
            let (l, r) = pair()?;
            Cond::Less(boxed(l)?, boxed(r)?, kind == "<=")
        }
        // `a > b` is `b < a`, `a >= b` is `b <= a`.
        ">" | ">=" => {
            let (l, r) = pair()?;
            Cond::Less(boxed(r)?, boxed(l)?, kind == ">=")
        }
        "like" => {
            let mut pattern = Vec::new();
            for el in inner["pattern"].as_array()? {
                match el {
                    Value::String(w) if w == "Wildcard" => pattern.push(Elem::Any),
                    Value::Object(o) => {
                        pattern.extend(o.get("Literal")?.as_str()?.chars().map(Elem::Char))
                    }
                    _ => return None,
                }
            }
            Cond::Like(boxed(&inner["left"])?, pattern)
        }
        _ => return None,
    })
}

/// `context.args`.
fn context_args(e: &Value) -> bool {
    e.get(".")
        .is_some_and(|d| is_var(&d["left"], "context") && d["attr"] == "args")
}

impl Cond {
    /// Whether the condition holds for `call`, as Cedar would find it; [`Unknown`] where Cedar would raise an error.
    pub(crate) fn holds(&self, call: &Call<'_>) -> Result<bool, Unknown> {
        match self.eval(call)? {
            V::Bool(b) => Ok(b),
            _ => Err(Unknown),
        }
    }

    fn eval<'a>(&'a self, call: &Call<'a>) -> Result<V<'a>, Unknown> {
        Ok(match self {
            Cond::Str(s) => V::Str(s),
            Cond::Long(n) => V::Long(*n),
            Cond::Bool(b) => V::Bool(*b),
            Cond::Arg(name) => match call.args.and_then(|a| a.get(name)) {
                Some(Value::String(s)) => V::Str(s),
                Some(Value::Bool(b)) => V::Bool(*b),
                Some(Value::Number(n)) => V::Long(n.as_i64().ok_or(Unknown)?),
                // Absent or null (Cedar: no such attribute), or not modelled.
                _ => return Err(Unknown),
            },
            Cond::Has(name) => V::Bool(match call.args.and_then(|a| a.get(name)) {
                None | Some(Value::Null) => false,
                Some(Value::String(_) | Value::Bool(_)) => true,
                Some(Value::Number(n)) if n.as_i64().is_some() => true,
                // Whether Cedar has it depends on its conversion (a fraction may be left out).
                Some(_) => return Err(Unknown),
            }),
            Cond::Client => V::Str(call.client.unwrap_or_default()),
            Cond::Script => V::Bool(call.script),
            Cond::InGroup(g) => V::Bool(call.groups.iter().any(|x| x == g)),
            Cond::IsUser(u) => V::Bool(call.user.unwrap_or(LOCAL_USER) == u),
            Cond::And(l, r) => V::Bool(l.holds(call)? && r.holds(call)?),
            Cond::Or(l, r) => V::Bool(l.holds(call)? || r.holds(call)?),
            Cond::Not(c) => V::Bool(!c.holds(call)?),
            Cond::Eq(l, r) => V::Bool(l.eval(call)? == r.eval(call)?),
            Cond::Less(l, r, or_equal) => match (l.eval(call)?, r.eval(call)?) {
                (V::Long(a), V::Long(b)) => V::Bool(if *or_equal { a <= b } else { a < b }),
                _ => return Err(Unknown),
            },
            Cond::Like(l, pattern) => match l.eval(call)? {
                V::Str(s) => V::Bool(glob(pattern, s)),
                _ => return Err(Unknown),
            },
        })
    }
}

/// Whether `text` matches `pattern` whole, `*` standing for any run of characters (possibly none).
fn glob(pattern: &[Elem], text: &str) -> bool {
    let (mut p, mut t) = (0, 0);
    // After the last `*` seen: where the pattern goes on, and the text position it was last tried at.
    let mut star: Option<(usize, usize)> = None;
    loop {
        match pattern.get(p) {
            Some(Elem::Any) => {
                star = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(Elem::Char(c)) => {
                if let Some(tc) = text[t..].chars().next()
                    && tc == *c
                {
                    p += 1;
                    t += tc.len_utf8();
                    continue;
                }
            }
            None if t == text.len() => return true,
            None => {}
        }
        // A mismatch (or text left over): let the last `*` take one more character.
        let Some((sp, st)) = star else { return false };
        let Some(tc) = text[st..].chars().next() else {
            return false;
        };
        star = Some((sp, st + tc.len_utf8()));
        (p, t) = (sp, st + tc.len_utf8());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cedar_policy::Policy;
    use std::str::FromStr;

    fn cond(conditions: &str) -> Option<Cond> {
        let p = Policy::from_str(&format!(
            "permit (principal, action, resource) {conditions};"
        ))
        .unwrap();
        compile(&p.to_json().unwrap())
    }

    #[test]
    fn the_common_forms_compile_and_the_others_are_left_to_cedar() {
        for text in [
            r#"when { context.args has path && context.args.path like "/etc/*" }"#,
            r#"when { context.args has owner && context.args.owner != "acme" } unless { principal in Group::"admins" }"#,
            r#"when { context.args.amount > 100 || context.args.amount <= -5 }"#,
            r#"when { context.client == "claude-code" } unless { context.script }"#,
            r#"when { principal == User::"alice" && !(Group::"x" == principal) }"#,
            r#"when { context["args"]["a b"] >= 3 }"#,
            "",
        ] {
            assert!(
                cond(text).is_some(),
                "{text}: {:?}",
                Policy::from_str(&format!("permit (principal, action, resource) {text};"))
                    .unwrap()
                    .to_json()
            );
        }
        for text in [
            r#"when { context.args.tags.contains("x") }"#,
            r#"when { context.args == {} }"#,
            r#"when { resource.name == "write" }"#,
            r#"when { resource in Server::"gh" }"#,
            r#"when { User::"alice" in Group::"dev" }"#,
            r#"when { context.args.price.greaterThan(decimal("1.0")) }"#,
            r#"when { context.args.nested.deep == 1 }"#,
            r#"when { context has args }"#,
            r#"when { if context.script then true else false }"#,
            r#"when { context.args.a + 1 == 2 }"#,
            r#"when { context.args has a.b }"#,
        ] {
            assert_eq!(cond(text), None, "{text}");
        }
    }

    #[test]
    fn glob_is_a_whole_match_with_stars_for_any_run() {
        let p = |s: &str| -> Vec<Elem> {
            s.chars()
                .map(|c| if c == '*' { Elem::Any } else { Elem::Char(c) })
                .collect()
        };
        for (pattern, text, want) in [
            ("", "", true),
            ("", "a", false),
            ("*", "", true),
            ("*", "anything", true),
            ("/etc/*", "/etc/passwd", true),
            ("/etc/*", "/etcpasswd", false),
            ("*password*", "my password here", true),
            ("*password*", "passwor", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYcZ", false),
            ("**a", "ba", true),
            ("é*ü", "éxyzü", true),
            ("é?", "éa", false),
            ("*aab", "aaab", true),
        ] {
            assert_eq!(glob(&p(pattern), text), want, "{pattern:?} {text:?}");
        }
    }
}
