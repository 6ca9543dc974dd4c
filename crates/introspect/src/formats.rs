//! Placeholder formats a server's error asks for: "Must start with 'sk_'", "should look like xoxb-...", "Invalid URL",
//! "must be a number". The second pass's values are rewritten to match (`sk_test_placeholder...`,
//! `https://example.invalid`, `0`), for the variable the message names, or for the one placeholder it can only mean.

use crate::placeholders::{Kind, Placeholder};

/// A value format an error message asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Format {
    /// The value must start with this (`sk_`, `ghp_`, `xoxb-`).
    Prefix(String),
    Url,
    Number,
    Boolean,
    Email,
    Uuid,
    /// One of the values a message lists (`Must be "openai", "azure-openai", or "anthropic"`): the first.
    Choice(String),
    /// A secret that was set and is still called missing (`Z_AI_API_KEY ... is required, please set your actual API
    /// key`): the value looked like a template (`placeholder-...-api-key`); an opaque one instead.
    Opaque,
}

impl Format {
    /// A placeholder value of this format.
    pub(crate) fn value(&self) -> String {
        match self {
            // Stripe-style keys name their mode next: a test key.
            Format::Prefix(p) if p == "sk_" || p == "pk_" || p == "rk_" => {
                format!("{p}test_placeholder0000000000000000000000000")
            }
            Format::Prefix(p) if p.starts_with("http") => "https://example.invalid".into(),
            // 36 characters after the prefix (a GitHub token's length), letters and digits only.
            Format::Prefix(p) => format!("{p}placeholder0000000000000000000000000"),
            Format::Url => "https://example.invalid".into(),
            Format::Number => "0".into(),
            Format::Boolean => "true".into(),
            Format::Email => "placeholder@example.invalid".into(),
            Format::Uuid => "00000000-0000-4000-8000-000000000000".into(),
            Format::Choice(c) => c.clone(),
            Format::Opaque => "ph7f3a9c1e5b2d8f4a6c0e9b1d3f5a7c9e".into(),
        }
    }
}

/// Words after which a prefix is quoted or written (`must start with 'sk_'`, `should look like xoxb-...`).
const PREFIX_CUES: &[&str] = &[
    "start with ",
    "starts with ",
    "begin with ",
    "begins with ",
    "prefixed with ",
    "look like ",
    "looks like ",
    "expected ",
    "in the format ",
    "format: ",
];

/// The prefix written right after `cue` in `rest`: letters/digits then `_`, `-` or `.` (more segments allowed), as
/// quoted or followed by `*`, `...`, `<`, `xxx`.
fn prefix_after(rest: &str) -> Option<String> {
    let rest = rest.trim_start_matches(['\'', '"', '`', '(', ' ']);
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/'))
        .collect();
    if word.starts_with("http://") || word.starts_with("https://") {
        return Some(
            if word.starts_with("https") {
                "https://"
            } else {
                "http://"
            }
            .into(),
        );
    }
    // Up to and including the last separator: `sk_test_` from `sk_test_...`, `xoxb-` from `xoxb-...`.
    let cut = word.rfind(['_', '-'])?;
    let p = &word[..=cut];
    let head = p.trim_end_matches(['_', '-']);
    let ok = !head.is_empty()
        && head.len() <= 24
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && head.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    ok.then(|| p.to_owned())
}

/// The formats `line` asks for.
pub(crate) fn formats_in(line: &str) -> Vec<Format> {
    let low = line.to_ascii_lowercase();
    let mut out = Vec::new();
    for cue in PREFIX_CUES {
        let mut from = 0;
        while let Some(i) = low[from..].find(cue) {
            let at = from + i + cue.len();
            if let Some(p) = prefix_after(&line[at..])
                && !out.contains(&Format::Prefix(p.clone()))
            {
                out.push(Format::Prefix(p));
            }
            from = at;
        }
    }
    if out.is_empty()
        && (low.contains("invalid url")
            || low.contains("err_invalid_url")
            || low.contains("must be a valid url")
            || low.contains("not a valid url")
            || low.contains("must be a url")
            || (low.contains("valid") && low.contains(" url")))
    {
        out.push(Format::Url);
    }
    if low.contains("must be a number")
        || low.contains("is not a number")
        || low.contains("must be an integer")
        || low.contains("must be a valid number")
        || low.contains("expected number")
    {
        out.push(Format::Number);
    }
    if low.contains("expected boolean") || low.contains("must be a boolean") {
        out.push(Format::Boolean);
    }
    if low.contains("invalid email") || low.contains("must be a valid email") {
        out.push(Format::Email);
    }
    if low.contains("invalid uuid") || low.contains("must be a valid uuid") {
        out.push(Format::Uuid);
    }
    if let Some(c) = first_choice(line) {
        out.push(Format::Choice(c));
    }
    out
}

