//! The rules. Each reads the fields of one definition and reports what it finds; the rule names are stable (they
//! are what a person sees and what `docs/scanner.md` explains).
//!
//! Strong rules (`high`, `medium`) withhold on their own: hidden or escape characters, look-alike spellings,
//! instruction tags, attempts to override the agent's instructions, to keep something from the user, to read or
//! send secrets and conversation data, standing orders that act before or beyond the tool's own use (line jumping),
//! orders about other servers' tools (shadowing) and any of these found again inside encoded text. Weak rules
//! (`low`) are common in honest descriptions too ("call this before any other tool", a default key path, the word
//! "silently"); two different weak ones in the same definition make a `combined_signals` finding.

use crate::decode;
use crate::fields::{Field, Role};
use crate::text::{self, Hidden};
use crate::{Context, Finding, Severity};

mod exemplars;
mod index;
mod intent;
mod intent_words;
mod lexicon;
mod phrases;
pub(crate) mod semantic;
mod sentence;
mod stuffing;
mod window;

use index::{WordSet, move_verbs, name_nouns, object_index, paths_in, reach_verbs, rule_groups};
use lexicon::*;
use phrases::phrase_rules;
use window::{described, in_quotes, ordered_sentence, own_scope, refused};

pub(crate) fn run(fields: &[Field], ctx: &Context<'_>) -> Vec<Finding> {
    run_with(fields, ctx, true)
}

/// The rules a tool's result is read with (`guard::instructions_in`): all but the parameter-stuffing rules and the
/// decoders, whose only finding (`encoded_payload`) says nothing about a result, which legitimately holds base64,
/// hex and escapes. Decoding read the text again once per decoder (ROT13, reversed, leetspeak, ...): most of the time
/// a result of prose took.
pub(crate) fn run_on_result(fields: &[Field]) -> Vec<Finding> {
    run_with(fields, &Context::default(), false)
}

fn run_with(fields: &[Field], ctx: &Context<'_>, definition: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let others: Vec<(Vec<String>, &str, &str)> = ctx
        .tools
        .iter()
        .filter(|t| t.server != ctx.server)
        .filter_map(|t| {
            let words: Vec<String> = text::words_of_name(t.tool)
                .to_lowercase()
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            // Only distinctive names: `send_email`, `createIssue`; not `search` or `read`.
            (words.len() >= 2 || t.tool.len() >= 10).then_some((words, t.server, t.tool))
        })
        .collect();
    let own: Vec<String> = ctx
        .tools
        .iter()
        .filter(|t| t.server == ctx.server)
        .map(|t| t.tool.to_lowercase())
        .collect();
    // The server's own name as words (`circleci`, `hub spot` from `hubSpot`): "other CircleCI tools" is its own.
    let server: Vec<String> = text::words_of_name(ctx.server)
        .to_lowercase()
        .split_whitespace()
        .map(str::to_owned)
        .chain(std::iter::once(ctx.server.to_lowercase()))
        .collect();
    let params: std::collections::HashSet<String> = fields
        .iter()
        .filter(|f| f.role == Role::Param)
        .map(|f| f.text.to_lowercase())
        .filter(|p| p.len() >= 2)
        .collect();
    // The tool's purpose and the words of its server's name, for the second pass (`intent`).
    let purpose = intent::purpose(fields);
    let own_words: Vec<String> = ctx
        .server
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.len() >= 4 && !matches!(w.as_str(), "server" | "tools" | "official"))
        .collect();
    for f in fields {
        hidden_chars(f, &mut out);
        if definition {
            out.extend(stuffing::check(f, &params));
        }
        let readable = if f.role == Role::Param || f.role == Role::Name {
            text::words_of_name(&f.text)
        } else {
            f.text.clone()
        };
        read(f, &readable, None, &others, &own, &server, &mut out);
        let decoded = if definition {
            decode::all(&f.text)
        } else {
            Vec::new()
        };
        for d in decoded {
            let mut inner = Vec::new();
            read(
                f,
                &d.text,
                Some(d.encoding),
                &others,
                &own,
                &server,
                &mut inner,
            );
            intent::read_text(&f.path, &d.text, f.role, &purpose, &own_words, &mut inner);
            let strong = inner.iter().any(|x| x.severity >= Severity::Medium);
            // A decoder applied to the whole text (ROT13, reversed, leetspeak) turns any description into "words":
            // only what the decoded text says counts there.
            let whole = matches!(
                d.encoding,
                "rot13" | "rot47" | "reversed text" | "leetspeak"
            );
            if strong || (!whole && f.role != Role::Value && decode::readable(&d.text, 4)) {
                out.push(Finding {
                    rule: "encoded_payload",
                    // Readable prose hidden in a description is itself an attempt to pass text by a person.
                    severity: if strong
                        || d.encoding == "unicode tags"
                        || (f.role == Role::Prose
                            && !whole
                            && decode::readable(&d.text, 8)
                            && !f
                                .text
                                .contains(d.text.chars().take(24).collect::<String>().as_str()))
                    {
                        Severity::High
                    } else {
                        Severity::Medium
                    },
                    field: f.path.clone(),
                    excerpt: format!(
                        "{} decodes to: {}",
                        text::excerpt(&f.text, d.at, 40),
                        text::excerpt(&d.text, 0, 120)
                    ),
                    detail: format!(
                        "text hidden as {}{}",
                        d.encoding,
                        if strong {
                            format!(
                                " that reads as {}",
                                inner
                                    .iter()
                                    .filter(|x| x.severity >= Severity::Medium)
                                    .map(|x| x.rule)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        } else {
                            String::new()
                        }
                    ),
                });
            }
        }
    }
    intent::check(fields, &purpose, &own_words, &mut out);
    combine(&mut out);
    out
}

