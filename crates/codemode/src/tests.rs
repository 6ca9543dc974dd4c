//! The engine against a fake host: limits, the sandbox's absences, the API's shapes. The real call path (proxy,
//! approvals, fronts) is tested end to end in `tests/it/codemode.rs`.

use std::sync::Arc;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::answer::{Failure, Outcome, Thrown};
use crate::bridge::{Dispatch, Reply, Request, ToolName};
use crate::engine::{Job, run};
use crate::limits::{Limit, Limits};
use crate::meter::Meter;

/// Answers from a thread of its own: `fx__echo` returns its arguments, `fx__slow` the same after 50 ms, `fx__fail`
/// throws, `find_tool` returns the query.
struct Fake;

impl Dispatch for Fake {
    fn start(&self, request: Request, reply: Reply) {
        std::thread::spawn(move || {
            let out = match request {
                Request::Call { name, args } => {
                    let args = Value::Object(args.unwrap_or_default());
                    match name.as_str() {
                        "fx__echo" => Ok(args.to_string()),
                        "fx__slow" => {
                            std::thread::sleep(Duration::from_millis(50));
                            Ok(args.to_string())
                        }
                        "fx__text" => Ok(json!("plain text").to_string()),
                        _ => Err(Thrown {
                            kind: "tool_error".into(),
                            message: format!("{name} failed"),
                            details: json!({"tool": name}),
                        }),
                    }
                }
                Request::FindTool { query } => {
                    Ok(json!({"found": true, "query": query}).to_string())
                }
                Request::FindTools { intents } => Ok(json!({"results": intents}).to_string()),
            };
            reply.send(out);
        });
    }

    fn tools(&self) -> Vec<ToolName> {
        vec![
            ("fx".into(), "echo".into(), "fx__echo".into()),
            ("fx".into(), "slow".into(), "fx__slow".into()),
            (
                "my_server".into(),
                "do_it".into(),
                "my-server__do.it".into(),
            ),
        ]
    }
}

fn exec_with(code: &str, limits: Limits) -> Outcome {
    let dispatch: Arc<dyn Dispatch> = Arc::new(Fake);
    let meter = Arc::new(Meter::new(limits.cpu, limits.wall));
    let (tx, rx) = channel();
    let job = Job {
        code: code.to_owned(),
        limits,
        tools: dispatch.tools(),
        dispatch,
        idle: tokio::sync::watch::channel(None).0,
    };
    run(job, meter, tx, rx)
}

fn exec(code: &str) -> Outcome {
    exec_with(code, Limits::default())
}

fn ok(code: &str) -> Value {
    let out = exec(code);
    match out.result {
        Ok(v) => v,
        Err(f) => panic!("{code}: {f:?} ({:?})", out.logs),
    }
}

fn fails(code: &str) -> Failure {
    exec(code).result.expect_err(code)
}

#[test]
fn a_script_returns_its_value_and_its_logs() {
    let out = exec(
        "console.log('hi', {a: 1}, [2], undefined); console.warn('careful'); return {n: 1 + 1};",
    );
    assert_eq!(out.result, Ok(json!({"n": 2})));
    assert_eq!(
        out.logs,
        vec![r#"hi {"a":1} [2] undefined"#, "[warn] careful"]
    );
    assert_eq!(ok("return;"), Value::Null);
    assert_eq!(ok("return 'x'"), json!("x"));
}

#[test]
fn calls_run_at_once_and_are_recorded() {
    let started = Instant::now();
    let out = exec(
        "const r = await Promise.all([1, 2, 3, 4].map((i) => call('fx__slow', {i})));\n\
         const e = await tools.fx.echo({x: 1});\n\
         const s = await tools.my_server.do_it().catch((e) => e.kind);\n\
         return {r: r.map((x) => x.i), e, s};",
    );
    let elapsed = started.elapsed();
    assert_eq!(
        out.result,
        Ok(json!({"r": [1, 2, 3, 4], "e": {"x": 1}, "s": "tool_error"}))
    );
    assert!(
        elapsed < Duration::from_millis(190),
        "not concurrent: {elapsed:?}"
    );
    let tools: Vec<&str> = out.calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "fx__slow",
            "fx__slow",
            "fx__slow",
            "fx__slow",
            "fx__echo",
            "my-server__do.it"
        ]
    );
    assert!(out.calls[0].ms >= 50 && out.calls[0].ok && !out.calls[5].ok);
}

