//! Query preprocessing for BM25: stop words out, plurals singular, verbs expanded to their synonyms, FTS5-safe output.

/// Words that carry no intent; dropping them keeps "find a tool for the weather" about weather.
const STOP: &[&str] = &[
    "a", "an", "the", "to", "for", "of", "in", "on", "with", "and", "or", "my", "me", "i", "from",
    "by", "is", "it", "at", "as", "be", "this", "that", "please", "some", "can", "you", "we",
    "our", "your", "into", "about", "want", "need", "would", "like", "do", "how", "what", "which",
    "tool", "using", "use",
];

/// Verb synonyms: a query word also matches the words it maps to.
const SYNONYMS: &[(&str, &[&str])] = &[
    ("fetch", &["get", "retrieve", "read"]),
    ("retrieve", &["get", "fetch", "read"]),
    ("obtain", &["get", "fetch"]),
    ("get", &["fetch", "read", "retrieve"]),
    ("read", &["get", "view"]),
    ("show", &["get", "list", "view"]),
    ("view", &["get", "read", "show"]),
    ("cancel", &["delete", "remove"]),
    ("remove", &["delete"]),
    ("erase", &["delete", "remove"]),
    ("destroy", &["delete", "remove"]),
    ("drop", &["delete", "remove"]),
    ("delete", &["remove"]),
    ("create", &["add", "new", "make"]),
    ("add", &["create", "new"]),
    ("make", &["create", "add"]),
    ("new", &["create", "add"]),
    ("find", &["search", "list", "lookup"]),
    ("search", &["find", "query", "list"]),
    ("lookup", &["search", "find", "get"]),
    ("look", &["search", "find", "get"]),
    ("query", &["search", "find"]),
    ("list", &["search", "get"]),
    ("modify", &["update", "edit"]),
    ("edit", &["update", "modify"]),
    ("change", &["update", "edit"]),
    ("update", &["edit", "modify"]),
    ("send", &["post", "create"]),
    ("post", &["send", "create"]),
    ("write", &["create", "update", "save"]),
    ("save", &["write", "create"]),
    ("run", &["execute", "start"]),
    ("execute", &["run"]),
    ("start", &["run", "launch"]),
    ("launch", &["start", "run"]),
    ("stop", &["cancel", "end"]),
    ("open", &["get", "navigate"]),
    ("browse", &["navigate", "open"]),
    ("upload", &["create", "put"]),
    ("download", &["get", "fetch"]),
];

/// Plural to singular, conservatively (`subscriptions` -> `subscription`, `entries` -> `entry`; `status` stays).
pub fn singular(word: &str) -> String {
    let s = Singular::of(word);
    if s.y {
        format!("{}y", s.stem)
    } else {
        s.stem.to_owned()
    }
}

/// The meaningful words of a query, lowercased and singular (at most 32).
pub fn terms(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for raw in query.split(|c: char| !c.is_alphanumeric()) {
        if raw.is_empty() {
            continue;
        }
        let w = singular(&raw.to_lowercase());
        if STOP.contains(&w.as_str()) || out.contains(&w) {
            continue;
        }
        out.push(w);
        if out.len() == 32 {
            break;
        }
    }
    out
}

/// A safe FTS5 OR-expression of the terms and their synonyms. The tools' index stems words (Porter), and FTS5 stems
/// the query's words the same way, so `subscription` finds `subscriptions` as a whole token. `None` when nothing is
/// left to search for.
pub fn fts(terms: &[String]) -> Option<String> {
    let mut words: Vec<String> = Vec::new();
    for t in terms {
        let mut push = |w: &str| {
            if !words.iter().any(|x| x == w) {
                words.push(w.to_owned());
            }
        };
        push(t);
        if let Some((_, syns)) = SYNONYMS.iter().find(|(k, _)| k == t) {
            for s in *syns {
                push(s);
            }
        }
    }
    if words.is_empty() {
        return None;
    }
    // Terms contain only alphanumerics (see `terms`), so quoting makes them plain tokens.
    Some(
        words
            .iter()
            .map(|w| format!("\"{w}\""))
            .collect::<Vec<_>>()
            .join(" OR "),
    )
}

/// Fraction of the query's terms found (as word prefixes) in `text`: 1.0 when every term is there.
pub fn coverage(terms: &[String], text: &str) -> f64 {
    Coverage::new(terms).of(&[text])
}

/// [`coverage`] for many texts against one query: each term's alternatives (it and its synonyms) are listed once, and
/// each word of a text is lowercased into one buffer and made singular without allocating (a query's fifty BM25
/// candidates took about 3,000 allocations one by one).
pub struct Coverage<'a> {
    /// Per term, the words any of which (as a prefix of a text's word) covers it.
    alts: Vec<Vec<&'a str>>,
}

impl<'a> Coverage<'a> {
    pub fn new(terms: &'a [String]) -> Coverage<'a> {
        let alts = terms
            .iter()
            .map(|t| {
                std::iter::once(t.as_str())
                    .chain(
                        SYNONYMS
                            .iter()
                            .find(|(k, _)| k == t)
                            .map(|(_, s)| s.to_vec())
                            .unwrap_or_default(),
                    )
                    .collect()
            })
            .collect();
        Coverage { alts }
    }

    /// The share of terms covered by the words of `parts` (one text in pieces: the words do not run across them).
    pub fn of(&self, parts: &[&str]) -> f64 {
        if self.alts.is_empty() {
            return 0.0;
        }
        let mut hit = vec![false; self.alts.len()];
        let mut buf = String::new();
        for part in parts {
            for raw in part.split(|c: char| !c.is_alphanumeric()) {
                if raw.is_empty() {
                    continue;
                }
                buf.clear();
                if raw.is_ascii() {
                    buf.extend(raw.bytes().map(|b| char::from(b.to_ascii_lowercase())));
                } else {
                    // `str::to_lowercase`'s rules (a final sigma, say), as before.
                    buf.push_str(&raw.to_lowercase());
                }
                let word = Singular::of(&buf);
                for (h, alts) in hit.iter_mut().zip(&self.alts) {
                    if !*h && alts.iter().any(|a| word.starts_with(a)) {
                        *h = true;
                    }
                }
            }
        }
        hit.iter().filter(|h| **h).count() as f64 / self.alts.len() as f64
    }
}

/// A word made singular without allocating (the rules of [`singular`]): a prefix of the word, with a `y` after it
/// for `-ies`.
struct Singular<'w> {
    stem: &'w str,
    y: bool,
}

