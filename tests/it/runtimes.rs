//! Issue 31, part 5: npm servers that need a newer Node run with one from the runtimes cache. The system's Node is
//! replaced by a stand-in (`AGENT_DISCOVER_SYSTEM_NODE`, or introspection's `Options::system_node`): a script that
//! reports v18.0.0 and fails the way undici fails on an old Node. The runtimes cache's `node-22` is the Node 22 the
//! test script already installed (`.ci/cache/node`, linked), so nothing is downloaded.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_discover::introspect::{self, Category, Limits, Options, Target};
use serde_json::json;

use crate::harness::{self, BIN};

/// `.ci/cache/node`, the prefix holding Node 22 (`node_modules/.bin/node`).
fn node22_prefix() -> PathBuf {
    let cache = std::env::var_os("AGENT_DISCOVER_TEST_CACHE")
        .expect("AGENT_DISCOVER_TEST_CACHE (scripts/test.sh sets it)");
    let prefix = PathBuf::from(cache).join("node");
    assert!(
        prefix.join("node_modules/.bin/node").exists(),
        "Node 22 missing in {}: run scripts/test.sh",
        prefix.display()
    );
    prefix
}

/// A runtimes folder whose `node-22` is the test cache's Node 22.
fn runtimes_in(dir: &Path) -> PathBuf {
    let root = dir.join("runtimes");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(node22_prefix(), root.join("node-22")).unwrap();
    root
}

