//! Issue 29: Streamable HTTP children are as faithful as stdio children. The official conformance suite (0.2.0-alpha.12
//! with both requirement sets, and 0.1.16, installed as the `conformance-0.1.16` alias of tests/interop/package.json)
//! runs against each HTTP child directly and through `/mcp/servers/{name}`: every check that passes directly passes
//! through us, except the ones [`conformance::compare`] allows (agent-discover's own HTTP front) and the ones listed
//! here with their reason. The children: the conformance fixture served over Streamable HTTP in both eras
//! (2026-07-28 with the legacy handshake too, legacy only, and `--era split`, which imitates the conformance
//! repository's reference server), the real server-everything, and a conformance server of our own on the official
//! TypeScript SDK (tests/interop/ts_conformance_server.cjs), which stands in for the conformance repository's reference
//! server: that one is built on the same SDK but published to no package registry, so CI cannot install it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::conformance::{self, Checks};
use crate::harness;

/// The suite 0.1.16, the package alias in tests/interop/package.json.
const SUITE_0_1_16: &str = "conformance-0.1.16";

/// The fixture's conformance server over Streamable HTTP on 127.0.0.1 in `era` (`legacy`, `both`, `split`); returns
/// it and the URL it printed once listening.
async fn fixture_http(name: &str, era: &str) -> (tokio::process::Child, String) {
    let args = ["--conformance", "--name", name, "--http", "0", "--era", era];
    let mut child = tokio::process::Command::new(harness::fixture())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    (child, url)
}

/// Every check that passes directly passes through `what` too, except the `allowed` ones (scenario, check, why),
/// each of which must still fail through us (so the list stays true). Returns the checks that pass only through us.
fn no_worse(
    direct: &Checks,
    through: &Checks,
    what: &str,
    allowed: &[(&str, &str, &str)],
) -> Vec<String> {
    let mut worse = Vec::new();
    let mut better = Vec::new();
    for (key, d) in direct {
        let t = through.get(key).map(String::as_str).unwrap_or("MISSING");
        if conformance::passed(d) && !conformance::passed(t) {
            worse.push((key.clone(), t.to_owned()));
        }
    }
    for (key, t) in through {
        let d = direct.get(key).map(String::as_str).unwrap_or("MISSING");
        if conformance::passed(t) && !conformance::passed(d) {
            better.push(format!("{key:?}: direct {d}, {what} {t}"));
        }
    }
    for (key, t) in &worse {
        assert!(
            allowed.iter().any(|(s, c, _)| *s == key.0 && *c == key.1),
            "passes directly but not through {what}: {key:?} ({t})"
        );
    }
    for (s, c, why) in allowed {
        assert!(
            worse.iter().any(|(k, _)| k.0 == *s && k.1 == *c),
            "({s}, {c}) now passes through {what}: remove it from the list ({why})"
        );
    }
    better
}

/// What passes against a legacy-era server (server-everything, the TypeScript SDK server) directly but not through
/// us, set 2026-07-28, and why.
const LEGACY_SERVER_2026_WORSE: &[(&str, &str, &str)] = &[
    (
        "input-required-result-validate-input",
        "sep-2322-error-on-protocol-error",
        UNKNOWN_MRTR_TOOL,
    ),
    (
        "input-required-result-validate-input",
        "sep-2322-validate-input-responses",
        UNKNOWN_MRTR_TOOL,
    ),
];

const UNKNOWN_MRTR_TOOL: &str = "server-everything and the TypeScript SDK server speak only the legacy era: \
    directly they refuse the suite's 2026-07-28 request (`Server not initialized`), which the check takes for the \
    protocol error it wants; through us the request is served, and the tool it names \
    (`test_input_required_result_elicitation`), which they do not have, is a tool error (`isError`), as any unknown \
    tool is on our endpoints";

fn http_child(name: &str, url: &str) -> serde_json::Value {
    json!({"action": "install", "name": name, "transport": "streamable-http", "url": url})
}

