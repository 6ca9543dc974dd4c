//! The input schemas of saved scripts: which JSON Schema keywords a saved script's schema may use (checked when it is
//! saved, so a keyword this file does not enforce is refused rather than silently ignored), and a call's arguments
//! checked against one (each violation named by its JSON pointer). A small subset on purpose: the shapes tool
//! arguments take (objects of strings, numbers, booleans, arrays and nested objects, with enums and bounds).

use serde_json::{Map, Value};

/// The keywords a saved script's schema may use.
const KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "description",
    "title",
    "default",
    "examples",
    "$schema",
];

const TYPES: &[&str] = &[
    "object", "array", "string", "number", "integer", "boolean", "null",
];

/// Checks that `schema` is an object schema (`"type": "object"`) using only the supported keywords; the error says
/// where (a JSON pointer) and what.
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let Value::Object(root) = schema else {
        return Err("the input schema must be a JSON object".into());
    };
    if root.get("type") != Some(&Value::String("object".into())) {
        return Err(
            "the input schema must have \"type\": \"object\" (a tool's arguments are an object)"
                .into(),
        );
    }
    check_node(root, "")
}

fn check_node(node: &Map<String, Value>, at: &str) -> Result<(), String> {
    for (k, v) in node {
        let here = format!("{at}/{k}");
        match k.as_str() {
            "type" => {
                let ok = |t: &Value| t.as_str().is_some_and(|t| TYPES.contains(&t));
                let valid = match v {
                    Value::Array(a) => !a.is_empty() && a.iter().all(ok),
                    t => ok(t),
                };
                if !valid {
                    return Err(format!(
                        "{here}: a type is one of {TYPES:?}, or a list of them"
                    ));
                }
            }
            "properties" => {
                let Value::Object(props) = v else {
                    return Err(format!("{here}: must be an object of schemas"));
                };
                for (name, p) in props {
                    let Value::Object(p) = p else {
                        return Err(format!("{here}/{name}: must be a schema (an object)"));
                    };
                    check_node(p, &format!("{here}/{name}"))?;
                }
            }
            "items" => {
                let Value::Object(p) = v else {
                    return Err(format!("{here}: must be a schema (an object)"));
                };
                check_node(p, &here)?;
            }
            "additionalProperties" => match v {
                Value::Bool(_) => {}
                Value::Object(p) => check_node(p, &here)?,
                _ => return Err(format!("{here}: must be a boolean or a schema")),
            },
            "required" => {
                if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
                    return Err(format!("{here}: must be a list of property names"));
                }
            }
            "enum" | "examples" => {
                if !v.is_array() {
                    return Err(format!("{here}: must be a list"));
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if !v.is_number() {
                    return Err(format!("{here}: must be a number"));
                }
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" => {
                if v.as_u64().is_none() {
                    return Err(format!("{here}: must be a whole number"));
                }
            }
            "description" | "title" | "$schema" => {
                if !v.is_string() {
                    return Err(format!("{here}: must be a string"));
                }
            }
            "const" | "default" => {}
            other => {
                debug_assert!(!KEYWORDS.contains(&other));
                return Err(format!(
                    "{here}: the keyword `{other}` is not supported in a saved script's schema (supported: {})",
                    KEYWORDS.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// Hex SHA-256 of a saved script's body (what its pinned definition carries).
pub fn body_sha256(code: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(code.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks `args` against a schema [`check_schema`] accepted: every violation, each as `POINTER: what`.
pub fn validate(schema: &Value, args: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, args, "", &mut out);
    out
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn matches_type(want: &str, v: &Value) -> bool {
    let got = type_of(v);
    want == got || (want == "number" && got == "integer")
}

fn walk(schema: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
    let Value::Object(s) = schema else {
        return;
    };
    let at_or_root = if at.is_empty() { "/" } else { at };
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => matches_type(t, v),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| matches_type(t, v)),
            _ => true,
        };
        if !ok {
            out.push(format!("{at_or_root}: expected {t}, got {}", type_of(v)));
            return;
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        out.push(format!(
            "{at_or_root}: must be one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        out.push(format!("{at_or_root}: must be {c}"));
    }
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            let bound = |k: &str| s.get(k).and_then(Value::as_f64);
            if let Some(m) = bound("minimum")
                && x < m
            {
                out.push(format!("{at_or_root}: must be at least {m}"));
            }
            if let Some(m) = bound("maximum")
                && x > m
            {
                out.push(format!("{at_or_root}: must be at most {m}"));
            }
            if let Some(m) = bound("exclusiveMinimum")
                && x <= m
            {
                out.push(format!("{at_or_root}: must be more than {m}"));
            }
            if let Some(m) = bound("exclusiveMaximum")
                && x >= m
            {
                out.push(format!("{at_or_root}: must be less than {m}"));
            }
        }
        Value::String(t) => {
            let len = t.chars().count() as u64;
            if let Some(m) = s.get("minLength").and_then(Value::as_u64)
                && len < m
            {
                out.push(format!(
                    "{at_or_root}: must be at least {m} characters long"
                ));
            }
            if let Some(m) = s.get("maxLength").and_then(Value::as_u64)
                && len > m
            {
                out.push(format!("{at_or_root}: must be at most {m} characters long"));
            }
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(m) = s.get("minItems").and_then(Value::as_u64)
                && len < m
            {
                out.push(format!("{at_or_root}: must have at least {m} items"));
            }
            if let Some(m) = s.get("maxItems").and_then(Value::as_u64)
                && len > m
            {
                out.push(format!("{at_or_root}: must have at most {m} items"));
            }
            if let Some(item) = s.get("items") {
                for (i, x) in items.iter().enumerate() {
                    walk(item, x, &format!("{at}/{i}"), out);
                }
            }
        }
        Value::Object(o) => {
            let props = s.get("properties").and_then(Value::as_object);
            for r in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(r) = r.as_str()
                    && !o.contains_key(r)
                {
                    out.push(format!("{at}/{r}: required"));
                }
            }
            for (k, x) in o {
                match props.and_then(|p| p.get(k)) {
                    Some(p) => walk(p, x, &format!("{at}/{k}"), out),
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            out.push(format!("{at}/{k}: not allowed (no such property)"))
                        }
                        Some(extra @ Value::Object(_)) => walk(extra, x, &format!("{at}/{k}"), out),
                        _ => {}
                    },
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "required": ["path"], "additionalProperties": false, "properties": {
            "path": {"type": "string", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10},
            "mode": {"enum": ["a", "b"]},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        }})
    }

    #[test]
    fn schemas_with_unsupported_keywords_or_no_object_type_are_refused() {
        assert!(check_schema(&schema()).is_ok());
        assert!(
            check_schema(&json!({"type": "string"}))
                .unwrap_err()
                .contains("\"type\": \"object\"")
        );
        let e = check_schema(
            &json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}),
        )
        .unwrap_err();
        assert!(e.starts_with("/properties/x/pattern:"), "{e}");
        assert!(
            check_schema(&json!({"type": "object", "properties": {"x": {"type": "text"}}}))
                .is_err()
        );
    }

    #[test]
    fn arguments_are_checked_and_each_violation_named() {
        assert!(
            validate(
                &schema(),
                &json!({"path": "a", "limit": 3, "mode": "b", "tags": ["x"]})
            )
            .is_empty()
        );
        let errors = validate(
            &schema(),
            &json!({"limit": 11.5, "mode": "c", "tags": ["x", 2, "z"], "other": 1}),
        );
        assert!(errors.contains(&"/path: required".to_owned()), "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/limit: expected \"integer\"")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/mode: must be one of")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/tags: must have at most 2")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("/tags/1: expected \"string\"")),
            "{errors:?}"
        );
        assert!(
            errors.contains(&"/other: not allowed (no such property)".to_owned()),
            "{errors:?}"
        );
        assert_eq!(
            validate(&schema(), &json!([])),
            ["/: expected \"object\", got array"]
        );
        assert!(validate(&schema(), &json!({"path": "p", "limit": 2.0})).is_empty());
    }
}
