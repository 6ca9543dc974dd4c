//! Saved scripts as tools, end to end: a script saved from the CLI (a file and its input schema) is the tool
//! `scripts__NAME` of a running `agent-discover mcp`: listed, found by `find_tool`, called by an rmcp client and from
//! another script, its arguments checked against its schema (a violation is an `isError` result naming it); its inner
//! calls take the proxy's call path (a filtered tool is out of reach, a `deny` policy refuses, the call log marks
//! them); a changed body is a changed definition, withheld until approved; the registry action and REST save too.

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{self, Agent, parse};
use crate::integrity::cli;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

const SUM: &str = r#"
const total = await call("calc__add", {a: args.a, b: args.b});
console.log(`added ${args.a} and ${args.b}`);
return total;
"#;

const SCHEMA: &str = r#"{"type": "object", "required": ["a", "b"], "additionalProperties": false,
  "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}"#;

/// Saves `code` as `name` with the CLI, as a person would.
fn save(dir: &Path, files: &Path, name: &str, code: &str) -> (bool, String, String) {
    let js = files.join(format!("{name}.js"));
    let schema = files.join(format!("{name}.json"));
    std::fs::write(&js, code).unwrap();
    std::fs::write(&schema, SCHEMA).unwrap();
    cli(
        dir,
        &[
            "scripts",
            "save",
            name,
            "--file",
            &js.display().to_string(),
            "--schema",
            &schema.display().to_string(),
            "--description",
            "Totals two quantities through the calculator",
        ],
    )
}

async fn call(agent: &Agent, name: &str, args: Value) -> (bool, Value) {
    let r = agent.call(name, args).await;
    (r.is_error == Some(true), parse(&r))
}

async fn with_calc(dir: &Path) -> Agent {
    let agent = harness::spawn(dir, &[], None).await;
    agent.install_fixture("calc", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "calc"}))
        .await;
    agent
}

#[tokio::test]
async fn a_saved_script_is_a_tool_listed_found_and_called_from_every_path() {
    let dir = tmp();
    let files = tmp();
    let agent = with_calc(dir.path()).await;
    let (ok, out, err) = save(dir.path(), files.path(), "sum", SUM);
    assert!(ok, "{out}{err}");
    assert!(out.contains("saved scripts__sum"), "{out}");

    // Listed, with its schema.
    let tools = agent.client.list_all_tools().await.unwrap();
    let sum = tools
        .iter()
        .find(|t| t.name == "scripts__sum")
        .expect("scripts__sum listed");
    assert_eq!(sum.input_schema.get("required"), Some(&json!(["a", "b"])));
    assert!(
        sum.description
            .as_deref()
            .unwrap()
            .starts_with("Totals two quantities")
    );

    // Called by the client: the script's answer, its inner call recorded.
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 2, "b": 3})).await;
    assert!(!is_error, "{v}");
    assert_eq!(v["result"], 5, "{v}");
    assert_eq!(v["logs"], json!(["added 2 and 3"]));
    assert_eq!(v["calls"][0]["tool"], "calc__add", "{v}");

    // Arguments against the schema: each violation named, nothing run.
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": "two", "c": 1})).await;
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "invalid_arguments", "{v}");
    let violations: Vec<&str> = v["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(violations.contains(&"/b: required"), "{v}");
    assert!(
        violations.iter().any(|x| x.starts_with("/a: expected")),
        "{v}"
    );
    assert!(
        violations.contains(&"/c: not allowed (no such property)"),
        "{v}"
    );

    // From another script, and through the registry's proxy_call.
    let r = agent
        .call(
            "run_script",
            json!({"code": "return (await tools.scripts.sum({a: 1, b: 2})).result * 10;"}),
        )
        .await;
    assert_eq!(parse(&r)["result"], 30, "{}", parse(&r));
    let r = agent
        .registry(json!({"action": "proxy_call", "call_as": "scripts__sum", "arguments": {"a": 4, "b": 4}}))
        .await;
    assert_eq!(r["result"], 8, "{r}");

    // Found by find_tool from its description.
    let found = agent
        .registry(json!({"action": "find_tool", "query": "total two quantities"}))
        .await;
    assert_eq!(found["call_as"], "scripts__sum", "{found}");
    assert_eq!(found["server_status"], "active", "{found}");

    // The call log has the script's call, and its inner call marked as a script's.
    let status = agent.registry(json!({"action": "status"})).await;
    let recent = status["calls"]["recent"].as_array().unwrap();
    assert!(
        recent
            .iter()
            .any(|c| c["server"] == "scripts" && c["tool"] == "sum"),
        "{status}"
    );
    assert!(
        recent.iter().any(|c| c["tool"] == "add"
            && c["response"]
                .as_str()
                .is_some_and(|r| r.starts_with("[script]"))),
        "{status}"
    );

    // Listed and removed from the CLI.
    let (ok, out, _) = cli(dir.path(), &["scripts", "list", "--json"]);
    assert!(ok);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed[0]["tool"], "scripts__sum", "{listed}");
    let (ok, _, err) = cli(dir.path(), &["scripts", "remove", "sum"]);
    assert!(ok, "{err}");
    let names = agent.tool_names().await;
    assert!(!names.contains(&"scripts__sum".to_owned()), "{names:?}");
    agent.stop().await;
}

