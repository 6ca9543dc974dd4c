//! Issue 29, part 2: the skills extension (SEP-2640) through agent-discover. The conformance suite's `sep-2640-*`
//! server scenarios against the fixture directly, through `/mcp/servers/NAME` (a 2026-07-28 child and a legacy-era
//! one) and through the aggregated `/mcp`; its `sep-2640-client-*` scenarios against agent-discover as the client
//! (`scripts/conformance-client.sh`); the aggregation of two children's skills (namespaced URIs, `skills/get` and
//! directory reads routed, a corrupt `SKILL.md` refused), and `agent-discover skills load`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use rmcp::model::*;
use serde_json::json;
use tokio::io::AsyncBufReadExt;

use crate::conformance::{cache, need, serve_all};
use crate::harness::{self, fixture};

const SCENARIOS: &[&str] = &[
    "sep-2640-skills-directory",
    "sep-2640-skills-enumeration",
    "sep-2640-skills-manifest",
];
const SPECS: &[&str] = &["2025-11-25", "2026-07-28"];

/// (check id, occurrence) -> status of one scenario run at `spec`.
async fn scenario(
    url: &str,
    name: &str,
    spec: &str,
    out: &Path,
) -> BTreeMap<(String, usize), String> {
    let node = need(cache().join("node/node_modules/.bin/node"));
    let suite =
        need(cache().join("node/node_modules/@modelcontextprotocol/conformance/dist/index.js"));
    let run = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(node)
            .arg(suite)
            .args([
                "server",
                "--url",
                url,
                "--scenario",
                name,
                "--spec-version",
                spec,
            ])
            .args(["--force", "-o"])
            .arg(out)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the conformance suite did not finish in 120 s")
    .expect("run the conformance suite");
    let mut checks = BTreeMap::new();
    for entry in std::fs::read_dir(out).unwrap() {
        let file = entry.unwrap().path().join("checks.json");
        let list: Vec<serde_json::Value> =
            serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        for c in list {
            let id = c["id"].as_str().unwrap().to_owned();
            let n = (0..)
                .find(|n| !checks.contains_key(&(id.clone(), *n)))
                .unwrap();
            checks.insert((id, n), c["status"].as_str().unwrap().to_owned());
        }
    }
    assert!(
        checks.len() >= 5,
        "{name} at {url} ran too few checks:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    checks
}

/// Checks the aggregated front may warn on, and why: its skill URIs are `agent-discover://SERVER/skill://...` (the
/// scheme is ours, as for every aggregated resource), and two children serving a skill of the same name are two
/// skills with one name (the spec says names are not guaranteed unique; the URIs tell them apart).
const AGGREGATED_WARNS: &[&str] = &[
    "sep-2640-skill-uri-scheme",
    "sep-2640-names-should-be-unique",
];

#[tokio::test]
async fn skills_scenarios_pass_directly_and_through_the_proxy() {
    let mut direct = tokio::process::Command::new(fixture())
        .args(["--conformance", "--name", "fx", "--http", "0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(direct.stdout.take().unwrap()).lines();
    let direct_url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the fixture printed no URL")
        .unwrap()
        .expect("the fixture exited");
    let dir = tempfile::tempdir().unwrap();
    let (mut serve, url) = serve_all(
        dir.path(),
        &[
            ("fx", fixture(), &["--conformance", "--name", "fx"]),
            (
                "fxl",
                fixture(),
                &["--conformance", "--name", "fxl", "--era", "legacy"],
            ),
        ],
    )
    .await;
    let results = tempfile::tempdir().unwrap();
    let mut n = 0;
    let mut out = || {
        n += 1;
        results.path().join(n.to_string())
    };
    for spec in SPECS {
        for name in SCENARIOS {
            let d = scenario(&direct_url, name, spec, &out()).await;
            let bad: Vec<_> = d
                .iter()
                .filter(|(_, s)| *s == "FAILURE" || *s == "WARNING")
                .collect();
            assert!(bad.is_empty(), "{name} ({spec}) fails directly: {bad:?}");
            assert!(d.values().any(|s| s == "SUCCESS"), "{name} ({spec}): {d:?}");
            // The per-server endpoints: check for check the same, from a 2026-07-28 child and from a legacy one.
            for server in ["fx", "fxl"] {
                let t = scenario(&format!("{url}/mcp/servers/{server}"), name, spec, &out()).await;
                assert_eq!(
                    d, t,
                    "{name} ({spec}) differs through /mcp/servers/{server}"
                );
            }
            // The aggregated front (both children's skills): declared, nothing fails, only the warnings above.
            let a = scenario(&format!("{url}/mcp"), name, spec, &out()).await;
            for (key, status) in &a {
                let direct = d.get(key).map(String::as_str).unwrap_or("MISSING");
                let ok = status == direct
                    || (status == "WARNING" && AGGREGATED_WARNS.contains(&key.0.as_str()));
                assert!(
                    ok,
                    "{name} ({spec}) through /mcp: {key:?} is {status}, directly {direct}"
                );
            }
            eprintln!(
                "{name} ({spec}): {} checks, the same through /mcp/servers/fx and fxl",
                d.len()
            );
        }
    }
    let _ = serve.kill().await;
    let _ = direct.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_client_scenarios_pass_with_agent_discover_as_the_client() {
    for s in [
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ] {
        let (ok, out) = crate::oauth::suite(&["--scenario", s]).await;
        assert!(
            ok && out.contains("OVERALL: PASSED") && out.contains(" 0 failed, 0 warnings"),
            "{s} did not pass:\n{out}"
        );
    }
}

async fn request(
    agent: &harness::Agent,
    request: ClientRequest,
) -> Result<ServerResult, rmcp::ErrorData> {
    // The front declares the extension at initialize only when a child runs already; it serves it once one does,
    // so the request is sent as it is (rmcp's own helpers check the declaration first).
    match agent.client.peer().send_request(request).await {
        Ok(r) => Ok(r),
        Err(rmcp::ServiceError::McpError(e)) => Err(e),
        Err(e) => panic!("transport failure: {e}"),
    }
}

#[tokio::test]
async fn two_childrens_skills_are_aggregated_routed_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    for (name, corrupt) in [("fx", false), ("bad", true)] {
        let mut args = vec!["--conformance", "--name", name];
        if corrupt {
            args.push("--skills-corrupt");
        }
        agent
            .registry(
                json!({"action": "install", "name": name, "command": fixture(), "args": args}),
            )
            .await;
        agent
            .registry(json!({"action": "activate", "name": name}))
            .await;
    }

    // Listed: both children's skills, every URI under its server's prefix.
    let listed = match request(&agent, ClientRequest::ListSkillsRequest(Default::default())).await {
        Ok(ServerResult::ListSkillsResult(r)) => r.skills,
        other => panic!("skills/list: {other:?}"),
    };
    let mut uris: Vec<&str> = listed.iter().map(|s| s.uri.as_str()).collect();
    uris.sort_unstable();
    assert_eq!(
        uris,
        [
            "agent-discover://bad/skill://acme/billing/SKILL.md",
            "agent-discover://bad/skill://code-review/SKILL.md",
            "agent-discover://fx/skill://acme/billing/SKILL.md",
            "agent-discover://fx/skill://code-review/SKILL.md",
        ]
    );
    for s in &listed {
        let SkillResources::Files(files) = &s.resources else {
            panic!("{s:?}")
        };
        let prefix = &s.uri[..s.uri.find("/skill://").unwrap() + 1];
        assert!(files.iter().all(|f| f.uri.starts_with(prefix)), "{s:?}");
        assert!(files.iter().any(|f| f.uri == s.uri), "{s:?}");
        assert!(s.uri.ends_with(&format!("/{}/SKILL.md", s.name())), "{s:?}");
    }

    // Got: routed to the owner by the URI's prefix, answered under the same URI; an unknown one is -32602.
    let uri = "agent-discover://bad/skill://code-review/SKILL.md";
    let get = ClientRequest::GetSkillRequest(GetSkillRequest::new(GetSkillRequestParams::new(uri)));
    match request(&agent, get).await {
        Ok(ServerResult::GetSkillResult(r)) => {
            assert_eq!(r.skill.uri, uri);
            assert_eq!(r.skill.name(), "code-review");
        }
        other => panic!("skills/get: {other:?}"),
    }
    for unknown in [
        "agent-discover://nope/skill://code-review/SKILL.md",
        "skill://code-review/SKILL.md",
        "agent-discover://fx/skill://nothing/SKILL.md",
    ] {
        let get = ClientRequest::GetSkillRequest(GetSkillRequest::new(GetSkillRequestParams::new(
            unknown,
        )));
        let e = request(&agent, get).await.expect_err(unknown);
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{unknown}: {e:?}");
        // Ours or the child's own -32602 (the last one), it names the URI the client knows.
        assert_eq!(e.data.as_ref().unwrap()["uri"], unknown, "{e:?}");
    }

    // A directory read, routed; its children come back under the prefix.
    let dir_read = ClientRequest::ReadResourceDirectoryRequest(ReadResourceDirectoryRequest::new(
        ReadResourceDirectoryRequestParams::new("agent-discover://fx/skill://acme/billing"),
    ));
    match request(&agent, dir_read).await {
        Ok(ServerResult::ListResourcesResult(r)) => {
            let got: Vec<(&str, Option<&str>)> = r
                .resources
                .iter()
                .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
                .collect();
            assert!(
                got.contains(&(
                    "agent-discover://fx/skill://acme/billing/SKILL.md",
                    Some("text/markdown")
                )),
                "{got:?}"
            );
            assert!(
                got.contains(&(
                    "agent-discover://fx/skill://acme/billing/references",
                    Some(DIRECTORY_MIME_TYPE)
                )),
                "{got:?}"
            );
        }
        other => panic!("resources/directory/read: {other:?}"),
    }

    // Read: the sound SKILL.md comes through; the corrupt one is refused, the failed check named.
    let read = |uri: &str| {
        agent
            .client
            .read_resource(ReadResourceRequestParams::new(uri))
    };
    let good = read("agent-discover://fx/skill://acme/billing/SKILL.md")
        .await
        .expect("read fx's billing");
    let ResourceContents::TextResourceContents { text, .. } = &good.contents[0] else {
        panic!("{good:?}")
    };
    assert!(text.starts_with("---\nname: billing\n"), "{text}");
    let refused = read("agent-discover://bad/skill://acme/billing/SKILL.md")
        .await
        .expect_err("corrupt SKILL.md");
    let message = refused.to_string();
    assert!(
        message.contains("skill_unverified") && message.contains("digest check"),
        "{message}"
    );
    // The same child's sound files still pass.
    read("agent-discover://bad/skill://code-review/SKILL.md")
        .await
        .expect("read bad's code-review");
    read("agent-discover://bad/skill://acme/billing/references/RATES.md")
        .await
        .expect("read bad's RATES.md");
    agent.stop().await;
}

#[tokio::test]
async fn skills_load_verifies_every_file_before_printing() {
    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    for (name, extra) in [("fx", None), ("bad", Some("--skills-corrupt"))] {
        let mut args = vec!["--conformance", "--name", name];
        args.extend(extra);
        setup
            .registry(
                json!({"action": "install", "name": name, "command": fixture(), "args": args}),
            )
            .await;
    }
    setup.stop().await;
    let run = |args: &'static [&'static str]| {
        let mut cmd = harness::command(dir.path(), args);
        async move { cmd.output().await.unwrap() }
    };

    let listed = run(&["skills", "list", "fx", "--json"]).await;
    assert!(listed.status.success(), "{listed:?}");
    let skills: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(skills.as_array().unwrap().len(), 2, "{skills}");

    let loaded = run(&["skills", "load", "fx", "billing", "--json"]).await;
    assert!(loaded.status.success(), "{loaded:?}");
    let loaded: serde_json::Value = serde_json::from_slice(&loaded.stdout).unwrap();
    let files: Vec<&str> = loaded["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [
            "skill://acme/billing/SKILL.md",
            "skill://acme/billing/references/RATES.md"
        ]
    );
    assert_eq!(
        loaded["frontmatter"],
        json!({"name": "billing", "description": "Issue and check invoices", "license": "MIT"})
    );

    // The corrupt SKILL.md: nothing printed, the failed check named.
    let refused = run(&["skills", "load", "bad", "billing"]).await;
    assert!(!refused.status.success());
    assert!(
        refused.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("skill_unverified: skill://acme/billing/SKILL.md of server `bad` failed the digest check"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_stdio_single_server_mode_passes_skills_through() {
    use rmcp::ServiceExt;
    use rmcp::transport::TokioChildProcess;

    let dir = tempfile::tempdir().unwrap();
    let setup = harness::spawn(dir.path(), &[], None).await;
    setup
        .registry(
            json!({"action": "install", "name": "fx", "command": fixture(),
            "args": ["--conformance", "--name", "fx", "--era", "legacy"]}),
        )
        .await;
    setup.stop().await;
    let (transport, _stderr) =
        TokioChildProcess::builder(harness::command(dir.path(), &["mcp", "--server", "fx"]))
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn agent-discover mcp --server fx");
    let client = ().serve(transport).await.expect("initialize");
    // The child's own declaration, directory reads included.
    let caps = &client.peer_info().expect("server info").capabilities;
    assert!(caps.supports_directory_read(), "{caps:?}");
    // Its own URIs, unchanged.
    let listed = client.list_skills(None).await.expect("skills/list");
    let uris: Vec<&str> = listed.skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://acme/billing/SKILL.md",
            "skill://code-review/SKILL.md"
        ]
    );
    let got = client
        .get_skill(GetSkillRequestParams::new("skill://code-review/SKILL.md"))
        .await
        .expect("skills/get");
    assert_eq!(got.skill, listed.skills[1]);
    let dir_read = client
        .read_resource_directory(ReadResourceDirectoryRequestParams::new(
            "skill://acme/billing/references",
        ))
        .await
        .expect("resources/directory/read");
    let children: Vec<&str> = dir_read.resources.iter().map(|r| r.uri.as_str()).collect();
    assert_eq!(children, ["skill://acme/billing/references/RATES.md"]);
    let e = client
        .get_skill(GetSkillRequestParams::new("skill://nothing/SKILL.md"))
        .await
        .expect_err("an unknown skill");
    assert!(
        matches!(e, rmcp::ServiceError::McpError(ref d) if d.code == ErrorCode::INVALID_PARAMS),
        "{e:?}"
    );
    let _ = client.cancel().await;
}
