//! A small npm semver-range check for `engines.node`: comparators `>=`, `>`, `<=`, `<`, `=`, `^`, `~`, x-ranges
//! (`20.x`, `22`, `*`), hyphen ranges (`18 - 22`), `||` between alternatives and spaces as AND. Pre-release tags are
//! ignored (Node releases have none). A range it cannot read is `None`, and callers treat it as satisfied.

type V = [u64; 3];

/// A partial version: the numbers given (`22` is `[22]`, `22.x` too, `*` is `[]`).
fn partial(s: &str) -> Option<Vec<u64>> {
    let s = s.trim().trim_start_matches(['v', 'V', '=']);
    let s = s.split(['-', '+']).next().unwrap_or(s);
    if s.is_empty() || s == "*" || s.eq_ignore_ascii_case("x") {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for p in s.split('.') {
        if p == "*" || p.eq_ignore_ascii_case("x") {
            break;
        }
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || out.len() == 3 {
            return None;
        }
        out.push(p.parse().ok()?);
    }
    Some(out)
}

fn fill(p: &[u64]) -> V {
    [
        p.first().copied().unwrap_or(0),
        p.get(1).copied().unwrap_or(0),
        p.get(2).copied().unwrap_or(0),
    ]
}

/// The first version above every version the partial `p` names (`1.2` -> `1.3.0`); `None` for `*`.
fn above(p: &[u64]) -> Option<V> {
    match p.len() {
        0 => None,
        1 => Some([p[0] + 1, 0, 0]),
        2 => Some([p[0], p[1] + 1, 0]),
        _ => Some([p[0], p[1], p[2] + 1]),
    }
}

/// One comparator as a half-open interval `[lo, hi)` (`hi` `None`: unbounded); `lo_open` makes the low end exclusive
/// (`>1.2.3`).
struct Interval {
    lo: V,
    lo_open: bool,
    hi: Option<(V, bool)>,
}

impl Interval {
    fn contains(&self, v: V) -> bool {
        let lo_ok = if self.lo_open {
            v > self.lo
        } else {
            v >= self.lo
        };
        let hi_ok = match self.hi {
            None => true,
            Some((h, inclusive)) => {
                if inclusive {
                    v <= h
                } else {
                    v < h
                }
            }
        };
        lo_ok && hi_ok
    }
}

fn comparator(op: &str, p: &[u64]) -> Interval {
    let any = Interval {
        lo: [0, 0, 0],
        lo_open: false,
        hi: None,
    };
    let exact = p.len() == 3;
    match op {
        ">=" => Interval { lo: fill(p), ..any },
        ">" if exact => Interval {
            lo: fill(p),
            lo_open: true,
            hi: None,
        },
        ">" => match above(p) {
            Some(lo) => Interval { lo, ..any },
            // `>*` matches nothing.
            None => Interval {
                lo: [u64::MAX; 3],
                lo_open: true,
                hi: None,
            },
        },
        "<" => Interval {
            hi: Some((fill(p), false)),
            ..any
        },
        "<=" if exact => Interval {
            hi: Some((fill(p), true)),
            ..any
        },
        "<=" => Interval {
            hi: above(p).map(|h| (h, false)),
            ..any
        },
        "^" => {
            let lo = fill(p);
            let hi = if lo[0] > 0 || p.len() == 1 {
                [lo[0] + 1, 0, 0]
            } else if lo[1] > 0 || p.len() == 2 {
                [0, lo[1] + 1, 0]
            } else {
                [0, 0, lo[2] + 1]
            };
            Interval {
                lo,
                lo_open: false,
                hi: (!p.is_empty()).then_some((hi, false)),
            }
        }
        "~" => {
            let lo = fill(p);
            let hi = match p.len() {
                0 => None,
                1 => Some([lo[0] + 1, 0, 0]),
                _ => Some([lo[0], lo[1] + 1, 0]),
            };
            Interval {
                lo,
                lo_open: false,
                hi: hi.map(|h| (h, false)),
            }
        }
        // `=` or no operator: an exact version, or the x-range a partial names.
        _ => Interval {
            lo: fill(p),
            lo_open: false,
            hi: if exact {
                Some((fill(p), true))
            } else {
                above(p).map(|h| (h, false))
            },
        },
    }
}

const OPS: &[&str] = &[">=", "<=", "~>", ">", "<", "=", "^", "~"];

/// One alternative (between `||`): its comparators, all of which must hold.
fn alternative(alt: &str) -> Option<Vec<Interval>> {
    let tokens: Vec<&str> = alt.split_whitespace().collect();
    // A hyphen range `A - B`: `>=A` and `<=B` (B partial: below the next).
    if tokens.len() == 3 && tokens[1] == "-" {
        let (a, b) = (partial(tokens[0])?, partial(tokens[2])?);
        return Some(vec![comparator(">=", &a), comparator("<=", &b)]);
    }
    let mut out = Vec::new();
    let mut pending: Option<&str> = None;
    for t in tokens {
        let (op, rest) = match OPS.iter().find(|o| t.starts_with(**o)) {
            Some(o) => (*o, &t[o.len()..]),
            None => (pending.take().unwrap_or(""), t),
        };
        // An operator written apart from its version (`>= 18`).
        if rest.is_empty() {
            pending = Some(op);
            continue;
        }
        let op = if op == "~>" { "~" } else { op };
        out.push(comparator(op, &partial(rest)?));
    }
    if pending.is_some() {
        return None;
    }
    Some(out)
}

/// Whether `version` (`20.20.2`, `v22.1.0`) satisfies the npm range `range`; `None` when either cannot be read.
pub fn satisfies(version: &str, range: &str) -> Option<bool> {
    let v = partial(version)?;
    if v.len() != 3 {
        return None;
    }
    let v = fill(&v);
    let mut any = false;
    for alt in range.split("||") {
        let comparators = alternative(alt.trim())?;
        any |= comparators.iter().all(|c| c.contains(v));
    }
    Some(any)
}

/// Whether some release of Node `major` satisfies `range` (probed at a few minor versions, the way Node's
/// releases are numbered).
pub fn major_satisfies(major: u64, range: &str) -> bool {
    [0, 1, 5, 9, 10, 12, 14, 16, 18, 20, 99]
        .iter()
        .any(|minor| satisfies(&format!("{major}.{minor}.0"), range) == Some(true))
        || satisfies(&format!("{major}.999.999"), range) == Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes(v: &str, r: &str) {
        assert_eq!(satisfies(v, r), Some(true), "{v} in {r}");
    }
    fn no(v: &str, r: &str) {
        assert_eq!(satisfies(v, r), Some(false), "{v} not in {r}");
    }

    #[test]
    fn comparators_and_alternatives() {
        yes("20.20.2", ">=18");
        no("20.20.2", ">=22");
        yes("22.0.0", ">=22");
        yes("22.12.0", ">=22.12.0");
        no("22.11.9", ">=22.12.0");
        yes("20.20.2", ">= 18");
        no("20.20.2", ">= 22.0.0");
        yes("20.20.2", ">18");
        no("18.9.0", ">18");
        no("18.0.0", ">18.0.0");
        yes("18.0.1", ">18.0.0");
        yes("20.20.2", "^20.1.0");
        no("20.0.5", "^20.1.0");
        no("20.20.2", "^18");
        yes("18.19.0", "^18 || ^20 || >=22");
        no("19.0.0", "^18 || ^20 || >=22");
        yes("0.2.5", "^0.2.3");
        no("0.3.0", "^0.2.3");
        yes("20.20.2", "~20.20");
        no("20.21.0", "~20.20.0");
        yes("20.20.2", "18 || 20");
        no("22.0.0", "18 || 20");
        yes("20.20.2", ">=18 <21");
        no("20.20.2", ">=18.0.0 <20");
        yes("20.20.2", "20.x");
        yes("20.20.2", "20.20.x");
        no("22.0.0", "20.x");
        yes("20.20.2", "*");
        yes("20.20.2", "");
        yes("20.5.0", "18 - 20");
        no("21.0.0", "18 - 20");
        yes("20.9.9", "<=20");
        no("21.0.0", "<=20");
        yes("v22.1.0", ">=v22");
        yes("22.0.0", "=22.0.0");
        no("22.0.1", "22.0.0");
        assert_eq!(satisfies("20.20.2", "what"), None);
        assert_eq!(satisfies("20.20.2", ">="), None);
    }

    #[test]
    fn majors() {
        assert!(major_satisfies(22, ">=22"));
        assert!(!major_satisfies(20, ">=22"));
        assert!(major_satisfies(22, ">=22.12.0"));
        assert!(major_satisfies(22, "^20.19.0 || >=22.12.0"));
        assert!(major_satisfies(20, "^20.19.0 || >=22.12.0"));
        assert!(!major_satisfies(22, ">=24"));
        assert!(major_satisfies(24, ">=24"));
        assert!(major_satisfies(22, ">=18 <23"));
    }
}
