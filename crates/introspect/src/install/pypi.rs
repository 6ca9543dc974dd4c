//! PyPI: a project into its own virtual environment `<cache>/pypi/<name>==<version>` (uv when present, else python3's
//! venv and pip; wheels only first, a source distribution when no wheel fits), then the pre-flight (the console
//! script to start, the version, the summary and long description).

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::failure::{install_failed, last_error_line, library, no_wheel};
use super::naming::{choose, slug};
use super::run::run_tool;
use crate::category::{Category, Diagnosis};
use crate::options::Options;
use crate::targets::{Target, normalize_pypi};
use crate::types::{Installed, StageTime, clip, stage};

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

/// `as_of`: install again from scratch with uv's `--exclude-newer` at this cut-off (see `dated`).
pub(super) async fn pypi(
    target: &Target,
    options: &Options,
    stages: &mut Vec<StageTime>,
    as_of: Option<&str>,
) -> Result<Installed, Diagnosis> {
    let norm = normalize_pypi(&target.package);
    let spec = match &target.version {
        Some(v) => format!("{}=={v}", target.package),
        None => target.package.clone(),
    };
    let dir = env_dir(options, target, &norm);
    let t = Instant::now();
    let mut flags_sdist = false;
    // A dated install has its own environment beside the first (which stays usable when it fails).
    let dir = match as_of {
        Some(cut) => dir.with_file_name(format!(
            "{}-as-of-{}",
            dir.file_name().and_then(|n| n.to_str()).unwrap_or("pypi"),
            cut.get(..10).unwrap_or(cut)
        )),
        None => dir,
    };
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
            if let Some(cut) = as_of.filter(|_| uv) {
                args.extend(["--exclude-newer".into(), cut.to_owned()]);
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
    if let Some(cut) = as_of {
        flags.push(format!(
            "dependencies as of the release: installed again with uv --exclude-newer {cut}"
        ));
    }
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
            clip(&mut body, 200_000);
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
        engines: None,
    })
}

/// The environment of `target` (normalised name `norm`) in the cache.
fn env_dir(options: &Options, target: &Target, norm: &str) -> PathBuf {
    options
        .cache_dir
        .join("pypi")
        .join(slug(&match &target.version {
            Some(v) => format!("{norm}=={v}"),
            None => norm.to_owned(),
        }))
}

/// Installs `target` (at `version`, the one installed) again with its dependencies as of its release day (see
/// `dated`): `None` without uv or when the release day is not found; the new install (or why it failed) otherwise.
pub(crate) async fn reinstall_dated(
    target: &Target,
    version: &str,
    options: &Options,
    stages: &mut Vec<StageTime>,
) -> Option<Result<Installed, Diagnosis>> {
    let uv = uv_program()?;
    let norm = normalize_pypi(&target.package);
    let dir = env_dir(options, target, &norm);
    let env = uv_env_from_pip(|k| std::env::var(k).ok());
    let t = Instant::now();
    let cut = super::dated::release_cutoff(
        &uv,
        &dir.join("bin").join("python"),
        &format!("{}=={version}", target.package),
        &options.cache_dir,
        &env,
    )
    .await;
    stages.push(stage(
        "release day",
        t,
        if cut.is_some() { "ok" } else { "failed" },
    ));
    let cut = cut?;
    Some(pypi(target, options, stages, Some(&cut)).await)
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
}
