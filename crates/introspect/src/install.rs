//! The install and pre-flight stages: an npm package into `<cache>/npm/<name>@<version>` (npm, with the user's npm
//! configuration), a PyPI package into its own virtual environment `<cache>/pypi/<name>==<version>` (uv when present,
//! else python3's venv and pip); then the runnable entry point (npm `bin`, a console script) and the engines check.
//!
//! A package already in the cache at the wanted version is not installed again. Package managers get our environment
//! (they need their registry configuration, and npm its cache, shared by the whole batch; `--prefer-offline` reuses
//! what an earlier package of the batch fetched); the server itself never does (see `probe`).
//!
//! Lifecycle scripts are skipped at first (`npm install --ignore-scripts`; a PyPI project from wheels only): most
//! servers need none, and the ones that fail here download browsers or build natively. They are run (`npm rebuild`;
//! source distributions allowed) only when the first try fails for a reason scripts explain: a bin file that a script
//! generates, a start-up crash naming a missing native build or an un-run setup step ([`scripts_explain`]), or no
//! wheel for the project.
//!
//! Before installing an npm package from a registry, its manifest is read (`npm view`): a package with no `bin` is a
//! library that npx cannot start, filed `no_entry_point` (marked `library`) without installing it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use tokio::io::AsyncReadExt;

use super::classify::{Category, Diagnosis};
use super::targets::{Ecosystem, Target, normalize_pypi};
use super::{Installed, Options, StageTime, stage};

/// Runs the install and pre-flight stages. `Err` carries an `install_failed` or `no_entry_point` diagnosis.
pub(crate) async fn install(
    target: &Target,
    options: &Options,
    stages: &mut Vec<StageTime>,
) -> Result<Installed, Diagnosis> {
    match target.ecosystem {
        Ecosystem::Command => Ok(Installed {
            name: target.package.clone(),
            version: None,
            description: None,
            launch: target.package.clone(),
            readme: None,
            flags: Vec::new(),
            scripts_skipped_in: None,
        }),
        Ecosystem::Npm => npm(target, options, stages).await,
        Ecosystem::Pypi => pypi(target, options, stages).await,
    }
}

/// A directory name for a package spec: letters, digits and `._@=-` only.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._@=-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

struct Output {
    status: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs a package manager with a time limit, killing its process group when the limit passes.
async fn run_tool(
    program: &str,
    args: &[String],
    cwd: &Path,
    env: &[(&str, String)],
    limit: std::time::Duration,
) -> Result<Output, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let pgid = child.id().map(|p| p as i32).unwrap_or(0);
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let read = async {
        let mut o = Vec::new();
        let mut e = Vec::new();
        let ro = async {
            if let Some(s) = out.as_mut() {
                let _ = s.read_to_end(&mut o).await;
            }
        };
        let re = async {
            if let Some(s) = err.as_mut() {
                let _ = s.read_to_end(&mut e).await;
            }
        };
        tokio::join!(ro, re);
        let status = child.wait().await.ok().and_then(|s| s.code());
        (status, o, e)
    };
    match tokio::time::timeout(limit, read).await {
        Ok((status, o, e)) => {
            // Scripts a package manager started may linger in its group.
            ad_proxy::spawn::kill_group(pgid);
            Ok(Output {
                status,
                stdout: String::from_utf8_lossy(&o).into_owned(),
                stderr: String::from_utf8_lossy(&e).into_owned(),
            })
        }
        Err(_) => {
            ad_proxy::spawn::kill_group(pgid);
            Err(format!(
                "{program} did not finish within {} s",
                limit.as_secs()
            ))
        }
    }
}

