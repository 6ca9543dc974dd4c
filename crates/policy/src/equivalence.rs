//! The per-tool slices never change a decision: random policy sets and random calls, each call decided by its tool's
//! slice (with only the arguments the slice reads) and by the whole set (with every argument), compared whole
//! (outcome, deciding policies, reason). The slice is also narrowed for each caller (`callers.rs`): principal scopes and
//! first conditions on the client or the script flag the call contradicts. A call whose every policy that can hold is
//! of the forms `direct.rs` decides without Cedar, and evaluates without an error, is decided there.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::call::{Call, Outcome};
use crate::engine::Set;

/// A small deterministic generator (xorshift64*): the same sets and calls on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick(&mut self, items: &[&'static str]) -> &'static str {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const SERVERS: &[&str] = &["fs", "gh", "pay", "mail"];
const TOOLS: &[&str] = &["read", "write", "charge", "send"];
const USERS: &[&str] = &["alice", "bob", "carol"];
const GROUPS: &[&str] = &["dev", "admins", "ops"];

/// Conditions over arguments, the client, the script flag, the principal and the tool; some can fail to evaluate
/// (an argument read without `has`, a type mismatch), some read the arguments as a whole or the tool's attributes.
const CONDITIONS: &[&str] = &[
    r#"context.args has path && context.args.path like "/etc/*""#,
    r#"!context.script"#,
    r#"User::"alice" in Group::"dev""#,
    r#""c1" == context.client"#,
    r#"context.script && context.args.amount > 100"#,
    r#"context.client == "c2" && context.args.nested.deep == 1"#,
    r#"!context.script && context.args has owner && context.args.owner == "acme""#,
    r#"context.args.amount > 100"#,
    r#"context.args has amount && context.args.amount <= 100"#,
    r#"context.args has owner && context.args.owner == "acme""#,
    r#"context.client == "c1""#,
    r#"context.script"#,
    r#"principal in Group::"admins""#,
    r#"resource.name == "write""#,
    r#"resource.server == "fs""#,
    r#"context.args has tags && context.args.tags.contains("x")"#,
    r#"context.args == {}"#,
    r#"context.args.nested.deep == 1"#,
    r#"resource in Server::"gh""#,
    r#"context.args has flag && context.args.flag"#,
    r#"context has args && context.args has price && context.args.price.greaterThan(decimal("1.0"))"#,
    // Forms `direct.rs` decides without Cedar, some of which Cedar finds in error for some calls.
    r#"context.args.owner != "acme" || context.script"#,
    r#"context.args has owner && context.args.owner == 5"#,
    r#"context.args has path && context.args.path like "*ü*""#,
    r#"context.args has path && context.args.path like "/h*e/*s""#,
    r#"principal == User::"alice" && !(principal in Group::"ops")"#,
    r#"context.args has amount && context.args.amount >= -3"#,
    r#"context.args has amount && 100 < context.args.amount"#,
    r#"context.args has flag && context.args.flag == true"#,
    r#"context.args.amount"#,
    r#"context.args has gone || context.args has price"#,
    r#"Group::"dev" == principal || context.client != "c1""#,
];

fn policy(rng: &mut Rng, id: usize) -> String {
    let forbid = rng.chance(40);
    let ask = !forbid && rng.chance(25);
    let principal = match rng.below(8) {
        0 | 1 => "principal".to_owned(),
        2 => format!("principal == User::\"{}\"", rng.pick(USERS)),
        3 => format!("principal in User::\"{}\"", rng.pick(USERS)),
        4 => "principal is User".to_owned(),
        5 => format!("principal is User in Group::\"{}\"", rng.pick(GROUPS)),
        6 => format!("principal == Group::\"{}\"", rng.pick(GROUPS)),
        _ => format!("principal in Group::\"{}\"", rng.pick(GROUPS)),
    };
    let action = if rng.chance(50) {
        "action"
    } else {
        "action == Action::\"call\""
    };
    let resource = match rng.below(6) {
        0 => "resource".to_owned(),
        1 => "resource is Tool".to_owned(),
        2 | 3 => format!("resource in Server::\"{}\"", rng.pick(SERVERS)),
        _ => format!(
            "resource == Tool::\"{}/{}\"",
            rng.pick(SERVERS),
            rng.pick(TOOLS)
        ),
    };
    let mut text = format!("@id(\"p{id}\") ");
    if ask {
        text.push_str("@ask(\"\") ");
    }
    text.push_str(&format!(
        "{} ({principal}, {action}, {resource})",
        if forbid { "forbid" } else { "permit" }
    ));
    for _ in 0..rng.below(3) {
        let kind = if rng.chance(75) { "when" } else { "unless" };
        text.push_str(&format!(" {kind} {{ {} }}", rng.pick(CONDITIONS)));
    }
    text.push_str(";\n");
    text
}