/// Suite 0.1.16 directly and through the per-server endpoint of `name`: the same checks pass (its 30 scenarios
/// each record a check at least).
async fn suite_0_1_16(direct_url: &str, base: &str, name: &str, out: &Path) {
    let direct =
        conformance::run_suite_package(SUITE_0_1_16, direct_url, &out.join("direct"), None, 30)
            .await;
    let through = conformance::run_suite_package(
        SUITE_0_1_16,
        &format!("{base}/mcp/servers/{name}"),
        &out.join("through"),
        None,
        30,
    )
    .await;
    let differ = conformance::compare(&direct, &through, &format!("/mcp/servers/{name}"));
    eprintln!(
        "suite 0.1.16, {name}: directly {}; through /mcp/servers/{name} {}\nchecks that differ: {differ:#?}",
        conformance::figures(&direct),
        conformance::figures(&through)
    );
}

#[tokio::test]
async fn http_fixture_children_pass_through_the_proxy_as_directly() {
    // `fxh` speaks 2026-07-28 and the legacy era (agent-discover connects with `server/discover` and opens a legacy
    // session beside it), `fxhl` only the legacy era; `fxhs` speaks both but, like the conformance repository's
    // reference server, cannot ask the client anything from its legacy tools on its 2026-07-28 path: a legacy client
    // gets their questions only by way of the legacy session.
    let (_fxh, fxh_url) = fixture_http("fxh", "both").await;
    let (_fxhl, fxhl_url) = fixture_http("fxhl", "legacy").await;
    let (_fxhs, fxhs_url) = fixture_http("fxhs", "split").await;
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = conformance::serve_installed(
        dir.path(),
        &[
            http_child("fxh", &fxh_url),
            http_child("fxhl", &fxhl_url),
            http_child("fxhs", &fxhs_url),
        ],
    )
    .await;
    let results = tempfile::tempdir().unwrap();
    let run = |u: String, what: String, req: &'static str| {
        let out = results.path().join(format!("{req}-{what}"));
        async move { conformance::run_suite(&u, &out, req).await }
    };
    for req in conformance::REQUIREMENTS {
        let direct = run(fxh_url.clone(), "direct".into(), req).await;
        let through = run(format!("{url}/mcp/servers/fxh"), "through".into(), req).await;
        let differ = conformance::compare(&direct, &through, "/mcp/servers/fxh");
        // The aggregated front serves HTTP children too.
        let aggregated = run(format!("{url}/mcp"), "aggregated".into(), req).await;
        conformance::aggregated_passes(&direct, &aggregated);
        // The legacy-only HTTP child: a legacy client gets what it gets directly; a 2026-07-28 client gets what the
        // 2026-07-28 fixture gives (input-required results minted from the child's requests), as for stdio children.
        let legacy = run(format!("{url}/mcp/servers/fxhl"), "legacy".into(), req).await;
        let differ_legacy = if *req == "2026-07-28" {
            conformance::compare_legacy_child(&direct, &legacy)
        } else {
            let legacy_direct = run(fxhl_url.clone(), "legacy-direct".into(), req).await;
            conformance::compare(&legacy_direct, &legacy, "/mcp/servers/fxhl")
        };
        let split_direct = run(fxhs_url.clone(), "split-direct".into(), req).await;
        let split = run(format!("{url}/mcp/servers/fxhs"), "split".into(), req).await;
        let differ_split = conformance::compare(&split_direct, &split, "/mcp/servers/fxhs");
        // The families issue 29 names pass through the HTTP child as they do directly.
        let families: &[&str] = if *req == "2025-11-25" {
            &[
                "tools-call-sampling",
                "tools-call-elicitation",
                "elicitation-sep1034-defaults",
                "elicitation-sep1330-enums",
                "resources-subscribe",
                "resources-unsubscribe",
            ]
        } else {
            &["server-stateless", "input-required-result-basic-sampling"]
        };
        for scenario in families {
            let split_too = (*req == "2025-11-25").then_some(&split);
            for checks in [&through, &legacy].into_iter().chain(split_too) {
                let got: Vec<_> = checks
                    .iter()
                    .filter(|((s, _, _), _)| s == scenario)
                    .collect();
                assert!(
                    !got.is_empty()
                        && got
                            .iter()
                            .all(|(_, st)| conformance::passed(st) || *st == "INFO"),
                    "{scenario} does not pass through an HTTP child ({req}): {got:?}"
                );
            }
        }
        eprintln!(
            "HTTP fixture, requirements {req}: directly {}; through /mcp/servers/fxh {}; through /mcp {}; through \
             /mcp/servers/fxhl (legacy era) {}; fxhs (split) directly {}, through /mcp/servers/fxhs {}\n\
             checks that differ through fxh: {differ:#?}\nthrough fxhl: {differ_legacy:#?}\nthrough fxhs: \
             {differ_split:#?}",
            conformance::figures(&direct),
            conformance::figures(&through),
            conformance::figures(&aggregated),
            conformance::figures(&legacy),
            conformance::figures(&split_direct),
            conformance::figures(&split),
        );
    }
    suite_0_1_16(&fxh_url, &url, "fxh", &results.path().join("0.1.16-fxh")).await;
    suite_0_1_16(&fxhl_url, &url, "fxhl", &results.path().join("0.1.16-fxhl")).await;
    suite_0_1_16(&fxhs_url, &url, "fxhs", &results.path().join("0.1.16-fxhs")).await;
    let _ = serve.kill().await;
}

