//! The installer: turns a marketplace entry (server.json packages/remotes) into a launch config, and warms or probes the tools it needs.
//!
//! Rules (the server.json schema, read where it is precise, decided here where it is not):
//! - Method order: npm (`npx`), pypi (`uvx`), oci (`docker`), then remotes, unless the caller asks for one.
//! - `npx -y <runtimeArguments> <id>@<version> <packageArguments>`; `uvx <runtimeArguments> <id>==<version>
//!   <packageArguments>`; `docker run -i --rm -e VAR… <runtimeArguments> <image> <packageArguments>` (the image gets
//!   `:<version>` unless it already has a tag or digest; `-e VAR` passes values through the environment so secrets are
//!   never on the command line).
//! - Arguments: positional -> the value; named -> `--flag value` as two words. The flag is taken as written when it
//!   has dashes (current schema) and gets `--` when it has none (2025-07 entries). The joined form `--flag=value` is
//!   used when the schema entry writes the name with a trailing `=`, or when the value starts with `-` (so it cannot
//!   be read as another flag). A named argument of format `boolean` is a bare flag: present for `true`, absent for
//!   `false`. `isRepeated` arguments get one value (a single input cannot carry several).
//! - Values: a fixed `value` is used as is (the schema says users do not change it); otherwise the input named after
//!   the item (env/header name, flag with or without dashes, positional `valueHint`), then `default`. `{var}`
//!   placeholders are filled from the inputs, then the item's `variables` (value, then default); an undeclared
//!   placeholder stays as written, except in a URL, where it is reported missing.
//! - Secrets: secret environment variables go to `plan.secrets` only (the caller's secret store puts them in the
//!   child's environment). A secret header goes to `plan.secrets` under its name and the header becomes
//!   `${Name}`; a secret URL/header variable becomes `${var}` with its value in `plan.secrets` (the proxy fills
//!   `${…}` in URLs and headers from secrets at connect time). A non-secret value built from a secret variable is
//!   itself treated as secret.
//! - Required values that are missing (no input, no default) are listed in `plan.missing`, never guessed.
//! - Identifiers match `^[@a-zA-Z0-9._/-]+$` (OCI also `:`), never start with `-`, never contain `..`; versions
//!   match `^[A-Za-z0-9][A-Za-z0-9._+-]*$`. Nothing is run through a shell.

use std::collections::BTreeMap;
use std::fmt;
use std::process::Stdio;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::entry::{
    Argument, ArgumentKind, Input, InstallMethod, KeyValueInput, MarketEntry, Package, Remote,
};
use super::error::InstallError;

/// How long `warm_cache` lets a download run.
pub const WARM_TIMEOUT: Duration = Duration::from_secs(600);
/// How long each `<tool> --version` may take in `probe_prereqs`.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    Stdio,
    StreamableHttp,
    Sse,
}

/// What to run (stdio) or where to connect (HTTP). A package served over HTTP has both a command and a URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchConfig {
    pub command: Option<String>,
    pub args: Vec<String>,
    /// Non-secret environment only; secrets are in [`InstallPlan::secrets`].
    pub env: BTreeMap<String, String>,
    pub transport: Transport,
    pub url: Option<String>,
    /// Non-secret headers, and `${NAME}` references to secrets.
    pub headers: BTreeMap<String, String>,
}

/// Which kind of value a [`MissingInput`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InputKind {
    Env,
    Header,
    Variable,
    Argument,
}

/// A required value nobody supplied: the caller asks for it (by `name` in the inputs map) instead of registering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingInput {
    /// The key to use in the inputs map.
    pub name: String,
    pub description: String,
    pub is_secret: bool,
    pub kind: InputKind,
}

/// A launch config plus what the caller must store or ask for. `secrets` are masked in `Debug` and `Serialize`.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct InstallPlan {
    /// Suggested local server name: the last path segment of the server name, made to fit `^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`.
    pub name: String,
    pub description: String,
    pub launch: LaunchConfig,
    #[serde(serialize_with = "masked")]
    pub secrets: BTreeMap<String, String>,
    pub missing: Vec<MissingInput>,
    pub method: InstallMethod,
    pub package_name: Option<String>,
    pub package_version: Option<String>,
    pub repository: Option<String>,
    /// A command that downloads the package ahead of the first start (`npm cache add`, `uv tool install`, `docker pull`).
    pub warm: Option<(String, Vec<String>)>,
}

