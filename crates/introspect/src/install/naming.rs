//! Names: the cache folder of a package spec, and the entry point (npm bin, console script) started among several.

/// A directory name for a package spec: letters, digits and `._@=-` only.
pub(super) fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._@=-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

/// The entry point to start among several: the one named like the package, else the only one, else one with `mcp`
/// in its name, else the first.
pub(super) fn choose(entries: &[(String, String)], package: &str) -> Option<(String, String)> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    entries
        .iter()
        .find(|(n, _)| norm(n) == norm(package))
        .or_else(|| (entries.len() == 1).then(|| &entries[0]))
        .or_else(|| entries.iter().find(|(n, _)| n.contains("mcp")))
        .or_else(|| entries.first())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_point_choice() {
        let e = |v: &[&str]| {
            v.iter()
                .map(|s| ((*s).to_owned(), String::new()))
                .collect::<Vec<_>>()
        };
        assert_eq!(choose(&e(&["a", "mcp-x"]), "mcp_x").unwrap().0, "mcp-x");
        assert_eq!(choose(&e(&["only"]), "pkg").unwrap().0, "only");
        assert_eq!(choose(&e(&["cli", "x-mcp"]), "pkg").unwrap().0, "x-mcp");
        assert!(choose(&[], "pkg").is_none());
        assert_eq!(slug("@scope/pkg@1.0"), "@scope_pkg@1.0");
    }
}