#[test]
fn a_failed_call_throws_an_error_with_kind_message_and_details() {
    let v = ok(
        "try { await call('fx__nope', {}); } catch (e) { return {err: e instanceof Error, kind: e.kind, message: e.message, details: e.details}; }",
    );
    assert_eq!(
        v,
        json!({"err": true, "kind": "tool_error", "message": "fx__nope failed", "details": {"tool": "fx__nope"}})
    );
    // Uncaught, it is the run's error, with the call's kind and details.
    match fails("await call('fx__nope');") {
        Failure::Thrown(u) => {
            assert_eq!(u.kind.as_deref(), Some("tool_error"));
            assert_eq!(u.details, Some(json!({"tool": "fx__nope"})));
            assert_eq!(u.message, "fx__nope failed");
        }
        f => panic!("{f:?}"),
    }
    assert_eq!(ok("return await call('fx__text')"), json!("plain text"));
}

#[test]
fn find_tool_and_find_tools_return_what_the_host_answers() {
    assert_eq!(
        ok("return [await find_tool('add numbers'), await find_tools(['a', 'b'])]"),
        json!([{"found": true, "query": "add numbers"}, {"results": ["a", "b"]}])
    );
    assert!(matches!(fails("await find_tools('a')"), Failure::Thrown(u) if u.name == "TypeError"));
}

#[test]
fn an_infinite_loop_is_stopped_by_the_cpu_limit_even_when_caught_or_after_an_await() {
    let limits = Limits {
        cpu: Duration::from_millis(200),
        ..Limits::default()
    };
    for code in [
        "while (true) {}",
        "try { while (true) {} } catch (e) { return 'swallowed'; }",
        "await call('fx__slow'); for (;;) {}",
        "const f = (n) => n < 2 ? n : f(n - 1) + f(n - 2); await call('fx__echo'); return f(40);",
    ] {
        let started = Instant::now();
        let out = exec_with(code, limits);
        assert_eq!(out.result, Err(Failure::Limit(Limit::CpuTime)), "{code}");
        assert!(started.elapsed() < Duration::from_secs(3), "{code}");
    }
}

#[test]
fn waiting_for_calls_is_not_cpu_time() {
    let limits = Limits {
        cpu: Duration::from_millis(40),
        ..Limits::default()
    };
    let out = exec_with(
        "for (let i = 0; i < 3; i++) await call('fx__slow'); return 'done'",
        limits,
    );
    assert_eq!(out.result, Ok(json!("done")));
}

#[test]
fn the_wall_clock_limit_stops_a_run_that_waits_too_long() {
    let limits = Limits {
        wall: Duration::from_millis(80),
        ..Limits::default()
    };
    let out = exec_with("while (true) await call('fx__slow');", limits);
    assert_eq!(out.result, Err(Failure::Limit(Limit::WallTime)));
}

#[test]
fn a_memory_bomb_is_stopped_by_the_memory_limit() {
    let limits = Limits {
        memory: 16 * 1024 * 1024,
        ..Limits::default()
    };
    for code in [
        "const a = []; while (true) a.push(new Array(100000).fill(42));",
        "const a = []; while (true) a.push('x'.repeat(1e6) + a.length);",
        "await call('fx__echo'); const a = []; while (true) a.push({i: a.length, s: 'y'.repeat(100)});",
        "const a = []; try { while (true) a.push(new Array(100000).fill(1)); } catch (e) { a.length = 0; return 'caught'; }",
    ] {
        let out = exec_with(code, limits);
        assert_eq!(out.result, Err(Failure::Limit(Limit::Memory)), "{code}");
    }
}

#[test]
fn the_call_limit_stops_the_run_even_when_the_error_is_caught() {
    let limits = Limits {
        calls: 5,
        ..Limits::default()
    };
    let out = exec_with(
        "let n = 0; for (let i = 0; i < 10; i++) { try { await call('fx__echo'); n++; } catch (e) {} } return n;",
        limits,
    );
    assert_eq!(out.result, Err(Failure::Limit(Limit::InnerCalls)));
    assert_eq!(out.calls.len(), 5);
}

#[test]
fn nothing_outside_the_api_exists() {
    let v = ok(
        "return [typeof require, typeof fetch, typeof process, typeof setTimeout, typeof setInterval, \
         typeof eval, typeof Function, typeof XMLHttpRequest, typeof WebAssembly, typeof std, typeof os, typeof Deno]",
    );
    assert_eq!(v, json!(vec!["undefined"; 12]));
    // import() has no loader.
    let v = ok("try { await import('fs'); return 'loaded'; } catch (e) { return String(e); }");
    assert!(v.as_str().unwrap().contains("could not load module"), "{v}");
    assert!(matches!(
        fails("import fs from 'fs';"),
        Failure::Syntax { .. }
    ));
}

