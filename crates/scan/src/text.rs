//! Text as the rules read it: hidden characters classified and made visible, the text folded (invisible characters
//! dropped, look-alike letters and full-width forms mapped to ASCII, lower case) and cut into word tokens.

/// Why a character is hidden from a person reading the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hidden {
    /// Zero-width and other invisible format characters (U+200B..U+200F, U+2060..U+2064, U+FEFF, U+180E, U+00AD).
    Invisible,
    /// Bidirectional controls that reorder what is shown (U+202A..U+202E, U+2066..U+2069, U+061C).
    Bidi,
    /// Unicode tag characters (U+E0000..U+E007F): invisible, each carrying one ASCII character.
    Tag,
    /// Variation selectors past the emoji ones (U+FE00..U+FE0D, U+E0100..U+E01EF): invisible, used to smuggle bytes.
    Selector,
    /// ESC or CSI: the start of a terminal escape sequence.
    Escape,
    /// Any other C0/C1 control but tab, line feed and carriage return.
    Control,
}

pub(crate) fn hidden(c: char) -> Option<Hidden> {
    let u = c as u32;
    Some(match u {
        0x1B | 0x9B => Hidden::Escape,
        0x09 | 0x0A | 0x0D => return None,
        0x00..=0x1F | 0x7F..=0x9F => Hidden::Control,
        0x00AD
        | 0x180E
        | 0x200B..=0x200F
        | 0x2060..=0x2064
        | 0xFEFF
        | 0x115F
        | 0x1160
        | 0x3164
        | 0xFFA0 => Hidden::Invisible,
        0x202A..=0x202E | 0x2066..=0x2069 | 0x061C => Hidden::Bidi,
        0xE0000..=0xE007F => Hidden::Tag,
        0xFE00..=0xFE0D | 0xE0100..=0xE01EF => Hidden::Selector,
        _ => return None,
    })
}

/// Whether the tag character at `i` belongs to an emoji flag of a subdivision (U+1F3F4, tag letters, U+E007F), the
/// one sanctioned use of tag characters.
pub(crate) fn in_flag(chars: &[char], i: usize) -> bool {
    let is_tag = |c: &char| ('\u{E0020}'..='\u{E007F}').contains(c);
    let mut start = i;
    while start > 0 && is_tag(&chars[start - 1]) {
        start -= 1;
    }
    let mut end = i;
    while end + 1 < chars.len() && is_tag(&chars[end + 1]) {
        end += 1;
    }
    start > 0 && chars[start - 1] == '\u{1F3F4}' && chars[end] == '\u{E007F}' && end - start <= 7
}

/// Whether a zero-width joiner at `i` sits inside an emoji sequence (legitimate: 👩‍💻), not between letters.
pub(crate) fn joins_emoji(chars: &[char], i: usize) -> bool {
    let pictographic = |c: Option<&char>| {
        c.is_some_and(|c| {
            let u = *c as u32;
            (0x1F000..=0x1FAFF).contains(&u)
                || (0x2600..=0x27BF).contains(&u)
                || u == 0xFE0F
                || (0x1F3FB..=0x1F3FF).contains(&u)
        })
    };
    chars[i] == '\u{200D}'
        && pictographic(i.checked_sub(1).and_then(|j| chars.get(j)))
        && pictographic(chars.get(i + 1))
}

/// `s` with every hidden character written as `<U+XXXX>` (`<ESC>` for escape), cut to about `max` characters
/// around byte offset `at`.
pub(crate) fn excerpt(s: &str, at: usize, max: usize) -> String {
    let at = at.min(s.len());
    let start = s[..at]
        .char_indices()
        .rev()
        .nth(max / 3)
        .map_or(0, |(i, _)| i);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    for (n, c) in s[start..].chars().enumerate() {
        if n >= max {
            out.push('…');
            break;
        }
        match hidden(c) {
            Some(Hidden::Escape) if c == '\u{1b}' => out.push_str("<ESC>"),
            Some(_) => out.push_str(&format!("<U+{:04X}>", c as u32)),
            None if c == '\n' || c == '\r' || c == '\t' => out.push(' '),
            None => out.push(c),
        }
    }
    out
}

