//! Issue 31, part 5 (coverage): what a failed second pass still says it needs, on local npm packages made by the test
//! (no registry): a choice its error lists for a value it quotes, then options it names whose flags only its `--help`
//! shows (a third attempt); a configuration file its schema refused (the skeleton of the package's shipped example);
//! a credentials variable that points at an OAuth key file; and a secret set but still called missing (its value
//! looked like a template). Also (npm top 120, fifth round): a configuration file not found up the tree, given through
//! the help's optional `--config <path>`; an ES module import without its `.js`, resolved by a hook.

use agent_discover::introspect::{self, Category, Record, Target};

use crate::introspect_rules::{options, package};

fn placeholder<'a>(r: &'a Record, name: &str) -> &'a introspect::Placeholder {
    r.placeholders
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no placeholder {name}: {:?}", r.placeholders))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_failed_second_pass_names_is_filled_in_a_third() {
    let pkgs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let named = package(
        pkgs.path(),
        "fixture-named-options",
        "# svc\n```json\n{\"mcpServers\": {\"svc\": {\"command\": \"npx\", \"args\": [\"fixture-named-options\"],\n  \"env\": {\"FIX_PROVIDER\": \"<provider>\"}}}}\n```\n",
        "const a = process.argv.slice(2);\n\
         if (a.includes('--help')) { console.log('Usage: fixture-named-options [options]\\n\\nOptions:\\n  -a, --app-id <appId>          App ID\\n  -s, --app-secret <appSecret>  App secret\\n  --oauth                       Sign in'); process.exit(0); }\n\
         const p = process.env.FIX_PROVIDER;\n\
         if (p && !['fast', 'safe'].includes(p)) { console.error(`Error: Invalid provider \"${p}\". Must be \"fast\", \"safe\", or \"auto\".`); process.exit(1); }\n\
         if (!a.includes('--app-id') || !a.includes('--app-secret')) { console.error('Error: [svc]  appId, and appSecret are required'); process.exit(1); }",
    );
    let config = package(
        pkgs.path(),
        "fixture-config-schema",
        "# svc\n",
        "const a = process.argv.slice(2);\n\
         if (a.includes('--help')) { console.log('Usage: fixture-config-schema [options] <config-file-path>\\n\\nOptions:\\n  -h, --help  display help'); process.exit(0); }\n\
         if (!a[0]) { console.error(\"error: missing required argument 'config-file-path'\"); process.exit(1); }\n\
         const c = JSON.parse(require('fs').readFileSync(a[0], 'utf8'));\n\
         if (typeof c.servers !== 'object' || c.servers === null || Array.isArray(c.servers)) { console.error('[error] Error: Specified configuration file is not satisfies the schema: ' + a[0]); process.exit(1); }",
    );
    // The example configuration ships in the package: add it and pack again.
    let root = pkgs.path().join("fixture-config-schema").join("package");
    std::fs::write(
        root.join("config.example.json"),
        r#"{"servers": {"browser": {"command": "npx", "args": ["-y", "some-server"]}}, "name": "svc"}"#,
    )
    .unwrap();
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&config)
        .arg("-C")
        .arg(pkgs.path().join("fixture-config-schema"))
        .arg("package")
        .status()
        .expect("tar");
    assert!(status.success());
    let keys = package(
        pkgs.path(),
        "fixture-oauth-keys",
        "# svc\n",
        "const f = process.env.FIX_OAUTH_CREDENTIALS; let k = null;\n\
         try { k = JSON.parse(require('fs').readFileSync(f, 'utf8')); } catch (e) {}\n\
         if (!k || !k.installed || !k.installed.client_id || !k.installed.client_secret) { console.error('Error loading OAuth keys: OAuth credentials not found. Set FIX_OAUTH_CREDENTIALS to the path of your credentials file: export FIX_OAUTH_CREDENTIALS=\"/path/to/oauth.keys.json\"'); process.exit(1); }",
    );
    let template = package(
        pkgs.path(),
        "fixture-template-key",
        "# svc\n",
        "const k = (process.env.FIX_API_KEY || '').toLowerCase();\n\
         if (!k || k.includes('api') || k.includes('key')) { console.error('ERROR: FIX_API_KEY environment variable is required, please set your actual API key'); process.exit(1); }",
    );
    let targets: Vec<Target> = [&named, &config, &keys, &template]
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
    let ok = |r: &Record| {
        assert_eq!(
            r.category,
            Category::Ok,
            "{}: {} {:?} {:?} {:?}",
            r.key,
            r.evidence,
            r.placeholders,
            r.flags,
            r.stages
        )
    };

    // The provider's value is quoted by the error, which lists the choices: the first; then the options the error
    // names by their values' names (`appId`), which only `--help` shows, in a third attempt; `--oauth` (a bare flag,
    // not named) is not passed.
    let r = get(0);
    ok(r);
    assert_eq!(placeholder(r, "FIX_PROVIDER").value, "fast");
    assert!(!placeholder(r, "--app-id").value.is_empty());
    assert!(!placeholder(r, "--app-secret").value.is_empty());
    assert!(r.placeholders.iter().all(|p| p.name != "--oauth"));
    assert!(
        r.stages.iter().any(|s| s.stage.ends_with("(pass 3)")),
        "{:?}",
        r.stages
    );
    assert!(
        r.flags.iter().any(|f| f.starts_with("pass 3: --app-id")),
        "{:?}",
        r.flags
    );

    // `{}` failed the schema: the shipped example's skeleton (top-level keys, collections emptied) passes it.
    let r = get(1);
    ok(r);
    let file = &placeholder(r, "config-file-path").value;
    assert!(
        r.flags
            .iter()
            .any(|f| f.contains("the example configuration's skeleton")),
        "{:?} ({file})",
        r.flags
    );

    // A credentials variable: an OAuth client key file, in the second pass already.
    let r = get(2);
    ok(r);
    assert!(
        placeholder(r, "FIX_OAUTH_CREDENTIALS")
            .value
            .ends_with(".json")
    );
    assert!(r.stages.iter().all(|s| !s.stage.ends_with("(pass 3)")));

    // Set and still called missing: an opaque value (no `api`, no `key` in it).
    let r = get(3);
    ok(r);
    let v = &placeholder(r, "FIX_API_KEY").value;
    assert!(!v.contains("api") && !v.contains("key"), "{v}");
    assert!(
        r.flags
            .iter()
            .any(|f| f.starts_with("placeholder formats (after pass 2): FIX_API_KEY")),
        "{:?}",
        r.flags
    );

    for r in &records {
        assert_eq!(r.left_behind, 0, "{}", r.key);
    }
}