#[tokio::test]
async fn inner_calls_take_the_filter_and_approval_path_and_a_changed_body_is_withheld() {
    let dir = tmp();
    let files = tmp();
    let agent = with_calc(dir.path()).await;
    let (ok, out, err) = save(dir.path(), files.path(), "sum", SUM);
    assert!(ok, "{out}{err}");

    // A deny policy on the inner tool: the script fails with the proxied call's kind.
    agent
        .registry(json!({"action": "tool_policy", "name": "calc", "tool": "add", "policy": "deny"}))
        .await;
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 1, "b": 1})).await;
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "script_error", "{v}");
    assert_eq!(v["thrown"]["kind"], "approval_denied", "{v}");
    // Loosened by a person (the registry tool may only tighten).
    let (ok, _, err) = cli(dir.path(), &["tools", "policy", "calc", "add", "--clear"]);
    assert!(ok, "{err}");

    // A filtered inner tool is out of reach.
    agent
        .registry(json!({"action": "tool_filter", "name": "calc", "deny": ["add"]}))
        .await;
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 1, "b": 1})).await;
    assert!(is_error, "{v}");
    assert_eq!(v["thrown"]["kind"], "tool_not_found", "{v}");
    agent
        .registry(json!({"action": "tool_filter", "name": "calc", "deny": []}))
        .await;
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 1, "b": 1})).await;
    assert!(!is_error && v["result"] == 2, "{v}");

    // A changed body is a changed definition: withheld (not listed, refused) until approved.
    let (ok, out, err) = save(dir.path(), files.path(), "sum", "return args.a * args.b;");
    assert!(ok, "{err}");
    assert!(out.contains("withheld until approved"), "{out}");
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 3, "b": 4})).await;
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "tool_changed", "{v}");
    assert!(
        !agent
            .tool_names()
            .await
            .contains(&"scripts__sum".to_owned())
    );
    let (ok, _, err) = cli(dir.path(), &["tools", "approve", "scripts", "sum"]);
    assert!(ok, "{err}");
    let (is_error, v) = call(&agent, "scripts__sum", json!({"a": 3, "b": 4})).await;
    assert!(!is_error && v["result"] == 12, "{v}");
    agent.stop().await;
}

#[tokio::test]
async fn the_registry_action_saves_and_bad_scripts_are_refused() {
    let dir = tmp();
    let agent = with_calc(dir.path()).await;
    let saved = agent
        .registry(json!({"action": "save_script", "name": "double", "code": "return args.n * 2;",
            "description": "Doubles a number",
            "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]}}))
        .await;
    assert_eq!(saved["script"]["tool"], "scripts__double", "{saved}");
    let (is_error, v) = call(&agent, "scripts__double", json!({"n": 21})).await;
    assert!(!is_error && v["result"] == 42, "{v}");
    let (is_error, v) = call(&agent, "scripts__double", json!({"n": -1})).await;
    assert!(
        is_error && v["violations"][0] == "/n: must be at least 0",
        "{v}"
    );
    for (args, field) in [
        (
            json!({"action": "save_script", "name": "1bad", "code": "return 1;"}),
            "name",
        ),
        (
            json!({"action": "save_script", "name": "s", "code": "return 1;", "input_schema": {"type": "string"}}),
            "input_schema",
        ),
        (
            json!({"action": "save_script", "name": "s", "code": "return 1;",
                "input_schema": {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a"}}}}),
            "input_schema",
        ),
    ] {
        let (is_error, v) = agent.try_registry(args.clone()).await.unwrap();
        assert!(is_error && v["field"] == field, "{args} -> {v}");
    }
    // A server registered as `scripts` by someone else keeps its name: saving is a conflict.
    let other = tmp();
    let agent2 = harness::spawn(other.path(), &[], None).await;
    agent2
        .registry(json!({"action": "install", "name": "scripts", "command": "node"}))
        .await;
    let (is_error, v) = agent2
        .try_registry(json!({"action": "save_script", "name": "x", "code": "return 1;"}))
        .await
        .unwrap();
    assert!(is_error && v["code"] == "conflict", "{v}");
    agent2.stop().await;
    agent.stop().await;
}