/// Look-alike letters (Cyrillic, Greek) mapped to the Latin letter they imitate.
fn confusable(c: char) -> Option<char> {
    Some(match c {
        'а' => 'a',
        'е' => 'e',
        'о' | 'ο' => 'o',
        'р' | 'ρ' => 'p',
        'с' => 'c',
        'у' => 'y',
        'х' | 'χ' => 'x',
        'і' | 'ι' => 'i',
        'ј' => 'j',
        'ѕ' => 's',
        'ԁ' => 'd',
        'һ' => 'h',
        'ӏ' => 'l',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'ν' => 'v',
        'Α' | 'А' => 'a',
        'Β' | 'В' => 'b',
        'Ε' | 'Е' => 'e',
        'Κ' | 'К' => 'k',
        'Μ' | 'М' => 'm',
        'Η' | 'Н' => 'h',
        'Ο' | 'О' => 'o',
        'Ρ' | 'Р' => 'p',
        'Τ' | 'Т' => 't',
        'Χ' | 'Х' => 'x',
        'С' => 'c',
        'Ι' | 'І' => 'i',
        _ => return None,
    })
}

/// The text the phrase rules read: hidden characters dropped (so `ig<U+200B>nore` reads `ignore`), full-width and
/// look-alike letters mapped to ASCII, lower case, apostrophes inside words removed (`don't` reads `dont`).
/// Returns the folded text and, for each of its bytes, the byte offset in the original it came from.
pub(crate) fn fold(s: &str) -> (String, Vec<usize>) {
    let mut out = String::with_capacity(s.len());
    let mut map = Vec::with_capacity(s.len());
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let mut skip_csi = false;
    for (k, &(i, c)) in chars.iter().enumerate() {
        // A terminal escape sequence (`ESC [ 8 m`) is dropped whole, so the text it hides reads as words.
        if skip_csi {
            skip_csi = !('@'..='~').contains(&c) || c == '[';
            continue;
        }
        if c == '\u{1b}' && chars.get(k + 1).is_some_and(|(_, n)| *n == '[') {
            skip_csi = true;
            continue;
        }
        if hidden(c).is_some() {
            continue;
        }
        let c = match c as u32 {
            0xFF01..=0xFF5E => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
            _ => confusable(c).unwrap_or(c),
        };
        if matches!(c, '\'' | '’' | '‘')
            && k > 0
            && chars[k - 1].1.is_alphanumeric()
            && chars.get(k + 1).is_some_and(|(_, n)| n.is_alphanumeric())
        {
            continue;
        }
        for l in c.to_lowercase() {
            let before = out.len();
            out.push(l);
            map.extend(std::iter::repeat_n(i, out.len() - before));
        }
    }
    (out, map)
}

/// Word tokens of folded text: runs of letters and digits (a `_` or `-` splits words; camelCase does not matter
/// here since the text is lower case already). Each token is (start, end) byte offsets into the folded text.
pub(crate) fn tokens(folded: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in folded.char_indices() {
        if c.is_alphanumeric() {
            start.get_or_insert(i);
        } else if let Some(s) = start.take() {
            out.push((s, i));
        }
    }
    if let Some(s) = start {
        out.push((s, folded.len()));
    }
    out
}

/// A parameter or tool name read as words: `content_from_ssh_key` and `contentFromSshKey` both read
/// `content from ssh key`.
pub(crate) fn words_of_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c == ' ' {
            out.push(' ');
            prev_lower = false;
        } else {
            if c.is_uppercase() && prev_lower {
                out.push(' ');
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            out.push(c);
        }
    }
    out
}

/// Whether a token mixes Latin letters with Cyrillic or Greek ones (a look-alike spelling meant to slip past
/// keyword checks; text written in one of those scripts does not mix within a word).
pub(crate) fn mixed_script(word: &str) -> bool {
    let (mut latin, mut other) = (false, false);
    for c in word.chars() {
        if c.is_ascii_alphabetic() {
            latin = true;
        } else if ('\u{0370}'..='\u{03FF}').contains(&c) || ('\u{0400}'..='\u{052F}').contains(&c) {
            other = true;
        }
    }
    latin && other
}
