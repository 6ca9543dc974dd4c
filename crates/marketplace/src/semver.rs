//! A small semantic-version ordering (SemVer 2.0 precedence, a leading `v` allowed) used to pick the newest of several registry rows.
//!
//! Versions that are not semver sort below every semver version and among themselves by plain string order, so a
//! registry row with a non-semantic version never wins over a semantic one.

use std::cmp::Ordering;

#[derive(Debug, PartialEq, Eq)]
struct Parsed<'a> {
    core: [u64; 3],
    pre: Vec<&'a str>,
}

fn parse(v: &str) -> Option<Parsed<'_>> {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    // Build metadata does not take part in precedence.
    let v = v.split_once('+').map_or(v, |(a, _)| a);
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let mut parts = core.split('.');
    let mut nums = [0u64; 3];
    for (i, slot) in nums.iter_mut().enumerate() {
        match parts.next() {
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                *slot = p.parse().ok()?
            }
            // "1" or "1.2" are accepted as 1.0.0 and 1.2.0.
            None if i > 0 => break,
            _ => return None,
        }
    }
    if parts.next().is_some() {
        return None;
    }
    let pre = match pre {
        Some(p) if p.is_empty() || p.split('.').any(str::is_empty) => return None,
        Some(p) => p.split('.').collect(),
        None => Vec::new(),
    };
    Some(Parsed { core: nums, pre })
}

fn cmp_pre(a: &[&str], b: &[&str]) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        // A release is newer than any of its pre-releases.
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(m), Ok(n)) => m.cmp(&n),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => x.cmp(y),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// Orders two version strings by semver precedence; non-semver strings sort first (lowest).
pub fn compare(a: &str, b: &str) -> Ordering {
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.core.cmp(&y.core).then_with(|| cmp_pre(&x.pre, &y.pre)),
        (Some(_), None) => Ordering::Greater,
        (None, Some(_)) => Ordering::Less,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::compare;
    use std::cmp::Ordering::*;

    #[test]
    fn precedence() {
        assert_eq!(compare("1.10.0", "1.9.0"), Greater);
        assert_eq!(compare("v2.0.0", "1.99.99"), Greater);
        assert_eq!(compare("1.0.0", "1.0.0-rc.1"), Greater);
        assert_eq!(compare("1.0.0-alpha", "1.0.0-alpha.1"), Less);
        assert_eq!(compare("1.0.0-alpha.beta", "1.0.0-beta"), Less);
        assert_eq!(compare("1.0.0-beta.2", "1.0.0-beta.11"), Less);
        assert_eq!(compare("1.0.0+build.5", "1.0.0"), Equal);
        assert_eq!(compare("2025.4.25", "2025.10.1"), Less);
        assert_eq!(compare("latest", "0.0.1"), Less);
        assert_eq!(compare("1.2", "1.2.0"), Equal);
    }
}
