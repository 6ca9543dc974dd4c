//! Build stamp for `agent-discover --version`: the commit and the target, set as `AGENT_DISCOVER_BUILD` for
//! src/main.rs.
//!
//! The commit is `AGENT_DISCOVER_COMMIT` when set (scripts/dist.sh sets it), else `git rev-parse` of the checkout,
//! else the `sha1` of `.cargo_vcs_info.json` (a crate packaged by cargo), else `unknown` (a tarball without git).
//! The script is not re-run when the checkout's HEAD moves (that would recompile the whole root crate after every
//! commit): a development build keeps the commit of its first build; a clean build or the dist script gets it right.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=AGENT_DISCOVER_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let commit = std::env::var("AGENT_DISCOVER_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git_commit(&dir))
        .or_else(|| vcs_info_commit(&dir))
        .unwrap_or_else(|| "unknown".to_owned());
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown target".to_owned());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=AGENT_DISCOVER_BUILD={version} (commit {commit}, {target})");
}

fn git_commit(dir: &str) -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()?;
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !commit.is_empty()).then_some(commit)
}

/// `"sha1": "..."` in the `.cargo_vcs_info.json` cargo writes into a packaged crate.
fn vcs_info_commit(dir: &str) -> Option<String> {
    let text =
        std::fs::read_to_string(std::path::Path::new(dir).join(".cargo_vcs_info.json")).ok()?;
    let rest = &text[text.find("\"sha1\"")? + 6..];
    let start = rest.find('"')? + 1;
    let sha: String = rest[start..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    (sha.len() >= 12).then(|| sha[..12].to_owned())
}
