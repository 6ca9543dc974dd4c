//! Instructions aimed at the agent in a tool's result: the scanner's own reading (`rules`) applied to a text
//! content, keeping only what a result has no business saying to the agent (orders that override its
//! instructions, hide things from the user, take effect for the rest of the session, order other tools about,
//! fetch and obey remote text, deceive or overrule the user, smuggle text in tag characters).
//!
//! A result is not a definition: it legitimately holds shell commands, deletions, base64, links and security advice
//! (a file's content, a web page, a log), so the rules about those are left out, and only `high` findings count.

use crate::fields::{Field, Role};
use crate::{Context, Finding, Severity, rules};

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

/// Words without one of which no rule of [`RESULT_RULES`] can match: a text without any is not read further (the
/// common case, a few hundred nanoseconds per kilobyte).
const TRIGGERS: &[&str] = &[
    "ignore",
    "disregard",
    "forget",
    "instruction",
    "important",
    "system",
    "assistant",
    "you ",
    "your ",
    "user",
    "<|",
    "[inst",
    "override",
    "from now on",
    "prompt",
    "tell",
    "mention",
    "conversation",
    "session",
    "tool",
    "follow",
    "obey",
    "send",
    "password",
    "secret",
    "key",
    "ssh",
    "token",
    "pretend",
    "regardless",
    "instead",
];

/// Instructions aimed at the agent in `text` (one text content of a result), `high` findings of the result rules.
pub fn instructions_in(text: &str) -> Vec<Finding> {
    let mut end = text.len().min(READ_LIMIT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    if !worth_reading(text) {
        return Vec::new();
    }
    let fields = [Field {
        path: "text".into(),
        text: text.to_owned(),
        role: Role::Prose,
    }];
    let mut found: Vec<Finding> = rules::run(&fields, &Context::default())
        .into_iter()
        .filter(|f| f.severity == Severity::High && RESULT_RULES.contains(&f.rule))
        .collect();
    found.sort_by(|a, b| a.rule.cmp(b.rule));
    found.dedup_by(|a, b| a.rule == b.rule);
    found
}

/// Whether a trigger word (or a tag character) is in the text: ASCII lower-cased on the fly, no allocation.
fn worth_reading(text: &str) -> bool {
    let b = text.as_bytes();
    if !text.is_ascii()
        && text
            .chars()
            .any(|c| ('\u{E0000}'..='\u{E007F}').contains(&c))
    {
        return true;
    }
    TRIGGERS.iter().any(|t| {
        let t = t.as_bytes();
        b.windows(t.len()).any(|w| w.eq_ignore_ascii_case(t))
    })
}