impl<'w> Singular<'w> {
    fn of(w: &'w str) -> Singular<'w> {
        let cut = |n: usize| &w[..w.len() - n];
        if w.len() > 4 && w.ends_with("ies") {
            return Singular {
                stem: cut(3),
                y: true,
            };
        }
        if w.len() > 4
            && (w.ends_with("sses")
                || w.ends_with("xes")
                || w.ends_with("ches")
                || w.ends_with("shes"))
        {
            return Singular {
                stem: cut(2),
                y: false,
            };
        }
        if w.len() > 3
            && w.ends_with('s')
            && !w.ends_with("ss")
            && !w.ends_with("us")
            && !w.ends_with("is")
        {
            return Singular {
                stem: cut(1),
                y: false,
            };
        }
        Singular { stem: w, y: false }
    }

    /// Whether the singular word starts with `a`.
    fn starts_with(&self, a: &str) -> bool {
        if a.len() <= self.stem.len() {
            return self.stem.starts_with(a);
        }
        self.y && a.len() == self.stem.len() + 1 && a.starts_with(self.stem) && a.ends_with('y')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `coverage` as it was written before `Coverage` (a `String` per word, the alternatives per term and text).
    fn coverage_before(terms: &[String], text: &str) -> f64 {
        if terms.is_empty() {
            return 0.0;
        }
        let words: Vec<String> = text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(|w| singular(&w.to_lowercase()))
            .collect();
        let hit = |t: &String| {
            let alts: Vec<&str> = std::iter::once(t.as_str())
                .chain(
                    SYNONYMS
                        .iter()
                        .find(|(k, _)| k == t)
                        .map(|(_, s)| s.to_vec())
                        .unwrap_or_default(),
                )
                .collect();
            words.iter().any(|w| alts.iter().any(|a| w.starts_with(a)))
        };
        terms.iter().filter(|t| hit(t)).count() as f64 / terms.len() as f64
    }

    /// Every query of the query sets against every tool of the real catalog: the same share as before.
    #[test]
    fn coverage_gives_what_it_gave_on_the_real_catalog() {
        let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data");
        let read = |f: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(data.join(f)).unwrap()).unwrap()
        };
        let catalog = read("tool_catalog.json");
        let mut texts: Vec<(String, String)> = Vec::new();
        for s in catalog["servers"].as_array().unwrap() {
            for t in s["tools"].as_array().unwrap() {
                let name = t["name"].as_str().unwrap().to_owned();
                texts.push((name, t["description"].as_str().unwrap_or("").to_owned()));
            }
        }
        let extra: (String, String) = (
            "Companies_queries".into(),
            "DELETES ENTRIES, İstanbul Straße ﬁles ΟΔΟΣ".into(),
        );
        let mut queries: Vec<String> = Vec::new();
        for f in ["tool_queries.json", "tool_queries_heldout.json"] {
            for q in read(f)["queries"].as_array().unwrap() {
                queries.push(q["query"].as_str().unwrap().to_owned());
            }
        }
        queries.push("delete the companies' entries in istanbul οδος".into());
        let (mut compared, mut partial) = (0, 0);
        for q in &queries {
            let terms = terms(q);
            let cov = Coverage::new(&terms);
            for (name, description) in texts.iter().step_by(7).chain([&extra]) {
                let joined = format!("{name} {description}");
                let want = coverage_before(&terms, &joined);
                assert_eq!(cov.of(&[name, description]), want, "{q:?} on {name}");
                assert_eq!(coverage(&terms, &joined), want);
                compared += 1;
                partial += usize::from(want > 0.0 && want < 1.0);
            }
        }
        assert!(
            compared > 10_000 && partial > 1_000,
            "{compared} pairs, {partial} partly covered"
        );
    }

    #[test]
    fn preprocessing() {
        assert_eq!(singular("subscriptions"), "subscription");
        assert_eq!(singular("entries"), "entry");
        assert_eq!(singular("status"), "status");
        assert_eq!(singular("processes"), "process");
        assert_eq!(
            terms("Cancel the Subscriptions for a customer"),
            ["cancel", "subscription", "customer"]
        );
        assert_eq!(
            fts(&terms("cancel it")).unwrap(),
            "\"cancel\" OR \"delete\" OR \"remove\""
        );
        for hostile in [
            "c++",
            "\"unbalanced",
            "NEAR(a b",
            "*",
            "-",
            "col:val",
            "^start",
            "a OR OR b",
            "🙂🙂",
        ] {
            let f = fts(&terms(hostile));
            assert!(
                f.as_deref()
                    .is_none_or(|f| !f.contains('(') && !f.contains(':') && !f.contains('^')),
                "{hostile} -> {f:?}"
            );
        }
        assert!(
            coverage(
                &terms("delete subscription"),
                "Cancel (remove) a customer's subscriptions"
            ) == 1.0
        );
        assert!(coverage(&terms("bake sourdough"), "Create a GitHub issue") == 0.0);
    }
}