impl fmt::Debug for InstallPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secrets: Vec<&String> = self.secrets.keys().collect();
        f.debug_struct("InstallPlan")
            .field("name", &self.name)
            .field("description", &self.description)
            .field("launch", &self.launch)
            .field("secrets (keys)", &secrets)
            .field("missing", &self.missing)
            .field("method", &self.method)
            .field("package_name", &self.package_name)
            .field("package_version", &self.package_version)
            .field("repository", &self.repository)
            .field("warm", &self.warm)
            .finish()
    }
}

fn masked<S: Serializer>(m: &BTreeMap<String, String>, s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(m.keys().map(|k| (k, "********")))
}

/// Versions of the tools install plans use; `None` when the tool is missing or did not answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Prereqs {
    pub npx: Option<String>,
    pub uvx: Option<String>,
    pub uv: Option<String>,
    pub docker: Option<String>,
}

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

// ---------------------------------------------------------------------------------------------------------------
// Packages and remotes.

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

// ---------------------------------------------------------------------------------------------------------------
// Validation.

fn validate_identifier(registry_type: &str, id: &str) -> Result<(), InstallError> {
    let bad = |reason: &str| InstallError::InvalidIdentifier {
        registry_type: registry_type.to_owned(),
        identifier: id.to_owned(),
        reason: reason.to_owned(),
    };
    if id.is_empty() || id.len() > 255 {
        return Err(bad("must be 1-255 characters"));
    }
    let oci = registry_type == "oci";
    let allowed = |c: char| {
        c.is_ascii_alphanumeric() || matches!(c, '@' | '.' | '_' | '/' | '-') || (oci && c == ':')
    };
    if let Some(c) = id.chars().find(|c| !allowed(*c)) {
        return Err(bad(&format!(
            "character {c:?} is not allowed (only letters, digits and @ . _ / -{})",
            if oci { " :" } else { "" }
        )));
    }
    if id.starts_with('-') {
        return Err(bad(
            "must not start with '-' (it would be read as an option)",
        ));
    }
    if id.contains("..") {
        return Err(bad("must not contain '..'"));
    }
    if id.starts_with('/') || id.ends_with('/') || id.contains("//") {
        return Err(bad("has an empty path segment"));
    }
    match registry_type {
        "npm" => {
            let body = id.strip_prefix('@').unwrap_or(id);
            let slashes = body.matches('/').count();
            let scoped = id.starts_with('@');
            if body.contains('@') || (scoped && slashes != 1) || (!scoped && slashes != 0) {
                return Err(bad("is not an npm package name (`name` or `@scope/name`)"));
            }
            if body
                .split('/')
                .any(|seg| seg.starts_with('.') || seg.starts_with('_'))
            {
                return Err(bad("npm names do not start with '.' or '_'"));
            }
        }
        "pypi"
            if id.contains(['@', '/'])
                || !id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) =>
        {
            return Err(bad("is not a PyPI project name"));
        }
        "oci" if id.starts_with(['@', ':']) => {
            return Err(bad("is not an image reference"));
        }
        _ => {}
    }
    Ok(())
}

fn validate_version(id: &str, v: &str) -> Result<(), InstallError> {
    let bad = |reason: &str| InstallError::InvalidVersion {
        identifier: id.to_owned(),
        version: v.to_owned(),
        reason: reason.to_owned(),
    };
    if v.is_empty() || v.len() > 128 {
        return Err(bad("must be 1-128 characters"));
    }
    if !v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Err(bad("must start with a letter or digit"));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')))
    {
        return Err(bad(&format!("character {c:?} is not allowed")));
    }
    Ok(())
}

fn check_env_name(name: &str) -> Result<(), InstallError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(InstallError::InvalidValue {
            what: "environment variable name",
            name: name.to_owned(),
            reason: "must be letters, digits and '_', not starting with a digit".into(),
        });
    }
    if name.starts_with("LD_") || name.starts_with("DYLD_") {
        return Err(InstallError::InvalidValue {
            what: "environment variable name",
            name: name.to_owned(),
            reason: "dynamic-loader variables are never set from a marketplace entry".into(),
        });
    }
    Ok(())
}