/// The stand-in for an old system Node: `--version` says v18.0.0; running anything fails like undici on Node 18-20.
fn old_node(dir: &Path) -> PathBuf {
    let bin = dir.join("old-node-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let node = bin.join("node");
    std::fs::write(
        &node,
        "#!/bin/sh\n\
         if [ \"$1\" = \"--version\" ]; then echo v18.0.0; exit 0; fi\n\
         echo 'TypeError: webidl.util.markAsUncloneable is not a function' >&2\n\
         exit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o755)).unwrap();
    node
}

/// A local npm package `<dir>/<name>` whose bin refuses Node < 22 ("Please update Node.js") and otherwise starts the
/// fixture MCP server (the path in its first argument, else the build's); `engines` is its `engines.node` (none: it
/// does not declare one).
fn package(dir: &Path, name: &str, engines: Option<&str>) -> PathBuf {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let mut manifest = json!({"name": name, "version": "1.0.0", "bin": {name: "server.js"}});
    if let Some(e) = engines {
        manifest["engines"] = json!({"node": e});
    }
    std::fs::write(root.join("package.json"), manifest.to_string()).unwrap();
    std::fs::write(
        root.join("server.js"),
        format!(
            "#!/usr/bin/env node\n\
             if (Number(process.versions.node.split('.')[0]) < 22) {{\n\
               console.error('This server requires Node.js >= 22. Please update Node.js');\n\
               process.exit(1);\n\
             }}\n\
             const bin = process.argv[2] || {bin:?};\n\
             const r = require('child_process').spawnSync(bin, ['--name', {name:?}], {{stdio: 'inherit'}});\n\
             process.exit(r.status === null ? 1 : r.status);\n",
            bin = harness::fixture(),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("server.js"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    root
}

fn options(cache: &Path, runtimes: PathBuf, system_node: PathBuf) -> Options {
    let mut o = Options::new(cache.to_path_buf(), BIN.into());
    o.read.push(
        Path::new(harness::fixture())
            .parent()
            .unwrap()
            .to_path_buf(),
    );
    o.limits = Limits {
        install: Duration::from_secs(120),
        initialize: Duration::from_secs(15),
        list: Duration::from_secs(10),
        term_grace: Duration::from_secs(2),
        hard: Duration::from_secs(60),
    };
    o.concurrency = 2;
    o.second_pass = false;
    o.runtimes = runtimes;
    o.system_node = Some(system_node);
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_runs_a_package_needing_node_22_with_the_cached_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let pkgs = dir.path().join("pkgs");
    let declared = package(&pkgs, "fixture-engines-22", Some(">=22"));
    let undeclared = package(&pkgs, "fixture-old-node-fails", None);
    let targets: Vec<Target> = [&declared, &undeclared]
        .iter()
        .map(|p| Target::npm(&p.display().to_string()).unwrap())
        .collect();
    let opts = options(
        &dir.path().join("cache"),
        runtimes_in(dir.path()),
        old_node(dir.path()),
    );
    let records = introspect::run_batch(targets.clone(), &opts, |_| {}).await;
    let get = |t: &Target| records.iter().find(|r| r.key == t.key()).unwrap();

    // `engines.node >=22` is not met by the "system" v18: the first attempt already runs with the cache's Node 22.
    let r = get(&targets[0]);
    assert_eq!(r.category, Category::Ok, "{} {:?}", r.evidence, r.flags);
    assert!(!r.tools.is_empty());
    let rt = r.runtime.as_ref().expect("runtime recorded");
    assert_eq!((rt.kind.as_str(), rt.source.as_str()), ("node", "cache"));
    assert!(rt.version.starts_with("22."), "{rt:?}");
    assert!(
        r.flags
            .iter()
            .any(|f| f.contains("engines: node >=22 wanted, 18.0.0")),
        "{:?}",
        r.flags
    );
    assert!(
        !r.stages.iter().any(|s| s.stage.contains("newer node")),
        "no second start: {:?}",
        r.stages
    );

    // No engines declared: it starts with the "system" Node, fails like an old Node, and is started again with 22.
    let r = get(&targets[1]);
    assert_eq!(r.category, Category::Ok, "{} {:?}", r.evidence, r.flags);
    let rt = r.runtime.as_ref().expect("runtime recorded");
    assert_eq!(rt.source, "cache");
    assert!(rt.version.starts_with("22."), "{rt:?}");
    assert!(
        r.flags
            .iter()
            .any(|f| f.contains("started again") && f.contains("markAsUncloneable")),
        "{:?}",
        r.flags
    );
    assert!(
        r.stages
            .iter()
            .any(|s| s.stage == "initialize (newer node)" && s.outcome == "ok"),
        "{:?}",
        r.stages
    );
    assert_eq!(r.left_behind, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activation_runs_an_old_node_failure_again_with_the_cached_runtime_and_status_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    runtimes_in(&data);
    let old = old_node(dir.path());
    let pkgs = dir.path().join("pkgs");
    let declared = package(&pkgs, "fixture-engines-22", Some(">=22"));
    let undeclared = package(&pkgs, "fixture-old-node-fails", None);
    let agent = harness::spawn_env(
        &data,
        &[],
        None,
        &[("AGENT_DISCOVER_SYSTEM_NODE", old.display().to_string())],
    )
    .await;
    for (name, pkg) in [("declared", &declared), ("undeclared", &undeclared)] {
        // The fixture's path as an argument: its sandbox grants it (arguments naming paths are granted).
        agent
            .registry(json!({"action": "install", "name": name, "command": "node",
                "args": [pkg.join("server.js").display().to_string(), harness::fixture()]}))
            .await;
        let out = agent
            .registry(json!({"action": "activate", "name": name}))
            .await;
        assert_eq!(out["state"], "ready", "{name}: {out}");
    }
    let status = agent.registry(json!({"action": "status"})).await;
    let servers = status["servers"].as_array().expect("servers");
    for name in ["declared", "undeclared"] {
        let s = servers
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {status}"));
        assert_eq!(s["runtime"]["kind"], "node", "{s}");
        assert_eq!(s["runtime"]["source"], "cache", "{s}");
        assert!(
            s["runtime"]["version"]
                .as_str()
                .is_some_and(|v| v.starts_with("22.")),
            "{s}"
        );
    }
    // Only the undeclared one needed a second start, after the old Node's failure.
    let seen = agent.seen.stderr.lock().unwrap().join("\n");
    assert!(
        seen.contains("needs a newer Node") && seen.contains("undeclared"),
        "{seen}"
    );
    agent.stop().await;

    // `status` from the command line reads what the start stored.
    let out = harness::command(&data, &["status", "--json"])
        .output()
        .await
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let declared = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "declared")
        .unwrap()
        .clone();
    assert_eq!(declared["runtime"]["source"], "cache", "{v}");
}
