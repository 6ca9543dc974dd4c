//! `${...}` variable references in client config files: scanning them, and resolving each string of an entry into
//! clear text, `${KEY}` placeholders or secrets, by where the string goes ([`Place`]).

use std::collections::BTreeMap;

use crate::format::Format;
use crate::types::{Env, InputDef, NeedsInput, bad};
use ad_core::error::Result;

/// A `${...}` reference inside a string.
#[derive(Debug, PartialEq)]
pub(super) enum Ref {
    Env {
        name: String,
        default: Option<String>,
    },
    Input(String),
    Builtin(&'static str),
}

/// Splits `s` into literal text and references. `${` without a closing `}` is literal.
/// Literal text, or a reference with its text as written.
pub(super) type Part = std::result::Result<String, (Ref, String)>;

pub(super) fn scan(s: &str) -> std::result::Result<Vec<Part>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        if start > 0 {
            out.push(Ok(rest[..start].to_owned()));
        }
        let whole = &rest[start..start + len + 1];
        let inner = &whole[2..whole.len() - 1];
        let r = if let Some(id) = inner.strip_prefix("input:") {
            if id.is_empty() {
                return Err(format!("{whole} names no input"));
            }
            Ref::Input(id.to_owned())
        } else if let Some(name) = inner.strip_prefix("env:") {
            Ref::Env {
                name: name.to_owned(),
                default: None,
            }
        } else if inner == "workspaceFolder" {
            Ref::Builtin("workspaceFolder")
        } else if inner == "userHome" {
            Ref::Builtin("userHome")
        } else {
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d.to_owned())),
                None => (inner, None),
            };
            Ref::Env {
                name: name.to_owned(),
                default,
            }
        };
        if let Ref::Env { name, .. } = &r
            && ad_core::model::validate_key("variable", name).is_err()
        {
            return Err(format!(
                "{whole} is not a variable reference this importer understands"
            ));
        }
        out.push(Err((r, whole.to_owned())));
        rest = &rest[start + len + 1..];
    }
    if !rest.is_empty() {
        out.push(Ok(rest.to_owned()));
    }
    Ok(out)
}

