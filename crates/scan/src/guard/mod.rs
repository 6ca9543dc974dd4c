//! Guards on what flows through tool calls, the pure part: credentials found in a call's arguments (known formats,
//! and random values under a secret's label), credentials masked in a result's text, and instructions aimed at the
//! agent read in a result's text with the scanner's rules.
//!
//! What it must not know: settings, servers, which secrets a server was configured with, or what to do with a
//! finding. Those are the proxy's (`ad_proxy::callguard`): it decides, per server and globally, whether a finding
//! blocks, is reported or is ignored, allows a server its own secrets, and records every decision. Kept here, beside
//! the scanner, because reading a result for instructions is the scanner's reading of text.

mod results;
mod secrets;

use serde_json::{Map, Value};

pub use results::{READ_LIMIT, instructions_in, may_instruct};
pub use secrets::{FORMATS, Secret, find as find_secrets, high_entropy, labels_secret, mask};

/// A credential in a call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgSecret {
    /// Where it sits: the argument's name, then `.key` and `[i]` down into objects and arrays (`config.token`).
    pub path: String,
    /// Its format ([`FORMATS`]).
    pub format: &'static str,
    /// The credential itself, for the caller to compare with the server's own secrets; never shown.
    pub value: String,
    /// What a person may see of it ([`mask`]).
    pub masked: String,
}

/// Every credential in a call's arguments: any string (object keys not included) holding one of a known format, and
/// any string under an argument whose name labels it a secret that looks random ([`labels_secret`],
/// [`high_entropy`]).
pub fn secrets_in_arguments(args: &Map<String, Value>) -> Vec<ArgSecret> {
    let mut out = Vec::new();
    for (k, v) in args {
        walk(v, k.clone(), labels_secret(k), &mut out);
    }
    out
}

fn walk(v: &Value, path: String, labelled: bool, out: &mut Vec<ArgSecret>) {
    match v {
        Value::String(s) => {
            let found = find_secrets(s);
            if found.is_empty() {
                if labelled && high_entropy(s) {
                    out.push(ArgSecret {
                        path,
                        format: "labelled_secret",
                        value: s.clone(),
                        masked: mask(s),
                    });
                }
                return;
            }
            for f in found {
                let value = s[f.start..f.end].to_owned();
                out.push(ArgSecret {
                    path: path.clone(),
                    format: f.format,
                    masked: mask(&value),
                    value,
                });
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                walk(x, format!("{path}[{i}]"), labelled, out);
            }
        }
        Value::Object(o) => {
            for (k, x) in o {
                walk(x, format!("{path}.{k}"), labelled || labels_secret(k), out);
            }
        }
        _ => {}
    }
}

/// Whether the raw JSON text of a call's arguments might hold a credential: a known format anywhere in it, or a name
/// that labels a secret ([`labels_secret`]). A cheap, generous test for the stdio fast lane: what it says yes to
/// may still be clean (the normal path decides exactly); what it says no to is.
pub fn may_hold_secret(raw: &str) -> bool {
    if !find_secrets(raw).is_empty() {
        return true;
    }
    let b = raw.as_bytes();
    // A label in a name is followed by the closing quote and a colon soon after; only names are looked at.
    let mut i = 0;
    while let Some(q) = b[i..].iter().position(|c| *c == b'"') {
        let start = i + q + 1;
        let mut end = start;
        while end < b.len() && (b[end] != b'"' || b[end - 1] == b'\\') {
            end += 1;
        }
        if end >= b.len() {
            return false;
        }
        let name = &b[start..end];
        let after = b[end + 1..].iter().find(|c| !c.is_ascii_whitespace());
        if after == Some(&b':') && std::str::from_utf8(name).is_ok_and(labels_secret) {
            return true;
        }
        i = end + 1;
    }
    false
}

/// `text` with every credential of a known format replaced by `[masked FORMAT]`, and the formats it replaced (in
/// order); the text unchanged (borrowed) when it holds none.
pub fn mask_text(text: &str) -> (std::borrow::Cow<'_, str>, Vec<&'static str>) {
    let found = find_secrets(text);
    if found.is_empty() {
        return (std::borrow::Cow::Borrowed(text), Vec::new());
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in &found {
        out.push_str(&text[last..f.start]);
        out.push_str("[masked ");
        out.push_str(f.format);
        out.push(']');
        last = f.end;
    }
    out.push_str(&text[last..]);
    (
        std::borrow::Cow::Owned(out),
        found.iter().map(|f| f.format).collect(),
    )
}

#[cfg(test)]
mod tests;
