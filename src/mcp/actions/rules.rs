//! The argument rules of the `registry` tool, read from the schema generated for its actions: each action's
//! arguments and which are required, the flat input schema the tool shows, and the checks of one value against its
//! schema, each problem an [`ArgError`] naming the argument. Knows no action: `actions.rs` hands it the schema.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// A problem with the arguments of a `registry` call: what is wrong and which argument (if one is to blame).
#[derive(Debug, Clone, PartialEq)]
pub struct ArgError {
    pub field: Option<String>,
    pub message: String,
}

impl ArgError {
    pub fn new(field: &str, message: impl Into<String>) -> ArgError {
        ArgError {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    /// The JSON the tool returns (`code` is the same `invalid_input` REST and the CLI use).
    pub fn body(&self) -> Value {
        json!({"error": self.message, "code": "invalid_input", "field": self.field})
    }
}

/// One action's argument rules, taken from the generated schema.
pub(super) struct ActionRules {
    pub(super) name: String,
    pub(super) properties: Map<String, Value>,
    pub(super) required: Vec<String>,
}

pub(super) fn variant_rules(v: &Value) -> ActionRules {
    let mut properties = v
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let tag = properties.remove("action").unwrap_or_default();
    let name = tag
        .get("const")
        .or_else(|| tag.get("enum").and_then(|e| e.get(0)))
        .and_then(Value::as_str)
        .expect("each variant names its action")
        .to_owned();
    for p in properties.values_mut() {
        simplify(p);
    }
    let required = v
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .filter(|r| *r != "action")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    ActionRules {
        name,
        properties,
        required,
    }
}

/// Drops `null` from optional fields' types and schemars' `format` hints: the flat schema shows plain types.
fn simplify(p: &mut Value) {
    let Some(obj) = p.as_object_mut() else { return };
    if let Some(Value::Array(types)) = obj.get("type") {
        let kept: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        let t = if kept.len() == 1 {
            kept[0].clone()
        } else {
            Value::Array(kept)
        };
        obj.insert("type".into(), t);
    }
    obj.remove("format");
    if let Some(Value::Array(e)) = obj.get_mut("enum") {
        e.retain(|v| !v.is_null());
    }
    if let Some(items) = obj.get_mut("items") {
        simplify(items);
    }
    if let Some(ap) = obj.get_mut("additionalProperties") {
        simplify(ap);
    }
}

/// The tool's input schema: one object with `action` plus the union of every action's arguments, each described
/// with the actions that use it (a flat object, because several clients reject `oneOf` at the top level).
pub(super) fn flat_schema(rules: &[ActionRules]) -> Map<String, Value> {
    let names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
    let mut props = Map::new();
    props.insert(
        "action".into(),
        json!({"type": "string", "enum": names, "description": format!("What to do: {}", names.join(", "))}),
    );
    // Per argument, in first-use order: its schema and the (actions, description) groups.
    let mut order: Vec<String> = Vec::new();
    type Groups = Vec<(Vec<String>, String)>;
    let mut seen: BTreeMap<String, (Value, Groups)> = BTreeMap::new();
    for r in rules {
        for (arg, schema) in &r.properties {
            let desc = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let entry = seen.entry(arg.clone()).or_insert_with(|| {
                order.push(arg.clone());
                (schema.clone(), Vec::new())
            });
            match entry.1.iter_mut().find(|(_, d)| *d == desc) {
                Some((actions, _)) => actions.push(r.name.clone()),
                None => entry.1.push((vec![r.name.clone()], desc)),
            }
        }
    }
    for arg in order {
        let (mut schema, groups) = seen.remove(&arg).expect("recorded");
        let text = groups
            .iter()
            .map(|(actions, d)| format!("[{}] {d}", actions.join("/")))
            .collect::<Vec<_>>()
            .join("; ");
        let shared = groups.iter().map(|(a, _)| a.len()).sum::<usize>() > 1;
        if let Some(obj) = schema.as_object_mut() {
            // An argument several actions use may have different limits in each (find_tool's query is required,
            // list's is not): the flat schema shows them only for single-action arguments; each action checks its own.
            for k in [
                "minLength",
                "maxLength",
                "minItems",
                "maxItems",
                "minimum",
                "maximum",
            ] {
                if shared || k.starts_with("min") && k != "minimum" {
                    obj.remove(k);
                }
            }
            obj.insert("description".into(), Value::String(text));
        }
        props.insert(arg, schema);
    }
    let Value::Object(schema) =
        json!({"type": "object", "properties": props, "required": ["action"]})
    else {
        unreachable!("literal object")
    };
    schema
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn describe_type(schema: &Value) -> &'static str {
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => "a non-empty string",
        Some("boolean") => "a boolean",
        Some("integer") => "a whole number",
        Some("array") => "a non-empty array",
        Some("object") => "an object",
        _ => "a value",
    }
}

/// Checks one value against its (simplified) schema: type, items, additional properties, lengths and ranges.
/// `field` is the argument blamed; `path` is where in it the problem is (`args[]`, `env.K`).
pub(super) fn check(field: &str, path: &str, schema: &Value, v: &Value) -> Result<(), ArgError> {
    let wrong = |want: &str| {
        ArgError::new(
            field,
            format!("argument `{path}` must be {want}, got {}", type_name(v)),
        )
    };
    let num = |k: &str| schema.get(k).and_then(Value::as_u64);
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => {
            let Value::String(s) = v else {
                return Err(wrong("a string"));
            };
            let n = s.chars().count();
            if num("minLength").is_some_and(|min| (n as u64) < min) {
                return Err(ArgError::new(field, format!("argument `{path}` is empty")));
            }
            if let Some(max) = num("maxLength").filter(|max| n as u64 > *max) {
                return Err(ArgError::new(
                    field,
                    format!("`{path}` is {n} characters, over the limit of {max}"),
                ));
            }
        }
        Some("boolean") if !v.is_boolean() => return Err(wrong("a boolean")),
        Some("integer") => {
            let Some(n) = v.as_u64() else {
                return Err(if v.is_number() {
                    ArgError::new(
                        field,
                        format!("argument `{path}` must be a whole number >= 0"),
                    )
                } else {
                    wrong("a number")
                });
            };
            let (min, max) = (num("minimum"), num("maximum"));
            if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                return Err(ArgError::new(
                    field,
                    format!(
                        "`{path}` must be between {} and {}",
                        min.unwrap_or(0),
                        max.unwrap_or(u64::MAX)
                    ),
                ));
            }
        }
        Some("array") => {
            let Value::Array(items) = v else {
                return Err(wrong(match schema.pointer("/items/type") {
                    Some(Value::String(t)) if t == "string" => "an array of strings",
                    _ => "an array",
                }));
            };
            if num("minItems").is_some_and(|min| (items.len() as u64) < min) {
                return Err(ArgError::new(
                    field,
                    format!("argument `{path}` must not be empty"),
                ));
            }
            if let Some(max) = num("maxItems").filter(|max| items.len() as u64 > *max) {
                return Err(ArgError::new(
                    field,
                    format!("`{path}` takes at most {max} entries"),
                ));
            }
            if let Some(item) = schema.get("items") {
                for i in items {
                    check(field, &format!("{path}[]"), item, i)?;
                }
            }
        }
        Some("object") => {
            let Value::Object(m) = v else {
                return Err(wrong(match schema.pointer("/additionalProperties/type") {
                    Some(Value::String(t)) if t == "string" => "an object of string values",
                    _ => "an object",
                }));
            };
            if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, item) in m {
                    check(
                        field,
                        &format!("{path}.{}", crate::model::truncate_for_message(k)),
                        ap,
                        item,
                    )?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}
