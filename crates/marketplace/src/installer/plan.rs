//! Planning a launch: the install method chosen from an entry's packages and remotes, then the command line
//! (`npx`, `uvx`, `docker run`) or the remote URL and headers, the warm-up command, and the suggested local name.

use std::collections::BTreeMap;

use super::resolve::Resolver;
use super::types::{InstallPlan, LaunchConfig, Transport};
use super::validate::{validate_identifier, validate_version};
use crate::entry::{InstallMethod, MarketEntry, Package, Remote};
use crate::error::InstallError;

/// Plans an install with the preferred method (npm, pypi, oci, remote).
pub fn plan_install(
    entry: &MarketEntry,
    inputs: &BTreeMap<String, String>,
) -> Result<InstallPlan, InstallError> {
    plan_install_with(entry, inputs, None)
}

enum Choice<'a> {
    Package(InstallMethod, &'a Package),
    Remote(&'a Remote),
}

/// Plans an install with `method`, or the preferred one when `None`.
pub fn plan_install_with(
    entry: &MarketEntry,
    inputs: &BTreeMap<String, String>,
    method: Option<InstallMethod>,
) -> Result<InstallPlan, InstallError> {
    let mut choices: Vec<Choice<'_>> = Vec::new();
    for (t, m) in [
        ("npm", InstallMethod::Npx),
        ("pypi", InstallMethod::Uvx),
        ("oci", InstallMethod::Docker),
    ] {
        if let Some(p) = entry.packages.iter().find(|p| p.registry_type == t) {
            choices.push(Choice::Package(m, p));
        }
    }
    if let Some(r) = entry
        .remotes
        .iter()
        .find(|r| r.kind == "streamable-http" || r.kind == "sse")
    {
        choices.push(Choice::Remote(r));
    }
    let available = || {
        let mut v: Vec<String> = entry
            .packages
            .iter()
            .map(|p| format!("{} package", p.registry_type))
            .collect();
        v.extend(entry.remotes.iter().map(|r| format!("{} remote", r.kind)));
        if v.is_empty() {
            "nothing".to_owned()
        } else {
            v.join(", ")
        }
    };
    let chosen = match method {
        None => choices
            .into_iter()
            .next()
            .ok_or_else(|| InstallError::NoInstallMethod {
                name: entry.name.clone(),
                available: available(),
            })?,
        Some(want) => choices
            .into_iter()
            .find(|c| match c {
                Choice::Package(m, _) => *m == want,
                Choice::Remote(_) => want == InstallMethod::Remote,
            })
            .ok_or_else(|| InstallError::MethodUnavailable {
                name: entry.name.clone(),
                method: want.to_string(),
                available: available(),
            })?,
    };
    let mut r = Resolver::new(inputs);
    let (method, launch, package_name, package_version, warm) = match chosen {
        Choice::Package(m, p) => {
            let (launch, warm) = plan_package(m, p, &mut r)?;
            (
                m,
                launch,
                Some(p.identifier.clone()),
                p.version.clone(),
                warm,
            )
        }
        Choice::Remote(rem) => (
            InstallMethod::Remote,
            plan_remote(rem, &mut r)?,
            None,
            None,
            None,
        ),
    };
    Ok(InstallPlan {
        name: suggest_name(&entry.name),
        description: entry.description.clone(),
        launch,
        secrets: r.secrets,
        missing: r.missing,
        method,
        package_name,
        package_version,
        repository: entry.repository.clone(),
        warm,
    })
}

/// The last path segment of a server or package name, made to fit `^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`.
pub fn suggest_name(server_name: &str) -> String {
    let last = server_name.rsplit('/').next().unwrap_or(server_name);
    let mapped: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed: String = mapped
        .trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .chars()
        .take(64)
        .collect();
    if trimmed.is_empty() {
        "server".to_owned()
    } else {
        trimmed
    }
}

type Warm = Option<(String, Vec<String>)>;

fn plan_package(
    method: InstallMethod,
    p: &Package,
    r: &mut Resolver<'_>,
) -> Result<(LaunchConfig, Warm), InstallError> {
    validate_identifier(&p.registry_type, &p.identifier)?;
    if let Some(v) = &p.version {
        validate_version(&p.identifier, v)?;
    }
    let env = r.environment(&p.environment_variables)?;
    let mut ctx: BTreeMap<String, String> = env.clone();
    let runtime_args = r.arguments(&p.runtime_arguments, &mut ctx)?;
    let package_args = r.arguments(&p.package_arguments, &mut ctx)?;

    let (command, args, warm) = match method {
        InstallMethod::Npx => {
            let spec = match &p.version {
                Some(v) => format!("{}@{v}", p.identifier),
                None => p.identifier.clone(),
            };
            let mut args = vec!["-y".to_owned()];
            args.extend(runtime_args);
            args.push(spec.clone());
            args.extend(package_args);
            let warm = (
                "npm".to_owned(),
                vec!["cache".to_owned(), "add".to_owned(), spec],
            );
            ("npx", args, warm)
        }
        InstallMethod::Uvx => {
            let spec = match &p.version {
                Some(v) => format!("{}=={v}", p.identifier),
                None => p.identifier.clone(),
            };
            let mut args = runtime_args;
            args.push(spec.clone());
            args.extend(package_args);
            let warm = (
                "uv".to_owned(),
                vec!["tool".to_owned(), "install".to_owned(), spec],
            );
            ("uvx", args, warm)
        }
        InstallMethod::Docker | InstallMethod::Remote => {
            let image = oci_image(&p.identifier, p.version.as_deref());
            let mut args = vec!["run".to_owned(), "-i".to_owned(), "--rm".to_owned()];
            let mut names: Vec<&String> = env.keys().collect();
            names.extend(r.secret_env.iter());
            names.sort();
            names.dedup();
            for n in names {
                args.push("-e".to_owned());
                args.push(n.clone());
            }
            args.extend(runtime_args);
            args.push(image.clone());
            args.extend(package_args);
            let warm = ("docker".to_owned(), vec!["pull".to_owned(), image]);
            ("docker", args, warm)
        }
    };

    let (transport, url, headers) = match p.transport.kind.as_str() {
        "streamable-http" | "sse" => {
            let transport = if p.transport.kind == "sse" {
                Transport::Sse
            } else {
                Transport::StreamableHttp
            };
            let url = match &p.transport.url {
                Some(u) => Some(r.url(u, &BTreeMap::new(), &ctx)?),
                None => None,
            };
            (transport, url, r.headers(&p.transport.headers, &ctx)?)
        }
        _ => (Transport::Stdio, None, BTreeMap::new()),
    };
    Ok((
        LaunchConfig {
            command: Some(command.to_owned()),
            args,
            env,
            transport,
            url,
            headers,
        },
        Some(warm),
    ))
}

fn plan_remote(rem: &Remote, r: &mut Resolver<'_>) -> Result<LaunchConfig, InstallError> {
    let transport = if rem.kind == "sse" {
        Transport::Sse
    } else {
        Transport::StreamableHttp
    };
    let ctx = BTreeMap::new();
    let url = r.url(&rem.url, &rem.variables, &ctx)?;
    let headers = r.headers(&rem.headers, &ctx)?;
    Ok(LaunchConfig {
        command: None,
        args: Vec::new(),
        env: BTreeMap::new(),
        transport,
        url: Some(url),
        headers,
    })
}

/// `identifier` with `:version` unless the last path segment already has a tag or the reference has a digest.
fn oci_image(identifier: &str, version: Option<&str>) -> String {
    let last = identifier.rsplit('/').next().unwrap_or(identifier);
    let tagged = identifier.contains('@') || last.contains(':');
    match version {
        Some(v) if !tagged => format!("{identifier}:{v}"),
        _ => identifier.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_images() {
        assert_eq!(suggest_name("io.github.foo/bar-server"), "bar-server");
        assert_eq!(suggest_name("@scope/x y"), "x-y");
        assert_eq!(suggest_name("///"), "server");
        assert_eq!(suggest_name(&"a".repeat(100)).len(), 64);
        assert_eq!(oci_image("ghcr.io/o/i", Some("1.0")), "ghcr.io/o/i:1.0");
        assert_eq!(
            oci_image("localhost:5000/i", Some("1.0")),
            "localhost:5000/i:1.0"
        );
        assert_eq!(oci_image("o/i:2", Some("1.0")), "o/i:2");
        assert_eq!(oci_image("o/i@sha256:ab", Some("1.0")), "o/i@sha256:ab");
    }
}
