//! npm: the selection check (`npm view`: a library is filed without installing it), the install into
//! `<cache>/npm/<spec>` (scripts skipped), and the pre-flight (the bin to start, the engines, the README).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::failure::{install_failed, library, npm_error};
use super::naming::{choose, slug};
use super::run::run_tool;
use super::scripts::{SCRIPTS_RAN, run_scripts};
use crate::category::{Category, Diagnosis};
use crate::options::Options;
use crate::targets::Target;
use crate::types::{Installed, StageTime, clip, stage};

pub(super) async fn npm(
    target: &Target,
    options: &Options,
    stages: &mut Vec<StageTime>,
) -> Result<Installed, Diagnosis> {
    let local = target.package.starts_with('/')
        || target.package.starts_with("./")
        || target.package.starts_with("file:");
    // A local folder is already built (its `prepare` would need its dev dependencies): its scripts never run. A local
    // tarball is installed like a registry package.
    let local_dir = local && Path::new(target.package.trim_start_matches("file:")).is_dir();
    let spec = match &target.version {
        Some(v) => format!("{}@{v}", target.package),
        None => target.package.clone(),
    };
    // A local folder is read for its name (a tarball's, after install); a registry name is the name.
    let mut name = if local {
        let dir = PathBuf::from(target.package.trim_start_matches("file:"));
        let manifest = std::fs::read_to_string(dir.join("package.json")).unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&manifest)
            .ok()
            .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned))
            .unwrap_or_else(|| target.package.clone())
    } else {
        target.package.clone()
    };
    let dir = options.cache_dir.join("npm").join(slug(&if local {
        format!("local-{}", slug(&target.package))
    } else {
        spec.clone()
    }));
    let mut pkg_dir = dir.join("node_modules").join(&name);
    let t = Instant::now();
    let cached_version = read_json(&pkg_dir.join("package.json"))
        .and_then(|m| m.get("version").and_then(|v| v.as_str()).map(str::to_owned));
    let exact = target
        .version
        .as_deref()
        .is_some_and(|v| v.chars().next().is_some_and(|c| c.is_ascii_digit()) && !v.contains(' '));
    if exact && cached_version.as_deref() == target.version.as_deref() && !local {
        stages.push(stage("install", t, "cached"));
    } else {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            stages.push(stage("install", t, "failed"));
            return Err(install_failed(
                format!("cannot create {}: {e}", dir.display()),
                "cache-dir",
            ));
        }
        // An own package.json keeps npm from walking up to a project above the cache.
        if !dir.join("package.json").exists() {
            let _ = std::fs::write(dir.join("package.json"), "{\"private\": true}\n");
        }
        let install_spec = if local {
            target.package.trim_start_matches("file:").to_owned()
        } else {
            spec.clone()
        };
        if !local && let Some(d) = select_npm(&spec, &dir, options, stages, t).await {
            return Err(d);
        }
        // Scripts are skipped (a local folder is already built, and its `prepare` would need its dev dependencies);
        // `run_scripts` runs them when a failure says they were needed.
        let _ = std::fs::remove_file(dir.join(SCRIPTS_RAN));
        let args: Vec<String> = [
            "install",
            "--no-audit",
            "--no-fund",
            "--no-package-lock",
            "--loglevel=error",
            "--ignore-scripts",
            "--prefer-offline",
            "--prefix",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([dir.display().to_string(), install_spec])
        .collect();
        match run_tool("npm", &args, &dir, &[], options.limits.install).await {
            Err(msg) => {
                stages.push(stage(
                    "install",
                    t,
                    if msg.contains("did not finish") {
                        "timeout"
                    } else {
                        "failed"
                    },
                ));
                let code = if msg.contains("did not finish") {
                    "timeout"
                } else {
                    "npm-missing"
                };
                return Err(install_failed(msg, code));
            }
            Ok(out) if out.status != Some(0) => {
                stages.push(stage("install", t, "failed"));
                let (code, line) = npm_error(&out.stderr);
                return Err(install_failed(line, &code));
            }
            Ok(_) => stages.push(stage("install", t, "ok")),
        }
        // A tarball's name: the dependency npm saved in the install folder's package.json.
        if local
            && !local_dir
            && let Some(n) = read_json(&dir.join("package.json"))
                .and_then(|m| m.get("dependencies")?.as_object()?.keys().next().cloned())
        {
            pkg_dir = dir.join("node_modules").join(&n);
            name = n;
        }
    }

    // Pre-flight: a runnable bin, and the engines the package asks for.
    let t = Instant::now();
    let Some(manifest) = read_json(&pkg_dir.join("package.json")) else {
        stages.push(stage("preflight", t, "failed"));
        return Err(Diagnosis::new(
            Category::NoEntryPoint,
            format!("no package.json at {}", pkg_dir.display()),
            "the install did not produce the package folder; the name in the registry may differ from the package's own",
        ));
    };
    let version = manifest
        .get("version")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    let unscoped = name.rsplit('/').next().unwrap_or(&name).to_owned();
    let bins: Vec<(String, String)> = match manifest.get("bin") {
        Some(serde_json::Value::String(s)) => vec![(unscoped.clone(), s.clone())],
        Some(serde_json::Value::Object(m)) => {
            let mut v: Vec<(String, String)> = m
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect();
            v.sort();
            v
        }
        _ => Vec::new(),
    };
    let Some((bin_name, bin_path)) = choose(&bins, &unscoped) else {
        stages.push(stage("preflight", t, "failed"));
        let main = manifest.get("main").and_then(|m| m.as_str()).unwrap_or("");
        return Err(library(Diagnosis::new(
            Category::NoEntryPoint,
            format!(
                "package.json of {name} has no `bin`{}",
                if main.is_empty() {
                    String::new()
                } else {
                    format!(" (only `main`: {main})")
                }
            ),
            "the package is a library or must be started another way (e.g. `node <file>`); it cannot be launched as `npx <package>`",
        )));
    };
    let file = pkg_dir.join(bin_path.trim_start_matches("./"));
    let mut flags = Vec::new();
    // A bin file that a lifecycle script generates: run the scripts, then look again.
    if !file.is_file() && !local_dir && !dir.join(SCRIPTS_RAN).exists() {
        stages.push(stage("preflight", t, "failed"));
        run_scripts(&dir, options, stages, "the bin file is missing").await?;
        flags.push(format!(
            "install scripts run: bin {bin_path} was missing without them"
        ));
    }
    let t = Instant::now();
    if !file.is_file() {
        stages.push(stage("preflight", t, "failed"));
        return Err(Diagnosis::new(
            Category::NoEntryPoint,
            format!("bin `{bin_name}` points to {bin_path}, which the package does not contain"),
            "the published package is broken (its bin file is missing); try another version",
        ));
    }
    if bins.len() > 1 {
        flags.push(format!(
            "several bins ({}); started `{bin_name}`",
            bins.iter()
                .map(|b| b.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let engines = manifest
        .get("engines")
        .and_then(|e| e.get("node"))
        .and_then(|n| n.as_str())
        .map(str::to_owned);
    if let Some(range) = &engines
        && let Some(have) = ad_proxy::runtime::system_node(options.system_node.as_deref()).await
        && ad_proxy::runtime::satisfies(&have.info.version, range) == Some(false)
    {
        flags.push(format!(
            "engines: node {range} wanted, {} on the system",
            have.info.version
        ));
    }
    let link = dir.join("node_modules").join(".bin").join(&bin_name);
    let launch = if link.exists() { link } else { file };
    let readme = readme_in(&pkg_dir);
    stages.push(stage("preflight", t, "ok"));
    Ok(Installed {
        name,
        version,
        description: manifest
            .get("description")
            .and_then(|d| d.as_str())
            .map(str::to_owned),
        launch: launch.display().to_string(),
        readme,
        flags,
        scripts_skipped_in: (!local_dir && !dir.join(SCRIPTS_RAN).exists()).then(|| dir.clone()),
        engines,
    })
}

/// The selection check before installing `spec`: its manifest (`npm view`, through the user's npm configuration and
/// cache). `Some` files a library (no `bin`) as `no_entry_point`, or a package npm cannot resolve as `install_failed`;
/// `None` goes on to install (also when the look-up itself failed for another reason: install will say more).
async fn select_npm(
    spec: &str,
    dir: &Path,
    options: &Options,
    stages: &mut Vec<StageTime>,
    t: Instant,
) -> Option<Diagnosis> {
    let args: Vec<String> = [
        "view",
        spec,
        "name",
        "version",
        "bin",
        "directories",
        "--json",
        "--prefer-offline",
        "--loglevel=error",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let limit = options
        .limits
        .install
        .min(std::time::Duration::from_secs(60));
    let out = run_tool("npm", &args, dir, &[], limit).await.ok()?;
    if out.status != Some(0) {
        let (code, line) = npm_error(&out.stderr);
        if matches!(code.as_str(), "E404" | "ETARGET") {
            stages.push(stage("select", t, "failed"));
            return Some(install_failed(line, &code));
        }
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(out.stdout.trim()).ok()?;
    // A range may match several versions: the last is the one npm installs.
    let m = match &v {
        serde_json::Value::Array(a) => a.last()?.clone(),
        other => other.clone(),
    };
    if !library_manifest(&m) {
        return None;
    }
    stages.push(stage("select", t, "library"));
    let mut d = Diagnosis::new(
        Category::NoEntryPoint,
        format!(
            "{}@{} has no `bin` in its manifest: a library, not a program (not installed)",
            m.get("name").and_then(|n| n.as_str()).unwrap_or(spec),
            m.get("version").and_then(|n| n.as_str()).unwrap_or("?")
        ),
        "the package is a library or must be started another way (e.g. `node <file>`); it cannot be launched as `npx <package>`",
    );
    d.library = true;
    Some(d)
}

/// A manifest (as `npm view --json` prints it) that declares no executable: no `bin`, no `directories.bin`.
fn library_manifest(m: &serde_json::Value) -> bool {
    let has_bin = match m.get("bin") {
        Some(serde_json::Value::String(s)) => !s.is_empty(),
        Some(serde_json::Value::Object(o)) => !o.is_empty(),
        _ => false,
    };
    let has_dir = m
        .get("directories")
        .and_then(|d| d.get("bin"))
        .is_some_and(|b| b.is_string());
    m.is_object() && !has_bin && !has_dir
}

fn read_json(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn readme_in(dir: &Path) -> Option<String> {
    let entries = std::fs::read_dir(dir).ok()?;
    for e in entries.flatten() {
        let n = e.file_name().to_string_lossy().to_ascii_lowercase();
        if n.starts_with("readme") {
            let mut s = std::fs::read_to_string(e.path()).ok()?;
            clip(&mut s, 200_000);
            return Some(s);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::failure::no_wheel;
    use crate::install::scripts::scripts_explain;

    #[test]
    fn libraries_and_what_scripts_explain() {
        use serde_json::json;
        assert!(library_manifest(
            &json!({"name": "lib", "version": "1.0.0"})
        ));
        assert!(library_manifest(&json!({"name": "lib", "bin": {}})));
        assert!(!library_manifest(
            &json!({"name": "srv", "bin": "dist/index.js"})
        ));
        assert!(!library_manifest(
            &json!({"name": "srv", "bin": {"srv": "x.js"}})
        ));
        assert!(!library_manifest(
            &json!({"name": "old", "directories": {"bin": "bin"}})
        ));
        assert!(
            !library_manifest(&json!([])),
            "not a manifest: not called a library"
        );
        let explained = |l: &str| scripts_explain(&[l]).is_some();
        assert!(explained(
            "Error: Could not locate the bindings file. Tried:"
        ));
        assert!(explained(
            "Error: Cannot find module '/x/node_modules/better-sqlite3/build/Release/better_sqlite3.node'"
        ));
        assert!(explained(
            "@prisma/client did not initialize yet. Please run \"prisma generate\""
        ));
        assert!(explained(
            "Error: Could not find Chrome (ver. 131.0.6778.204)."
        ));
        assert!(explained("Please run `npm rebuild esbuild`"));
        assert!(!explained("Error: API key required: set FIXTURE_API_KEY"));
        assert!(!explained(
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'zod'"
        ));
        assert!(!explained("Error: Cannot find module './dist/index.js'"));
        assert!(no_wheel(
            "ERROR: Could not find a version that satisfies the requirement x (from versions: none)"
        ));
        assert!(!no_wheel("ERROR: Failed building wheel for x"));
    }
}
