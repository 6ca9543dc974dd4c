//! `script_api`: TypeScript declarations of what a script can call, generated from the tools' input and output schemas
//! with their descriptions as doc comments, so an agent writes correct code the first time. JSON Schema is turned
//! into TypeScript as far as it maps (types, enums and consts, required and optional properties, arrays, records,
//! unions and intersections, local `$ref`s); anything else is `unknown`.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::idents::ident;

/// One tool to declare.
#[derive(Debug, Clone)]
pub struct ApiTool {
    pub server: String,
    /// The tool's own name on its server.
    pub tool: String,
    /// The name `call` takes (`server__tool`).
    pub exposed: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
}

/// The fixed part: the script's shape and its host API.
const HEADER: &str = r#"// agent-discover code mode: what a script can use. A script is the body of an async function: `await` works at the
// top, `return` gives the result. There is no require, import, fetch, process, file system, network or timer.

/** A failed call: `kind` says what happened (tool_error, tool_not_found, tool_changed, tool_flagged,
 *  approval_denied, approval_timeout, input_required, timeout, transport_error, ...), `details` says more. */
interface ToolError extends Error {
  kind: string;
  details: unknown;
}

/** Calls a tool by its exposed name (`server__tool`). Resolves with the tool's structuredContent when it has one,
 *  else its text parsed as JSON when it parses, else the text. A failure rejects with a ToolError. */
declare function call(name: string, args?: Record<string, unknown>): Promise<unknown>;

/** Finds the one tool for a need across every known server (as the registry's find_tool answers; it may start the
 *  server that has it, whose tools then appear under `tools`). */
declare function find_tool(query: string): Promise<unknown>;

/** Several find_tool queries at once (as the registry's find_tools answers). */
declare function find_tools(intents: string[]): Promise<unknown>;

/** Captured into the answer's `logs` (bounded). */
declare const console: {
  log(...values: unknown[]): void;
  info(...values: unknown[]): void;
  warn(...values: unknown[]): void;
  error(...values: unknown[]): void;
  debug(...values: unknown[]): void;
};
"#;

/// How deep a schema is followed before its type is `unknown`.
const MAX_DEPTH: usize = 8;

/// The declarations for `tools` (grouped by server, in the order given), after the fixed header.
pub fn declarations(tools: &[ApiTool]) -> String {
    let mut out = String::from(HEADER);
    out.push_str("\ndeclare const tools: {\n");
    let mut seen = std::collections::HashSet::new();
    let mut current: Option<String> = None;
    for t in tools {
        let (s, n) = (ident(&t.server), ident(&t.tool));
        if !seen.insert((s.clone(), n.clone())) {
            continue;
        }
        if current.as_deref() != Some(s.as_str()) {
            if current.is_some() {
                out.push_str("  };\n");
            }
            let _ = writeln!(out, "  {s}: {{");
            current = Some(s);
        }
        let mut doc = t.description.clone().unwrap_or_default();
        if !doc.is_empty() {
            doc.push_str("\n\n");
        }
        let _ = write!(doc, "Also `call(\"{}\", args)`.", t.exposed);
        comment(&mut out, 4, &doc);
        let root = &t.input_schema;
        let args = ts_type(root, root, 4, 0);
        let optional = root
            .get("required")
            .and_then(Value::as_array)
            .is_none_or(|r| r.is_empty());
        let output = t
            .output_schema
            .as_ref()
            .map(|o| ts_type(o, o, 4, 0))
            .unwrap_or_else(|| "unknown".into());
        let _ = writeln!(
            out,
            "    {n}(args{}: {args}): Promise<{output}>;",
            if optional { "?" } else { "" }
        );
    }
    if current.is_some() {
        out.push_str("  };\n");
    }
    out.push_str("};\n");
    out
}

/// A doc comment at `indent`.
fn comment(out: &mut String, indent: usize, text: &str) {
    let pad = " ".repeat(indent);
    let text = text.replace("*/", "*\\/");
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 1 {
        let _ = writeln!(out, "{pad}/** {} */", lines.first().copied().unwrap_or(""));
        return;
    }
    let _ = writeln!(out, "{pad}/**");
    for l in lines {
        let line = format!("{pad} * {l}");
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out, "{pad} */");
}

/// A property name as TypeScript writes it.
fn key(name: &str) -> String {
    if ident(name) == name {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    }
}

/// The TypeScript type of `schema` (`root` resolves `$ref`s), written at `indent`.
fn ts_type(schema: &Value, root: &Value, indent: usize, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    let Some(s) = schema.as_object() else {
        // `true` (anything) or `false` (nothing).
        return if schema == &Value::Bool(false) {
            "never"
        } else {
            "unknown"
        }
        .into();
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return match resolve(root, r) {
            Some(target) => ts_type(target, root, indent, depth + 1),
            None => "unknown".into(),
        };
    }
    if let Some(c) = s.get("const") {
        return literal(c);
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        let parts: Vec<String> = e.iter().map(literal).collect();
        return if parts.is_empty() {
            "never".into()
        } else {
            parts.join(" | ")
        };
    }
    for (k, sep) in [("anyOf", " | "), ("oneOf", " | "), ("allOf", " & ")] {
        if let Some(list) = s.get(k).and_then(Value::as_array).filter(|l| !l.is_empty()) {
            let parts: Vec<String> = list
                .iter()
                .map(|x| paren(ts_type(x, root, indent, depth + 1)))
                .collect();
            return parts.join(sep);
        }
    }
    match s.get("type") {
        Some(Value::String(t)) => of_type(t, s, root, indent, depth),
        Some(Value::Array(ts)) => {
            let parts: Vec<String> = ts
                .iter()
                .filter_map(Value::as_str)
                .map(|t| paren(of_type(t, s, root, indent, depth)))
                .collect();
            if parts.is_empty() {
                "unknown".into()
            } else {
                parts.join(" | ")
            }
        }
        _ if s.contains_key("properties") => object(s, root, indent, depth),
        _ => "unknown".into(),
    }
}

