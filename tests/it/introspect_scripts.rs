//! Issue 14: npm packages are installed with their lifecycle scripts skipped, and the scripts are run (`npm rebuild`)
//! only when the server then fails for a reason they explain. Local tarballs made by the test (no registry): a server
//! whose postinstall builds what it needs, one whose postinstall fails but is not needed (a browser download, say),
//! and one that needs a postinstall that fails.

use std::path::Path;
use std::time::Duration;

use agent_discover::introspect::{self, Category, Limits, Options, Record, Target};

use crate::harness::BIN;

fn options(cache: &Path) -> Options {
    let mut o = Options::new(cache.to_path_buf(), BIN.into());
    // The test packages run the fixture binary from the build directory: readable in their sandbox.
    o.read.push(
        std::path::Path::new(crate::harness::fixture())
            .parent()
            .unwrap()
            .to_path_buf(),
    );
    o.limits = Limits {
        install: Duration::from_secs(120),
        initialize: Duration::from_secs(10),
        list: Duration::from_secs(10),
        term_grace: Duration::from_secs(2),
        hard: Duration::from_secs(60),
    };
    o.concurrency = 3;
    o.second_pass = false;
    o
}

/// A tarball `<dir>/<name>.tgz` of a package whose bin starts the fixture server when `built.txt` (written by its
/// postinstall) exists, and otherwise fails the way an unbuilt native addon does; `needs_build: false` starts the
/// fixture either way. `postinstall_ok: false` makes the postinstall write `built.txt` and then fail.
fn package(dir: &Path, name: &str, needs_build: bool, postinstall_ok: bool) -> String {
    let root = dir.join(name).join("package");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("package.json"),
        serde_json::json!({
            "name": name,
            "version": "1.0.0",
            "bin": {name: "server.js"},
            "scripts": {"postinstall": "node setup.js"},
        })
        .to_string(),
    )
    .unwrap();
    std::fs::write(
        root.join("setup.js"),
        format!(
            "require('fs').writeFileSync(require('path').join(__dirname, 'built.txt'), 'yes');\n{}",
            if postinstall_ok {
                ""
            } else {
                "console.error('ERROR: Failed to download the browser: getaddrinfo ENOTFOUND'); process.exit(1);\n"
            }
        ),
    )
    .unwrap();
    std::fs::write(
        root.join("server.js"),
        format!(
            "#!/usr/bin/env node\n\
             const fs = require('fs'), path = require('path');\n\
             if ({needs_build} && !fs.existsSync(path.join(__dirname, 'built.txt'))) {{\n\
               console.error(\"Error: Could not locate the bindings file. Tried: build/Release/addon.node\");\n\
               process.exit(1);\n\
             }}\n\
             const r = require('child_process').spawnSync({bin:?}, ['--name', {name:?}], {{stdio: 'inherit'}});\n\
             process.exit(r.status === null ? 1 : r.status);\n",
            bin = crate::harness::fixture(),
        ),
    )
    .unwrap();
    let tgz = dir.join(format!("{name}.tgz"));
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&tgz)
        .arg("-C")
        .arg(dir.join(name))
        .arg("package")
        .status()
        .expect("tar");
    assert!(status.success());
    tgz.display().to_string()
}

fn stage<'a>(r: &'a Record, name: &str) -> Option<&'a introspect::StageTime> {
    r.stages.iter().find(|s| s.stage == name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_scripts_are_skipped_and_run_only_when_a_failure_says_they_were_needed() {
    let pkgs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let needs = package(pkgs.path(), "fixture-needs-build", true, true);
    let unneeded = package(pkgs.path(), "fixture-unneeded-script", false, false);
    let broken = package(pkgs.path(), "fixture-needs-broken-script", true, false);
    let targets: Vec<Target> = [&needs, &unneeded, &broken]
        .iter()
        .map(|p| Target::npm(p).unwrap())
        .collect();
    let records = introspect::run_batch(targets.clone(), &options(cache.path()), |_| {}).await;
    let get = |t: &Target| {
        records
            .iter()
            .find(|r| r.key == t.key())
            .unwrap_or_else(|| panic!("no record for {}", t.key()))
    };

    // Started without its build, it failed the way an unbuilt addon does: the scripts ran, then it was enumerated.
    let r = get(&targets[0]);
    assert_eq!(r.category, Category::Ok, "{} {:?}", r.evidence, r.stages);
    assert_eq!(r.package, "fixture-needs-build");
    let names: Vec<&str> = r.stages.iter().map(|s| s.stage.as_str()).collect();
    let scripts = names
        .iter()
        .position(|s| *s == "install scripts")
        .expect("scripts stage");
    assert!(
        names[..scripts].contains(&"initialize")
            && names[scripts + 1..].contains(&"initialize (after scripts)"),
        "{names:?}"
    );
    assert_eq!(stage(r, "install").unwrap().outcome, "ok");
    assert_eq!(stage(r, "install scripts").unwrap().outcome, "ok");
    assert!(
        r.flags.iter().any(
            |f| f.starts_with("install scripts run: Error: Could not locate the bindings file")
        ),
        "{:?}",
        r.flags
    );
    assert!(r.tools.iter().any(|t| t.name == "echo"));

    // Its postinstall fails (with scripts it would be install_failed), but nothing needs it: never run.
    let r = get(&targets[1]);
    assert_eq!(r.category, Category::Ok, "{} {:?}", r.evidence, r.stages);
    assert!(stage(r, "install scripts").is_none(), "{:?}", r.stages);
    assert!(
        r.flags.iter().all(|f| !f.contains("install scripts")),
        "{:?}",
        r.flags
    );

    // Needed and failing: install_failed with the script's message and why it was run.
    let r = get(&targets[2]);
    assert_eq!(
        r.category,
        Category::InstallFailed,
        "{} {:?}",
        r.evidence,
        r.stages
    );
    assert_eq!(stage(r, "install scripts").unwrap().outcome, "failed");
    assert!(r.evidence.starts_with("install-script:"), "{}", r.evidence);
    assert!(
        r.evidence.contains("Failed to download the browser"),
        "{}",
        r.evidence
    );
    assert!(
        r.evidence
            .contains("run because Error: Could not locate the bindings file"),
        "{}",
        r.evidence
    );

    for r in &records {
        assert_eq!(r.left_behind, 0, "{}", r.key);
    }
}
