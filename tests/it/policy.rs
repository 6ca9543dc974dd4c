//! Policies for calls (Cedar files in the data dir's `policies/`, or `AGENT_DISCOVER_POLICIES`): a forbid on an
//! argument's path prefix refuses with the typed `policy_denied` error on the MCP front, through `proxy_call` and
//! inside a code-mode script; an `@ask` permit makes the call wait for a person's approval; a bad file keeps the last
//! good set and says so in `status`; a changed file is read again without a restart; `policy test`, `list` and
//! `check` from the CLI; and, on the protected front, a permit for one user and one group and not for another user,
//! with the REST routes.

use std::path::Path;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::approvals::{cli, pending_in};
use crate::harness::{self, Agent, parse};
use crate::ident_as::TestAs;
use crate::identity::{client_as, protected_env, register, users};
use crate::replicas;

const FIRST: &str = r#"
@id("no-secret-echo")
forbid (principal, action == Action::"call", resource == Tool::"fx/echo")
when { context.args has text && context.args.text like "/secret/*" };

@id("big-adds-ask")
@ask("")
permit (principal, action, resource == Tool::"fx/add")
when { context.args.a > 100 };

@id("small-adds")
permit (principal, action, resource == Tool::"fx/add")
when { context.args.a <= 100 };

@id("not-from-it")
forbid (principal, action, resource == Tool::"fx/echo")
when { context.args has text && context.args.text == "/by-client" && context.client == "it" };
"#;

const SECOND: &str = r#"
@id("no-other-echo")
forbid (principal, action, resource == Tool::"fx/echo")
when { context.args has text && context.args.text like "/other/*" };
"#;