#[test]
fn code_cannot_be_made_from_strings_by_any_route() {
    let v = ok("const routes = [\n\
           () => (() => {}).constructor,\n\
           () => (async () => {}).constructor,\n\
           () => (function* () {}).constructor,\n\
           () => (async function* () {}).constructor,\n\
           () => call.constructor,\n\
           () => Object.getPrototypeOf(function () {}).constructor,\n\
           () => tools.fx.echo.constructor,\n\
           () => console.log.constructor,\n\
           () => Reflect.getPrototypeOf(find_tool).constructor,\n\
         ];\n\
         return routes.map((r) => typeof r());");
    assert_eq!(v, json!(vec!["undefined"; 9]));
    // The stack-trace hooks that would hand out the functions on the stack are gone.
    let v = ok(
        "Error.prepareStackTrace = (e, frames) => frames.map((f) => f.getFunction());\n\
         let frames; try { await call(1); } catch (e) { frames = e.stack; }\n\
         return [typeof Error.prepareStackTrace, typeof Error.captureStackTrace, typeof frames];",
    );
    assert_eq!(v, json!(["undefined", "undefined", "string"]));
}

#[test]
fn the_api_cannot_be_replaced_or_reached_through_prototypes() {
    let v = ok("'use strict';\n\
         const tries = [\n\
           () => { globalThis.call = () => 1; },\n\
           () => { tools.fx = {}; },\n\
           () => { tools.fx.echo = () => 1; },\n\
           () => { delete globalThis.console; },\n\
           () => { console.log = () => 1; },\n\
         ];\n\
         const failed = tries.map((t) => { try { t(); return false; } catch (e) { return e instanceof TypeError; } });\n\
         const leaks = [Object.getOwnPropertyNames(globalThis).filter((k) => /host|__/.test(k)),\n\
                        Object.getOwnPropertyNames(call), Object.keys(tools.fx.echo)];\n\
         return {failed, leaks};");
    assert_eq!(
        v,
        json!({"failed": [true, true, true, true, true], "leaks": [[], ["length", "name"], []]})
    );
    // Polluting prototypes changes only the script's own values: the host takes a JSON object or nothing.
    let v = ok(
        "Object.prototype.toJSON = function () { return 'polluted'; };\n\
         const r = await call('fx__echo', {a: 1}).catch((e) => e.name + ': ' + e.message);\n\
         delete Object.prototype.toJSON;\n\
         return r;",
    );
    assert_eq!(
        v,
        json!("TypeError: a tool's arguments must be a JSON object")
    );
}

#[test]
fn errors_say_what_happened() {
    assert!(
        matches!(fails("return )"), Failure::Syntax { message } if message.contains("unexpected"))
    );
    match fails("\nnull.x;") {
        Failure::Thrown(u) => {
            assert_eq!(u.name, "TypeError");
            assert!(
                u.stack.unwrap_or_default().contains("script.js:2"),
                "line numbers are the script's"
            );
        }
        f => panic!("{f:?}"),
    }
    assert!(matches!(fails("throw 'plain'"), Failure::Thrown(u) if u.message == "\"plain\""));
    assert_eq!(fails("await new Promise(() => {});"), Failure::Unsettled);
    assert!(matches!(
        fails("return 10n"),
        Failure::Unserializable { .. }
    ));
    let deep = fails("const f = (n) => f(n + 1) + 1; return f(0);");
    assert!(
        matches!(deep, Failure::Thrown(ref u) if u.name == "RangeError"),
        "{deep:?}"
    );
}

#[test]
fn output_is_bounded_and_the_answer_says_so() {
    let limits = Limits {
        result_bytes: 100,
        log_bytes: 50,
        ..Limits::default()
    };
    let out = exec_with(
        "for (let i = 0; i < 20; i++) console.log('line', i); return 'z'.repeat(1000);",
        limits,
    );
    assert_eq!(out.result_cut, Some(1002));
    assert_eq!(out.result.as_ref().unwrap().as_str().unwrap().len(), 100);
    assert!(out.logs.iter().map(String::len).sum::<usize>() <= 50 + 3);
    assert!(out.logs_dropped > 10);
    let v = out.to_json();
    assert_eq!(v["truncated"]["result"]["bytes"], 1002);
}
