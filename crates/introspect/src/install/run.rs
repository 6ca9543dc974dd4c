//! Running a package manager: no shell, our environment plus the given variables, its own process group, and a time
//! limit after which the group is ended.

use std::path::Path;
use std::process::Stdio;

use tokio::io::AsyncReadExt;

pub(super) struct Output {
    pub(super) status: Option<i32>,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

/// Runs a package manager with a time limit, killing its process group when the limit passes.
pub(super) async fn run_tool(
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