#[tokio::test]
async fn server_everything_over_http_fares_the_same_through_the_proxy() {
    let (_everything, port) = conformance::everything_http().await;
    let direct_url = format!("http://127.0.0.1:{port}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) =
        conformance::serve_installed(dir.path(), &[http_child("everything", &direct_url)]).await;
    let results = tempfile::tempdir().unwrap();
    for req in conformance::REQUIREMENTS {
        let direct: Checks = conformance::run_suite(
            &direct_url,
            &results.path().join(format!("{req}-direct")),
            req,
        )
        .await;
        let through = conformance::run_suite(
            &format!("{url}/mcp/servers/everything"),
            &results.path().join(format!("{req}-through")),
            req,
        )
        .await;
        // A legacy-era server: through us a 2026-07-28 client gets our 2026-07-28 front, so more passes there.
        let allowed: &[(&str, &str, &str)] = if *req == "2026-07-28" {
            LEGACY_SERVER_2026_WORSE
        } else {
            &[]
        };
        let better = no_worse(&direct, &through, "/mcp/servers/everything", allowed);
        eprintln!(
            "server-everything over HTTP, requirements {req}: directly {}; through /mcp/servers/everything {}\n\
             checks that pass only through us: {better:#?}",
            conformance::figures(&direct),
            conformance::figures(&through)
        );
        if *req == "2025-11-25" {
            for scenario in [
                "logging-set-level",
                "resources-subscribe",
                "resources-unsubscribe",
            ] {
                assert!(
                    through
                        .iter()
                        .any(|((s, _, _), st)| s == scenario && conformance::passed(st)),
                    "{scenario} does not pass through the HTTP child"
                );
            }
        }
    }
    suite_0_1_16(
        &direct_url,
        &url,
        "everything",
        &results.path().join("0.1.16"),
    )
    .await;
    let _ = serve.kill().await;
}

/// What passes against the TypeScript SDK server directly but not through us, set 2025-11-25, and why.
const TS_2025_WORSE: &[(&str, &str, &str)] = &[(
    "server-sse-polling",
    "server-sse-disconnect-resume",
    "SSE polling (SEP-1699) is a choice of the server that holds the stream: the child closes its stream mid-call, \
     agent-discover's client reconnects to it with Last-Event-ID and takes the result, and our own front, which keeps \
     its stream open, hands the result on that stream, so the suite sees no disconnect (INFO, not a failure)",
)];

/// The TypeScript SDK conformance server over Streamable HTTP on 127.0.0.1, with the URL it printed once listening.
async fn ts_sdk_http() -> (tokio::process::Child, String) {
    ts_server("ts_conformance_server.cjs", &[]).await
}

/// `script` (tests/interop) run with the cache's Node 22 and its node_modules, plus `args`; with the URL it printed
/// once listening.
async fn ts_server(script: &str, args: &[&str]) -> (tokio::process::Child, String) {
    let modules = conformance::cache().join("node/node_modules");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/interop")
        .join(script);
    // The SDK packages the scripts load (each fails with a clear message when scripts/test.sh has not installed it).
    for package in [
        "@modelcontextprotocol/sdk",
        "@modelcontextprotocol/server",
        "@modelcontextprotocol/node",
    ] {
        conformance::need(modules.join(package).join("package.json"));
    }
    let mut child = tokio::process::Command::new(conformance::need(modules.join(".bin/node")))
        .arg(script)
        .arg(&modules)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), out.next_line())
        .await
        .expect("the TypeScript server printed no URL")
        .unwrap()
        .expect("the TypeScript server exited");
    (child, url)
}

