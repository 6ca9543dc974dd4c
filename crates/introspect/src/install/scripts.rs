//! Lifecycle scripts, skipped at install: whether a start-up failure is one they explain, and running them
//! (`npm rebuild`) in the install folder, which is then marked so they do not run twice.

use std::path::Path;
use std::time::Instant;

use super::failure::{install_failed, npm_error};
use super::run::run_tool;
use crate::category::Diagnosis;
use crate::options::Options;
use crate::types::{StageTime, clip, stage};

/// Marks an npm install folder whose lifecycle scripts have run.
pub(super) const SCRIPTS_RAN: &str = ".agent-discover-scripts-ran";

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
            clip(&mut e, 200);
            e
        })
    })
}
