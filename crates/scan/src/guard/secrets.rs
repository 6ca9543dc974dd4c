//! Credential formats found in text by hand-written matchers (no regex engine): one pass over the bytes, each
//! position tried only against the formats whose first byte it has, so a clean kilobyte costs about a microsecond.

/// A credential found in a text: its format's stable name and where it sits (byte offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Secret {
    pub format: &'static str,
    pub start: usize,
    pub end: usize,
}

/// Every format this module knows, as `find` names them (what `docs/guards.md` lists).
pub const FORMATS: &[&str] = &[
    "private_key",
    "aws_access_key_id",
    "github_token",
    "gitlab_token",
    "slack_token",
    "stripe_key",
    "google_api_key",
    "openai_api_key",
    "anthropic_api_key",
    "jwt",
    "npm_token",
    "sendgrid_key",
    "huggingface_token",
    "labelled_secret",
];

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

fn url64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// How many bytes from `i` on satisfy `pred`.
fn run(s: &[u8], i: usize, pred: impl Fn(u8) -> bool) -> usize {
    s[i.min(s.len())..].iter().take_while(|b| pred(**b)).count()
}

/// Whether `s` has a letter and a digit (a random key does; a word or a slug usually does not).
fn mixed(s: &[u8]) -> bool {
    s.iter().any(u8::is_ascii_alphabetic) && s.iter().any(u8::is_ascii_digit)
}

/// Every credential of a known format in `text`, in order, not overlapping.
pub fn find(text: &str) -> Vec<Secret> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        // Only at the start of a token: a key inside a longer word is part of something else.
        let boundary = i == 0 || !word(s[i - 1]) || s[i] == b'-';
        let hit = if boundary { at(s, i) } else { None };
        match hit {
            Some((format, len)) => {
                out.push(Secret {
                    format,
                    start: i,
                    end: i + len,
                });
                i += len;
            }
            None => i += 1,
        }
    }
    out
}

/// The format and length of a credential starting at `i`, if one does.
fn at(s: &[u8], i: usize) -> Option<(&'static str, usize)> {
    let rest = &s[i..];
    let ends_word = |len: usize| s.get(i + len).is_none_or(|b| !alnum(*b));
    match s[i] {
        b'-' if rest.starts_with(b"-----BEGIN ") => pem(rest).map(|len| ("private_key", len)),
        b'A' => {
            if (rest.starts_with(b"AKIA")
                || rest.starts_with(b"ASIA")
                || rest.starts_with(b"ABIA")
                || rest.starts_with(b"ACCA"))
                && run(s, i + 4, upper_digit) == 16
            {
                return Some(("aws_access_key_id", 20));
            }
            if rest.starts_with(b"AIza") && run(s, i + 4, url64) == 35 {
                return Some(("google_api_key", 39));
            }
            None
        }
        b'g' => {
            if rest.len() > 4
                && rest.starts_with(b"gh")
                && matches!(rest[2], b'p' | b'o' | b'u' | b's' | b'r')
                && rest[3] == b'_'
            {
                let n = run(s, i + 4, alnum);
                return (36..=255).contains(&n).then_some(("github_token", 4 + n));
            }
            if rest.starts_with(b"github_pat_") {
                let n = run(s, i + 11, word);
                return (n >= 22).then_some(("github_token", 11 + n));
            }
            if rest.starts_with(b"glpat-") {
                let n = run(s, i + 6, url64);
                return (n >= 20).then_some(("gitlab_token", 6 + n));
            }
            None
        }
        b'x' => {
            let slack = (rest.starts_with(b"xox")
                && rest.len() > 4
                && matches!(rest[3], b'a' | b'b' | b'p' | b'o' | b'r' | b's' | b'e')
                && rest[4] == b'-')
                || rest.starts_with(b"xapp-");
            // `xoxb-`, `xapp-`: five characters.
            let head = 5;
            if slack {
                let n = run(s, i + head, |b| alnum(b) || b == b'-');
                let body = &s[i + head..i + head + n];
                return (n >= 20 && body.iter().filter(|b| b.is_ascii_digit()).count() >= 6)
                    .then_some(("slack_token", head + n));
            }
            None
        }
        b's' | b'r' => {
            if rest.starts_with(b"sk_live_") || rest.starts_with(b"rk_live_") {
                let n = run(s, i + 8, alnum);
                return (n >= 20 && ends_word(8 + n)).then_some(("stripe_key", 8 + n));
            }
            if rest.starts_with(b"sk-ant-") {
                let n = run(s, i + 7, url64);
                return (n >= 32).then_some(("anthropic_api_key", 7 + n));
            }
            if rest.starts_with(b"sk-") {
                let n = run(s, i + 3, url64);
                let body = &s[i + 3..i + 3 + n];
                // `sk-proj-…`, `sk-svcacct-…`, the older 48 characters: long, random, letters and digits.
                return (n >= 32 && mixed(body)).then_some(("openai_api_key", 3 + n));
            }
            None
        }
        b'e' if rest.starts_with(b"eyJ") => jwt(s, i).map(|len| ("jwt", len)),
        b'n' if rest.starts_with(b"npm_") => {
            let n = run(s, i + 4, alnum);
            (n == 36).then_some(("npm_token", 40))
        }
        b'S' if rest.starts_with(b"SG.") => {
            let a = run(s, i + 3, url64);
            if a == 22 && s.get(i + 25) == Some(&b'.') {
                let b = run(s, i + 26, url64);
                return (b == 43).then_some(("sendgrid_key", 69));
            }
            None
        }
        b'h' if rest.starts_with(b"hf_") => {
            let n = run(s, i + 3, alnum);
            ((34..=40).contains(&n) && mixed(&s[i + 3..i + 3 + n]))
                .then_some(("huggingface_token", 3 + n))
        }
        _ => None,
    }
}

