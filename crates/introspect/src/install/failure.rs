//! What a failed install said: the `install_failed` diagnosis (code, evidence, fix hint), npm's error code and most
//! telling line, pip's and uv's error line, a wheels-only install that found no wheel, and the `library` mark.

use crate::category::{Category, Diagnosis};

pub(super) fn install_failed(evidence: String, code: &str) -> Diagnosis {
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
pub(super) fn npm_error(stderr: &str) -> (String, String) {
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

pub(super) fn library(mut d: Diagnosis) -> Diagnosis {
    d.library = true;
    d
}

/// A wheels-only install that failed because no wheel fits (a source distribution may).
pub(super) fn no_wheel(text: &str) -> bool {
    text.contains("No matching distribution")
        || text.contains("Could not find a version")
        || text.contains("No solution found")
        || text.contains("only-binary")
        || text.contains("no-binary")
}

pub(super) fn last_error_line(stderr: &str, stdout: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
