//! The words around a match: whether they describe rather than ask, refuse what they name, quote it, give an order
//! all the same, or speak of this very server.

use super::lexicon::{DESCRIBING, REFUSING};

/// The sentence around word `i`: the words between the punctuation that ends sentences is not known here (tokens
/// drop it), so a window of eight words either side stands for it.
pub(super) fn sentence(words: &[&str], i: usize) -> std::ops::Range<usize> {
    i.saturating_sub(8)..(i + 8).min(words.len())
}

/// Whether the words around `i` describe rather than ask.
pub(super) fn described(words: &[&str], i: usize) -> bool {
    words[sentence(words, i)]
        .iter()
        .any(|w| DESCRIBING.contains(w))
}

pub(super) fn refused(words: &[&str], i: usize) -> bool {
    words[i.saturating_sub(14)..(i + 14).min(words.len())]
        .iter()
        .any(|w| REFUSING.contains(w))
}

/// Whether byte `at` of `raw` sits inside a quotation ('…', "…", “…”): a phrase quoted as an example of what to
/// look for, not an order.
pub(super) fn in_quotes(raw: &str, at: usize) -> bool {
    let at = at.min(raw.len());
    let before = &raw[..at];
    let after = &raw[at..];
    let opener = before.char_indices().rev().take(80).find_map(|(i, c)| {
        let boundary = before[..i]
            .chars()
            .next_back()
            .is_none_or(|p| !p.is_alphanumeric());
        match c {
            '\'' | '"' if boundary => Some(c),
            '“' | '‘' | '«' => Some(c),
            '.' | '!' | '?' | '\n' => Some('x'),
            _ => None,
        }
    });
    let close = match opener {
        Some('\'') => '\'',
        Some('"') => '"',
        Some('“') => '”',
        Some('‘') => '’',
        Some('«') => '»',
        _ => return false,
    };
    after.char_indices().take(120).any(|(i, c)| {
        c == close
            && after[i + c.len_utf8()..]
                .chars()
                .next()
                .is_none_or(|n| !n.is_alphanumeric())
    })
}

/// Whether the words around `i` give an order all the same ("you must", "always", "before", "please").
pub(super) fn ordered_sentence(words: &[&str], i: usize) -> bool {
    words[sentence(words, i)].iter().any(|w| {
        matches!(
            *w,
            "must"
                | "always"
                | "please"
                | "ensure"
                | "before"
                | "first"
                | "immediately"
                | "otherwise"
        )
    })
}

/// Whether a match from word `start` to `end` is about this very server ("any other tool of this server", "other
/// CircleCI tools" on the server named circleci).
pub(super) fn own_scope(words: &[&str], start: usize, end: usize, server: &[String]) -> bool {
    let tail = &words[end.min(words.len())..(end + 4).min(words.len())];
    tail.windows(2).any(|w| {
        w[0] == "this"
            && matches!(
                w[1],
                "server" | "mcp" | "service" | "integration" | "toolkit" | "plugin"
            )
    }) || words[start..(end + 2).min(words.len())]
        .iter()
        .any(|w| w.len() >= 3 && server.iter().any(|s| s == w))
}
