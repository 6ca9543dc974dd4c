//! The BERT uncased WordPiece tokenizer (as the `tokenizers` library runs it for all-MiniLM-L6-v2), from vocab.txt:
//! normalise (drop control characters, whitespace to spaces, CJK characters apart, strip accents, lowercase), split
//! on whitespace and punctuation, then greedy longest-match-first WordPiece with `##` continuations.
//!
//! Accent stripping uses tables probed from that library (tables.rs) plus Hangul decomposition computed here, so it
//! covers every canonical decomposition the library knows; characters newer than its Unicode tables are treated as
//! it treats them.

use std::collections::HashMap;

use super::EmbedError;
use super::tables::{PUNCTUATION, REMOVED, STRIP_MANY, STRIP_ONE};

/// Words longer than this many characters become `[UNK]`, as in BERT.
const MAX_WORD_CHARS: usize = 100;

pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
    /// The longest vocabulary entry in characters (`##` excluded): bounds the WordPiece search.
    longest: usize,
}

impl Tokenizer {
    /// Reads vocab.txt: one token a line, the line number is the id.
    pub fn from_vocab(text: &str) -> Result<Tokenizer, EmbedError> {
        let mut vocab = HashMap::new();
        let mut longest = 0;
        for (id, line) in text.lines().enumerate() {
            let token = line.trim_end();
            let id = u32::try_from(id)
                .map_err(|_| EmbedError::BadFormat("vocab.txt has too many lines".into()))?;
            longest = longest.max(token.strip_prefix("##").unwrap_or(token).chars().count());
            vocab.insert(token.to_string(), id);
        }
        let special = |t: &str| {
            vocab
                .get(t)
                .copied()
                .ok_or_else(|| EmbedError::BadFormat(format!("vocab.txt has no {t} token")))
        };
        let (cls, sep, unk) = (special("[CLS]")?, special("[SEP]")?, special("[UNK]")?);
        Ok(Tokenizer {
            vocab,
            cls,
            sep,
            unk,
            longest,
        })
    }

    /// The ids of `[CLS]` and `[SEP]`.
    pub fn cls_sep(&self) -> (u32, u32) {
        (self.cls, self.sep)
    }

    /// The largest id in the vocabulary plus one.
    pub fn vocab_len(&self) -> usize {
        self.vocab
            .values()
            .map(|&id| id as usize + 1)
            .max()
            .unwrap_or(0)
    }

