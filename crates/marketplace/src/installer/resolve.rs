//! Filling values: each environment variable, header, URL and argument of a server.json item gets its fixed value,
//! the caller's input or its default, with `{var}` placeholders filled in; secrets go apart, missing required values
//! are reported.

use std::collections::BTreeMap;

use super::types::{InputKind, MissingInput};
use super::validate::{
    check_choice, check_env_name, check_header_name, check_value, secret_key_for,
};
use crate::entry::{Argument, ArgumentKind, Input, KeyValueInput};
use crate::error::InstallError;

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

pub(super) struct Resolver<'a> {
    inputs: &'a BTreeMap<String, String>,
    pub(super) missing: Vec<MissingInput>,
    pub(super) secrets: BTreeMap<String, String>,
    /// Names of secret environment variables (set or missing), for `docker run -e`.
    pub(super) secret_env: Vec<String>,
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
    pub(super) fn new(inputs: &'a BTreeMap<String, String>) -> Self {
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
    pub(super) fn environment(
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
    pub(super) fn headers(
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
    pub(super) fn url(
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
    pub(super) fn arguments(
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
