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
    let w = word;
    if w.len() > 4 && w.ends_with("ies") {
        return format!("{}y", &w[..w.len() - 3]);
    }
    if w.len() > 4
        && (w.ends_with("sses") || w.ends_with("xes") || w.ends_with("ches") || w.ends_with("shes"))
    {
        return w[..w.len() - 2].to_owned();
    }
    if w.len() > 3
        && w.ends_with('s')
        && !w.ends_with("ss")
        && !w.ends_with("us")
        && !w.ends_with("is")
    {
        return w[..w.len() - 1].to_owned();
    }
    w.to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

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
