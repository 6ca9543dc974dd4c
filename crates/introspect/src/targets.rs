//! What to introspect: npm and PyPI package specs, local commands, lines of a list file, entries of the official
//! registry (with their server.json variables and arguments), and the most downloaded MCP servers of npm and PyPI.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use ad_core::error::{Error, Result};
use ad_marketplace::{ArgumentKind, MarketEntry, Marketplace};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    #[default]
    Npm,
    Pypi,
    /// A command already on this machine (no install stage).
    Command,
}

impl Ecosystem {
    pub fn as_str(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
            Ecosystem::Command => "command",
        }
    }

    pub fn parse(s: &str) -> Option<Ecosystem> {
        match s {
            "npm" => Some(Ecosystem::Npm),
            "pypi" => Some(Ecosystem::Pypi),
            "command" => Some(Ecosystem::Command),
            _ => None,
        }
    }
}

/// A variable server.json declares.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredVar {
    pub name: String,
    pub required: bool,
    pub secret: bool,
    #[serde(default)]
    pub format: Option<String>,
}

/// One package or command to introspect.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub ecosystem: Ecosystem,
    /// npm or PyPI name (npm: or a local folder), or the program of a command.
    pub package: String,
    pub version: Option<String>,
    /// Arguments always passed (a command's, or fixed ones from server.json).
    pub args: Vec<String>,
    /// Fixed, non-secret values from server.json.
    pub env: BTreeMap<String, String>,
    /// Variables server.json declares (filled with placeholders in the second pass).
    pub declared_env: Vec<DeclaredVar>,
    /// Positional arguments server.json declares without a value (labels).
    pub declared_args: Vec<String>,
    pub registry_name: Option<String>,
}

impl Target {
    /// `npm:<name>`, `pypi:<name>` (normalised) or `command:<program> <args>`.
    pub fn key(&self) -> String {
        match self.ecosystem {
            Ecosystem::Npm => format!("npm:{}", self.package),
            Ecosystem::Pypi => format!("pypi:{}", normalize_pypi(&self.package)),
            Ecosystem::Command => {
                let mut s = format!("command:{}", self.package);
                for a in &self.args {
                    s.push(' ');
                    s.push_str(a);
                }
                s
            }
        }
    }

    /// `NAME[@VERSION]` (scoped names keep their leading `@`), or a local folder (`./dir`, `/dir`, `file:dir`).
    pub fn npm(spec: &str) -> Result<Target> {
        let spec = spec.trim();
        let local = spec.starts_with('/') || spec.starts_with("./") || spec.starts_with("file:");
        let (name, version) = if local {
            (spec.to_owned(), None)
        } else {
            let (body, scoped) = match spec.strip_prefix('@') {
                Some(rest) => (rest, true),
                None => (spec, false),
            };
            let (n, v) = match body.rsplit_once('@') {
                Some((n, v)) if !v.is_empty() => (n, Some(v.to_owned())),
                _ => (body, None),
            };
            (
                if scoped {
                    format!("@{n}")
                } else {
                    n.to_owned()
                },
                v,
            )
        };
        if !local && !valid_npm_name(&name) {
            return Err(Error::invalid(
                "npm",
                format!(
                    "`{spec}` is not an npm package name (NAME or @scope/NAME, optionally @VERSION)"
                ),
            ));
        }
        if let Some(v) = &version
            && !v
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-+^~<>=*| ".contains(c))
        {
            return Err(Error::invalid(
                "npm",
                format!("`{v}` is not a version or range"),
            ));
        }
        Ok(Target {
            ecosystem: Ecosystem::Npm,
            package: name,
            version,
            ..Target::default()
        })
    }

    /// `NAME[==VERSION]`.
    pub fn pypi(spec: &str) -> Result<Target> {
        let spec = spec.trim();
        let (name, version) = match spec.split_once("==") {
            Some((n, v)) => (n.trim(), Some(v.trim().to_owned())),
            None => (spec, None),
        };
        if !ad_marketplace::valid_pypi_name(name) {
            return Err(Error::invalid(
                "pypi",
                format!("`{spec}` is not a PyPI project name (NAME, optionally ==VERSION)"),
            ));
        }
        if let Some(v) = &version
            && (v.is_empty()
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-+!".contains(c)))
        {
            return Err(Error::invalid("pypi", format!("`{v}` is not a version")));
        }
        Ok(Target {
            ecosystem: Ecosystem::Pypi,
            package: name.to_owned(),
            version,
            ..Target::default()
        })
    }

    /// `PROGRAM [ARGS...]`, split on whitespace (never run through a shell).
    pub fn command(line: &str) -> Result<Target> {
        let mut words = line.split_whitespace().map(str::to_owned);
        let program = words
            .next()
            .ok_or_else(|| Error::invalid("command", "empty; give a program and its arguments"))?;
        Ok(Target {
            ecosystem: Ecosystem::Command,
            package: program,
            args: words.collect(),
            ..Target::default()
        })
    }

    /// One line of a list file: `npm:SPEC`, `pypi:SPEC`, `command:LINE`, or a bare npm spec. `None` for blank lines
    /// and `#` comments.
    pub fn from_line(line: &str) -> Option<Result<Target>> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        Some(match line.split_once(':') {
            Some(("npm", rest)) => Target::npm(rest),
            Some(("pypi", rest)) => Target::pypi(rest),
            Some(("command", rest)) => Target::command(rest),
            _ => Target::npm(line),
        })
    }

