//! Names of proxied tools and prompts (`server__tool`) and of resources; parsing them back; similar-name suggestions.
//!
//! Every exposed tool name fits `^[a-zA-Z0-9_-]{1,64}$`, the limit most model providers enforce. Longer or illegal
//! names are shortened deterministically (a stable FNV-1a hash suffix), so the same tool always gets the same name.

pub const SEP: &str = "__";
pub const MAX: usize = 64;
/// Prefix of resource URIs we expose: `agent-discover://<server>/<original uri>`.
pub const URI_PREFIX: &str = "agent-discover://";

fn legal(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// 64-bit FNV-1a: stable across builds and platforms (std's hasher is not).
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The name a client sees for `tool` of `server`.
pub fn expose(server: &str, tool: &str) -> String {
    let full = format!("{server}{SEP}{tool}");
    if !full.is_empty() && full.len() <= MAX && full.chars().all(legal) {
        return full;
    }
    let cleaned: String = full
        .chars()
        .map(|c| if legal(c) { c } else { '_' })
        .collect();
    let suffix = format!("_{:08x}", fnv1a(&full) as u32);
    let keep = MAX - suffix.len();
    let mut head: String = cleaned.chars().take(keep).collect();
    if head.is_empty() {
        head.push('t');
    }
    head + &suffix
}

/// Splits `server__tool` (or `mcp__server__tool`) by the longest known server name followed by `__`.
pub fn split<'a>(
    name: &'a str,
    servers: impl IntoIterator<Item = &'a str>,
) -> Option<(&'a str, &'a str)> {
    let name = strip_mcp(name);
    servers
        .into_iter()
        .filter(|s| {
            name.len() > s.len() + SEP.len()
                && name.starts_with(s)
                && name[s.len()..].starts_with(SEP)
        })
        .max_by_key(|s| s.len())
        .map(|s| (&name[..s.len()], &name[s.len() + SEP.len()..]))
}

/// Accepts agent-discover's `mcp__server__tool` spelling by dropping the `mcp__` prefix.
pub fn strip_mcp(name: &str) -> &str {
    name.strip_prefix("mcp__").unwrap_or(name)
}

pub fn expose_uri(server: &str, uri: &str) -> String {
    format!("{URI_PREFIX}{server}/{uri}")
}

/// `agent-discover://server/original` back to (server, original).
pub fn split_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix(URI_PREFIX)?;
    let (server, original) = rest.split_once('/')?;
    (!server.is_empty() && !original.is_empty()).then_some((server, original))
}

/// Similarity of two names in [0, 1]: shared word tokens (split on `_`, `-`, case) and edit distance.
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (a.to_ascii_lowercase(), b.to_ascii_lowercase());
    if a == b {
        return 1.0;
    }
    let words = |s: &str| {
        s.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let (wa, wb) = (words(&a), words(&b));
    let shared = wa.iter().filter(|w| wb.contains(w)).count();
    let jaccard = if wa.is_empty() || wb.is_empty() {
        0.0
    } else {
        shared as f64 / (wa.len() + wb.len() - shared) as f64
    };
    let max = a.chars().count().max(b.chars().count()).max(1);
    let edit = 1.0 - levenshtein(&a, &b) as f64 / max as f64;
    jaccard.max(edit)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_are_legal_and_stable() {
        assert_eq!(expose("fs", "read_file"), "fs__read_file");
        let long = expose(
            "a-very-long-server-name-for-testing",
            "and_an_even_longer_tool_name_that_goes_on",
        );
        assert!(long.len() <= MAX && long.chars().all(legal), "{long}");
        assert_eq!(
            long,
            expose(
                "a-very-long-server-name-for-testing",
                "and_an_even_longer_tool_name_that_goes_on"
            )
        );
        let dotted = expose("io.github.x", "get.thing");
        assert!(
            dotted.chars().all(legal) && dotted.starts_with("io_github_x__get_thing_"),
            "{dotted}"
        );
        assert_ne!(expose("a.b", "c"), expose("a_b", "c"));
    }

    #[test]
    fn split_by_longest_server_prefix() {
        let servers = ["a", "a__b", "fs"];
        assert_eq!(split("a__b__tool", servers), Some(("a__b", "tool")));
        assert_eq!(split("mcp__fs__read", servers), Some(("fs", "read")));
        assert_eq!(split("fs__", servers), None);
        assert_eq!(split("nope__x", servers), None);
    }

    #[test]
    fn uris_round_trip() {
        let u = expose_uri("fx", "fixture://item/{id}");
        assert_eq!(split_uri(&u), Some(("fx", "fixture://item/{id}")));
        assert_eq!(split_uri("file:///x"), None);
    }

    #[test]
    fn similar_names() {
        assert!(similarity("read_file", "read_files") > 0.8);
        assert!(similarity("create_issue", "issue_create") > 0.9);
        assert!(similarity("read_file", "delete_repo") < 0.4);
    }
}
