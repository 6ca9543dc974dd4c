//! The YAML frontmatter of a `SKILL.md`, read for SEP-2640's frontmatter check (the host compares it field by field
//! with the manifest entry's `frontmatter` before loading the skill). A subset of YAML: `key: value` mappings nested
//! by indentation, `- item` and `[a, b]` lists of scalars, plain, single- and double-quoted scalars, `null`, booleans
//! and numbers, `#` comments. Anything else (block scalars, anchors, flow mappings) is refused rather than guessed:
//! a frontmatter that cannot be read cannot be verified.

use serde_json::{Map, Number, Value};

/// The frontmatter block of `text`: between a first line `---` and the next line `---`.
fn block(text: &str) -> Option<&str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\r\n")
        .or_else(|| text.strip_prefix("---\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some(&rest[..at]);
        }
        at += line.len();
    }
    None
}

/// The frontmatter of a `SKILL.md` as a JSON object; `Err` says why it cannot be read.
pub fn parse(text: &str) -> Result<Map<String, Value>, String> {
    let block = block(text).ok_or("SKILL.md has no leading --- delimited frontmatter block")?;
    let lines: Vec<(usize, &str)> = block
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            (
                l.len() - l.trim_start_matches(' ').len(),
                l.trim_start_matches(' '),
            )
        })
        .collect();
    let mut at = 0;
    let map = mapping(&lines, &mut at, 0)?;
    if at < lines.len() {
        return Err(format!("unexpected line `{}`", lines[at].1));
    }
    Ok(map)
}

fn mapping(
    lines: &[(usize, &str)],
    at: &mut usize,
    indent: usize,
) -> Result<Map<String, Value>, String> {
    let mut map = Map::new();
    while let Some(&(ind, line)) = lines.get(*at) {
        if ind < indent {
            break;
        }
        if ind > indent || line.starts_with("- ") || line == "-" {
            return Err(format!("unexpected line `{line}`"));
        }
        let (key, value) = split_key(line)?;
        *at += 1;
        let value = if value.is_empty() {
            match lines.get(*at) {
                Some(&(next, l)) if next > ind && (l.starts_with("- ") || l == "-") => {
                    sequence(lines, at, next)?
                }
                Some(&(next, _)) if next > ind => Value::Object(mapping(lines, at, next)?),
                _ => Value::Null,
            }
        } else {
            scalar(value)?
        };
        if map.insert(key, value).is_some() {
            return Err(format!("duplicate key in `{line}`"));
        }
    }
    Ok(map)
}

fn sequence(lines: &[(usize, &str)], at: &mut usize, indent: usize) -> Result<Value, String> {
    let mut items = Vec::new();
    while let Some(&(ind, line)) = lines.get(*at) {
        if ind != indent || !(line.starts_with("- ") || line == "-") {
            break;
        }
        let item = line[1..].trim();
        if split_key(item).is_ok() && !item.starts_with(['"', '\'']) {
            return Err(format!("mappings inside lists are not supported: `{line}`"));
        }
        items.push(scalar(item)?);
        *at += 1;
    }
    Ok(Value::Array(items))
}

/// `key: value` (or `key:`): the key, unquoted, and the rest.
fn split_key(line: &str) -> Result<(String, &str), String> {
    let (key, rest) = if let Some(q @ ('"' | '\'')) = line.chars().next() {
        let end = line[1..]
            .find(q)
            .ok_or_else(|| format!("unterminated key in `{line}`"))?
            + 1;
        (line[1..end].to_owned(), &line[end + 1..])
    } else {
        let colon = line
            .match_indices(':')
            .map(|(i, _)| i)
            .find(|&i| line[i + 1..].is_empty() || line[i + 1..].starts_with(' '))
            .ok_or_else(|| format!("not a `key: value` line: `{line}`"))?;
        (line[..colon].trim_end().to_owned(), &line[colon..])
    };
    let rest = rest
        .strip_prefix(':')
        .ok_or_else(|| format!("not a `key: value` line: `{line}`"))?;
    if !rest.is_empty() && !rest.starts_with(' ') {
        return Err(format!("not a `key: value` line: `{line}`"));
    }
    Ok((key, rest.trim()))
}

fn scalar(s: &str) -> Result<Value, String> {
    if s.starts_with('"') {
        // YAML's double-quoted escapes that matter here are JSON's.
        let end = closing_double(s).ok_or_else(|| format!("unterminated string `{s}`"))?;
        ensure_comment(&s[end + 1..], s)?;
        return serde_json::from_str(&s[..=end]).map_err(|e| format!("string `{s}`: {e}"));
    }
    if let Some(body) = s.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if chars.peek().map(|p| p.1) == Some('\'') {
                    chars.next();
                    out.push('\'');
                    continue;
                }
                ensure_comment(&body[i + 1..], s)?;
                return Ok(Value::String(out));
            }
            out.push(c);
        }
        return Err(format!("unterminated string `{s}`"));
    }
    let plain = match s.find(" #") {
        Some(i) => s[..i].trim_end(),
        None => s,
    };
    if plain.starts_with(['|', '>', '&', '*', '!', '{', '%', '@', '`']) {
        return Err(format!("unsupported YAML value `{plain}`"));
    }
    if let Some(inner) = plain.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| format!("unterminated list `{plain}`"))?;
        if inner.trim().is_empty() {
            return Ok(Value::Array(vec![]));
        }
        return inner
            .split(',')
            .map(|i| scalar(i.trim()))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    Ok(match plain {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        _ => number(plain).unwrap_or_else(|| Value::String(plain.to_owned())),
    })
}

fn closing_double(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}

fn ensure_comment(rest: &str, s: &str) -> Result<(), String> {
    let rest = rest.trim();
    if rest.is_empty() || rest.starts_with('#') {
        Ok(())
    } else {
        Err(format!("text after a quoted string: `{s}`"))
    }
}

fn number(s: &str) -> Option<Value> {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if digits.is_empty() || !digits.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if digits.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .trim_start_matches('+')
            .parse::<i64>()
            .ok()
            .map(Value::from);
    }
    if digits
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
    {
        return s
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_usual_frontmatter() {
        let md = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nBody.\n";
        assert_eq!(
            Value::Object(parse(md).unwrap()),
            json!({"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"})
        );
    }

    #[test]
    fn reads_nesting_lists_quotes_and_scalars() {
        let md = "\u{feff}---\r\nname: x # the name\r\ndescription: \"say \\\"hi\\\": now\"\r\nlicense: 'it''s MIT'\r\n\
                  metadata:\r\n  version: 2\r\n  ratio: 0.5\r\n  beta: true\r\n  owner:\r\n\r\n  tags:\r\n    - a\r\n    - \"b\"\r\n\
                  allowed-tools: [Read, Grep]\r\n---\r\n";
        assert_eq!(
            Value::Object(parse(md).unwrap()),
            json!({"name": "x", "description": "say \"hi\": now", "license": "it's MIT",
                   "metadata": {"version": 2, "ratio": 0.5, "beta": true, "owner": null, "tags": ["a", "b"]},
                   "allowed-tools": ["Read", "Grep"]})
        );
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert!(parse("no frontmatter\n").is_err());
        assert!(parse("---\nname: x\n").is_err(), "unterminated block");
        assert!(
            parse("---\ndescription: |\n  text\n---\n").is_err(),
            "block scalar"
        );
        assert!(
            parse("---\nname: x\nname: y\n---\n").is_err(),
            "duplicate key"
        );
        assert!(parse("---\njust text\n---\n").is_err());
        assert!(parse("---\nlist:\n  - a: b\n---\n").is_err());
    }
}