    /// The target for a registry entry: its npm package, else its PyPI package, with the server.json variables,
    /// fixed values and arguments. `None` when it has neither (remote-only, OCI, ...).
    pub fn from_entry(entry: &MarketEntry) -> Option<Target> {
        let pkg = entry
            .packages
            .iter()
            .find(|p| p.registry_type == "npm" && p.transport.kind == "stdio")
            .or_else(|| {
                entry
                    .packages
                    .iter()
                    .find(|p| p.registry_type == "pypi" && p.transport.kind == "stdio")
            })?;
        let mut t = Target {
            ecosystem: if pkg.registry_type == "npm" {
                Ecosystem::Npm
            } else {
                Ecosystem::Pypi
            },
            package: pkg.identifier.clone(),
            version: pkg
                .version
                .clone()
                .filter(|v| !v.is_empty() && v != "latest"),
            registry_name: (entry.source == ad_marketplace::MarketSource::Registry)
                .then(|| entry.name.clone()),
            ..Target::default()
        };
        for v in &pkg.environment_variables {
            match &v.input.value {
                Some(fixed) if !v.input.is_secret && !fixed.contains('{') => {
                    t.env.insert(v.name.clone(), fixed.clone());
                }
                _ => t.declared_env.push(DeclaredVar {
                    name: v.name.clone(),
                    required: v.input.is_required,
                    secret: v.input.is_secret,
                    format: v.input.format.clone(),
                }),
            }
        }
        for a in &pkg.package_arguments {
            match (a.kind, &a.input.value, &a.name) {
                (ArgumentKind::Named, Some(v), Some(flag)) if !v.contains('{') => {
                    t.args.push(flag.clone());
                    t.args.push(v.clone());
                }
                (ArgumentKind::Named, None, Some(flag))
                    if a.input.format.as_deref() == Some("boolean") && a.input.is_required =>
                {
                    t.args.push(flag.clone());
                }
                (ArgumentKind::Positional, Some(v), _) if !v.contains('{') => {
                    t.args.push(v.clone())
                }
                (ArgumentKind::Positional, _, _) if a.input.is_required => t
                    .declared_args
                    .push(a.value_hint.clone().unwrap_or_else(|| "argument".into())),
                _ => {}
            }
        }
        Some(t)
    }
}

fn valid_npm_name(name: &str) -> bool {
    let body = name.strip_prefix('@');
    let parts: Vec<&str> = name.trim_start_matches('@').split('/').collect();
    let shape_ok = matches!((body.is_some(), parts.len()), (true, 2) | (false, 1));
    shape_ok
        && name.len() <= 214
        && parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with('.')
                && !p.starts_with('_')
                && p.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || b"._~-".contains(&c))
        })
}

/// PyPI's name normalisation (PEP 503).
pub fn normalize_pypi(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Entries of the official registry matching `query` (up to `max`), as targets; entries without an npm or PyPI
/// stdio package are skipped and counted.
pub async fn from_registry(
    market: &Marketplace,
    query: &str,
    max: usize,
) -> Result<(Vec<Target>, usize)> {
    let entries = market
        .collect_registry(query, max)
        .await
        .map_err(|e| Error::Upstream {
            server: "marketplace".into(),
            message: e.to_string(),
        })?;
    let mut skipped = 0;
    let mut out = Vec::new();
    for e in &entries {
        match Target::from_entry(e) {
            Some(t) => out.push(t),
            None => skipped += 1,
        }
    }
    Ok((out, skipped))
}

/// The `n` most downloaded MCP servers of npm (registry search, ranked by the monthly downloads it reports) and/or
/// PyPI (which reports no downloads: the curated list, then its search page, in that order).
pub async fn top(market: &Marketplace, n: usize, npm: bool, pypi: bool) -> Result<Vec<Target>> {
    let upstream = |e: ad_marketplace::MarketError| Error::Upstream {
        server: "marketplace".into(),
        message: e.to_string(),
    };
    let mut out = Vec::new();
    if npm {
        for name in market.top_npm(n).await.map_err(upstream)? {
            out.push(Target {
                ecosystem: Ecosystem::Npm,
                package: name,
                ..Target::default()
            });
        }
    }
    if pypi {
        for name in market.top_pypi(n).await.map_err(upstream)? {
            out.push(Target {
                ecosystem: Ecosystem::Pypi,
                package: name,
                ..Target::default()
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        let t = Target::npm("@scope/pkg@1.2.3").unwrap();
        assert_eq!(
            (t.package.as_str(), t.version.as_deref()),
            ("@scope/pkg", Some("1.2.3"))
        );
        let t = Target::npm("@scope/pkg").unwrap();
        assert_eq!((t.package.as_str(), t.version), ("@scope/pkg", None));
        let t = Target::npm("pkg@latest").unwrap();
        assert_eq!(t.version.as_deref(), Some("latest"));
        assert!(Target::npm("a/b").is_err());
        assert!(Target::npm("pkg@1;rm").is_err());
        let t = Target::pypi("mcp-server-time==2026.10.19").unwrap();
        assert_eq!(t.key(), "pypi:mcp-server-time");
        assert_eq!(t.version.as_deref(), Some("2026.10.19"));
        assert!(Target::pypi("-x").is_err());
        let t = Target::command("prog --flag a").unwrap();
        assert_eq!(t.key(), "command:prog --flag a");
        assert!(Target::from_line("# comment").is_none());
        assert!(
            matches!(Target::from_line("pypi:Mcp_Server.Time"), Some(Ok(t)) if t.key() == "pypi:mcp-server-time")
        );
        assert!(
            matches!(Target::from_line("left-pad"), Some(Ok(t)) if t.ecosystem == Ecosystem::Npm)
        );
    }
}