fn install_failed(evidence: String, code: &str) -> Diagnosis {
    let hint = match code {
        "E404" => "the package or version does not exist in the configured npm registry; check the name".to_owned(),
        "ETARGET" => "no version matches the requested one; omit the version or pick a published one".to_owned(),
        "ENOTFOUND" | "ECONNREFUSED" | "ETIMEDOUT" | "EAI_AGAIN" | "ECONNRESET" => {
            "the package registry could not be reached; check npm's registry setting (npm config get registry)".to_owned()
        }
        "install-script" => "an install script of the package or a dependency failed (often a download of a browser or a native build); see the evidence".to_owned(),
        "EBADENGINE" | "ENOTSUP" => "the package does not support this Node version or platform".to_owned(),
        "timeout" => "installing took longer than the install limit; raise --install-timeout or retry".to_owned(),
        "no-matching-distribution" => "no release of this project fits this Python (or the name is wrong); check Requires-Python and the name".to_owned(),
        "build-failed" => "a dependency had to be built from source and failed; it needs a compiler or system libraries".to_owned(),
        _ => format!("the package manager failed ({code}); see the evidence"),
    };
    let mut d = Diagnosis::new(
        Category::InstallFailed,
        format!("{code}: {evidence}"),
        &hint,
    );
    d.code = Some(code.to_owned());
    d
}

/// npm's error code (`npm error code E404`, `npm ERR! code E404`) and the most telling line.
fn npm_error(stderr: &str) -> (String, String) {
    let mut code = None;
    let mut line = None;
    for l in stderr.lines() {
        let t = l.trim();
        let rest = t
            .strip_prefix("npm error ")
            .or_else(|| t.strip_prefix("npm ERR! "));
        let Some(rest) = rest else { continue };
        if let Some(c) = rest.strip_prefix("code ") {
            code.get_or_insert(c.trim().to_owned());
        } else if line.is_none()
            && !rest.is_empty()
            && !rest.starts_with("A complete log")
            && !rest.starts_with("errno")
            && !rest.starts_with("syscall")
            && !rest.starts_with("path ")
            && !rest.starts_with("command failed")
            && !rest.starts_with("path:")
        {
            line = Some(t.to_owned());
        }
    }
    // A failed install script: npm says `code 1` and names the script's command; its own last message is more telling.
    if code
        .as_deref()
        .is_some_and(|c| c.chars().all(|ch| ch.is_ascii_digit()))
    {
        let command = stderr
            .lines()
            .map(str::trim)
            .filter_map(|l| {
                l.strip_prefix("npm error command ")
                    .or_else(|| l.strip_prefix("npm ERR! command "))
            })
            .find(|c| !c.starts_with("failed"));
        let last = stderr
            .lines()
            .map(str::trim)
            .filter_map(|l| {
                l.strip_prefix("npm error ")
                    .or_else(|| l.strip_prefix("npm ERR! "))
            })
            .rfind(|l| {
                !l.is_empty()
                    && !l.starts_with("A complete log")
                    && !l.starts_with("command")
                    && !l.starts_with("code ")
                    && !l.starts_with("path ")
            });
        return (
            "install-script".into(),
            format!(
                "install script failed: {}{}",
                command.unwrap_or("(unknown command)"),
                last.map(|l| format!(" — {l}")).unwrap_or_default()
            ),
        );
    }
    let line = line
        .or_else(|| {
            stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_owned())
        })
        .unwrap_or_default();
    (code.unwrap_or_else(|| "npm-failed".into()), line)
}

async fn npm(
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
    if let Some(range) = manifest
        .get("engines")
        .and_then(|e| e.get("node"))
        .and_then(|n| n.as_str())
        && let Some(have) = node_version().await
        && !super::classify::version_satisfies(&have, range)
    {
        flags.push(format!("engines: node {range} wanted, {have} here"));
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
    })
}

fn library(mut d: Diagnosis) -> Diagnosis {
    d.library = true;
    d
}

/// Marks an npm install folder whose lifecycle scripts have run.
const SCRIPTS_RAN: &str = ".agent-discover-scripts-ran";

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

