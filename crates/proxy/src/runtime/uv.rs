//! uv for `uvx`/`uv` servers on a machine without it: PyPI's `uv` package is a wheel holding the `uv` and `uvx`
//! binaries, fetched at a pinned version into `<data>/runtimes/uv-<version>/bin` once (under a lock file, into a
//! temporary folder renamed into place) and reused by every server. Neither uv nor pip is needed: the wheel is found
//! in the user's find-links folders (`UV_FIND_LINKS`, `PIP_FIND_LINKS`) or on the package index the user configured
//! (`UV_DEFAULT_INDEX`, `UV_INDEX_URL`, `PIP_INDEX_URL`, pip's configuration files, else the one pip itself uses),
//! downloaded, checked against the SHA-256 the index lists, and unpacked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use ad_embed::fetch::pypi::{Link, extract_files, parse_simple_html, parse_simple_json};

/// The uv version fetched (its `uvx` accepts what `install` plans for PyPI servers).
pub const UV_VERSION: &str = "0.13.9";
/// How long fetching uv may take.
const FETCH_LIMIT: Duration = Duration::from_secs(300);

/// `<root>/uv-<version>/bin` holding `uv` and `uvx` that run: fetched now when missing.
pub async fn ensure(root: &Path) -> Result<PathBuf, String> {
    static LOCAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let prefix = root.join(format!("uv-{UV_VERSION}"));
    let bin = prefix.join("bin");
    if runs(&bin).await {
        return Ok(bin);
    }
    let _in_process = LOCAL.lock().await;
    std::fs::create_dir_all(root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    let lock_path = root.join(format!("uv-{UV_VERSION}.lock"));
    let lock_file = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    let lock_file = tokio::task::spawn_blocking(move || super::lock_exclusive(lock_file))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    // Another process may have fetched it while we waited.
    if runs(&bin).await {
        return Ok(bin);
    }
    let partial = root.join(format!("uv-{UV_VERSION}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(partial.join("bin"))
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let fetched = tokio::time::timeout(FETCH_LIMIT, fetch_into(&partial)).await;
    let result = match fetched {
        Err(_) => Err(format!(
            "fetching uv {UV_VERSION} did not finish within {} s",
            FETCH_LIMIT.as_secs()
        )),
        Ok(r) => r,
    };
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::rename(&partial, &prefix)
        .map_err(|e| format!("cannot move uv into {}: {e}", prefix.display()))?;
    drop(lock_file);
    if runs(&bin).await {
        Ok(bin)
    } else {
        Err(format!(
            "uv {UV_VERSION} fetched into {} does not run",
            prefix.display()
        ))
    }
}

async fn runs(bin: &Path) -> bool {
    let (uv, uvx) = (bin.join("uv"), bin.join("uvx"));
    uvx.is_file()
        && tokio::process::Command::new(&uv)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .status()
            .await
            .is_ok_and(|s| s.success())
}

/// The wheel's platform tag for this machine (the part of its file name after `py3-none-`), as uv publishes them.
fn platform_tags() -> Result<&'static [&'static str], String> {
    let arch = std::env::consts::ARCH;
    let musl = cfg!(target_env = "musl");
    Ok(match (std::env::consts::OS, arch, musl) {
        ("linux", "x86_64", false) => &["manylinux_2_17_x86_64"],
        ("linux", "aarch64", false) => &["manylinux_2_17_aarch64", "manylinux_2_28_aarch64"],
        ("linux", "x86_64", true) => &["musllinux_1_1_x86_64"],
        ("linux", "aarch64", true) => &["musllinux_1_1_aarch64"],
        ("macos", "x86_64", _) => &["macosx_10_12_x86_64"],
        ("macos", "aarch64", _) => &["macosx_11_0_arm64"],
        (os, arch, _) => {
            return Err(format!(
                "agent-discover does not know uv's wheel for {os}/{arch}"
            ));
        }
    })
}

/// Whether `filename` is uv's wheel of the pinned version for this machine.
fn is_our_wheel(filename: &str, tags: &[&str]) -> bool {
    let Some(rest) = filename
        .strip_prefix(&format!("uv-{UV_VERSION}-py3-none-"))
        .and_then(|r| r.strip_suffix(".whl"))
    else {
        return false;
    };
    rest.split('.').any(|t| tags.contains(&t))
}

fn truthy(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        !v.is_empty() && v != "0" && v != "false" && v != "no" && v != "off"
    })
}