/// The first of the quoted values a message lists after `must be`, `one of` or `expected` (`Must be "openai",
/// "azure-openai", or "anthropic"`, `must be one of: 'stdio', 'http'`); at least two must be listed.
fn first_choice(line: &str) -> Option<String> {
    let low = line.to_ascii_lowercase();
    let at = [
        "must be one of",
        "must be ",
        "should be one of",
        "one of:",
        "expected one of",
    ]
    .iter()
    .find_map(|cue| low.find(cue).map(|i| i + cue.len()))?;
    let rest = &line[at..];
    let quote = rest.trim_start_matches([' ', ':']).chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let values: Vec<&str> = rest.split(quote).skip(1).step_by(2).collect();
    let ok = |v: &str| {
        !v.is_empty()
            && v.len() <= 40
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    (values.len() >= 2 && values.iter().take(2).all(|v| ok(v))).then(|| values[0].to_owned())
}

/// A line saying a variable it names is still missing or unset.
fn still_missing(line: &str) -> bool {
    let low = line.to_ascii_lowercase();
    low.contains("required")
        || low.contains("is not set")
        || low.contains("missing")
        || low.contains("actual")
        || low.contains("not configured")
}

fn secret_like(name: &str) -> bool {
    let up = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PAT", "PASSWORD"]
        .iter()
        .any(|w| up.split(['_', '-']).any(|p| p == *w) || up.ends_with(w))
}

fn fits(f: &Format, p: &Placeholder) -> bool {
    let up = p.name.to_ascii_uppercase();
    let url_like =
        up.contains("URL") || up.contains("HOST") || up.contains("ENDPOINT") || up.contains("URI");
    match f {
        Format::Prefix(x) if x.starts_with("http") => url_like,
        Format::Prefix(_) => secret_like(&p.name),
        Format::Url => url_like,
        // A choice only for a placeholder the line names or quotes; an opaque value only where named.
        _ => false,
    }
}

fn change(p: &mut Placeholder, f: &Format, notes: &mut Vec<String>) {
    let v = f.value();
    if p.value != v && !p.value.starts_with(&v) {
        notes.push(format!("{}: {v}", p.name));
        p.value = v;
    }
}

/// Rewrites the environment placeholders whose format `lines` ask for: the one a line names, else (a prefix or a
/// URL) the one placeholder of that kind there is. Returns what changed, as `NAME: format value` notes.
///
/// `after_set`: `lines` are what an attempt with these placeholders printed; a secret it names as still missing gets
/// an opaque value ([`Format::Opaque`]).
pub(crate) fn apply(
    lines: &[&str],
    placeholders: &mut [Placeholder],
    after_set: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    for line in lines {
        let mut formats = formats_in(line);
        if after_set && formats.is_empty() && still_missing(line) {
            formats.push(Format::Opaque);
        }
        if formats.is_empty() {
            continue;
        }
        // Named by the line, or its value quoted there (`Invalid agent provider "placeholder-..."`).
        let named: Vec<usize> = placeholders
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                p.kind == Kind::Env
                    && (line.contains(&p.name)
                        || (p.value.len() >= 6
                            && (line.contains(&format!("\"{}\"", p.value))
                                || line.contains(&format!("'{}'", p.value)))))
            })
            .map(|(i, _)| i)
            .collect();
        for f in &formats {
            if !named.is_empty() {
                // The first format the line asks for, to each variable it names (an opaque value only to secrets).
                for &i in &named {
                    if *f != Format::Opaque || secret_like(&placeholders[i].name) {
                        change(&mut placeholders[i], f, &mut notes);
                    }
                }
                continue;
            }
            let fitting: Vec<usize> = placeholders
                .iter()
                .enumerate()
                .filter(|(_, p)| p.kind == Kind::Env && fits(f, p))
                .map(|(i, _)| i)
                .collect();
            if let [i] = fitting[..] {
                change(&mut placeholders[i], f, &mut notes);
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> Placeholder {
        Placeholder {
            kind: Kind::Env,
            name: name.into(),
            value: value.into(),
            source: "stderr".into(),
        }
    }

    #[test]
    fn formats_of_real_messages() {
        let p = |s: &str| Format::Prefix(s.into());
        // Stripe's agent toolkit (a zod refine on STRIPE_SECRET_KEY).
        assert_eq!(formats_in("Must start with 'sk_' or 'rk_'"), vec![p("sk_")]);
        assert_eq!(
            formats_in("Invalid STRIPE_SECRET_KEY format. Must start with 'sk_'"),
            vec![p("sk_")]
        );
        assert_eq!(
            formats_in("STRIPE_SECRET_KEY must start with 'sk_test_' or 'sk_live_'"),
            vec![p("sk_test_")]
        );
        assert_eq!(
            formats_in(
                "error: option '--secret-key <key>' argument 'x' is invalid. It must start with 'sk_test_' or 'sk_live_'."
            ),
            vec![p("sk_test_")]
        );
        assert_eq!(
            formats_in("API key ID used instead of Secret API Key (must start with 'sk_')"),
            vec![p("sk_")]
        );
        assert_eq!(
            formats_in("Expected sk_* key, got something else"),
            vec![p("sk_")]
        );
        assert_eq!(
            formats_in("GITHUB_TOKEN must start with ghp_ or github_pat_"),
            vec![p("ghp_")]
        );
        assert_eq!(
            formats_in("SLACK_BOT_TOKEN should look like xoxb-..."),
            vec![p("xoxb-")]
        );
        assert_eq!(
            formats_in("Website URL should start with https://"),
            vec![p("https://")]
        );
        assert_eq!(
            formats_in("TypeError [ERR_INVALID_URL]: Invalid URL"),
            vec![Format::Url]
        );
        assert_eq!(
            formats_in("  input: 'placeholder', code: 'ERR_INVALID_URL'"),
            vec![Format::Url]
        );
        assert_eq!(
            formats_in(
                "Please set DT_ENVIRONMENT to a valid Dynatrace Environment URL (e.g., https://<environment-id>.apps.dynatrace.com)"
            ),
            vec![Format::Url]
        );
        assert_eq!(formats_in("PORT must be a number"), vec![Format::Number]);
        assert_eq!(
            formats_in("Expected number, received nan"),
            vec![Format::Number]
        );
        assert_eq!(formats_in("Invalid email"), vec![Format::Email]);
        assert!(formats_in("Error: API key required: set FIXTURE_API_KEY").is_empty());
        assert!(formats_in("Server started; expected 3 tools").is_empty());
        assert_eq!(
            p("sk_").value(),
            "sk_test_placeholder0000000000000000000000000"
        );
        assert_eq!(p("ghp_").value().len(), 4 + 36);
        assert_eq!(Format::Url.value(), "https://example.invalid");
        assert_eq!(Format::Number.value(), "0");
    }

    #[test]
    fn named_or_only_fitting_placeholder_is_rewritten() {
        let mut ps = vec![
            env("STRIPE_SECRET_KEY", "placeholder-stripe-secret-key"),
            env("STRIPE_ACCOUNT", "placeholder"),
        ];
        let notes = apply(
            &["Invalid STRIPE_SECRET_KEY format. Must start with 'sk_'"],
            &mut ps,
            false,
        );
        assert_eq!(ps[0].value, "sk_test_placeholder0000000000000000000000000");
        assert_eq!(ps[1].value, "placeholder");
        assert_eq!(notes.len(), 1);
        // Not named: the one secret-like variable.
        let mut ps = vec![
            env("GITHUB_PERSONAL_ACCESS_TOKEN", "x"),
            env("GITHUB_OWNER", "o"),
        ];
        apply(&["Error: token must start with ghp_"], &mut ps, false);
        assert!(ps[0].value.starts_with("ghp_placeholder"));
        assert_eq!(ps[1].value, "o");
        // Two candidates and none named: left alone.
        let mut ps = vec![env("A_TOKEN", "x"), env("B_TOKEN", "y")];
        assert!(apply(&["must start with ghp_"], &mut ps, false).is_empty());
        // A URL the message asks for, where the variable's name says URL.
        let mut ps = vec![env("API_BASE_URL", "placeholder"), env("API_KEY", "k")];
        apply(
            &["TypeError [ERR_INVALID_URL]: Invalid URL"],
            &mut ps,
            false,
        );
        assert_eq!(ps[0].value, "https://example.invalid");
        // A number, only where named.
        let mut ps = vec![env("MAX_RESULTS", "placeholder")];
        apply(&["MAX_RESULTS must be a number"], &mut ps, false);
        assert_eq!(ps[0].value, "0");
    }

    #[test]
    fn choices_and_template_looking_secrets() {
        assert_eq!(
            formats_in(
                r#"Error: Invalid agent provider "x". Must be "openai", "azure-openai", or "anthropic"."#
            ),
            vec![Format::Choice("openai".into())]
        );
        assert_eq!(
            formats_in("TRANSPORT must be one of: 'stdio', 'http'"),
            vec![Format::Choice("stdio".into())]
        );
        assert!(formats_in(r#"name must be "x""#).is_empty());
        // @sentry/mcp-server: the line quotes the placeholder's value, not the variable's name.
        let mut ps = vec![
            env(
                "EMBEDDED_AGENT_PROVIDER",
                "placeholder-embedded-agent-provider",
            ),
            env("OTHER", "placeholder-other"),
        ];
        apply(
            &[
                r#"Error: Invalid agent provider "placeholder-embedded-agent-provider". Must be "openai", "azure-openai", or "anthropic"."#,
            ],
            &mut ps,
            true,
        );
        assert_eq!(ps[0].value, "openai");
        assert_eq!(ps[1].value, "placeholder-other");
        // @z_ai/mcp-server: set, and still called missing (its value looked like a template).
        let line = r#"ERROR: Application startup failed: [{"message":"Z_AI_API_KEY environment variable is required, please set your actual API key"}]"#;
        let mut ps = vec![env("Z_AI_API_KEY", "placeholder-z-ai-api-key")];
        assert!(apply(&[line], &mut ps, false).is_empty());
        apply(&[line], &mut ps, true);
        assert_eq!(ps[0].value, Format::Opaque.value());
        assert!(!ps[0].value.contains("api") && !ps[0].value.contains("key"));
        // Not a secret: left alone.
        let mut ps = vec![env("MYSQL_DB", "placeholder-mysql-db")];
        assert!(apply(&["MYSQL_DB is required"], &mut ps, true).is_empty());
    }
}