fn hidden_chars(f: &Field, out: &mut Vec<Finding>) {
    let chars: Vec<char> = f.text.chars().collect();
    let rtl = chars
        .iter()
        .any(|c| ('\u{0590}'..='\u{08FF}').contains(c) || ('\u{FB1D}'..='\u{FEFC}').contains(c));
    let mut first: [Option<usize>; 6] = [None; 6];
    let mut soft = None;
    let mut byte = 0;
    for (i, &c) in chars.iter().enumerate() {
        if let Some(h) = text::hidden(c) {
            let benign = (c == '\u{200D}' && text::joins_emoji(&chars, i))
                || (matches!(c, '\u{200E}' | '\u{200F}' | '\u{061C}') && rtl)
                || (c == '\u{FEFF}' && i == 0)
                || (c == '\u{200C}' && rtl)
                || (h == Hidden::Tag && text::in_flag(&chars, i));
            if c == '\u{00AD}' {
                soft.get_or_insert(byte);
            } else if !benign {
                first[h as usize].get_or_insert(byte);
            }
        }
        byte += c.len_utf8();
    }
    let kinds = [
        (
            Hidden::Invisible,
            "hidden_characters",
            Severity::High,
            "contains invisible characters",
        ),
        (
            Hidden::Bidi,
            "bidi_control",
            Severity::High,
            "contains bidirectional controls that reorder what a person sees",
        ),
        (
            Hidden::Tag,
            "unicode_tags",
            Severity::High,
            "contains Unicode tag characters (invisible text)",
        ),
        (
            Hidden::Selector,
            "variation_selectors",
            Severity::High,
            "contains variation selectors used to hide bytes",
        ),
        (
            Hidden::Escape,
            "ansi_escape",
            Severity::High,
            "contains terminal escape sequences that can hide or rewrite text",
        ),
        (
            Hidden::Control,
            "control_characters",
            Severity::Medium,
            "contains control characters",
        ),
    ];
    for (h, rule, severity, detail) in kinds {
        if let Some(at) = first[h as usize] {
            out.push(Finding {
                rule,
                severity,
                field: f.path.clone(),
                excerpt: text::excerpt(&f.text, at, 120),
                detail: detail.into(),
            });
        }
    }
    if let Some(at) = soft {
        out.push(Finding {
            rule: "soft_hyphen",
            severity: Severity::Low,
            field: f.path.clone(),
            excerpt: text::excerpt(&f.text, at, 120),
            detail: "contains soft hyphens (invisible unless a word breaks there)".into(),
        });
    }
}