fn of_type(t: &str, s: &Map<String, Value>, root: &Value, indent: usize, depth: usize) -> String {
    match t {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match s.get("items") {
            Some(items) => format!("{}[]", paren(ts_type(items, root, indent, depth + 1))),
            None => "unknown[]".into(),
        },
        "object" => object(s, root, indent, depth),
        _ => "unknown".into(),
    }
}

/// An object type: its properties (optional unless required), and an index signature for `additionalProperties`.
fn object(s: &Map<String, Value>, root: &Value, indent: usize, depth: usize) -> String {
    let props = s.get("properties").and_then(Value::as_object);
    let extra = match s.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(v @ Value::Object(_)) => Some(ts_type(v, root, indent + 2, depth + 1)),
        _ if props.is_none_or(|p| p.is_empty()) => Some("unknown".into()),
        _ => None,
    };
    let Some(props) = props.filter(|p| !p.is_empty()) else {
        return match extra {
            Some(t) => format!("Record<string, {t}>"),
            None => "{}".into(),
        };
    };
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let pad = " ".repeat(indent + 2);
    let mut out = String::from("{\n");
    for (name, p) in props {
        if let Some(d) = p
            .get("description")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
        {
            comment(&mut out, indent + 2, d);
        }
        let opt = if required.contains(&name.as_str()) {
            ""
        } else {
            "?"
        };
        let _ = writeln!(
            out,
            "{pad}{}{opt}: {};",
            key(name),
            ts_type(p, root, indent + 2, depth + 1)
        );
    }
    if let Some(t) = extra {
        let _ = writeln!(out, "{pad}[key: string]: {t};");
    }
    out.push_str(&" ".repeat(indent));
    out.push('}');
    out
}

/// A local `$ref` (`#/$defs/X`, `#/definitions/X`, any JSON pointer into the root).
fn resolve<'a>(root: &'a Value, r: &str) -> Option<&'a Value> {
    let pointer = r.strip_prefix('#')?;
    root.pointer(pointer)
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(_) | Value::Number(_) | Value::Bool(_) | Value::Null => v.to_string(),
        _ => "unknown".into(),
    }
}

/// Parenthesises a union or intersection where it becomes part of a larger type.
fn paren(t: String) -> String {
    if (t.contains(" | ") || t.contains(" & ")) && !t.starts_with('{') {
        format!("({t})")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(input: Value, output: Option<Value>) -> ApiTool {
        ApiTool {
            server: "my-server".into(),
            tool: "read.file".into(),
            exposed: "my-server__read_file".into(),
            description: Some("Reads a file.\nWhole.".into()),
            input_schema: input,
            output_schema: output,
        }
    }

    #[test]
    fn schemas_become_typescript() {
        let input = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Where it is"},
                "mode": {"enum": ["text", "base64"]},
                "limit": {"type": ["integer", "null"]},
                "tags": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
                "opts": {"$ref": "#/$defs/Opts"},
                "odd-name": {"const": 3},
                "meta": {"type": "object", "additionalProperties": {"type": "boolean"}}
            },
            "required": ["path"],
            "$defs": {"Opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "additionalProperties": false}}
        });
        let output = json!({"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"]});
        let d = declarations(&[tool(input, Some(output))]);
        for want in [
            "declare const tools: {\n  my_server: {\n",
            "    /**\n     * Reads a file.\n     * Whole.\n     *\n     * Also `call(\"my-server__read_file\", args)`.\n     */\n",
            "    read_file(args: {\n",
            "      /** Where it is */\n      path: string;\n",
            "      mode?: \"text\" | \"base64\";\n",
            "      limit?: number | null;\n",
            "      tags?: (string | number)[];\n",
            "      opts?: {\n        deep?: boolean;\n      };\n",
            "      \"odd-name\"?: 3;\n",
            "      meta?: Record<string, boolean>;\n",
            "    }): Promise<{\n      content: string;\n    }>;\n",
            "declare function call(name: string",
        ] {
            assert!(d.contains(want), "missing {want:?} in\n{d}");
        }
    }

    #[test]
    fn a_tool_without_required_arguments_takes_none_and_odd_schemas_are_unknown() {
        let d = declarations(&[tool(json!({"type": "object"}), None)]);
        assert!(
            d.contains("read_file(args?: Record<string, unknown>): Promise<unknown>;"),
            "{d}"
        );
        let d = declarations(&[tool(
            json!({"type": "object", "properties": {"x": {"$ref": "https://elsewhere"}, "y": {"not": {}}}, "required": ["x"]}),
            None,
        )]);
        assert!(
            d.contains("x: unknown;") && d.contains("y?: unknown;"),
            "{d}"
        );
        // A description cannot end the comment early.
        let mut t = tool(json!({"type": "object"}), None);
        t.description = Some("evil */ declare const x: 1; /*".into());
        assert!(!declarations(&[t]).contains("evil */"));
    }
}