/// Runs the lifecycle scripts skipped at install (`npm rebuild` in the install folder), because `why`. `Err` is an
/// `install_failed` diagnosis (code `install-script`) with the script's message.
pub(crate) async fn run_scripts(
    dir: &Path,
    options: &Options,
    stages: &mut Vec<StageTime>,
    why: &str,
) -> Result<(), Diagnosis> {
    let t = Instant::now();
    let args: Vec<String> = [
        "rebuild",
        "--no-audit",
        "--no-fund",
        "--loglevel=error",
        "--prefix",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .chain([dir.display().to_string()])
    .collect();
    match run_tool("npm", &args, dir, &[], options.limits.install).await {
        Err(msg) => {
            let timeout = msg.contains("did not finish");
            stages.push(stage(
                "install scripts",
                t,
                if timeout { "timeout" } else { "failed" },
            ));
            Err(install_failed(
                format!("{msg} (run because {why})"),
                if timeout { "timeout" } else { "npm-missing" },
            ))
        }
        Ok(out) if out.status != Some(0) => {
            stages.push(stage("install scripts", t, "failed"));
            let (code, line) = npm_error(&out.stderr);
            let code = if code == "npm-failed" {
                "install-script".to_owned()
            } else {
                code
            };
            Err(install_failed(format!("{line} (run because {why})"), &code))
        }
        Ok(_) => {
            let _ = std::fs::write(dir.join(SCRIPTS_RAN), "");
            stages.push(stage("install scripts", t, "ok"));
            Ok(())
        }
    }
}

/// Whether a start-up failure is one that skipped lifecycle scripts explain: a native addon that was not built, a
/// setup step (`prisma generate`, a browser download) that a postinstall script does, or a message that says to
/// run the scripts.
pub(crate) fn scripts_explain(lines: &[&str]) -> Option<String> {
    const SIGNS: &[&str] = &[
        "could not locate the bindings file",
        "build/release/",
        "npm rebuild",
        "npm run postinstall",
        "postinstall",
        "install script",
        "prebuild-install",
        "node-gyp",
        "prisma generate",
        "did not initialize yet",
        "could not find chrome",
        "could not find expected browser",
        "browser was not found",
        "executable doesn't exist",
        "playwright install",
        "puppeteer browsers install",
        "sharp module",
        "\"sharp\" module",
        "was compiled against a different node.js version",
    ];
    lines.iter().find_map(|l| {
        let lower = l.to_ascii_lowercase();
        let native_module = lower.contains("cannot find module") && lower.contains(".node'");
        (native_module || SIGNS.iter().any(|s| lower.contains(s))).then(|| {
            let mut e = l.trim().to_owned();
            crate::clip(&mut e, 200);
            e
        })
    })
}

/// The entry point to start among several: the one named like the package, else the only one, else one with `mcp`
/// in its name, else the first.
fn choose(entries: &[(String, String)], package: &str) -> Option<(String, String)> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    entries
        .iter()
        .find(|(n, _)| norm(n) == norm(package))
        .or_else(|| (entries.len() == 1).then(|| &entries[0]))
        .or_else(|| entries.iter().find(|(n, _)| n.contains("mcp")))
        .or_else(|| entries.first())
        .cloned()
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
            crate::clip(&mut s, 200_000);
            return Some(s);
        }
    }
    None
}

async fn node_version() -> Option<String> {
    static V: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();
    V.get_or_init(|| async {
        let out = tokio::process::Command::new("node")
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .await
            .ok()?;
        Some(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .trim_start_matches('v')
                .to_owned(),
        )
    })
    .await
    .clone()
}

/// The uv to install PyPI packages with: `AGENT_DISCOVER_UV` (a path or a program name; empty or `0` turns uv off),
/// else `uv` when it is on PATH; `None` falls back to `python3 -m venv` and pip.
pub(crate) fn uv_program() -> Option<String> {
    match std::env::var("AGENT_DISCOVER_UV") {
        Ok(v) if v.is_empty() || v == "0" => None,
        Ok(v) if Path::new(&v).is_file() || have(&v) => Some(v),
        _ => have("uv").then(|| "uv".to_owned()),
    }
}

/// `uv pip install` into the environment of `python`. Bytecode is compiled at install (pip does so by default, uv
/// does not): otherwise a large server compiles every module on its first start, inside the `initialize` limit.
fn uv_install_args(python: &Path) -> Vec<String> {
    vec![
        "pip".into(),
        "install".into(),
        "--quiet".into(),
        "--compile-bytecode".into(),
        "--python".into(),
        python.display().to_string(),
    ]
}