/// The registry `status`'s `policy` once `done` holds for it, polled with a deadline (a file watcher has no event a
/// test can wait on).
async fn policy_status(agent: &Agent, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let s = agent.registry(json!({"action": "status"})).await;
        if done(&s["policy"]) {
            return s["policy"].clone();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: status still says {}",
            s["policy"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn fast_lane_calls(agent: &Agent) -> u64 {
    agent.registry(json!({"action": "status"})).await["relay"]["fast_lane_calls"]
        .as_u64()
        .unwrap()
}

/// A refused call's body: `policy_denied`, naming the policy.
#[track_caller]
fn denied(is_error: bool, v: &Value, policy: &str) {
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "policy_denied", "{v}");
    assert_eq!(v["code"], "denied", "{v}");
    assert_eq!(v["policy"], policy, "{v}");
    assert!(v["reason"].is_string(), "{v}");
}

/// Replaces a policy file at once (written aside, then renamed), as an editor's save does: the watcher never reads
/// it half written.
fn put(file: &Path, text: &str) {
    let aside = file.with_extension("cedar.new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, file).unwrap();
}

async fn echo(agent: &Agent, text: &str) -> (bool, Value) {
    let r = agent.call("fx__echo", json!({"text": text})).await;
    (r.is_error == Some(true), parse(&r))
}

#[tokio::test]
async fn policies_refuse_ask_and_reload_on_every_front() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let policies = d.join("policies");
    std::fs::create_dir_all(&policies).unwrap();
    std::fs::write(policies.join("main.cedar"), FIRST).unwrap();
    let agent = harness::spawn(d, &[], None).await;
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let st = policy_status(&agent, "loaded at start", |p| p["policies"] == 4).await;
    assert_eq!(st["generation"], 1, "{st}");
    assert!(st["error"].is_null(), "{st}");

    // A tool no policy is scoped to takes the fast lane; so does a call of a policed one the policies allow at once,
    // while one they refuse takes the normal path, which answers it.
    let before = fast_lane_calls(&agent).await;
    let r = agent.call("fx__sleep", json!({"ms": 1})).await;
    assert_ne!(r.is_error, Some(true), "{}", parse(&r));
    assert_eq!(fast_lane_calls(&agent).await, before + 1);

    // A forbid on a path prefix: the typed error, as a tool error the agent sees.
    let (is_error, v) = echo(&agent, "/secret/key").await;
    denied(is_error, &v, "no-secret-echo");
    assert_eq!(
        (v["server"].as_str(), v["tool"].as_str()),
        (Some("fx"), Some("echo"))
    );
    assert_eq!(
        fast_lane_calls(&agent).await,
        before + 1,
        "a refused call is not relayed"
    );
    assert_eq!(echo(&agent, "/public/x").await, (false, json!("/public/x")));
    assert_eq!(
        fast_lane_calls(&agent).await,
        before + 2,
        "an allowed policed call is relayed"
    );
    // The lane names the caller's client as the normal path does: this client (`it`) is refused, in both ways in.
    let (is_error, v) = echo(&agent, "/by-client").await;
    denied(is_error, &v, "not-from-it");
    let (is_error, v) = agent
        .try_registry(json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "/by-client"}}))
        .await
        .unwrap();
    denied(is_error, &v, "not-from-it");
    assert_eq!(fast_lane_calls(&agent).await, before + 2);
    let r = agent
        .registry(json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "/public/y"}}))
        .await;
    assert!(r.to_string().contains("/public/y"), "{r}");
    assert_eq!(
        fast_lane_calls(&agent).await,
        before + 3,
        "an allowed proxy_call is relayed"
    );

    // The registry's proxy_call, and a code-mode script's inner call, meet the same policy.
    let (is_error, v) = agent
        .try_registry(json!({"action": "proxy_call", "call_as": "fx__echo", "arguments": {"text": "/secret/a"}}))
        .await
        .unwrap();
    denied(is_error, &v, "no-secret-echo");
    let r = agent
        .call(
            "run_script",
            json!({"code": r#"
                const out = {};
                try { await tools.fx.echo({text: "/secret/b"}); out.secret = "called"; }
                catch (e) { out.secret = [e.kind, e.details.policy]; }
                out.public = await tools.fx.echo({text: "/public/b"});
                return out;
            "#}),
        )
        .await;
    let v = parse(&r);
    assert_eq!(
        v["result"],
        json!({"secret": ["policy_denied", "no-secret-echo"], "public": "/public/b"}),
        "{v}"
    );

    // `ask`: the call waits for a person (a pending approval, as a tool whose approval rule asks), here approved from
    // the CLI; a call the other permit allows goes on at once.
    let small = agent.call("fx__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(parse(&small), json!(5));
    let (big, approved) = tokio::join!(agent.call("fx__add", json!({"a": 500, "b": 1})), async {
        let pending = pending_in(d).await;
        assert_eq!(pending["tool"], "add", "{pending}");
        assert_eq!(pending["arguments"], r#"{"a":500,"b":1}"#);
        let id = pending["id"].as_str().unwrap().to_owned();
        cli(d, &["approvals", "approve", &id]).await
    });
    assert!(approved.0, "{}", approved.2);
    assert_ne!(big.is_error, Some(true), "{}", parse(&big));
    assert_eq!(parse(&big), json!(501));

    // `policy test`: a dry run naming the deciding policy, as JSON and as text; `policy list`; `policy check`.
    let (ok, out, err) = cli(
        d,
        &[
            "policy",
            "test",
            "fx",
            "echo",
            "--args",
            r#"{"text":"/secret/z"}"#,
            "--json",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let t: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(t["outcome"], "deny", "{t}");
    assert_eq!(t["decided_by"], json!(["no-secret-echo"]), "{t}");
    let (ok, out, err) = cli(
        d,
        &[
            "policy",
            "test",
            "fx",
            "add",
            "--args",
            r#"{"a":500,"b":1}"#,
        ],
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.starts_with("ask by big-adds-ask\n"), "{out}");
    let (ok, out, err) = cli(d, &["policy", "test", "fx", "sleep", "--user", "bob"]).await;
    assert!(
        ok && out.starts_with("allow\n") && out.contains("not policed"),
        "{out}{err}"
    );
    let (ok, out, err) = cli(d, &["policy", "list", "--json"]).await;
    assert!(ok, "{err}");
    let l: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = l["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "no-secret-echo",
            "big-adds-ask",
            "small-adds",
            "not-from-it"
        ],
        "{l}"
    );
    let scratch = tempfile::tempdir().unwrap();
    let bad = scratch.path().join("bad.cedar");
    std::fs::write(
        &bad,
        "permit (principal, action == Action::\"read\", resource);",
    )
    .unwrap();
    let (ok, _, err) = cli(d, &["policy", "check", bad.to_str().unwrap()]).await;
    assert!(!ok && err.contains("Action::\"call\""), "{err}");
    let good = scratch.path().join("good.cedar");
    std::fs::write(&good, SECOND).unwrap();
    let (ok, out, err) = cli(d, &["policy", "check", good.to_str().unwrap()]).await;
    assert!(ok && out.starts_with("ok: 1 policy"), "{out}{err}");

    // A file that does not parse: the last good set stays in force, and status says why.
    put(
        &policies.join("main.cedar"),
        "forbid (principal, action, resource",
    );
    let st = policy_status(&agent, "the bad file reported", |p| p["error"].is_object()).await;
    assert!(
        st["error"]["file"]
            .as_str()
            .unwrap()
            .ends_with("main.cedar"),
        "{st}"
    );
    assert!(
        st["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{st}"
    );
    assert_eq!(
        (st["generation"].as_u64(), st["policies"].as_u64()),
        (Some(1), Some(4)),
        "{st}"
    );
    let (is_error, v) = echo(&agent, "/secret/key").await;
    denied(is_error, &v, "no-secret-echo");

    // A good file again: read without a restart.
    put(&policies.join("main.cedar"), SECOND);
    let st = policy_status(&agent, "the new file in force", |p| p["generation"] == 2).await;
    assert!(st["error"].is_null(), "{st}");
    assert_eq!(st["policies"], 1);
    assert_eq!(
        echo(&agent, "/secret/key").await,
        (false, json!("/secret/key"))
    );
    let (is_error, v) = echo(&agent, "/other/x").await;
    denied(is_error, &v, "no-other-echo");
    agent.stop().await;
}

/// The identity settings of this test: both groups see server `one`.
const RULES: &str = r#"
admin_groups = ["admins"]
[groups.dev]
servers = ["one"]
[groups.ops]
servers = ["one"]
"#;

const PER_USER: &str = r#"
@id("alice-echoes")
permit (principal == User::"alice", action, resource == Tool::"one/echo");

@id("ops-adds")
permit (principal in Group::"ops", action, resource == Tool::"one/add");
"#;

async fn call(c: &crate::identity::Client, name: &str, args: Value) -> (bool, Value) {
    let r =
        c.0.call_tool(
            CallToolRequestParams::new(name.to_owned())
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
        .expect("tools/call");
    (r.is_error == Some(true), parse(&r))
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f.display().to_string()
}

#[tokio::test]
async fn a_permit_for_one_user_and_one_group_on_the_protected_front() {
    let auth = TestAs::start(users(), "mcp").await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = protected_env(&auth, dir.path());
    env.push((
        "AGENT_DISCOVER_AUTH_CONFIG",
        write(dir.path(), "rules.toml", RULES),
    ));
    env.push((
        "AGENT_DISCOVER_POLICIES",
        write(dir.path(), "calls.cedar", PER_USER),
    ));
    let r = replicas::replica(dir.path(), &env).await;
    let http = reqwest::Client::new();
    let token = |sub: &str| auth.sign(&auth.mint_for(sub, &format!("{}/mcp", r.url)));
    let root = token("root");
    register(&http, &r, &root, "one").await;

    let alice = client_as(&r.url, &token("alice")).await;
    let bob = client_as(&r.url, &token("bob")).await;
    let (is_error, v) = call(&alice, "one__echo", json!({"text": "hi"})).await;
    assert!(!is_error, "{v}");
    assert_eq!(v, json!("hi"));
    // Nothing permits bob's echo: inside a permit's scope, a call no permit allows is refused.
    let (is_error, v) = call(&bob, "one__echo", json!({"text": "hi"})).await;
    denied(is_error, &v, "default");
    // Bob is in ops; alice is not.
    let (is_error, v) = call(&bob, "one__add", json!({"a": 1, "b": 2})).await;
    assert!(!is_error, "{v}");
    assert_eq!(v, json!(3));
    let (is_error, v) = call(&alice, "one__add", json!({"a": 1, "b": 2})).await;
    denied(is_error, &v, "default");

    // REST, for administrators: the set in force and a dry run.
    let list: Value = http
        .get(format!("{}/api/policy", r.url))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["policies"], 2, "{list}");
    assert_eq!(list["list"][0]["id"], "alice-echoes", "{list}");
    let tested: Value = http
        .post(format!("{}/api/policy/test", r.url))
        .bearer_auth(&root)
        .json(&json!({"user": "carol", "groups": ["ops"], "server": "one", "tool": "add", "arguments": {"a": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tested["outcome"], "allow", "{tested}");
    assert_eq!(tested["decided_by"], json!(["ops-adds"]), "{tested}");
    let checked: Value = http
        .post(format!("{}/api/policy/check", r.url))
        .bearer_auth(&root)
        .json(&json!({"text": "forbid (principal, action, resource == Server::\"one\");"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(checked["ok"], false, "{checked}");
    assert!(
        checked["error"]["message"]
            .as_str()
            .unwrap()
            .contains("resource in Server::"),
        "{checked}"
    );
    // Not for a user who is not an administrator.
    let refused = http
        .get(format!("{}/api/policy", r.url))
        .bearer_auth(token("alice"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
}
