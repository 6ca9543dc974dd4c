//! A sentence as the second pass reads it: its words, which of the named word lists it has a word of (one bit per
//! list), and the tests the rules ask of it (a word of a list, words in a row, one list's word after another's, an
//! order, a refusal, a description, an account number).

use super::intent_words::*;
use crate::text;

/// One sentence of a field: its words (folded, lower case, apostrophes dropped) and where it starts in the raw text.
pub(super) struct Sentence<'a> {
    pub(super) text: &'a str,
    pub(super) words: Vec<&'a str>,
    pub(super) at: usize,
    /// Which of the named word lists ([`LISTS`]) the sentence has a word of, one bit per list.
    mask: u32,
}

/// The word lists looked up most: a sentence's words are looked up once in [`list_bits`], and `has` on one of
/// these lists is a bit test instead of a scan.
const LISTS: [&[&str]; 20] = [
    IMPERATIVE,
    MODAL,
    TELL,
    CHOSEN,
    OTHERS,
    DISCREDIT,
    PROMO,
    SECURITY,
    STEER,
    KINDS,
    TOOLISH,
    CHANGE,
    NEGATION,
    REFUSED,
    COLLECT,
    REACH,
    RESOURCES,
    SECRET_FILES,
    CLAUSE,
    DESCRIBE,
];

fn list_bits() -> &'static std::collections::HashMap<&'static str, u32> {
    static MAP: std::sync::OnceLock<std::collections::HashMap<&'static str, u32>> =
        std::sync::OnceLock::new();
    MAP.get_or_init(|| {
        let mut m = std::collections::HashMap::new();
        for (i, list) in LISTS.iter().enumerate() {
            for w in list.iter() {
                *m.entry(*w).or_insert(0) |= 1 << i;
            }
        }
        m
    })
}

fn bit_of(set: &[&str]) -> Option<u32> {
    LISTS
        .iter()
        .position(|l| std::ptr::eq(*l, set))
        .map(|i| 1 << i)
}

impl Sentence<'_> {
    pub(super) fn has(&self, set: &[&str]) -> bool {
        match bit_of(set) {
            Some(b) => self.mask & b != 0,
            None => self.words.iter().any(|w| set.contains(w)),
        }
    }
    /// Whether the words `seq` occur in a row.
    pub(super) fn phrase(&self, seq: &[&str]) -> bool {
        self.words.windows(seq.len()).any(|w| w == seq)
    }
    pub(super) fn any_phrase(&self, seqs: &[&[&str]]) -> bool {
        seqs.iter().any(|s| self.phrase(s))
    }
    /// Whether a word of `b` follows a word of `a` within `gap` words.
    pub(super) fn then(&self, a: &[&str], b: &[&str], gap: usize) -> bool {
        self.has(a)
            && self.has(b)
            && self.words.iter().enumerate().any(|(i, w)| {
                a.contains(w)
                    && self.words[i + 1..(i + 1 + gap).min(self.words.len())]
                        .iter()
                        .any(|x| b.contains(x))
            })
    }
    /// An order to the agent: starts with an imperative (after a leading clause), or carries a modal or "you".
    pub(super) fn order(&self) -> bool {
        let lead = self
            .words
            .iter()
            .position(|w| !CLAUSE.contains(w))
            .unwrap_or(0);
        self.words.first().is_some_and(|w| IMPERATIVE.contains(w))
            || self
                .words
                .get(lead)
                .is_some_and(|w| IMPERATIVE.contains(w))
            || self.has(MODAL)
            || self.any_phrase(&[&["has", "to"], &["have", "to"], &["make", "sure"]])
            // An imperative after a leading clause: "If a file is large, delete it".
            || self.text.split(',').skip(1).any(|part| {
                part.split(|c: char| !c.is_alphanumeric())
                    .find(|w| !w.is_empty())
                    .is_some_and(|w| IMPERATIVE.contains(&w))
            })
    }
    /// Whether the sentence refuses what it names: "do not include", "never send", "paths like ~/.ssh are rejected".
    pub(super) fn refusal(&self) -> bool {
        self.then(NEGATION, COLLECT, 3)
            || self.then(NEGATION, REACH, 3)
            || self.then(NEGATION, REFUSED, 3)
            || self.then(
                NEGATION,
                &["call", "use", "invoke", "run", "mention", "pass"],
                3,
            )
            || self.has(&["rejected", "omitted", "excluded", "redacted", "masked"])
    }
    /// Whether the sentence describes what the tool detects or refuses ("warns when a description contains ...")
    /// rather than giving an order.
    pub(super) fn describes(&self) -> bool {
        self.words.iter().any(|w| {
            super::lexicon::DESCRIBING.contains(w)
                && !matches!(*w, "never" | "such" | "like" | "eg")
        }) && !self.has(&["must", "always", "should", "shall"])
    }
    /// Whether a word of `a` and a word of `b` are at most `gap` words apart, in either order.
    pub(super) fn near(&self, a: &[&str], b: &[&str], gap: usize) -> bool {
        self.then(a, b, gap) || self.then(b, a, gap)
    }
    /// A number that can name an account: groups of digits joined by `-` or spaces (six digits or more), or an IBAN.
    pub(super) fn account_number(&self) -> bool {
        let b = self.text.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) {
                let (mut digits, mut groups, mut j) = (0, 0, i);
                loop {
                    let start = j;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    digits += j - start;
                    groups += 1;
                    if j + 1 < b.len() && matches!(b[j], b'-' | b' ') && b[j + 1].is_ascii_digit() {
                        j += 1;
                    } else {
                        break;
                    }
                }
                if digits >= 6 && (groups >= 2 || digits >= 8) {
                    return true;
                }
                i = j.max(i + 1);
            } else {
                i += 1;
            }
        }
        self.words.iter().any(|w| {
            w.len() >= 4
                && w.is_ascii()
                && w[..2].bytes().all(|b| b.is_ascii_alphabetic())
                && w[2..].bytes().all(|b| b.is_ascii_digit())
                && IBAN_COUNTRIES.contains(&&w[..2])
        })
    }
}

pub(super) fn sentences<'a>(folded: &'a str, map: &[usize]) -> Vec<Sentence<'a>> {
    let mut out = Vec::new();
    let b = folded.as_bytes();
    let mut start = 0;
    let cut = |s: usize, e: usize, out: &mut Vec<Sentence<'a>>| {
        let part = &folded[s..e];
        let words: Vec<&str> = text::tokens(part)
            .into_iter()
            .map(|(x, y)| &part[x..y])
            .collect();
        if words.len() >= 3 {
            let bits = list_bits();
            let mask = words
                .iter()
                .fold(0, |m, w| m | bits.get(w).copied().unwrap_or(0));
            out.push(Sentence {
                mask,
                text: part,
                words,
                at: map.get(s).copied().unwrap_or(0),
            });
        }
    };
    for i in 0..b.len() {
        let end = match b[i] {
            b'\n' | b';' => true,
            b'.' | b'!' | b'?' => b.get(i + 1).is_none_or(|n| n.is_ascii_whitespace()),
            _ => false,
        };
        if end {
            cut(start, i, &mut out);
            start = i + 1;
        }
    }
    cut(start, b.len(), &mut out);
    out
}