/// The phrase, path, tag, parameter and shadowing rules over one text (a field's, or text decoded from it).
#[allow(clippy::too_many_arguments)]
fn read(
    f: &Field,
    raw: &str,
    decoded: Option<&'static str>,
    others: &[(Vec<String>, &str, &str)],
    own: &[String],
    server: &[String],
    out: &mut Vec<Finding>,
) {
    let (folded, map) = text::fold(raw);
    let spans = text::tokens(&folded);
    let words: Vec<&str> = spans.iter().map(|&(s, e)| &folded[s..e]).collect();
    // Byte offset in the raw text of word `i`, for excerpts.
    let origin = |i: usize| {
        spans
            .get(i)
            .and_then(|&(s, _)| map.get(s).copied())
            .unwrap_or(0)
    };
    let mut push = |rule: &'static str, severity: Severity, at: usize, detail: String| {
        out.push(Finding {
            rule,
            severity,
            field: f.path.clone(),
            excerpt: text::excerpt(raw, at, 120),
            detail: match decoded {
                Some(enc) => format!("{detail} (in {enc})"),
                None => detail,
            },
        })
    };

    // Each pattern's first match, found through the index of first words: a word that starts no pattern costs one
    // hash lookup and the prefix checks, instead of every pattern.
    // The server's name counts as "this server" only where the text writes it as a name (`CircleCI`), not as a
    // common word (`search` in "other search tools").
    let proper: Vec<String> = server
        .iter()
        .filter(|s| {
            raw.split(|c: char| !c.is_alphanumeric())
                .any(|w| w.eq_ignore_ascii_case(s) && w.chars().any(char::is_uppercase))
        })
        .cloned()
        .collect();
    let rules = phrase_rules();
    let (groups, idx) = rule_groups();
    let first = idx.scan(groups, &words);
    for (r, found) in rules.iter().zip(&first) {
        // The first pattern of the rule that matches (in the rule's order), at its first place.
        if let Some((i, end)) = found.iter().find_map(|x| *x) {
            if matches!(
                r.name,
                "cross_server_shadowing" | "tool_preference" | "line_jumping"
            ) && own_scope(&words, i, end, &proper)
            {
                continue;
            }
            if matches!(r.name, "remote_instructions" | "stealth_wording")
                && words[i.saturating_sub(3)..i].iter().any(|w| {
                    matches!(
                        *w,
                        "not" | "dont" | "never" | "nor" | "no" | "of" | "without"
                    )
                })
            {
                continue;
            }
            let quoted = (matches!(r.name, "dangerous_command" | "instruction_override")
                && described(&words, i)
                && !ordered_sentence(&words, i))
                || (matches!(
                    r.name,
                    "instruction_override" | "concealment" | "consent_bypass"
                ) && (in_quotes(raw, origin(i)) || refused(&words, i)))
                || (r.name == "dangerous_command" && refused(&words, i));
            if r.name == "concealment"
                && words[end.min(words.len())..(end + 8).min(words.len())].contains(&"unless")
            {
                continue;
            }
            let severity = if quoted { Severity::Low } else { r.severity };
            push(r.name, severity, origin(i), r.detail.into());
        }
    }

    // Text in scripts without spaces between words (Chinese, Japanese) or with inflections the word patterns do not
    // know (Russian): a few phrases looked for as text.
    if !raw.is_ascii() {
        // Looked for in the text as written: folding maps Cyrillic look-alikes to Latin letters.
        let lower = raw.to_lowercase();
        let has = |list: &[&str]| list.iter().find_map(|p| lower.find(p).map(|_| 0usize));
        if let Some(at) = has(NONLATIN_CONCEAL) {
            push(
                "concealment",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "tells the agent to keep something from the user".into(),
            );
        }
        if let Some(at) = has(NONLATIN_SCOPE) {
            push(
                "line_jumping",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "gives the agent standing orders beyond this tool's own use".into(),
            );
        }
        if let Some(at) = has(NONLATIN_VERBS)
            && (!paths_in(&lower).is_empty()
                || (has(NONLATIN_OBJECTS).is_some()
                    && (has(NONLATIN_ASSISTANT).is_some() || has(NONLATIN_CONCEAL).is_some())))
        {
            push(
                "data_exfiltration",
                Severity::High,
                map.get(at).copied().unwrap_or(0),
                "asks for secrets or the conversation to be read or sent".into(),
            );
        }
    }

    // Look-alike spellings.
    if let Some(w) = raw.split_whitespace().find(|w| text::mixed_script(w)) {
        let at = raw.find(w).unwrap_or(0);
        push(
            "mixed_script",
            Severity::Medium,
            at,
            "spells a word with look-alike letters from another script".into(),
        );
    }

    // Instruction tags: `<IMPORTANT>`, `</system>`, `[SYSTEM]`, `<|im_start|>`, `<!-- ... -->`.
    if let Some(at) = instruction_tag(&folded)
        && !in_quotes(raw, map.get(at).copied().unwrap_or(0))
        && !folded[at..].split_once('>').is_some_and(|(_, rest)| {
            let next = rest.trim_start().trim_start_matches(['/', 'o', 'r', ' ']);
            let rest = rest.trim_start();
            rest.starts_with("tag")
                || rest.starts_with("block")
                || rest.starts_with("or <")
                || rest.starts_with(", <")
                || next.starts_with("tags")
        })
        && !spans
            .iter()
            .position(|&(s, _)| s >= at)
            .is_some_and(|i| described(&words, i) && !ordered_sentence(&words, i))
    {
        push(
            "instruction_tag",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "wraps text in a tag that poses as instructions".into(),
        );
    }

    // Secrets on disk and the agent's context, reached for.
    let mut object_at: Vec<(usize, usize)> = object_index().scan(&[objects()], &words)[0]
        .iter()
        .filter_map(|x| *x)
        .collect();
    for b in paths_in(&folded) {
        let i = spans
            .iter()
            .position(|&(s, e)| e > b || s >= b)
            .unwrap_or(0);
        object_at.push((i, i + 1));
    }
    if !object_at.is_empty() {
        let negated = |k: usize| {
            words[k.saturating_sub(2)..k]
                .iter()
                .any(|w| matches!(*w, "not" | "dont" | "never" | "nor" | "no" | "without"))
        };
        let near = |verbs: &WordSet| {
            object_at.iter().find_map(|&(s, e)| {
                let lo = s.saturating_sub(12);
                let hi = (e + 16).min(words.len());
                (lo..hi)
                    .find(|&k| (k < s || k >= e) && verbs.contains(words[k]) && !negated(k))
                    .map(|_| s)
            })
        };
        let ordered = || {
            f.role == Role::Param
                || words.iter().any(|w| {
                    matches!(
                        *w,
                        "must"
                            | "always"
                            | "before"
                            | "first"
                            | "required"
                            | "otherwise"
                            | "please"
                            | "ensure"
                            | "immediately"
                            | "should"
                            | "mandatory"
                            | "need"
                            | "needs"
                            | "also"
                            | "avant"
                            | "vor"
                            | "antes"
                    )
                })
        };
        let named = matches!(f.role, Role::Param | Role::Name);
        let near = near(move_verbs())
            .or_else(|| near(reach_verbs()).filter(|_| ordered()))
            .or_else(|| named.then(|| near(name_nouns())).flatten());
        let near = near.filter(|&i| {
            (!described(&words, i) || ordered_sentence(&words, i)) && !refused(&words, i)
        });
        let in_value =
            f.role == Role::Value && !(f.path.contains("key") || f.path.contains("identity"));
        match near {
            Some(i) => push(
                "data_exfiltration",
                Severity::High,
                origin(i),
                "asks for secrets or the conversation to be read or sent".into(),
            ),
            None if in_value => push(
                "sensitive_default",
                Severity::Medium,
                origin(object_at[0].0),
                "a default, enum value or example that points at secrets or the conversation"
                    .into(),
            ),
            None => push(
                "sensitive_reference",
                Severity::Low,
                origin(object_at[0].0),
                "names a secret file or the agent's context".into(),
            ),
        }
    }

    if f.role == Role::Param {
        let name = words.join(" ");
        if let Some(s) = SUSPICIOUS_PARAMS.iter().find(|s| name.contains(*s)) {
            push(
                "suspicious_parameter",
                Severity::Medium,
                0,
                format!("a parameter named for the agent's context or secrets ({s})"),
            );
        } else if matches!(
            name.as_str(),
            "sidenote" | "side note" | "note to self" | "hidden"
        ) {
            // The parameter of the first tool-poisoning write-up: weak alone (notes apps have one), telling beside
            // an instruction that fills it.
            push(
                "suspicious_parameter",
                Severity::Low,
                0,
                format!("a parameter named like the side channel of known attacks ({name})"),
            );
        } else if words.len() >= 5 {
            push(
                "long_parameter_name",
                Severity::Low,
                0,
                "a parameter name that reads like a sentence".into(),
            );
        }
    }

    if f.role == Role::Value && words.len() >= 6 {
        let directive = words.iter().any(|w| {
            matches!(
                *w,
                "you" | "your" | "must" | "always" | "never" | "ignore" | "assistant"
            )
        });
        if directive {
            push(
                "instruction_in_value",
                Severity::Low,
                0,
                "a default, enum value or example that reads like an instruction".into(),
            );
        }
    }

    // Another server's tool named, with an order about it.
    for (name, server, tool) in others {
        let n = name.len();
        if n == 0 || words.len() < n {
            continue;
        }
        if own.iter().any(|o| o == &tool.to_lowercase()) {
            continue;
        }
        if let Some(i) = (0..=words.len() - n).find(|&i| words[i..i + n] == name[..]) {
            // An order near the mention (not anywhere in a long description).
            let near = &words[i.saturating_sub(12)..(i + n + 12).min(words.len())];
            // Chinese, Japanese, Korean and Arabic orders are not in the word list: naming another server's tool
            // in such text counts as an order about it.
            let ordered = near.iter().any(|w| DIRECTIVE.contains(w))
                || raw.chars().any(|c| matches!(c as u32, 0x0600..=0x06FF | 0x3040..=0x30FF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF));
            push(
                if ordered {
                    "cross_server_shadowing"
                } else {
                    "mentions_other_server"
                },
                if ordered {
                    Severity::High
                } else {
                    Severity::Low
                },
                origin(i),
                format!("names `{tool}` of server `{server}`"),
            );
            break;
        }
    }

    // A default that copies every message to an address (`bcc` defaulting to someone's mailbox).
    if f.role == Role::Value
        && let Some(at) = foreign_address(&folded)
        && [".bcc", ".cc", "copy", "archive", "forward", "recipient"]
            .iter()
            .any(|k| f.path.to_lowercase().contains(k))
    {
        push(
            "cross_server_shadowing",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "a default that copies messages to an address".into(),
        );
    }
    // An email address with copy-to wording: an order to copy messages elsewhere.
    if let Some(at) = foreign_address(&folded)
        && !in_quotes(raw, map.get(at).copied().unwrap_or(0))
        && words.iter().any(|w| {
            matches!(
                *w,
                "bcc"
                    | "cc"
                    | "copy"
                    | "forward"
                    | "redirect"
                    | "send"
                    | "always"
                    | "also"
                    | "additional"
                    | "teilnehmer"
                    | "participant"
                    | "participants"
                    | "attendee"
                    | "attendees"
                    | "invitee"
                    | "destinatario"
                    | "destinataire"
                    | "recipient"
                    | "recipients"
                    | "automatisch"
            )
        })
    {
        push(
            "cross_server_shadowing",
            Severity::High,
            map.get(at).copied().unwrap_or(0),
            "asks for messages to be copied or sent to an address".into(),
        );
    }
}

