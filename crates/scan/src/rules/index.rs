//! Finding where patterns and paths start without trying each at every word: an index by first word (and first
//! byte), and word sets hashed.

use std::sync::OnceLock;

use super::lexicon::{MOVE, NAME_NOUNS, PATHS, REACH, objects};
use super::phrases::phrase_rules;
use crate::pattern::Pattern;

/// A set of words (`a|b|c*`, as one word of a pattern): exact words hashed, prefixes checked in turn.
pub(super) struct WordSet {
    exact: std::collections::HashSet<String>,
    prefix: Vec<String>,
}

impl WordSet {
    fn new(alternatives: &str) -> WordSet {
        let pattern = Pattern::new(alternatives);
        let (prefix, exact): (Vec<_>, Vec<_>) =
            pattern.first().iter().cloned().partition(|(_, p)| *p);
        WordSet {
            exact: exact.into_iter().map(|(w, _)| w).collect(),
            prefix: prefix.into_iter().map(|(w, _)| w).collect(),
        }
    }

    pub(super) fn contains(&self, w: &str) -> bool {
        self.exact.contains(w) || self.prefix.iter().any(|p| w.starts_with(p.as_str()))
    }
}

/// Byte offsets in folded text where one of [`PATHS`] starts: one pass, checking only at bytes some path starts with.
pub(super) fn paths_in(folded: &str) -> Vec<usize> {
    static FIRST: OnceLock<Vec<Vec<usize>>> = OnceLock::new();
    let first = FIRST.get_or_init(|| {
        let mut t = vec![Vec::new(); 256];
        for (k, p) in PATHS.iter().enumerate() {
            t[p.as_bytes()[0] as usize].push(k);
        }
        t
    });
    let b = folded.as_bytes();
    let mut out = Vec::new();
    let mut seen = [false; 64];
    for i in 0..b.len() {
        for &k in &first[b[i] as usize] {
            if !seen[k]
                && b[i..].starts_with(PATHS[k].as_bytes())
                && !(PATHS[k] == ".env."
                    && ["example", "sample", "template", "dist", "defaults"]
                        .iter()
                        .any(|x| b[i + 5..].starts_with(x.as_bytes())))
            {
                seen[k] = true;
                out.push(i);
            }
        }
    }
    out
}

/// Where patterns may start: (group, pattern) by exact first word, and by first-word prefix.
pub(super) struct Index {
    exact: std::collections::HashMap<String, Vec<(usize, usize)>>,
    /// Prefix alternatives by their first byte.
    prefix: Vec<Vec<(String, usize, usize)>>,
}

impl Index {
    fn new<'a>(groups: impl Iterator<Item = &'a [Pattern]>) -> Index {
        let mut idx = Index {
            exact: Default::default(),
            prefix: vec![Vec::new(); 256],
        };
        for (r, group) in groups.enumerate() {
            for (p, pattern) in group.iter().enumerate() {
                for (word, is_prefix) in pattern.first() {
                    if *is_prefix {
                        let b = word.as_bytes().first().copied().unwrap_or(0) as usize;
                        idx.prefix[b].push((word.clone(), r, p));
                    } else {
                        idx.exact.entry(word.clone()).or_default().push((r, p));
                    }
                }
            }
        }
        idx
    }

    /// The first match of every pattern of every group in `words`: `found[group][pattern]`.
    pub(super) fn scan(
        &self,
        groups: &[&[Pattern]],
        words: &[&str],
    ) -> Vec<Vec<Option<(usize, usize)>>> {
        let mut found: Vec<Vec<Option<(usize, usize)>>> =
            groups.iter().map(|g| vec![None; g.len()]).collect();
        for (i, w) in words.iter().enumerate() {
            let mut attempt = |r: usize, p: usize| {
                if found[r][p].is_none()
                    && let Some(end) = groups[r][p].at_start(words, i)
                {
                    found[r][p] = Some((i, end));
                }
            };
            if let Some(starts) = self.exact.get(*w) {
                for &(r, p) in starts {
                    attempt(r, p);
                }
            }
            let b = w.as_bytes().first().copied().unwrap_or(0) as usize;
            for (prefix, r, p) in &self.prefix[b] {
                if w.starts_with(prefix.as_str()) {
                    attempt(*r, *p);
                }
            }
        }
        found
    }
}

pub(super) fn rule_groups() -> &'static (Vec<&'static [Pattern]>, Index) {
    static I: OnceLock<(Vec<&'static [Pattern]>, Index)> = OnceLock::new();
    I.get_or_init(|| {
        let groups: Vec<&'static [Pattern]> = phrase_rules()
            .iter()
            .map(|r| r.patterns.as_slice())
            .collect();
        let idx = Index::new(groups.iter().copied());
        (groups, idx)
    })
}

pub(super) fn object_index() -> &'static Index {
    static I: OnceLock<Index> = OnceLock::new();
    I.get_or_init(|| Index::new(std::iter::once(objects())))
}

pub(super) fn move_verbs() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(MOVE))
}

pub(super) fn name_nouns() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(NAME_NOUNS))
}

pub(super) fn reach_verbs() -> &'static WordSet {
    static P: OnceLock<WordSet> = OnceLock::new();
    P.get_or_init(|| WordSet::new(REACH))
}