    /// Token ids: `[CLS]`, at most `max_len - 2` word pieces, `[SEP]`. Text after the last piece that fits is not
    /// even read, so a huge input costs no more than its first few kilobytes.
    pub fn encode(&self, text: &str, max_len: usize) -> Vec<u32> {
        let budget = max_len.saturating_sub(2);
        let mut ids = vec![self.cls];
        let (mut word, mut piece, mut chars) = (String::new(), String::new(), String::new());
        let mut word_len = 0;
        let mut flush = |word: &mut String, word_len: &mut usize, ids: &mut Vec<u32>| {
            if *word_len > MAX_WORD_CHARS {
                ids.push(self.unk);
            } else if *word_len > 0 {
                self.word_piece(word, &mut piece, ids);
            }
            word.clear();
            *word_len = 0;
        };
        for c in text.chars() {
            if ids.len() > budget {
                break;
            }
            chars.clear();
            normalize_char(c, &mut chars);
            for n in chars.chars() {
                if n.is_whitespace() {
                    flush(&mut word, &mut word_len, &mut ids);
                } else if is_punctuation(n) {
                    flush(&mut word, &mut word_len, &mut ids);
                    word.push(n);
                    word_len = 1;
                    flush(&mut word, &mut word_len, &mut ids);
                } else {
                    // A word past the limit is [UNK] whatever follows: count its characters, keep none.
                    if word_len < MAX_WORD_CHARS {
                        word.push(n);
                    }
                    word_len += 1;
                }
            }
        }
        flush(&mut word, &mut word_len, &mut ids);
        ids.truncate(budget + 1);
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first WordPiece of one word; a word that cannot be covered is one `[UNK]`.
    fn word_piece(&self, word: &str, piece: &mut String, ids: &mut Vec<u32>) {
        // Byte offsets of the character boundaries, end included.
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain([word.len()])
            .collect();
        let chars = bounds.len() - 1;
        if chars > MAX_WORD_CHARS {
            ids.push(self.unk);
            return;
        }
        let first = ids.len();
        let mut start = 0;
        while start < chars {
            let mut end = chars.min(start + self.longest);
            let mut found = None;
            while end > start {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => ids.push(id),
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }
}

/// BertNormalizer on a whole text: clean text, isolate CJK characters, strip accents, lowercase.
#[cfg(test)]
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    text.chars().for_each(|c| normalize_char(c, &mut out));
    out
}

/// BertNormalizer on one character, appended to `out` (none, a space, or one or more characters).
fn normalize_char(c: char, out: &mut String) {
    if c.is_ascii() {
        match c {
            '\t' | '\n' | '\r' | ' ' => out.push(' '),
            '\0'..='\x1f' | '\x7f' => {}
            _ => out.push(c.to_ascii_lowercase()),
        }
        return;
    }
    let cp = c as u32;
    if in_ranges(REMOVED, cp) {
        return;
    }
    if c.is_whitespace() {
        out.push(' ');
        return;
    }
    let cjk = is_cjk(cp);
    if cjk {
        out.push(' ');
    }
    push_stripped_lower(c, out);
    if cjk {
        out.push(' ');
    }
}

/// Canonical decomposition minus non-spacing marks, then lowercase.
fn push_stripped_lower(c: char, out: &mut String) {
    let cp = c as u32;
    let push_lower = |c: char, out: &mut String| out.extend(c.to_lowercase());
    if (0xAC00..=0xD7A3).contains(&cp) {
        // Hangul syllable -> leading consonant, vowel and optional trailing consonant jamo (no case, no marks).
        let s = cp - 0xAC00;
        let (l, v, t) = (0x1100 + s / 588, 0x1161 + (s % 588) / 28, 0x11A7 + s % 28);
        for j in [l, v, t] {
            if j != 0x11A7 {
                out.extend(char::from_u32(j));
            }
        }
        return;
    }
    if let Ok(i) = STRIP_ONE.binary_search_by_key(&cp, |&(from, _)| from) {
        if let Some(base) = char::from_u32(STRIP_ONE[i].1) {
            push_lower(base, out);
        }
        return;
    }
    if let Ok(i) = STRIP_MANY.binary_search_by_key(&cp, |&(from, _)| from) {
        for base in STRIP_MANY[i].1.chars() {
            push_lower(base, out);
        }
        return;
    }
    push_lower(c, out);
}

fn in_ranges(table: &[(u32, u32)], cp: u32) -> bool {
    // The first range whose end is >= cp is the only one that can hold it.
    let i = table.partition_point(|&(_, end)| end < cp);
    table.get(i).is_some_and(|&(start, _)| start <= cp)
}

/// The CJK Unified Ideographs blocks that BERT puts spaces around.
fn is_cjk(cp: u32) -> bool {
    matches!(cp,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || (!c.is_ascii() && in_ranges(PUNCTUATION, c as u32))
}

/// BertPreTokenizer on a whole text: words split on whitespace, each punctuation character a word of its own.
#[cfg(test)]
fn split_words(text: &str) -> impl Iterator<Item = &str> {
    text.split(char::is_whitespace)
        .filter(|w| !w.is_empty())
        .flat_map(|w| {
            let mut parts = Vec::new();
            let mut start = 0;
            for (i, c) in w.char_indices() {
                if is_punctuation(c) {
                    if start < i {
                        parts.push(&w[start..i]);
                    }
                    parts.push(&w[i..i + c.len_utf8()]);
                    start = i + c.len_utf8();
                }
            }
            if start < w.len() {
                parts.push(&w[start..]);
            }
            parts
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok() -> Tokenizer {
        let vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\nworld\n,\n!\nun\n##aff\n##able\ncafe\n\u{4e2d}\n##s\n";
        Tokenizer::from_vocab(vocab).unwrap()
    }

    #[test]
    fn normalises_like_bert() {
        assert_eq!(normalize("Héllo\tWORLD\u{200d}\u{0}x"), "hello worldx");
        assert_eq!(normalize("Ångström ÇA"), "angstrom ca");
        assert_eq!(normalize("中文"), " 中  文 ");
        assert_eq!(normalize("İ"), "i");
        assert_eq!(normalize("\u{D55C}"), "\u{1112}\u{1161}\u{11AB}");
        assert_eq!(normalize("a\u{00A0}b"), "a b");
    }

    #[test]
    fn splits_punctuation() {
        let w: Vec<&str> = split_words("hello, world!! a.b ¿qué? «x»").collect();
        assert_eq!(
            w,
            [
                "hello", ",", "world", "!", "!", "a", ".", "b", "¿", "qué", "?", "«", "x", "»"
            ]
        );
    }

    #[test]
    fn word_pieces() {
        let t = tok();
        assert_eq!(t.encode("Hello, world!", 256), [2, 4, 6, 5, 7, 3]);
        assert_eq!(t.encode("unaffable", 256), [2, 8, 9, 10, 3]);
        assert_eq!(t.encode("unaffablex café", 256), [2, 1, 11, 3]);
        assert_eq!(t.encode("", 256), [2, 3]);
        assert_eq!(t.encode(&"a".repeat(101), 256), [2, 1, 3]);
        assert_eq!(t.encode(&"hello ".repeat(300), 256).len(), 256);
        assert_eq!(t.encode("hello world hello", 4), [2, 4, 5, 3]);
    }
}
