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
        line.starts_with(&format!("agent-discover {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{line}"
    );
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap();
    assert!(
        commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
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