/// A PEM private key from its `-----BEGIN ... PRIVATE KEY-----` line through its END line (or its header alone when
/// the END line is missing: a key cut short is still a key).
fn pem(rest: &[u8]) -> Option<usize> {
    let line_end = rest[11..]
        .iter()
        .take(64)
        .position(|b| *b == b'-')
        .map(|p| 11 + p)?;
    let label = &rest[11..line_end];
    if !(label.ends_with(b"PRIVATE KEY") || label.ends_with(b"PRIVATE KEY BLOCK"))
        || !rest[line_end..].starts_with(b"-----")
    {
        return None;
    }
    let header = line_end + 5;
    let end = find_bytes(&rest[header..], b"-----END ")
        .and_then(|p| {
            let from = header + p + 9;
            find_bytes(&rest[from..], b"-----").map(|q| from + q + 5)
        })
        .unwrap_or(header);
    Some(end)
}

fn find_bytes(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A JSON Web Token: a header and payload in base64url that both start `eyJ` (`{"`), and a signature.
fn jwt(s: &[u8], i: usize) -> Option<usize> {
    let b64 = |b: u8| url64(b);
    let h = run(s, i, b64);
    if h < 10 || s.get(i + h) != Some(&b'.') {
        return None;
    }
    let p0 = i + h + 1;
    if !s[p0..].starts_with(b"eyJ") {
        return None;
    }
    let p = run(s, p0, b64);
    if p < 10 || s.get(p0 + p) != Some(&b'.') {
        return None;
    }
    let sig = run(s, p0 + p + 1, b64);
    (sig >= 16).then_some(h + 1 + p + 1 + sig)
}

/// Whether an argument's name labels its value a secret: a word `secret`, `token`, `password`, `passphrase`,
/// `credential(s)`, `apikey`, or a pair such as `api_key`, `access_key`, `private_key`, `client_secret`; not a name
/// that is about tokens rather than one (`max_tokens`, `page_token`, `token_type`). A bare `key` is not a label (a
/// key-value store's key, a sort key).
pub fn labels_secret(name: &str) -> bool {
    let words = split_name(name);
    let has = |w: &str| words.iter().any(|x| x == w);
    const NOT: &[&str] = &[
        "page",
        "next",
        "cursor",
        "continuation",
        "max",
        "count",
        "limit",
        "type",
        "name",
        "id",
        "url",
        "path",
        "file",
        "length",
        "usage",
        "format",
        "prefix",
        "expires",
        "expiry",
        "ttl",
        "env",
        "var",
        "ref",
    ];
    if NOT.iter().any(|w| has(w)) {
        return false;
    }
    const ONE: &[&str] = &[
        "secret",
        "secrets",
        "token",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "apikey",
        "credential",
        "credentials",
        "pat",
    ];
    if ONE.iter().any(|w| has(w)) {
        return true;
    }
    has("key")
        && ["api", "access", "private", "secret", "auth", "signing"]
            .iter()
            .any(|w| has(w))
}

/// The words of an argument name: `apiKey`, `api_key`, `API-KEY` all give `api`, `key`.
fn split_name(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Whether a value under a secret's label looks like one: 16 to 4,096 characters without spaces, not a
/// placeholder, and random (at least 3.5 bits of entropy per character, two kinds of character).
pub fn high_entropy(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() < 16 || b.len() > 4096 || b.iter().any(|c| c.is_ascii_whitespace()) {
        return false;
    }
    // `${API_TOKEN}`, `<your-token>`, `xxxx…`: placeholders, not secrets.
    if value.contains("${") || value.starts_with('<') || value.starts_with('{') {
        return false;
    }
    let kinds = [
        b.iter().any(u8::is_ascii_lowercase),
        b.iter().any(u8::is_ascii_uppercase),
        b.iter().any(u8::is_ascii_digit),
        b.iter().any(|c| c.is_ascii_punctuation()),
    ]
    .iter()
    .filter(|k| **k)
    .count();
    kinds >= 2 && entropy(b) >= 3.5
}

/// Shannon entropy in bits per byte.
fn entropy(b: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for c in b {
        counts[*c as usize] += 1;
    }
    let n = b.len() as f64;
    counts
        .iter()
        .filter(|c| **c > 0)
        .map(|c| {
            let p = f64::from(*c) / n;
            -p * p.log2()
        })
        .sum()
}

/// A secret as a person may see it: enough to recognise it (its first four characters, a PEM key's header) and its
/// length, never enough to use it.
pub fn mask(secret: &str) -> String {
    if secret.starts_with("-----BEGIN ") {
        let header = secret.lines().next().unwrap_or(secret);
        return format!("{header}…({} chars)", secret.chars().count());
    }
    let head: String = secret.chars().take(4).collect();
    format!("{head}…({} chars)", secret.chars().count())
}
