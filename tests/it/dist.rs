//! What a shipped binary says about itself: `--version` names the version, the commit and the target it was built
//! for (see build.rs). The artefacts of scripts/dist.sh are installed and driven by scripts/dist-test.sh.

use std::process::Command;

use crate::harness::BIN;

#[test]
fn version_names_version_commit_and_target() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text.trim();
    assert!(
        line.starts_with(&format!(
            "agent-discover {} (commit ",
            env!("CARGO_PKG_VERSION")
        )),
        "{line}"
    );
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "commit `{commit}` in {line}"
    );
    // The target triple: this test is built for the same one.
    let arch = std::env::consts::ARCH;
    let os = std::env::consts::OS;
    assert!(
        line.ends_with(')') && line.contains(&format!(", {arch}-")) && line.contains(os),
        "no {arch} {os} target in {line}"
    );
}

/// `health` (the container's and the chart's probe) asks a running `serve` over loopback with the data dir's token,
/// and fails when the server refuses or is not there.
#[tokio::test]
async fn health_asks_serve_with_the_data_dirs_token() {
    let dir = tempfile::tempdir().unwrap();
    let served = crate::http::serve(dir.path(), &["--require-token"]).await;
    let port = served.url.rsplit(':').next().unwrap().to_owned();
    let health = |extra: &[&str]| {
        let mut args = vec!["health", "--port", port.as_str()];
        args.extend_from_slice(extra);
        let mut cmd = crate::harness::command(dir.path(), &args);
        cmd.env_remove("AGENT_DISCOVER_TOKEN");
        async move { cmd.output().await.unwrap() }
    };
    let ok = health(&[]).await;
    assert!(ok.status.success(), "{ok:?}");
    assert!(
        String::from_utf8_lossy(&ok.stdout).contains("\"version\""),
        "{ok:?}"
    );
    let refused = health(&["--token", "wrong"]).await;
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("401"),
        "{refused:?}"
    );
    served.stop().await;
    let gone = health(&[]).await;
    assert_eq!(gone.status.code(), Some(2), "{gone:?}");
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("no answer"),
        "{gone:?}"
    );
}
