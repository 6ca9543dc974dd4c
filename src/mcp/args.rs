//! Typed extraction of tool arguments from a JSON object, with errors that name the argument and the expected type.

use std::collections::BTreeMap;

use rmcp::ErrorData as McpError;
use serde_json::{Map, Value};

pub type Args = Map<String, Value>;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn wrong(key: &str, want: &str, got: &Value) -> McpError {
    McpError::invalid_params(
        format!("argument `{key}` must be {want}, got {}", type_name(got)),
        None,
    )
}

pub fn opt_str(args: &Args, key: &str) -> Result<Option<String>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(v) => Err(wrong(key, "a string", v)),
    }
}

pub fn req_str(args: &Args, key: &str, action: &str) -> Result<String, McpError> {
    match opt_str(args, key)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(McpError::invalid_params(
            format!("action `{action}` needs the argument `{key}` (a non-empty string)"),
            None,
        )),
    }
}

pub fn opt_bool(args: &Args, key: &str) -> Result<Option<bool>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(wrong(key, "a boolean", v)),
    }
}

pub fn opt_u64(args: &Args, key: &str) -> Result<Option<u64>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_u64().map(Some).ok_or_else(|| {
            McpError::invalid_params(
                format!("argument `{key}` must be a whole number >= 0"),
                None,
            )
        }),
        Some(v) => Err(wrong(key, "a number", v)),
    }
}

pub fn opt_str_list(args: &Args, key: &str) -> Result<Option<Vec<String>>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(wrong(&format!("{key}[]"), "a string", other)),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(wrong(key, "an array of strings", v)),
    }
}

pub fn opt_str_map(args: &Args, key: &str) -> Result<Option<BTreeMap<String, String>>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(wrong(&format!("{key}.{k}"), "a string", other)),
            })
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map(Some),
        Some(v) => Err(wrong(key, "an object of string values", v)),
    }
}

pub fn opt_object(args: &Args, key: &str) -> Result<Option<Map<String, Value>>, McpError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m.clone())),
        Some(v) => Err(wrong(key, "an object", v)),
    }
}