#[tokio::test]
async fn a_typescript_sdk_server_over_http_fares_the_same_through_the_proxy() {
    let (_ts, direct_url) = ts_sdk_http().await;
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) =
        conformance::serve_installed(dir.path(), &[http_child("tsc", &direct_url)]).await;
    let through_url = format!("{url}/mcp/servers/tsc");
    let results = tempfile::tempdir().unwrap();
    for req in conformance::REQUIREMENTS {
        let direct = conformance::run_suite(
            &direct_url,
            &results.path().join(format!("{req}-direct")),
            req,
        )
        .await;
        let through = conformance::run_suite(
            &through_url,
            &results.path().join(format!("{req}-through")),
            req,
        )
        .await;
        if *req == "2025-11-25" {
            // The server passes every 2025-11-25 check directly; through us each check comes out the same (but for
            // the transport scenarios, where our own front may only do better).
            let failing: Vec<_> = direct.iter().filter(|(_, st)| *st == "FAILURE").collect();
            assert!(
                failing.is_empty(),
                "the TypeScript server fails directly: {failing:?}"
            );
            let better = no_worse(&direct, &through, "/mcp/servers/tsc", TS_2025_WORSE);
            eprintln!(
                "TypeScript SDK server, 2025-11-25: directly {}; through {}\nchecks that pass only through us: \
                 {better:#?}",
                conformance::figures(&direct),
                conformance::figures(&through)
            );
        } else {
            // A legacy-era server (SDK 1.x): through us a 2026-07-28 client gets our 2026-07-28 front.
            let better = no_worse(
                &direct,
                &through,
                "/mcp/servers/tsc",
                LEGACY_SERVER_2026_WORSE,
            );
            eprintln!(
                "TypeScript SDK server, {req}: directly {}; through {}\nchecks that pass only through us: \
                {}",
                conformance::figures(&direct),
                conformance::figures(&through),
                better.len()
            );
        }
    }
    suite_0_1_16(&direct_url, &url, "tsc", &results.path().join("0.1.16")).await;
    let _ = serve.kill().await;
}

/// What passes against the TypeScript SDK 2.x server directly but not through us, set 2026-07-28, and why.
const TS2_2026_WORSE: &[(&str, &str, &str)] = &[
    (
        "input-required-result-validate-input",
        "sep-2322-error-on-protocol-error",
        UNOFFERED_MRTR_TOOL,
    ),
    (
        "input-required-result-validate-input",
        "sep-2322-validate-input-responses",
        UNOFFERED_MRTR_TOOL,
    ),
];

const UNOFFERED_MRTR_TOOL: &str = "the server does not have the tool the scenario calls \
    (`test_input_required_result_elicitation`): directly the SDK answers a JSON-RPC error, which the checks take for \
    the protocol error they want; through `/mcp/servers/NAME` a tool the server does not offer is a tool error \
    (`isError`), as on every endpoint of ours (WARNING)";

