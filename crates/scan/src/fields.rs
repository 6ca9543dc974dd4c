//! The text of a definition, field by field: every string a model reads (or a terminal shows), with its path and
//! the role it plays (a name, a description, a value such as a default or an enum member).

use serde::Serialize;
use serde_json::Value;

/// What kind of definition is scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Tool,
    Prompt,
    ResourceTemplate,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::ResourceTemplate => "resource_template",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "tool" => Some(Kind::Tool),
            "prompt" => Some(Kind::Prompt),
            "resource_template" => Some(Kind::ResourceTemplate),
            _ => None,
        }
    }
}

/// The role a string plays, which decides which rules apply to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A tool, prompt or template name.
    Name,
    /// A parameter (property or prompt argument) name.
    Param,
    /// Prose: a title or description, or any string of a schema not known to be a value.
    Prose,
    /// A value: a default, const, enum member or example.
    Value,
    /// A URI template or MIME type.
    Uri,
}

pub(crate) struct Field {
    pub path: String,
    pub text: String,
    pub role: Role,
}

/// Every string of a definition with its path and role. At most [`MAX_FIELDS`] fields and [`MAX_DEPTH`] levels of
/// schema are read: a definition past either is reported by the rules as oversized rather than read to the end.
pub(crate) fn collect(kind: Kind, def: &Value) -> Vec<Field> {
    let mut out = Vec::new();
    let mut push = |path: String, v: &Value, role: Role| {
        if let Some(s) = v.as_str() {
            out.push(Field {
                path,
                text: s.to_owned(),
                role,
            });
        }
    };
    match kind {
        Kind::Tool => {
            push("name".into(), &def["name"], Role::Name);
            push("title".into(), &def["title"], Role::Prose);
            push("description".into(), &def["description"], Role::Prose);
        }
        Kind::Prompt => {
            push("name".into(), &def["name"], Role::Name);
            push("title".into(), &def["title"], Role::Prose);
            push("description".into(), &def["description"], Role::Prose);
            for (i, a) in def["arguments"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                push(format!("arguments[{i}].name"), &a["name"], Role::Param);
                push(format!("arguments[{i}].title"), &a["title"], Role::Prose);
                push(
                    format!("arguments[{i}].description"),
                    &a["description"],
                    Role::Prose,
                );
            }
        }
        Kind::ResourceTemplate => {
            push("uriTemplate".into(), &def["uriTemplate"], Role::Uri);
            push("name".into(), &def["name"], Role::Name);
            push("title".into(), &def["title"], Role::Prose);
            push("description".into(), &def["description"], Role::Prose);
            push("mimeType".into(), &def["mimeType"], Role::Uri);
        }
    }
    if kind == Kind::Tool {
        if let Some(a) = def.get("annotations") {
            strings("annotations", a, Role::Prose, 0, &mut out);
        }
        for key in ["inputSchema", "outputSchema"] {
            if let Some(s) = def.get(key) {
                schema(key, s, 0, &mut out);
            }
        }
    }
    out.truncate(MAX_FIELDS);
    out
}

pub(crate) const MAX_FIELDS: usize = 4096;
pub(crate) const MAX_DEPTH: usize = 32;

/// Schema keywords whose strings are not read: types, formats, references, regular expressions.
const SKIPPED: &[&str] = &[
    "type",
    "format",
    "$schema",
    "$ref",
    "$id",
    "$anchor",
    "$dynamicRef",
    "pattern",
    "contentEncoding",
    "contentMediaType",
];

fn schema(path: &str, v: &Value, depth: usize, out: &mut Vec<Field>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FIELDS {
        return;
    }
    let Value::Object(m) = v else {
        strings(path, v, Role::Prose, depth, out);
        return;
    };
    for (k, v) in m {
        let p = format!("{path}.{k}");
        match k.as_str() {
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Value::Object(props) = v {
                    for (name, sub) in props {
                        let pp = format!("{p}.{name}");
                        if k == "properties" {
                            out.push(Field {
                                path: pp.clone(),
                                text: name.clone(),
                                role: Role::Param,
                            });
                        }
                        schema(&pp, sub, depth + 1, out);
                    }
                }
            }
            "required" => {
                for (i, r) in v.as_array().into_iter().flatten().enumerate() {
                    if let Some(s) = r.as_str() {
                        out.push(Field {
                            path: format!("{p}[{i}]"),
                            text: s.to_owned(),
                            role: Role::Param,
                        });
                    }
                }
            }
            "default" | "const" | "enum" | "examples" | "example" => {
                strings(&p, v, Role::Value, depth, out)
            }
            "title" | "description" | "$comment" => strings(&p, v, Role::Prose, depth, out),
            key if SKIPPED.contains(&key) => {}
            _ => match v {
                Value::Object(_) => schema(&p, v, depth + 1, out),
                Value::Array(a) => {
                    for (i, x) in a.iter().enumerate() {
                        schema(&format!("{p}[{i}]"), x, depth + 1, out);
                    }
                }
                Value::String(_) => strings(&p, v, Role::Prose, depth, out),
                _ => {}
            },
        }
    }
}

/// Every string inside `v` (a value may be an array or an object of strings).
fn strings(path: &str, v: &Value, role: Role, depth: usize, out: &mut Vec<Field>) {
    if depth > MAX_DEPTH || out.len() >= MAX_FIELDS {
        return;
    }
    match v {
        Value::String(s) => out.push(Field {
            path: path.to_owned(),
            text: s.clone(),
            role,
        }),
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                strings(&format!("{path}[{i}]"), x, role, depth + 1, out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                strings(&format!("{path}.{k}"), x, role, depth + 1, out);
            }
        }
        _ => {}
    }
}