fn check_header_name(name: &str) -> Result<(), InstallError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(InstallError::InvalidValue {
            what: "header name",
            name: name.to_owned(),
            reason: "must be an HTTP token (letters, digits, - and a few symbols)".into(),
        })
    }
}

fn check_value(what: &'static str, name: &str, v: &str, header: bool) -> Result<(), InstallError> {
    if v.contains('\0') || (header && v.contains(['\r', '\n'])) {
        return Err(InstallError::InvalidValue {
            what,
            name: name.to_owned(),
            reason: if header {
                "contains a NUL or line break".into()
            } else {
                "contains a NUL byte".into()
            },
        });
    }
    Ok(())
}

fn check_choice(name: &str, input: &Input, v: &str) -> Result<(), InstallError> {
    if !input.choices.is_empty() && !input.choices.iter().any(|c| c == v) {
        return Err(InstallError::InvalidValue {
            what: "input",
            name: name.to_owned(),
            reason: format!("must be one of {}", input.choices.join(", ")),
        });
    }
    Ok(())
}

/// A header name as a secret-store key (letters, digits, `_ . -`, starting with a letter or `_`).
fn secret_key_for(name: &str) -> String {
    let mut k: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    {
        k.insert(0, '_');
    }
    k
}

// ---------------------------------------------------------------------------------------------------------------
// Filling values.

/// One env var, header or argument as the resolver sees it.
struct Item<'x> {
    /// Input names to look for, in order.
    keys: &'x [&'x str],
    /// The name reported when missing.
    display: &'x str,
    input: &'x Input,
    vars: &'x BTreeMap<String, Input>,
    kind: InputKind,
}

struct Resolver<'a> {
    inputs: &'a BTreeMap<String, String>,
    missing: Vec<MissingInput>,
    secrets: BTreeMap<String, String>,
    /// Names of secret environment variables (set or missing), for `docker run -e`.
    secret_env: Vec<String>,
}

/// How a secret `{variable}` is put into a template.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SecretVars {
    /// As `${var}`, its value going to the secrets (URLs, headers: the proxy fills them in).
    Reference,
    /// Inline; the caller treats the whole result as secret (environment values, arguments).
    Inline,
}

impl<'a> Resolver<'a> {
    fn new(inputs: &'a BTreeMap<String, String>) -> Self {
        Resolver {
            inputs,
            missing: Vec::new(),
            secrets: BTreeMap::new(),
            secret_env: Vec::new(),
        }
    }

    fn report(&mut self, name: &str, input: &Input, kind: InputKind) {
        if !self
            .missing
            .iter()
            .any(|m| m.name == name && m.kind == kind)
        {
            self.missing.push(MissingInput {
                name: name.to_owned(),
                description: input.description.clone().unwrap_or_default(),
                is_secret: input.is_secret,
                kind,
            });
        }
    }