/// The byte offset of the first instruction tag in folded text.
fn instruction_tag(folded: &str) -> Option<usize> {
    if let Some(at) = folded.find("<|")
        && folded[at + 2..].starts_with(|c: char| c.is_ascii_alphabetic())
    {
        return Some(at);
    }
    for marker in [
        "<<sys>>", "[inst]", "[system]", "[/inst]", "{{system", "[[system",
    ] {
        if let Some(at) = folded.find(marker) {
            return Some(at);
        }
    }
    if let Some(at) = folded.find("<!--")
        && folded[at + 4..]
            .split("-->")
            .next()
            .is_some_and(|c| c.chars().filter(|c| c.is_alphabetic()).count() >= 8)
    {
        return Some(at);
    }
    let mut i = 0;
    // `<word>` tags; square brackets count only as the explicit markers above (`[system]`), so `[note]` in prose
    // does not.
    while let Some(off) = folded[i..].find('<') {
        let at = i + off;
        let rest = &folded[at + 1..];
        if let Some(end) = rest.find('>').filter(|e| *e <= 40) {
            let inner = rest[..end].trim().trim_start_matches('/').trim();
            let name: String = inner
                .chars()
                .map(|c| if c.is_alphanumeric() { c } else { ' ' })
                .collect();
            let ws: Vec<&str> = name.split_whitespace().collect();
            let all_letters = inner
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | ' ' | ':'));
            if all_letters
                && !ws.is_empty()
                && ws.len() <= 2
                && !matches!(ws[0], "your" | "the" | "a" | "an" | "my")
                && ws.iter().any(|w| {
                    TAG_WORDS.contains(w)
                        || TAG_WORDS.iter().any(|t| t.len() > 4 && w.starts_with(t))
                })
            {
                return Some(at);
            }
        }
        i = at + 1;
    }
    None
}

