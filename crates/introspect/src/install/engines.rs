//! The engines check: the Node version here (asked once) against the npm range a package's `engines.node` asks for.

use std::process::Stdio;

pub(super) async fn node_version() -> Option<String> {
    static V: tokio::sync::OnceCell<Option<String>> = tokio::sync::OnceCell::const_new();
    V.get_or_init(|| async {
        let out = tokio::process::Command::new("node")
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .await
            .ok()?;
        Some(
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .trim_start_matches('v')
                .to_owned(),
        )
    })
    .await
    .clone()
}

/// Whether `version` (e.g. `20.20.2`) satisfies an npm range (`>=18`, `^20.1`, `18 || 20`, `>=18 <21`, `20.x`).
/// Ranges it cannot read count as satisfied (the check only adds a flag).
pub(super) fn version_satisfies(version: &str, range: &str) -> bool {
    let parse = |s: &str| -> Option<[u64; 3]> {
        let s = s.trim().trim_start_matches('v');
        let mut parts = s.split('.').map(|p| {
            if p == "x" || p == "*" || p == "X" {
                Some(0)
            } else {
                p.split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<u64>()
                    .ok()
            }
        });
        let a = parts.next()??;
        let b = parts.next().flatten().unwrap_or(0);
        let c = parts.next().flatten().unwrap_or(0);
        Some([a, b, c])
    };
    let Some(v) = parse(version) else { return true };
    range.split("||").any(|alt| {
        let alt = alt.trim();
        if alt.is_empty() || alt == "*" || alt == "x" {
            return true;
        }
        alt.split_whitespace().all(|cmp| {
            let (op, rest) = if let Some(r) = cmp.strip_prefix(">=") {
                (">=", r)
            } else if let Some(r) = cmp.strip_prefix("<=") {
                ("<=", r)
            } else if let Some(r) = cmp.strip_prefix('>') {
                (">", r)
            } else if let Some(r) = cmp.strip_prefix('<') {
                ("<", r)
            } else if let Some(r) = cmp.strip_prefix('^') {
                ("^", r)
            } else if let Some(r) = cmp.strip_prefix('~') {
                ("~", r)
            } else if let Some(r) = cmp.strip_prefix('=') {
                ("=", r)
            } else {
                ("=", cmp)
            };
            let Some(want) = parse(rest) else { return true };
            let wildcard = rest.contains('x') || rest.contains('*') || rest.split('.').count() < 3;
            match op {
                ">=" => v >= want,
                "<=" => v <= want,
                ">" => v > want,
                "<" => v < want,
                "^" => v >= want && v[0] == want[0],
                "~" => v >= want && v[0] == want[0] && v[1] == want[1],
                _ if wildcard => {
                    let n = rest
                        .split('.')
                        .filter(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
                        .count();
                    v[..n.min(3)] == want[..n.min(3)]
                }
                _ => v == want,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines() {
        assert!(version_satisfies("20.20.2", ">=18"));
        assert!(!version_satisfies("20.20.2", ">=22"));
        assert!(version_satisfies("20.20.2", "^20.1.0"));
        assert!(!version_satisfies("20.20.2", "^18"));
        assert!(version_satisfies("20.20.2", "18 || 20"));
        assert!(version_satisfies("20.20.2", ">=18 <21"));
        assert!(!version_satisfies("20.20.2", ">=18.0.0 <20"));
        assert!(version_satisfies("20.20.2", "20.x"));
        assert!(version_satisfies("20.20.2", "what"));
    }
}