/// Finds, downloads and unpacks the wheel into `partial/bin`.
async fn fetch_into(partial: &Path) -> Result<(), String> {
    let tags = platform_tags()?;
    let wheel = partial.join("uv.whl");
    let mut tried = Vec::new();
    let mut found = false;
    // 1. The user's find-links folders (and pages).
    for var in ["UV_FIND_LINKS", "PIP_FIND_LINKS"] {
        let Ok(value) = std::env::var(var) else {
            continue;
        };
        for place in value
            .split([' ', ',', '\n'])
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let dir = Path::new(place.strip_prefix("file://").unwrap_or(place));
            if dir.is_dir() {
                let hit = std::fs::read_dir(dir)
                    .map(|rd| {
                        rd.flatten().map(|e| e.path()).find(|p| {
                            p.file_name()
                                .is_some_and(|n| is_our_wheel(&n.to_string_lossy(), tags))
                        })
                    })
                    .ok()
                    .flatten();
                match hit {
                    Some(p) => {
                        std::fs::copy(&p, &wheel)
                            .map_err(|e| format!("cannot copy {}: {e}", p.display()))?;
                        found = true;
                        break;
                    }
                    None => tried.push(format!("{var} folder {}", dir.display())),
                }
            } else if place.starts_with("http://") || place.starts_with("https://") {
                match from_page(place, tags, &wheel).await {
                    Ok(()) => {
                        found = true;
                        break;
                    }
                    Err(e) => tried.push(format!("{var} page {place}: {e}")),
                }
            }
        }
        if found {
            break;
        }
    }
    // 2. The package index the user configured (or pip's own), unless told to use none.
    if !found && !truthy("UV_NO_INDEX") && !truthy("PIP_NO_INDEX") && !truthy("UV_OFFLINE") {
        let index = match ["UV_DEFAULT_INDEX", "UV_INDEX_URL"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
        {
            Some(u) => Ok(u),
            None => tokio::task::spawn_blocking(ad_embed::fetch::pypi::pip_index_url)
                .await
                .map_err(|e| e.to_string())
                .and_then(|r| r),
        };
        match index {
            Ok(index) => {
                let page = format!("{}/uv/", index.trim().trim_end_matches('/'));
                match from_page(&page, tags, &wheel).await {
                    Ok(()) => found = true,
                    Err(e) => tried.push(format!("the package index {page}: {e}")),
                }
            }
            Err(e) => tried.push(e),
        }
    }
    if !found {
        return Err(format!(
            "no uv {UV_VERSION} wheel for this machine ({})",
            if tried.is_empty() {
                "no package index may be used: PIP_NO_INDEX/UV_NO_INDEX/UV_OFFLINE is set and no find-links folder is".into()
            } else {
                tried.join("; ")
            }
        ));
    }
    let bin = partial.join("bin");
    let (uv, uvx) = (bin.join("uv"), bin.join("uvx"));
    let (w, a, b) = (wheel.clone(), uv.clone(), uvx.clone());
    tokio::task::spawn_blocking(move || {
        extract_files(
            &w,
            &[
                (&format!("uv-{UV_VERSION}.data/scripts/uv"), &a),
                (&format!("uv-{UV_VERSION}.data/scripts/uvx"), &b),
            ],
        )
    })
    .await
    .map_err(|e| e.to_string())??;
    #[cfg(unix)]
    for p in [&uv, &uvx] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", p.display()))?;
    }
    let _ = std::fs::remove_file(&wheel);
    Ok(())
}

/// Downloads the wheel a simple index page (PEP 691 JSON or PEP 503 HTML) lists into `out`, checking the SHA-256 the
/// page gives.
async fn from_page(page: &str, tags: &[&str], out: &Path) -> Result<(), String> {
    let client = reqwest::Client::new();
    let resp = client
        .get(page)
        .header(
            "accept",
            "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
        )
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .map_err(|e| format!("cannot reach it: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status()));
    }
    let base = resp.url().clone();
    let json = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let body = resp.text().await.map_err(|e| e.to_string())?;
    let links: Vec<Link> = if json {
        parse_simple_json(&body)?
    } else {
        parse_simple_html(&body)
    };
    let link = links
        .into_iter()
        .find(|l| is_our_wheel(&l.filename, tags))
        .ok_or_else(|| format!("it lists no uv {UV_VERSION} wheel for this machine"))?;
    let url = base
        .join(&link.url)
        .map_err(|e| format!("bad link {:?}: {e}", link.url))?;
    let mut resp = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| format!("cannot download {url}: {e}"))?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {} for {url}", resp.status()));
    }
    let mut file = tokio::fs::File::create(out)
        .await
        .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut hash = Sha256::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("downloading {url}: {e}"))?
    {
        hash.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    file.flush().await.map_err(|e| e.to_string())?;
    let got: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    if let Some(want) = &link.sha256
        && !want.eq_ignore_ascii_case(&got)
    {
        let _ = std::fs::remove_file(out);
        return Err(format!(
            "{} has SHA-256 {got}, the index lists {want}; refused",
            link.filename
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wheel_names() {
        let tags = &["manylinux_2_17_x86_64"];
        assert!(is_our_wheel(
            &format!("uv-{UV_VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"),
            tags
        ));
        assert!(!is_our_wheel(
            &format!("uv-{UV_VERSION}-py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.whl"),
            tags
        ));
        assert!(!is_our_wheel(
            "uv-0.1.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            tags
        ));
        assert!(!is_our_wheel(&format!("uv-{UV_VERSION}.tar.gz"), tags));
    }
}