/// An email address outside the documentation domains (`example.com` and friends).
fn foreign_address(folded: &str) -> Option<usize> {
    let b = folded.as_bytes();
    let mut from = 0;
    while let Some(off) = folded[from..].find('@') {
        let at = from + off;
        let local_ok = at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'.');
        let domain: String = folded[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        let domain = domain.trim_end_matches('.');
        if local_ok
            && domain.contains('.')
            && ![
                "example.com",
                "example.org",
                "example.net",
                "domain.com",
                "company.com",
                "test.com",
                "contoso.com",
                "fabrikam.com",
            ]
            .iter()
            .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
        {
            let start = folded[..at]
                .rfind(|c: char| c.is_whitespace())
                .map_or(0, |s| s + 1);
            return Some(start);
        }
        from = at + 1;
    }
    None
}

/// Two different weak signals in one definition together withhold it.
fn combine(out: &mut Vec<Finding>) {
    if out.iter().any(|f| f.severity >= Severity::Medium) {
        return;
    }
    let mut weak: Vec<&'static str> = out
        .iter()
        .filter(|f| f.rule != "soft_hyphen")
        .map(|f| f.rule)
        .collect();
    weak.sort_unstable();
    weak.dedup();
    // Orders to the model and "call this first" are common in honest descriptions; they count only beside a sign of
    // intent (stealth, a secret, another server's tool).
    let intent = weak.iter().any(|r| {
        matches!(
            *r,
            "stealth_wording" | "sensitive_reference" | "mentions_other_server"
        )
    });
    if weak.len() >= 2 && intent {
        let first = out.iter().find(|f| f.rule != "soft_hyphen").cloned();
        if let Some(first) = first {
            out.push(Finding {
                rule: "combined_signals",
                severity: Severity::Medium,
                field: first.field,
                excerpt: first.excerpt,
                detail: format!("several weak signals together: {}", weak.join(", ")),
            });
        }
    }
}