/// A server that answers `server/discover` with only `2026-07-28` yet serves `initialize` and legacy sessions on the
/// same `/mcp`, as the conformance repository's reference server does (tests/interop/ts_conformance_server_v2.cjs, on
/// the official TypeScript SDK 2.x): agent-discover connects to it in 2026-07-28 and opens a legacy session beside
/// it, so legacy clients of `/mcp/servers/NAME` get what they get directly (sampling, elicitation, subscriptions, log
/// level), the server registered and not yet activated; `busy` answers its first two `initialize` requests 503, and
/// still gets its legacy session (asked again).
#[tokio::test]
async fn a_server_that_discovers_only_2026_07_28_keeps_its_legacy_clients_through_the_proxy() {
    let (_conf, direct_url) = ts_server("ts_conformance_server_v2.cjs", &[]).await;
    let (_busy, busy_url) =
        ts_server("ts_conformance_server_v2.cjs", &["--busy-initializes", "2"]).await;
    // Its discovery lists only 2026-07-28.
    let (status, discovered) =
        crate::eras::raw_2026_with(&direct_url, "server/discover", json!({}), &[], json!({})).await;
    assert_eq!(status, 200, "{discovered}");
    assert_eq!(
        discovered["result"]["supportedVersions"],
        json!(["2026-07-28"]),
        "{discovered}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = conformance::serve_installed(
        dir.path(),
        &[
            http_child("conf", &direct_url),
            http_child("busy", &busy_url),
        ],
    )
    .await;
    let results = tempfile::tempdir().unwrap();
    let out = |what: &str| results.path().join(what);
    // Suite 0.1.16 first, while neither server is active yet.
    let through = conformance::run_suite_package(
        SUITE_0_1_16,
        &format!("{url}/mcp/servers/conf"),
        &out("0.1.16-through"),
        None,
        30,
    )
    .await;
    let busy = conformance::run_suite_package(
        SUITE_0_1_16,
        &format!("{url}/mcp/servers/busy"),
        &out("0.1.16-busy"),
        None,
        30,
    )
    .await;
    let direct =
        conformance::run_suite_package(SUITE_0_1_16, &direct_url, &out("0.1.16-direct"), None, 30)
            .await;
    let failing: Vec<_> = direct.iter().filter(|(_, st)| *st == "FAILURE").collect();
    assert!(failing.is_empty(), "the server fails directly: {failing:?}");
    let better = no_worse(&direct, &through, "/mcp/servers/conf", &[]);
    let better_busy = no_worse(&direct, &busy, "/mcp/servers/busy", &[]);
    eprintln!(
        "TypeScript SDK 2.x server, suite 0.1.16: directly {}; through /mcp/servers/conf {}; through \
         /mcp/servers/busy {}\nchecks that pass only through us: {better:#?} {better_busy:#?}",
        conformance::figures(&direct),
        conformance::figures(&through),
        conformance::figures(&busy)
    );
    // Recorded in its newest era, legacy session or not.
    let status: serde_json::Value = reqwest::get(format!("{url}/api/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for name in ["conf", "busy"] {
        let s = status["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not running: {status}"));
        assert_eq!(s["protocol"], "2026-07-28", "{s}");
    }
    for req in conformance::REQUIREMENTS {
        let direct = conformance::run_suite(&direct_url, &out(&format!("{req}-direct")), req).await;
        let through = conformance::run_suite(
            &format!("{url}/mcp/servers/conf"),
            &out(&format!("{req}-through")),
            req,
        )
        .await;
        let allowed = if *req == "2025-11-25" {
            TS_2025_WORSE
        } else {
            TS2_2026_WORSE
        };
        let better = no_worse(&direct, &through, "/mcp/servers/conf", allowed);
        eprintln!(
            "TypeScript SDK 2.x server, {req}: directly {}; through /mcp/servers/conf {}\nchecks that pass only \
             through us: {better:#?}",
            conformance::figures(&direct),
            conformance::figures(&through)
        );
    }
    let _ = serve.kill().await;
}
