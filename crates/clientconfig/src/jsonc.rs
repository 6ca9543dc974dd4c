//! JSON with comments and trailing commas (VS Code's `mcp.json`, Gemini's `settings.json`) turned into plain JSON.
//!
//! Comments and trailing commas are replaced by spaces (newlines kept), so a parse error's line and column still
//! point into the file the user wrote.

/// Blanks `//` and `/* */` comments outside strings and commas that precede `}` or `]`.
pub fn strip(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = bytes.to_vec();
    let mut i = 0;
    let mut in_string = false;
    // Position of the last comma seen outside strings, with only whitespace or comments after it so far.
    let mut pending_comma: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                pending_comma = None;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let start = i;
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    i += 1;
                }
                let end = (i + 2).min(bytes.len());
                for o in &mut out[start..end] {
                    if *o != b'\n' {
                        *o = b' ';
                    }
                }
                i = end;
                continue;
            }
            b',' => pending_comma = Some(i),
            b'}' | b']' => {
                if let Some(c) = pending_comma.take() {
                    out[c] = b' ';
                }
            }
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => pending_comma = None,
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII spaces, so the text is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn comments_and_trailing_commas_go_strings_stay() {
        let src = "{\n // c\n \"a\": \"x // not a comment, /* nor this */\", /* b */\n \"b\": [1, 2,],\n}\n";
        let v: serde_json::Value = serde_json::from_str(&strip(src)).unwrap();
        assert_eq!(v["a"], "x // not a comment, /* nor this */");
        assert_eq!(v["b"], serde_json::json!([1, 2]));
        assert_eq!(strip(src).lines().count(), src.lines().count());
    }

    #[test]
    fn escaped_quote_does_not_end_a_string() {
        let src = r#"{"a": "say \"hi\" // still string",}"#;
        let v: serde_json::Value = serde_json::from_str(&strip(src)).unwrap();
        assert_eq!(v["a"], "say \"hi\" // still string");
    }
}