/// Gemini CLI also reads `$VAR`: written as `${VAR}` so one scanner handles both.
pub(super) fn gemini_bare_refs(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        let starts_name = chars
            .peek()
            .is_some_and(|(_, n)| n.is_ascii_alphabetic() || *n == '_');
        if c == '$' && starts_name {
            out.push_str("${");
            while let Some((_, n)) = chars.peek().copied() {
                if n.is_ascii_alphanumeric() || n == '_' {
                    out.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push('}');
        } else {
            out.push(c);
        }
    }
    out
}

/// Secret key for an `${input:ID}`.
pub(super) fn input_key(id: &str) -> String {
    let k: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("INPUT_{k}")
}

/// Where a string with references goes.
pub(super) enum Place<'a> {
    /// An env value: the whole value becomes secret `key`.
    Env(&'a str),
    /// A header or URL: each reference becomes a `${KEY}` placeholder and its own secret.
    Placeholder,
    /// A URL's scheme and host (which the proxy cannot fill in later): references are substituted in clear.
    Inline,
    /// Args and commands: only built-ins (`${workspaceFolder}`, `${userHome}`) are allowed.
    Literal,
}

pub(super) struct Resolver<'a, 'b> {
    pub(super) format: Format,
    pub(super) file: &'a str,
    pub(super) server: &'a str,
    pub(super) env: &'a Env<'b>,
    pub(super) inputs: &'a BTreeMap<String, InputDef>,
}

/// The outcome of one string: its new text (None: drop it, it became a secret).
pub(super) struct Resolved {
    pub(super) text: Option<String>,
    /// (secret key, its value when the environment has it).
    pub(super) secrets: Vec<(String, Option<String>)>,
}

impl Resolver<'_, '_> {
    fn builtin(&self, b: &str) -> Option<String> {
        match b {
            "workspaceFolder" => self.env.workspace.as_ref().map(|p| p.display().to_string()),
            _ => self.env.home.as_ref().map(|p| p.display().to_string()),
        }
    }

    /// A built-in variable's value, or the error naming the reference `whole` when it has none here.
    fn builtin_value(&self, field: &str, b: &str, whole: &str) -> Result<String> {
        self.builtin(b).ok_or_else(|| {
            bad(
                self.file,
                Some(self.server),
                Some(field),
                format!("{whole} has no value here"),
            )
        })
    }

    pub(super) fn resolve(
        &self,
        field: &str,
        s: &str,
        place: Place,
    ) -> Result<(Resolved, Vec<NeedsInput>)> {
        let braced;
        let s = if self.format == Format::Gemini {
            braced = gemini_bare_refs(s);
            braced.as_str()
        } else {
            s
        };
        let parts = scan(s).map_err(|e| bad(self.file, Some(self.server), Some(field), e))?;
        let mut needs = Vec::new();
        let mut secrets = Vec::new();
        if parts
            .iter()
            .all(|p| p.is_ok() || matches!(p, Err((Ref::Builtin(_), _))))
        {
            let mut text = String::new();
            for p in parts {
                match p {
                    Ok(t) => text.push_str(&t),
                    Err((Ref::Builtin(b), whole)) => {
                        text.push_str(&self.builtin_value(field, b, &whole)?)
                    }
                    Err(_) => unreachable!("checked above"),
                }
            }
            return Ok((
                Resolved {
                    text: Some(text),
                    secrets,
                },
                needs,
            ));
        }
        let lookup = |r: &Ref, whole: &str| -> Result<Option<String>> {
            match r {
                Ref::Env { name, default } => Ok((self.env.var)(name).or_else(|| default.clone())),
                Ref::Input(id) => {
                    if self.format != Format::Vscode || !self.inputs.contains_key(id) {
                        return Err(bad(
                            self.file,
                            Some(self.server),
                            Some(field),
                            format!("{whole} refers to an input that `inputs` does not define"),
                        ));
                    }
                    Ok(None)
                }
                Ref::Builtin(b) => Ok(self.builtin(b)),
            }
        };
        let mut need = |key: &str, whole: &str, r: &Ref| {
            let (description, password) = match r {
                Ref::Input(id) => self
                    .inputs
                    .get(id)
                    .map(|d| (d.description.clone(), d.password))
                    .unwrap_or((None, false)),
                _ => (None, true),
            };
            needs.push(NeedsInput {
                server: self.server.to_owned(),
                key: key.to_owned(),
                reference: whole.to_owned(),
                field: field.to_owned(),
                description,
                password,
            });
        };
        match place {
            Place::Literal => Err(bad(
                self.file,
                Some(self.server),
                Some(field),
                "variable references are not supported here (values are passed literally and never through a shell); move the value into `env`",
            )),
            Place::Inline => {
                let mut text = String::new();
                for p in parts {
                    match p {
                        Ok(t) => text.push_str(&t),
                        Err((r, whole)) => match lookup(&r, &whole)? {
                            Some(v) => text.push_str(&v),
                            None => {
                                return Err(bad(
                                    self.file,
                                    Some(self.server),
                                    Some(field),
                                    format!(
                                        "{whole} starts the URL and has no value in the environment (a URL's scheme and host cannot wait for a secret)"
                                    ),
                                ));
                            }
                        },
                    }
                }
                Ok((
                    Resolved {
                        text: Some(text),
                        secrets,
                    },
                    needs,
                ))
            }
            Place::Env(key) => {
                let mut text = String::new();
                let mut missing = None;
                for p in parts {
                    match p {
                        Ok(t) => text.push_str(&t),
                        Err((r, whole)) => match lookup(&r, &whole)? {
                            Some(v) => text.push_str(&v),
                            None => {
                                if missing.is_none() {
                                    missing = Some((r, whole));
                                }
                            }
                        },
                    }
                }
                match missing {
                    None => secrets.push((key.to_owned(), Some(text))),
                    Some((r, whole)) => {
                        need(key, &whole, &r);
                        secrets.push((key.to_owned(), None));
                    }
                }
                Ok((
                    Resolved {
                        text: None,
                        secrets,
                    },
                    needs,
                ))
            }
            Place::Placeholder => {
                let mut text = String::new();
                for p in parts {
                    match p {
                        Ok(t) => text.push_str(&t),
                        Err((Ref::Builtin(b), whole)) => {
                            text.push_str(&self.builtin_value(field, b, &whole)?)
                        }
                        Err((r, whole)) => {
                            let key = match &r {
                                Ref::Env { name, .. } => name.clone(),
                                Ref::Input(id) => input_key(id),
                                Ref::Builtin(_) => unreachable!("handled above"),
                            };
                            let value = lookup(&r, &whole)?;
                            if value.is_none() {
                                need(&key, &whole, &r);
                            }
                            text.push_str(&format!("${{{key}}}"));
                            secrets.push((key, value));
                        }
                    }
                }
                Ok((
                    Resolved {
                        text: Some(text),
                        secrets,
                    },
                    needs,
                ))
            }
        }
    }
}