fn arguments(rng: &mut Rng) -> Map<String, Value> {
    let choices = [
        ("path", json!("/etc/passwd")),
        ("path", json!("/home/a/notes")),
        ("owner", json!("acme")),
        ("owner", json!("evil")),
        ("amount", json!(50)),
        ("amount", json!(250)),
        ("amount", json!(1.5)),
        ("price", json!(2.25)),
        ("tags", json!(["x", "y"])),
        ("nested", json!({"deep": 1})),
        ("nested", json!({"deep": "no"})),
        ("flag", json!(true)),
        ("content", json!("x".repeat(64))),
        ("gone", Value::Null),
        ("path", json!("/home/ü/notes")),
        ("owner", json!(5)),
        ("amount", json!(-3)),
        ("amount", json!(u64::MAX)),
        ("flag", json!("yes")),
    ];
    let mut args = Map::new();
    for _ in 0..rng.below(5) {
        let (k, v) = &choices[rng.below(choices.len())];
        args.insert((*k).to_owned(), v.clone());
    }
    args
}

#[test]
fn slices_decide_as_the_whole_set_over_random_policies_and_calls() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut compared, mut unpoliced) = (0, 0);
    let mut outcomes = [0usize; 3];
    let mut broken = 0;
    // Calls put to only part of their slice, for their caller (`callers.rs`); calls decided without Cedar.
    let (mut narrowed, mut direct) = (0, 0);
    for set_no in 0..160 {
        let n = 1 + rng.below(12);
        let text: String = (0..n).map(|i| policy(&mut rng, i)).collect();
        let set = Set::compile(&[(PathBuf::from("random.cedar"), text.clone())])
            .unwrap_or_else(|e| panic!("set {set_no} does not load: {e}\n{text}"));
        for _ in 0..40 {
            let groups: Vec<String> = GROUPS
                .iter()
                .filter(|_| rng.chance(30))
                .map(|g| (*g).to_owned())
                .collect();
            let args = arguments(&mut rng);
            let server = if rng.chance(10) {
                "other"
            } else {
                rng.pick(SERVERS)
            };
            let user = rng.pick(USERS);
            let client = if rng.chance(50) { "c1" } else { "c2" };
            let call = Call {
                user: (!rng.chance(10)).then_some(user),
                groups: &groups,
                client: (!rng.chance(10)).then_some(client),
                script: rng.chance(20),
                server,
                tool: rng.pick(TOOLS),
                args: (!rng.chance(5)).then_some(&args),
            };
            narrowed += usize::from(set.narrowed(&call));
            direct += usize::from(set.direct(&call));
            let sliced = set.decide(&call);
            let whole = set.decide_whole(&call);
            assert_eq!(
                sliced, whole,
                "set {set_no}:\n{text}\ncall {call:?}\nsliced {sliced:?}\nwhole {whole:?}"
            );
            assert_eq!(set.covers(server, call.tool), whole.is_some());
            match whole {
                None => unpoliced += 1,
                Some(d) => {
                    compared += 1;
                    outcomes[d.outcome as usize] += 1;
                    broken += usize::from(d.reason.contains("could not be evaluated"));
                }
            }
        }
    }
    // The cases are varied enough to mean something: every outcome, refusals by broken forbids, unpoliced tools.
    assert!(compared > 2_000, "{compared} policed calls");
    assert!(unpoliced > 100, "{unpoliced} unpoliced calls");
    for (o, n) in [Outcome::Allow, Outcome::Deny, Outcome::Ask]
        .iter()
        .zip(outcomes)
    {
        assert!(n > 100, "{o:?}: {n}");
    }
    assert!(broken > 20, "{broken} refusals by a forbid that failed");
    assert!(narrowed > 500, "{narrowed} calls narrowed for their caller");
    assert!(direct > 500, "{direct} calls decided without Cedar");
}