/// `package` with `"type": "module"`: its bin imports `./helper` (no `.js`), as published packages built for a
/// bundler do, then runs the fixture server.
fn esm_package(dir: &std::path::Path, name: &str) -> String {
    let root = dir.join(name).join("package");
    std::fs::create_dir_all(root.join("dist")).unwrap();
    std::fs::write(
        root.join("package.json"),
        serde_json::json!({"name": name, "version": "1.0.0", "type": "module", "bin": {name: "dist/server.js"}})
            .to_string(),
    )
    .unwrap();
    std::fs::write(
        root.join("dist").join("helper.js"),
        "export const ready = true;\n",
    )
    .unwrap();
    std::fs::write(
        root.join("dist").join("server.js"),
        format!(
            "#!/usr/bin/env node\nimport {{ ready }} from './helper';\nimport {{ spawnSync }} from 'node:child_process';\n\
             const r = spawnSync({bin:?}, ['--name', {name:?}], {{ stdio: 'inherit' }});\n\
             process.exit(ready && r.status !== null ? r.status : 1);\n",
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_not_found_up_the_tree_and_an_import_without_its_extension() {
    let pkgs = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    // Walks up from its working directory for `fixture.config.json` (in the sandbox the folders above are refused:
    // EACCES; without it, it reaches the root and says so); its help offers `--config <path>`, which is not required.
    let walk = package(
        pkgs.path(),
        "fixture-walk-config",
        "# svc\n",
        "const a = process.argv.slice(2), fs = require('fs'), path = require('path');\n\
         if (a.includes('--help')) { console.log('Usage:\\n  $ fixture-walk-config [command]\\n\\nOptions:\\n  -c, --config <path>  Path to fixture config file\\n  --silent             Suppress logs\\n  -h, --help           Display this message'); process.exit(0); }\n\
         const i = a.indexOf('--config');\n\
         if (i < 0) { let d = process.cwd(); for (;;) { if (fs.readdirSync(d).includes('fixture.config.json')) break; const up = path.dirname(d); if (up === d) { console.error('Cannot find config file `fixture.config.json`.'); process.exit(1); } d = up; } }\n\
         else { JSON.parse(fs.readFileSync(a[i + 1], 'utf8')); }",
    );
    let esm = esm_package(pkgs.path(), "fixture-esm-extensionless");
    let targets: Vec<Target> = [&walk, &esm]
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
    let summary = |r: &Record| {
        format!(
            "{}: {:?} {} {:?} {:?} {:?}",
            r.key, r.category, r.evidence, r.placeholders, r.flags, r.stages
        )
    };

    // It did not find its configuration: the help's optional `--config <path>` gets a file (JSON `{}`).
    let r = get(0);
    assert_eq!(r.category, Category::Ok, "{}", summary(r));
    assert_eq!(
        r.first_pass.as_ref().map(|f| f.category),
        Some(Category::NeedsConfig),
        "{}",
        summary(r)
    );
    let file = &placeholder(r, "--config").value;
    assert!(file.ends_with("config_path.json"), "{file}");
    assert!(r.placeholders.iter().all(|p| p.name != "--silent"));

    // `./helper` without `.js`: started again with the resolve hook in NODE_OPTIONS, listed without placeholders.
    let r = get(1);
    assert_eq!(r.category, Category::Ok, "{}", summary(r));
    assert!(r.placeholders.is_empty(), "{}", summary(r));
    assert!(
        r.flags.iter().any(
            |f| f.starts_with("esm resolver: an import without its extension")
                && f.contains("dist/helper.js")
        ),
        "{}",
        summary(r)
    );
    assert!(
        r.stages.iter().any(|s| s.stage.ends_with("(esm resolver)")),
        "{}",
        summary(r)
    );
    for r in &records {
        assert_eq!(r.left_behind, 0, "{}", r.key);
    }
}
