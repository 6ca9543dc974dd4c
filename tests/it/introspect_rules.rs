//! Issue 14, third round: second-pass rules that rescued real servers, each on a local npm package made by the test
//! (no registry): a README example's concrete value kept for a setting with a format, a secret asked for without its
//! name found in the entry script's `process.env` reads, and a `USAGE` heading (no colon) whose usage line names the
//! subcommand that starts the server.

use std::path::Path;
use std::time::Duration;

use agent_discover::introspect::{self, Category, Limits, Options, Record, Target};

use crate::harness::BIN;

pub(crate) fn options(cache: &Path) -> Options {
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
    o
}

/// A tarball `<dir>/<name>.tgz` whose bin runs `check` (JavaScript that exits when the server would refuse to
/// start) and then the fixture server, with `readme` as its README.md.
pub(crate) fn package(dir: &Path, name: &str, readme: &str, check: &str) -> String {
    let root = dir.join(name).join("package");
    std::fs::create_dir_all(root.join("dist")).unwrap();
    std::fs::write(
        root.join("package.json"),
        serde_json::json!({"name": name, "version": "1.0.0", "bin": {name: "dist/server.js"}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(root.join("README.md"), readme).unwrap();
    std::fs::write(
        root.join("dist").join("server.js"),
        format!(
            "#!/usr/bin/env node\n{check}\n\
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

fn placeholder<'a>(r: &'a Record, name: &str) -> &'a introspect::Placeholder {
    r.placeholders
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no placeholder {name}: {:?}", r.placeholders))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_values_entry_script_secrets_and_usage_headings_unlock_servers() {
    let pkgs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let readme_values = package(
        pkgs.path(),
        "fixture-readme-values",
        "# svc\n```json\n{\"mcpServers\": {\"svc\": {\"command\": \"npx\", \"args\": [\"fixture-readme-values\"],\n  \"env\": {\"SVC_API_KEY\": \"your-api-key\", \"SVC_RATE_LIMIT\": \"100/1h\"}}}}\n```\n",
        "if (!process.env.SVC_API_KEY) { console.error('Error: SVC_API_KEY environment variable is required'); process.exit(1); }\n\
         if (!/^\\d+\\/\\d+[hm]$/.test(process.env.SVC_RATE_LIMIT || '1/1h')) { console.error('Error: Invalid SVC_RATE_LIMIT format. Use: 100/1h or 50/30m'); process.exit(1); }",
    );
    let unnamed_secret = package(
        pkgs.path(),
        "fixture-unnamed-secret",
        "# svc\nA server.\n",
        "const token = process.env.SVC_API_TKN || process.env.SVC_API_TOKEN; const ro = process.env.SVC_READONLY;\n\
         if (!token) { console.error('A Fixture api token is required.'); process.exit(1); }",
    );
    let usage_heading = package(
        pkgs.path(),
        "fixture-usage-heading",
        "# svc\n",
        "if (process.argv[2] !== 'start') {\n\
           console.log('USAGE\\n  fixture-usage-heading start [--transport stdio|sse] [--port value]\\n  fixture-usage-heading --help\\n\\nFLAGS\\n  -h --help  Print help\\n\\nCOMMANDS\\n  start  Run the MCP server');\n\
           process.exit(0);\n\
         }",
    );
    let targets: Vec<Target> = [&readme_values, &unnamed_secret, &usage_heading]
        .iter()
        .map(|p| Target::npm(p).unwrap())
        .collect();
    let records = introspect::run_batch(targets.clone(), &options(cache.path()), |_| {}).await;
    let get = |i: usize| {
        records
            .iter()
            .find(|r| r.key == targets[i].key())
            .unwrap_or_else(|| panic!("no record for {}", targets[i].key()))
    };

    // The key gets a placeholder; the rate limit keeps the README's value (a generated one fails its format).
    let r = get(0);
    assert_eq!(
        r.category,
        Category::Ok,
        "{} {:?}",
        r.evidence,
        r.placeholders
    );
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsCredentials)
    );
    let limit = placeholder(r, "SVC_RATE_LIMIT");
    assert_eq!(
        (limit.value.as_str(), limit.source.as_str()),
        ("100/1h", "readme")
    );
    assert_eq!(
        placeholder(r, "SVC_API_KEY").value,
        "placeholder-svc-api-key"
    );

    // "A Fixture api token is required." names no variable: the entry script's secret-like reads are filled.
    let r = get(1);
    assert_eq!(
        r.category,
        Category::Ok,
        "{} {:?}",
        r.evidence,
        r.placeholders
    );
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsCredentials)
    );
    assert_eq!(r.rescued_by, ["source"]);
    let names: Vec<&str> = r.placeholders.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["SVC_API_TKN", "SVC_API_TOKEN"],
        "not SVC_READONLY: not a secret"
    );
    assert_eq!(r.needs.env, ["SVC_API_TKN", "SVC_API_TOKEN"]);

    // Usage printed on stdout under `USAGE`: its help names `start`, which is passed first.
    let r = get(2);
    assert_eq!(
        r.category,
        Category::Ok,
        "{} {:?} {:?}",
        r.evidence,
        r.placeholders,
        r.stages
    );
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NonJsonStdout)
    );
    assert_eq!(r.rescued_by, ["help"]);
    let cmd = placeholder(r, "command");
    assert_eq!(cmd.value, "start");
    assert!(
        r.needs.args.is_empty(),
        "a subcommand is never asked of the user: {:?}",
        r.needs
    );

    for r in &records {
        assert_eq!(r.left_behind, 0, "{}", r.key);
        assert!(r.tools.iter().all(|t| t.under_placeholders), "{}", r.key);
    }
}