/// uv does not read pip's settings: the pip variables the user set (index, extra index, local wheels, CA bundle) are
/// handed to uv under its own names, unless uv's are set.
pub(crate) fn uv_env_from_pip(get: impl Fn(&str) -> Option<String>) -> Vec<(&'static str, String)> {
    const MAP: &[(&str, &str)] = &[
        ("PIP_INDEX_URL", "UV_DEFAULT_INDEX"),
        ("PIP_EXTRA_INDEX_URL", "UV_INDEX"),
        ("PIP_FIND_LINKS", "UV_FIND_LINKS"),
        ("PIP_CERT", "SSL_CERT_FILE"),
    ];
    let mut out = Vec::new();
    for (pip, uv) in MAP {
        let already =
            get(uv).is_some() || (*uv == "UV_DEFAULT_INDEX" && get("UV_INDEX_URL").is_some());
        if let Some(v) = get(pip).filter(|v| !v.is_empty())
            && !already
        {
            out.push((*uv, v));
        }
    }
    out
}

fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

async fn pypi(
    target: &Target,
    options: &Options,
    stages: &mut Vec<StageTime>,
) -> Result<Installed, Diagnosis> {
    let norm = normalize_pypi(&target.package);
    let spec = match &target.version {
        Some(v) => format!("{}=={v}", target.package),
        None => target.package.clone(),
    };
    let dir = options
        .cache_dir
        .join("pypi")
        .join(slug(&match &target.version {
            Some(v) => format!("{norm}=={v}"),
            None => norm.clone(),
        }));
    let t = Instant::now();
    let mut flags_sdist = false;
    let cached = target.version.is_some()
        && find_dist_info(&dir, &norm)
            .is_some_and(|d| dist_version(&d).as_deref() == target.version.as_deref());
    if cached {
        stages.push(stage("install", t, "cached"));
    } else {
        let uv_exe = uv_program();
        let uv = uv_exe.is_some();
        let uv_exe = uv_exe.unwrap_or_default();
        let uv_env = if uv {
            uv_env_from_pip(|k| std::env::var(k).ok())
        } else {
            Vec::new()
        };
        let python = dir.join("bin").join("python");
        let limit = options.limits.install;
        let deadline = Instant::now() + limit;
        let left = || deadline.saturating_duration_since(Instant::now());
        let parent = options.cache_dir.join("pypi");
        let _ = std::fs::create_dir_all(&parent);
        if !python.exists() {
            let made = if uv {
                run_tool(
                    &uv_exe,
                    &["venv".into(), "--quiet".into(), dir.display().to_string()],
                    &parent,
                    &uv_env,
                    left(),
                )
                .await
            } else {
                run_tool(
                    "python3",
                    &["-m".into(), "venv".into(), dir.display().to_string()],
                    &parent,
                    &[],
                    left(),
                )
                .await
            };
            match made {
                Ok(o) if o.status == Some(0) => {}
                Ok(o) => {
                    stages.push(stage("install", t, "failed"));
                    return Err(install_failed(
                        last_error_line(&o.stderr, &o.stdout),
                        "venv-failed",
                    ));
                }
                Err(msg) => {
                    stages.push(stage("install", t, "failed"));
                    return Err(install_failed(
                        msg,
                        if uv { "uv-missing" } else { "python3-missing" },
                    ));
                }
            }
        }
        // Wheels only first (no build scripts); source distributions only when no wheel fits.
        let pip = |wheels_only: bool| {
            let mut args: Vec<String> = if uv {
                uv_install_args(&python)
            } else {
                vec![
                    "install".into(),
                    "--quiet".into(),
                    "--disable-pip-version-check".into(),
                ]
            };
            if wheels_only {
                args.extend(["--only-binary".into(), ":all:".into()]);
            }
            args.push(spec.clone());
            let program = if uv {
                uv_exe.clone()
            } else {
                dir.join("bin").join("pip").display().to_string()
            };
            (program, args)
        };
        let (program, args) = pip(true);
        let mut out = run_tool(&program, &args, &parent, &uv_env, left()).await;
        if let Ok(o) = &out
            && o.status != Some(0)
            && no_wheel(&format!("{}\n{}", o.stderr, o.stdout))
        {
            stages.push(stage("install", t, "failed"));
            flags_sdist = true;
            let (program, args) = pip(false);
            out = run_tool(&program, &args, &parent, &uv_env, left()).await;
        }
        match out {
            Err(msg) => {
                let timeout = msg.contains("did not finish");
                stages.push(stage(
                    "install",
                    t,
                    if timeout { "timeout" } else { "failed" },
                ));
                return Err(install_failed(
                    msg,
                    if timeout { "timeout" } else { "pip-missing" },
                ));
            }
            Ok(o) if o.status != Some(0) => {
                stages.push(stage("install", t, "failed"));
                let text = format!("{}\n{}", o.stderr, o.stdout);
                let code = if text.contains("No matching distribution")
                    || text.contains("No solution found")
                    || text.contains("Could not find a version")
                {
                    "no-matching-distribution"
                } else if text.contains("Failed to build")
                    || text.contains("failed-wheel-build")
                    || text.contains("Failed building wheel")
                {
                    "build-failed"
                } else if text.contains("NewConnectionError")
                    || text.contains("Failed to establish")
                    || text.contains("dns error")
                {
                    "ENOTFOUND"
                } else {
                    "pip-failed"
                };
                return Err(install_failed(last_error_line(&o.stderr, &o.stdout), code));
            }
            Ok(_) => stages.push(stage("install", t, "ok")),
        }
    }

    let t = Instant::now();
    let Some(info) = find_dist_info(&dir, &norm) else {
        stages.push(stage("preflight", t, "failed"));
        return Err(Diagnosis::new(
            Category::NoEntryPoint,
            format!("no installed metadata for {norm} under {}", dir.display()),
            "the install did not leave the project's metadata; the project name may differ from the distribution",
        ));
    };
    let version = dist_version(&info);
    let scripts = console_scripts(&info);
    let Some((script, _)) = choose(&scripts, &norm) else {
        stages.push(stage("preflight", t, "failed"));
        return Err(library(Diagnosis::new(
            Category::NoEntryPoint,
            format!(
                "{norm} declares no console script (entry_points.txt has no [console_scripts])"
            ),
            "the project is a library or is started as `python -m <module>`; it cannot be launched as `uvx <project>`",
        )));
    };
    let launch = dir.join("bin").join(&script);
    if !launch.exists() {
        stages.push(stage("preflight", t, "failed"));
        return Err(Diagnosis::new(
            Category::NoEntryPoint,
            format!(
                "console script `{script}` was not installed at {}",
                launch.display()
            ),
            "the environment is incomplete; remove the cache folder and retry",
        ));
    }
    let mut flags = Vec::new();
    if flags_sdist {
        flags.push(
            "no wheel fits: installed from a source distribution (build scripts run)".to_owned(),
        );
    }
    if scripts.len() > 1 {
        flags.push(format!(
            "several console scripts ({}); started `{script}`",
            scripts
                .iter()
                .map(|s| s.0.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let readme = std::fs::read_to_string(info.join("METADATA"))
        .ok()
        .map(|m| {
            // The long description follows the headers' blank line.
            let body = m.split_once("\n\n").map(|(_, b)| b.to_owned()).unwrap_or(m);
            let mut body = body;
            crate::clip(&mut body, 200_000);
            body
        });
    stages.push(stage("preflight", t, "ok"));
    let description = std::fs::read_to_string(info.join("METADATA"))
        .ok()
        .and_then(|m| {
            m.lines()
                .take_while(|l| !l.is_empty())
                .find_map(|l| l.strip_prefix("Summary:"))
                .map(|s| s.trim().to_owned())
        });
    Ok(Installed {
        name: target.package.clone(),
        version,
        description,
        launch: launch.display().to_string(),
        readme,
        flags,
        scripts_skipped_in: None,
    })
}

/// A wheels-only install that failed because no wheel fits (a source distribution may).
fn no_wheel(text: &str) -> bool {
    text.contains("No matching distribution")
        || text.contains("Could not find a version")
        || text.contains("No solution found")
        || text.contains("only-binary")
        || text.contains("no-binary")
}

fn last_error_line(stderr: &str, stdout: &str) -> String {
    let pick = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| l.starts_with("ERROR:") || l.starts_with("error:") || l.starts_with("×"))
            .map(str::to_owned)
    };
    pick(stderr)
        .or_else(|| pick(stdout))
        .or_else(|| {
            stderr
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "the package manager failed without a message".into())
}

/// `<venv>/lib/python*/site-packages/<name>-<version>.dist-info` of the normalised project name.
fn find_dist_info(venv: &Path, norm: &str) -> Option<PathBuf> {
    let lib = venv.join("lib");
    for py in std::fs::read_dir(&lib).ok()?.flatten() {
        let site = py.path().join("site-packages");
        let Ok(entries) = std::fs::read_dir(&site) else {
            continue;
        };
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = file.strip_suffix(".dist-info") else {
                continue;
            };
            let dist = stem.rsplit_once('-').map(|(n, _)| n).unwrap_or(stem);
            if normalize_pypi(dist) == norm {
                return Some(e.path());
            }
        }
    }
    None
}

fn dist_version(info: &Path) -> Option<String> {
    let meta = std::fs::read_to_string(info.join("METADATA")).ok()?;
    meta.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_owned())
}

/// `[console_scripts]` of entry_points.txt: (name, target).
fn console_scripts(info: &Path) -> Vec<(String, String)> {
    let Ok(text) = std::fs::read_to_string(info.join("entry_points.txt")) else {
        return Vec::new();
    };
    let mut in_section = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('[') {
            in_section = l == "[console_scripts]";
            continue;
        }
        if in_section && let Some((k, v)) = l.split_once('=') {
            out.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uv_compiles_bytecode_at_install() {
        let args = uv_install_args(Path::new("/venv/bin/python"));
        assert_eq!(&args[..2], ["pip", "install"]);
        assert!(args.contains(&"--compile-bytecode".to_owned()));
        let at = args.iter().position(|a| a == "--python").unwrap();
        assert_eq!(args[at + 1], "/venv/bin/python");
    }

    #[test]
    fn pip_settings_are_handed_to_uv() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let got = uv_env_from_pip(env(&[
            ("PIP_INDEX_URL", "http://127.0.0.1:1/simple"),
            ("PIP_FIND_LINKS", "/opt/wheels"),
            ("PIP_CERT", "/etc/ca.pem"),
        ]));
        assert_eq!(
            got,
            [
                ("UV_DEFAULT_INDEX", "http://127.0.0.1:1/simple".to_owned()),
                ("UV_FIND_LINKS", "/opt/wheels".to_owned()),
                ("SSL_CERT_FILE", "/etc/ca.pem".to_owned()),
            ]
        );
        // uv's own settings win.
        let got = uv_env_from_pip(env(&[
            ("PIP_INDEX_URL", "http://127.0.0.1:1/simple"),
            ("UV_INDEX_URL", "http://127.0.0.1:2/simple"),
            ("PIP_CERT", ""),
        ]));
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn npm_errors() {
        let (code, line) = npm_error(
            "npm error code E404\nnpm error 404 Not Found - GET http://x/nope - Not found\nnpm error A complete log of this run can be found in: /x",
        );
        assert_eq!(code, "E404");
        assert!(line.contains("404 Not Found"), "{line}");
        let (code, line) = npm_error(
            "npm error code 1\nnpm error path /x/node_modules/puppeteer\nnpm error command failed\nnpm error command sh -c node install.mjs\nnpm error ERROR: Failed to set up chrome: download failed\nnpm error A complete log of this run can be found in: /x",
        );
        assert_eq!(code, "install-script");
        assert_eq!(
            line,
            "install script failed: sh -c node install.mjs — ERROR: Failed to set up chrome: download failed"
        );
        let (code, _) = npm_error("npm ERR! code ETARGET\nnpm ERR! notarget No matching version");
        assert_eq!(code, "ETARGET");
    }

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

    #[test]
    fn entry_point_choice() {
        let e = |v: &[&str]| {
            v.iter()
                .map(|s| ((*s).to_owned(), String::new()))
                .collect::<Vec<_>>()
        };
        assert_eq!(choose(&e(&["a", "mcp-x"]), "mcp_x").unwrap().0, "mcp-x");
        assert_eq!(choose(&e(&["only"]), "pkg").unwrap().0, "only");
        assert_eq!(choose(&e(&["cli", "x-mcp"]), "pkg").unwrap().0, "x-mcp");
        assert!(choose(&[], "pkg").is_none());
        assert_eq!(slug("@scope/pkg@1.0"), "@scope_pkg@1.0");
    }
}