    fn input(&self, keys: &[&str]) -> Option<&'a String> {
        let inputs = self.inputs;
        keys.iter().find_map(|k| inputs.get(*k))
    }

    /// Fills `{var}` placeholders. Returns the text, whether a secret went in inline, and whether anything required
    /// was missing (reported). `strict`: an undeclared, unsupplied placeholder is missing (URLs) instead of kept.
    fn fill(
        &mut self,
        template: &str,
        vars: &BTreeMap<String, Input>,
        ctx: &BTreeMap<String, String>,
        strict: bool,
        mode: SecretVars,
    ) -> Result<(String, bool, bool), InstallError> {
        let mut out = String::with_capacity(template.len());
        let mut used_secret = false;
        let mut incomplete = false;
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            let Some(close) = after.find('}') else {
                out.push_str(&rest[open..]);
                rest = "";
                break;
            };
            let var = &after[..close];
            let is_placeholder = !var.is_empty()
                && var
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && var
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            rest = &after[close + 1..];
            if !is_placeholder {
                out.push('{');
                out.push_str(var);
                out.push('}');
                continue;
            }
            let declared = vars.get(var);
            let value = match self.input(&[var]) {
                Some(v) => {
                    if let Some(d) = declared {
                        check_choice(var, d, v)?;
                    }
                    Some(v.clone())
                }
                None => declared
                    .and_then(|d| d.value.clone().or_else(|| d.default.clone()))
                    .or_else(|| ctx.get(var).cloned()),
            };
            let secret = declared.is_some_and(|d| d.is_secret);
            match value {
                Some(v) if secret && mode == SecretVars::Reference => {
                    self.secrets.insert(secret_key_for(var), v);
                    out.push_str(&format!("${{{}}}", secret_key_for(var)));
                }
                Some(v) => {
                    used_secret |= secret;
                    out.push_str(&v);
                }
                None => match declared {
                    Some(d) if d.is_required || strict => {
                        self.report(var, d, InputKind::Variable);
                        incomplete = true;
                        out.push_str(&format!("{{{var}}}"));
                    }
                    Some(_) => {}
                    None if strict => {
                        self.report(var, &Input::default(), InputKind::Variable);
                        incomplete = true;
                        out.push_str(&format!("{{{var}}}"));
                    }
                    None => out.push_str(&format!("{{{var}}}")),
                },
            }
        }
        out.push_str(rest);
        Ok((out, used_secret, incomplete))
    }

    /// The value of an env var, header or argument: fixed value, else input, else default; `None` if absent
    /// (reported when required). The bool says a secret variable went into it.
    fn value(
        &mut self,
        item: Item<'_>,
        ctx: &BTreeMap<String, String>,
        mode: SecretVars,
    ) -> Result<Option<(String, bool)>, InstallError> {
        let Item {
            keys,
            display,
            input,
            vars,
            kind,
        } = item;
        if let Some(fixed) = &input.value {
            let (v, secret, incomplete) = self.fill(fixed, vars, ctx, false, mode)?;
            return Ok((!incomplete).then_some((v, secret)));
        }
        if let Some(v) = self.input(keys) {
            check_choice(display, input, v)?;
            return Ok(Some((v.clone(), false)));
        }
        if let Some(d) = &input.default {
            let (v, secret, incomplete) = self.fill(d, vars, ctx, false, mode)?;
            return Ok((!incomplete).then_some((v, secret)));
        }
        if input.is_required {
            self.report(display, input, kind);
        }
        Ok(None)
    }

    /// Non-secret environment; secret values go to `self.secrets`.
    fn environment(
        &mut self,
        vars: &[KeyValueInput],
    ) -> Result<BTreeMap<String, String>, InstallError> {
        let mut env = BTreeMap::new();
        let none = BTreeMap::new();
        for kv in vars {
            check_env_name(&kv.name)?;
            if kv.input.is_secret {
                self.secret_env.push(kv.name.clone());
            }
            let item = Item {
                keys: &[kv.name.as_str()],
                display: &kv.name,
                input: &kv.input,
                vars: &kv.variables,
                kind: InputKind::Env,
            };
            let got = self.value(item, &none, SecretVars::Inline)?;
            if let Some((v, secret_inside)) = got {
                check_value("environment value", &kv.name, &v, false)?;
                if kv.input.is_secret || secret_inside {
                    self.secrets.insert(kv.name.clone(), v);
                    if !self.secret_env.contains(&kv.name) {
                        self.secret_env.push(kv.name.clone());
                    }
                } else {
                    env.insert(kv.name.clone(), v);
                }
            }
        }
        Ok(env)
    }

    /// Non-secret headers and `${Name}` references to secret ones.
    fn headers(
        &mut self,
        list: &[KeyValueInput],
        ctx: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, String>, InstallError> {
        let mut out = BTreeMap::new();
        for h in list {
            check_header_name(&h.name)?;
            let mode = if h.input.is_secret {
                SecretVars::Inline
            } else {
                SecretVars::Reference
            };
            let item = Item {
                keys: &[h.name.as_str()],
                display: &h.name,
                input: &h.input,
                vars: &h.variables,
                kind: InputKind::Header,
            };
            let got = self.value(item, ctx, mode)?;
            let secret_key = secret_key_for(&h.name);
            match got {
                Some((v, secret_inside)) => {
                    check_value("header value", &h.name, &v, true)?;
                    if h.input.is_secret || secret_inside {
                        self.secrets.insert(secret_key.clone(), v);
                        out.insert(h.name.clone(), format!("${{{secret_key}}}"));
                    } else {
                        out.insert(h.name.clone(), v);
                    }
                }
                // A required secret header not given yet: keep the reference so setting the secret later is enough.
                None if h.input.is_secret && h.input.is_required => {
                    out.insert(h.name.clone(), format!("${{{secret_key}}}"));
                }
                None => {}
            }
        }
        Ok(out)
    }

    /// A URL template filled strictly and checked to be http(s) once complete.
    fn url(
        &mut self,
        template: &str,
        vars: &BTreeMap<String, Input>,
        ctx: &BTreeMap<String, String>,
    ) -> Result<String, InstallError> {
        let (url, _, incomplete) = self.fill(template, vars, ctx, true, SecretVars::Reference)?;
        if incomplete {
            // Reported in `missing`; the caller asks for the variables before using the URL.
            return Ok(url);
        }
        check_value("URL", template, &url, true)?;
        // `${secret}` references are filled in by the proxy; check the rest of the URL.
        let probe = url.replace("${", "x").replace('}', "x");
        let parsed = reqwest::Url::parse(&probe).map_err(|e| InstallError::InvalidUrl {
            url: url.clone(),
            reason: e.to_string(),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(InstallError::InvalidUrl {
                url,
                reason: "must be an http:// or https:// URL with a host".into(),
            });
        }
        Ok(url)
    }

    /// Command-line words for a list of arguments. Values are added to `ctx` under their hint or flag name
    /// (a package transport URL may refer to them).
    fn arguments(
        &mut self,
        list: &[Argument],
        ctx: &mut BTreeMap<String, String>,
    ) -> Result<Vec<String>, InstallError> {
        let mut out = Vec::new();
        for (i, a) in list.iter().enumerate() {
            match a.kind {
                ArgumentKind::Positional => {
                    let label = a
                        .value_hint
                        .clone()
                        .or_else(|| a.name.clone())
                        .unwrap_or_else(|| format!("argument {}", i + 1));
                    let mut keys: Vec<&str> = Vec::new();
                    if let Some(h) = &a.value_hint {
                        keys.push(h);
                    }
                    if let Some(n) = &a.name {
                        keys.push(n);
                    }
                    let item = Item {
                        keys: &keys,
                        display: &label,
                        input: &a.input,
                        vars: &a.variables,
                        kind: InputKind::Argument,
                    };
                    let got = self.value(item, ctx, SecretVars::Inline)?;
                    if let Some((v, _)) = got {
                        check_value("argument", &label, &v, false)?;
                        ctx.insert(label, v.clone());
                        out.push(v);
                    }
                }
                ArgumentKind::Named => {
                    let Some(raw) = a.name.as_deref().map(str::trim).filter(|n| !n.is_empty())
                    else {
                        tracing::debug!("named argument without a name skipped");
                        continue;
                    };
                    let (written, join) = match raw.strip_suffix('=') {
                        Some(n) => (n, true),
                        None => (raw, false),
                    };
                    let flag = if written.starts_with('-') {
                        written.to_owned()
                    } else {
                        format!("--{written}")
                    };
                    let bare = flag.trim_start_matches('-');
                    let flag_ok = !bare.is_empty()
                        && flag.len() - bare.len() <= 2
                        && bare
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
                    if !flag_ok {
                        return Err(InstallError::InvalidValue {
                            what: "argument flag",
                            name: raw.to_owned(),
                            reason:
                                "must be '-x' or '--name' with letters, digits, '-', '_' or '.'"
                                    .into(),
                        });
                    }
                    let bare = bare.to_owned();
                    let item = Item {
                        keys: &[written, bare.as_str(), flag.as_str()],
                        display: &bare,
                        input: &a.input,
                        vars: &a.variables,
                        kind: InputKind::Argument,
                    };
                    let got = self.value(item, ctx, SecretVars::Inline)?;
                    let Some((v, _)) = got else { continue };
                    check_value("argument", &bare, &v, false)?;
                    if a.input.format.as_deref() == Some("boolean") {
                        if v.eq_ignore_ascii_case("true") {
                            out.push(flag);
                        }
                        continue;
                    }
                    ctx.insert(bare, v.clone());
                    if join || (flag.starts_with("--") && v.starts_with('-')) {
                        out.push(format!("{flag}={v}"));
                    } else {
                        out.push(flag);
                        out.push(v);
                    }
                }
            }
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Running the tools.

/// Runs a plan's `warm` command (download ahead of the first start) with [`WARM_TIMEOUT`].
pub async fn warm_cache(cmd: &(String, Vec<String>)) -> Result<(), InstallError> {
    warm_cache_with_timeout(cmd, WARM_TIMEOUT).await
}

/// [`warm_cache`] with an explicit time limit. Only `npm cache add`, `uv tool install` and `docker pull` are run;
/// no shell; stderr is captured for the error; the process is killed when the limit passes.
pub async fn warm_cache_with_timeout(
    cmd: &(String, Vec<String>),
    timeout: Duration,
) -> Result<(), InstallError> {
    let (program, args) = cmd;
    let allowed = match program.as_str() {
        "npm" => args.len() == 3 && args[0] == "cache" && args[1] == "add",
        "uv" => args.len() == 3 && args[0] == "tool" && args[1] == "install",
        "docker" => args.len() == 2 && args[0] == "pull",
        _ => false,
    };
    let Some(target) = args.last().filter(|_| allowed) else {
        return Err(InstallError::UnsupportedCommand {
            program: format!("{program} {}", args.join(" ")),
        });
    };
    if target.starts_with('-') || target.contains(['\0', ' ', '\n']) {
        return Err(InstallError::UnsupportedCommand {
            program: format!("{program} {}", args.join(" ")),
        });
    }
    let shown = format!("{program} {}", args.join(" "));
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| InstallError::Spawn {
            program: program.clone(),
            message: e.to_string(),
        })?;
    let out = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return Err(InstallError::Spawn {
                program: program.clone(),
                message: e.to_string(),
            });
        }
        Err(_) => {
            return Err(InstallError::CommandTimeout {
                command: shown,
                secs: timeout.as_secs(),
            });
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail: String = {
        let t = stderr.trim();
        let skip = t.chars().count().saturating_sub(2000);
        t.chars().skip(skip).collect()
    };
    Err(InstallError::CommandFailed {
        command: shown,
        status: out.status.to_string(),
        stderr: tail,
    })
}

/// `npx`, `uvx`, `uv` and `docker` `--version`, in parallel, each within [`PROBE_TIMEOUT`].
pub async fn probe_prereqs() -> Prereqs {
    let (npx, uvx, uv, docker) = tokio::join!(
        version_of("npx"),
        version_of("uvx"),
        version_of("uv"),
        version_of("docker")
    );
    Prereqs {
        npx,
        uvx,
        uv,
        docker,
    }
}

async fn version_of(program: &str) -> Option<String> {
    let run = tokio::process::Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(PROBE_TIMEOUT, run).await.ok()?.ok()?;
    if !out.status.success() {
        return None;
    }
    let first = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    };
    first(&out.stdout).or_else(|| first(&out.stderr))
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

    #[test]
    fn identifiers() {
        for ok in ["@scope/pkg", "pkg", "a.b-c_d"] {
            assert!(validate_identifier("npm", ok).is_ok(), "{ok}");
        }
        for bad in [
            "x; rm -rf /",
            "../../etc",
            "-rf",
            "a b",
            "a\nb",
            "@a/b/c",
            "a/b",
            "@a",
            ".hidden",
            "x@1",
        ] {
            assert!(validate_identifier("npm", bad).is_err(), "{bad}");
        }
        assert!(validate_identifier("pypi", "mcp-server-time").is_ok());
        assert!(validate_identifier("pypi", "a/b").is_err());
        assert!(validate_identifier("oci", "ghcr.io/o/i:1@sha256:ab").is_ok());
        assert!(validate_version("x", "1.0.0-rc.1+b").is_ok());
        assert!(validate_version("x", "1.0; rm").is_err());
        assert!(validate_version("x", "-1").is_err());
    }
}
