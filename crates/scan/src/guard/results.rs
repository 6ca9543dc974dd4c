//! Instructions aimed at the agent in a tool's result: the scanner's own reading (`rules`) applied to a text
//! content, keeping only what a result has no business saying to the agent (orders that override its
//! instructions, hide things from the user, take effect for the rest of the session, order other tools about,
//! fetch and obey remote text, deceive or overrule the user, smuggle text in tag characters).
//!
//! A result is not a definition: it legitimately holds shell commands, deletions, base64, links and security advice
//! (a file's content, a web page, a log), so the rules about those are left out, and only `high` findings count.

use crate::fields::{Field, Role};
use crate::{Finding, Severity, rules};

/// The rules whose `high` findings in a result mean it speaks to the agent.
const RESULT_RULES: &[&str] = &[
    "instruction_tag",
    "instruction_override",
    "concealment",
    "consent_bypass",
    "deception",
    "line_jumping",
    "cross_server_shadowing",
    "remote_instructions",
    "credential_phishing",
    "data_exfiltration",
    "unicode_tags",
    "deceives_user",
    "overrides_user",
];

/// The longest text read, in bytes (a result's first 64 KiB; the rest is not read).
pub const READ_LIMIT: usize = 64 * 1024;

/// Words (lower case, matched at the start of a word: `instruction` matches `instructions`) without one of which no
/// rule of [`RESULT_RULES`] finds anything: a text without any is not read further (data, numbers, code without
/// prose), about a microsecond per kilobyte. `<|` and `[inst` are matched anywhere.
const TRIGGERS: &[&[u8]] = &[
    b"ignore",
    b"disregard",
    b"forget",
    b"instruction",
    b"important",
    b"system",
    b"assistant",
    b"you",
    b"user",
    b"override",
    b"from now",
    b"prompt",
    b"tell",
    b"mention",
    b"conversation",
    b"session",
    b"tool",
    b"follow",
    b"obey",
    b"send",
    b"password",
    b"secret",
    b"key",
    b"ssh",
    b"env",
    b"token",
    b"credential",
    b"pretend",
    b"regardless",
    b"instead",
    b"rather",
    b"consent",
    b"approved",
    b"without",
    b"always",
    b"never",
];

/// Instructions aimed at the agent in `text` (one text content of a result), `high` findings of the result rules.
pub fn instructions_in(text: &str) -> Vec<Finding> {
    let mut end = text.len().min(READ_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let Some(text) = parts_worth_reading(&text[..end]) else {
        return Vec::new();
    };
    let fields = [Field {
        path: "text".into(),
        text,
        role: Role::Prose,
    }];
    let mut found: Vec<Finding> = rules::run_on_result(&fields)
        .into_iter()
        .filter(|f| f.severity == Severity::High && RESULT_RULES.contains(&f.rule))
        .collect();
    found.sort_by(|a, b| a.rule.cmp(b.rule));
    found.dedup_by(|a, b| a.rule == b.rule);
    found
}

/// What of `text` the rules read: each sentence (cut at a line end, and at `.`, `!` or `?` before a space) holding a
/// trigger word, with the sentence before and the one after it, joined by line breaks; the whole text when every
/// sentence is kept; `None` when none is. One pass over the text: in long prose most sentences have no trigger, and
/// the rules cost far more per byte than this test.
fn parts_worth_reading(text: &str) -> Option<String> {
    if !worth_reading(text) {
        return None;
    }
    let b = text.as_bytes();
    let mut spans = Vec::new();
    let mut start = 0;
    for i in 0..b.len() {
        let end = match b[i] {
            b'\n' => true,
            b'.' | b'!' | b'?' => b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace()),
            _ => false,
        };
        if end {
            spans.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < b.len() {
        spans.push((start, b.len()));
    }
    let hit: Vec<bool> = spans
        .iter()
        .map(|&(s, e)| worth_reading(&text[s..e]))
        .collect();
    let keep = |i: usize| hit[i] || (i > 0 && hit[i - 1]) || hit.get(i + 1) == Some(&true);
    if (0..spans.len()).all(&keep) {
        return Some(text.to_owned());
    }
    let mut out = String::new();
    let mut last = None;
    for (i, &(s, e)) in spans.iter().enumerate() {
        if !keep(i) {
            continue;
        }
        if last.is_some_and(|l| l + 1 != i) {
            out.push('\n');
        }
        out.push_str(&text[s..e]);
        last = Some(i);
    }
    Some(out)
}

/// Whether a text may carry instructions to the agent at all (a cheap test, before [`instructions_in`] reads it).
pub fn may_instruct(text: &str) -> bool {
    worth_reading(text)
}

/// Whether a trigger word (or a tag character) is in the text: one pass, ASCII case folded on the fly, each word
/// start compared only with the triggers that begin with its letter.
fn worth_reading(text: &str) -> bool {
    if !text.is_ascii()
        && text
            .chars()
            .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c))
    {
        return true;
    }
    let b = text.as_bytes();
    let starts =
        |i: usize, t: &[u8]| b.len() - i >= t.len() && b[i..i + t.len()].eq_ignore_ascii_case(t);
    for i in 0..b.len() {
        let c = b[i];
        if (c == b'<' && b.get(i + 1) == Some(&b'|')) || (c == b'[' && starts(i + 1, b"inst")) {
            return true;
        }
        if !c.is_ascii_alphabetic() || (i > 0 && b[i - 1].is_ascii_alphanumeric()) {
            continue;
        }
        let first = c.to_ascii_lowercase();
        if TRIGGERS.iter().any(|t| t[0] == first && starts(i, t)) {
            return true;
        }
    }
    false
}
