//! Running the package managers: a plan's warm-up command (download ahead of the first start) and the version probe
//! of the tools plans use. Nothing goes through a shell.

use std::process::Stdio;
use std::time::Duration;

use serde::Serialize;

use crate::error::InstallError;

/// How long `warm_cache` lets a download run.
pub const WARM_TIMEOUT: Duration = Duration::from_secs(600);
/// How long each `<tool> --version` may take in `probe_prereqs`.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Versions of the tools install plans use; `None` when the tool is missing or did not answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Prereqs {
    pub npx: Option<String>,
    pub uvx: Option<String>,
    pub uv: Option<String>,
    pub docker: Option<String>,
}

/// Runs a plan's `warm` command (download ahead of the first start) with [`WARM_TIMEOUT`].
pub async fn warm_cache(cmd: &(String, Vec<String>)) -> Result<(), InstallError> {
    warm_cache_with_timeout(cmd, WARM_TIMEOUT).await
}

/// [`warm_cache`] with an explicit time limit. Only `npm cache add`, `uv tool install` and `docker pull` are run;
/// no shell; stderr is captured for the error; the process is killed when the limit passes.
pub async fn warm_cache_with_timeout(
    cmd: &(String, Vec<String>),
    timeout: Duration,
) -> Result<(), InstallError> {
    let (program, args) = cmd;
    let allowed = match program.as_str() {
        "npm" => args.len() == 3 && args[0] == "cache" && args[1] == "add",
        "uv" => args.len() == 3 && args[0] == "tool" && args[1] == "install",
        "docker" => args.len() == 2 && args[0] == "pull",
        _ => false,
    };
    let Some(target) = args.last().filter(|_| allowed) else {
        return Err(InstallError::UnsupportedCommand {
            program: format!("{program} {}", args.join(" ")),
        });
    };
    if target.starts_with('-') || target.contains(['\0', ' ', '\n']) {
        return Err(InstallError::UnsupportedCommand {
            program: format!("{program} {}", args.join(" ")),
        });
    }
    let shown = format!("{program} {}", args.join(" "));
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| InstallError::Spawn {
            program: program.clone(),
            message: e.to_string(),
        })?;
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return Err(InstallError::Spawn {
                program: program.clone(),
                message: e.to_string(),
            });
        }
        Err(_) => {
            return Err(InstallError::CommandTimeout {
                command: shown,
                secs: timeout.as_secs(),
            });
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = {
        let t = stderr.trim();
        let skip = t.chars().count().saturating_sub(2000);
        t.chars().skip(skip).collect()
    };
    Err(InstallError::CommandFailed {
        command: shown,
        status: out.status.to_string(),
        stderr: tail,
    })
}

/// `npx`, `uvx`, `uv` and `docker` `--version`, in parallel, each within [`PROBE_TIMEOUT`].
pub async fn probe_prereqs() -> Prereqs {
    let (npx, uvx, uv, docker) = tokio::join!(
        version_of("npx"),
        version_of("uvx"),
        version_of("uv"),
        version_of("docker")
    );
    Prereqs {
        npx,
        uvx,
        uv,
        docker,
    }
}

async fn version_of(program: &str) -> Option<String> {
    let run = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PROBE_TIMEOUT, run).await.ok()?.ok()?;
    if !out.status.success() {
        return None;
    }
    let first = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    };
    first(&out.stdout).or_else(|| first(&out.stderr))
}
