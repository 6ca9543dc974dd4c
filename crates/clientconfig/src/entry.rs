//! One server entry of a client file into a [`ServerSpec`]: the fields its format uses (the others warned about or
//! refused), the transport, and every value passed through the variable resolver so references become secrets.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::format::Format;
use crate::types::{Env, Imported, ImportedServer, InputDef, NeedsInput, bad};
use crate::vars::{Place, Resolved, Resolver};
use ad_core::error::{Error, Result};
use ad_core::model::{ServerSpec, Transport, truncate_for_message};

fn get_str(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Option<String>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(file, Some(server), Some(field), "must be a string")),
    }
}

fn get_strs(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Vec<String>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(bad(
                    file,
                    Some(server),
                    Some(&format!("{field}[{i}]")),
                    "must be a string",
                )),
            })
            .collect(),
        Some(_) => Err(bad(
            file,
            Some(server),
            Some(field),
            "must be an array of strings",
        )),
    }
}

fn get_map(
    file: &str,
    server: &str,
    obj: &Map<String, Value>,
    field: &str,
) -> Result<Vec<(String, String)>> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(bad(
                    file,
                    Some(server),
                    Some(&format!("{field}.{k}")),
                    "must be a string",
                )),
            })
            .collect(),
        Some(_) => Err(bad(
            file,
            Some(server),
            Some(field),
            "must be an object of strings",
        )),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn entry(
    format: Format,
    file: &str,
    raw_name: &str,
    name: String,
    value: Value,
    env: &Env,
    inputs: &BTreeMap<String, InputDef>,
    out: &mut Imported,
) -> Result<ImportedServer> {
    let Value::Object(obj) = value else {
        return Err(bad(file, Some(raw_name), None, "must be an object"));
    };
    let (used, ignored) = format.fields();
    for k in obj.keys() {
        if used.contains(&k.as_str()) {
            continue;
        }
        if let Some((_, why)) = ignored.iter().find(|(f, _)| f == k) {
            out.warnings
                .push(format!("server `{raw_name}`: field `{k}` ignored: {why}"));
            continue;
        }
        return Err(bad(
            file,
            Some(raw_name),
            Some(k),
            format!(
                "unknown field for {format}; expected one of {}",
                used.join(", ")
            ),
        ));
    }
    let r = Resolver {
        format,
        file,
        server: raw_name,
        env,
        inputs,
    };
    let mut spec = ServerSpec {
        name: name.clone(),
        ..ServerSpec::default()
    };
    let mut secrets: BTreeMap<String, String> = BTreeMap::new();
    let mut secret_keys: Vec<String> = Vec::new();
    let mut take = |res: Resolved, needs: Vec<NeedsInput>, out: &mut Imported| -> Option<String> {
        for (k, v) in res.secrets {
            if !secret_keys.contains(&k) {
                secret_keys.push(k.clone());
            }
            if let Some(v) = v {
                secrets.insert(k, v);
            }
        }
        for mut n in needs {
            n.server = name.clone();
            out.needs_input.push(n);
        }
        res.text
    };

    let kind = get_str(file, raw_name, &obj, "type")?;
    let url_field = ["url", "serverUrl", "httpUrl"]
        .into_iter()
        .find(|f| obj.get(*f).is_some_and(|v| !v.is_null()));
    spec.transport = match (kind.as_deref(), url_field) {
        (Some("stdio"), _) => Transport::Stdio,
        (Some("http" | "streamable-http" | "streamableHttp" | "streamable_http"), _) => {
            Transport::StreamableHttp
        }
        (Some("sse"), _) => Transport::Sse,
        (Some(other), _) => {
            return Err(bad(
                file,
                Some(raw_name),
                Some("type"),
                format!(
                    "{:?}; expected stdio, http or sse",
                    truncate_for_message(other)
                ),
            ));
        }
        (None, Some("url")) if format == Format::Gemini => Transport::Sse,
        (None, Some(_)) => Transport::StreamableHttp,
        (None, None) => Transport::Stdio,
    };
    if let Some(f) = url_field {
        let u = get_str(file, raw_name, &obj, f)?.unwrap_or_default();
        let place = if u.starts_with("${") || u.starts_with('$') && format == Format::Gemini {
            Place::Inline
        } else {
            Place::Placeholder
        };
        let (res, needs) = r.resolve(f, &u, place)?;
        spec.url = take(res, needs, out);
    }
    if let Some(c) = get_str(file, raw_name, &obj, "command")? {
        let (res, needs) = r.resolve("command", &c, Place::Literal)?;
        spec.command = take(res, needs, out);
    }
    for (i, a) in get_strs(file, raw_name, &obj, "args")?
        .into_iter()
        .enumerate()
    {
        let (res, needs) = r.resolve(&format!("args[{i}]"), &a, Place::Literal)?;
        spec.args.extend(take(res, needs, out));
    }
    for (k, v) in get_map(file, raw_name, &obj, "env")? {
        let field = format!("env.{k}");
        ad_core::model::validate_key("env", &k)
            .map_err(|e| bad(file, Some(raw_name), Some(&field), e))?;
        let (res, needs) = r.resolve(&field, &v, Place::Env(&k))?;
        if let Some(v) = take(res, needs, out) {
            spec.env.insert(k, v);
        }
    }
    let header_field = if format == Format::Codex {
        "http_headers"
    } else {
        "headers"
    };
    for (k, v) in get_map(file, raw_name, &obj, header_field)? {
        let field = format!("{header_field}.{k}");
        let (res, needs) = r.resolve(&field, &v, Place::Placeholder)?;
        if let Some(v) = take(res, needs, out) {
            spec.headers.insert(k, v);
        }
    }
    if format == Format::Codex {
        for (i, var) in get_strs(file, raw_name, &obj, "env_vars")?
            .into_iter()
            .enumerate()
        {
            let field = format!("env_vars[{i}]");
            ad_core::model::validate_key("env", &var)
                .map_err(|e| bad(file, Some(raw_name), Some(&field), e))?;
            let (res, needs) = r.resolve(&field, &format!("${{{var}}}"), Place::Env(&var))?;
            take(res, needs, out);
        }
        for (k, var) in get_map(file, raw_name, &obj, "env_http_headers")? {
            let field = format!("env_http_headers.{k}");
            let (res, needs) = r.resolve(&field, &format!("${{{var}}}"), Place::Placeholder)?;
            if let Some(v) = take(res, needs, out) {
                spec.headers.insert(k, v);
            }
        }
        if let Some(var) = get_str(file, raw_name, &obj, "bearer_token_env_var")? {
            let field = "bearer_token_env_var";
            let (res, needs) =
                r.resolve(field, &format!("Bearer ${{{var}}}"), Place::Placeholder)?;
            if let Some(v) = take(res, needs, out) {
                spec.headers.insert("Authorization".into(), v);
            }
        }
    }
    if let Some(d) = get_str(file, raw_name, &obj, "description")? {
        spec.description = d;
    }
    spec.validate().map_err(|e| match e {
        Error::Invalid { what, reason } => bad(file, Some(raw_name), Some(what), reason),
        other => bad(file, Some(raw_name), None, other),
    })?;
    Ok(ImportedServer {
        original_name: raw_name.to_owned(),
        spec,
        secrets,
        secret_keys,
    })
}
