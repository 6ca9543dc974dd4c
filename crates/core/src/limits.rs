//! The limits vocabulary: a server's rate limits (token buckets with a burst, for the server, each tool, one tool,
//! each caller), its concurrency cap with a queue, and its circuit breaker, as a user sets them. Pure data and the
//! parsing of the short forms the CLI takes (`10/s`, `5/30s`, `5s`); enforcing them is the proxy's.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod patch;
pub use patch::{Cap, LimitsPatch};

/// A rate: `count` calls per `per_ms` milliseconds, with a bucket of `burst` tokens (at least 1). A bucket starts
/// full, so `burst` calls may go at once, then one every `per_ms / count`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub count: u32,
    pub per_ms: u64,
    /// Tokens the bucket holds; `None` means `count` (a second's worth at `10/s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

impl Rate {
    /// Tokens added per millisecond.
    pub fn per_milli(&self) -> f64 {
        f64::from(self.count) / self.per_ms as f64
    }

    /// The bucket's size.
    pub fn capacity(&self) -> u32 {
        self.burst.unwrap_or(self.count).max(1)
    }

    /// Parses `COUNT/UNIT` or `COUNT/Nunit` (`10/s`, `600/min`, `5/30s`, `1/500ms`, `100/h`), optionally followed
    /// by ` burst N` (as [`Rate`]'s `Display` writes it).
    pub fn parse(s: &str) -> Result<Rate> {
        let bad = |why: &str| {
            Error::invalid(
                "rate",
                format!("{s:?}: {why} (expected e.g. 10/s, 600/min, 5/30s, 10/s burst 20)"),
            )
        };
        let (s_rate, burst) = match s.trim().split_once(" burst ") {
            Some((r, b)) => (
                r,
                Some(
                    b.trim()
                        .parse::<u32>()
                        .map_err(|_| bad("the burst is not a whole number"))?,
                ),
            ),
            None => (s.trim(), None),
        };
        let (count, per) = s_rate.trim().split_once('/').ok_or_else(|| bad("no `/`"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a whole number"))?;
        let per = per.trim();
        let per_ms = if per.starts_with(|c: char| c.is_ascii_digit()) {
            parse_duration(per).map_err(|_| bad("the period is not a duration"))?
        } else {
            parse_duration(&format!("1{per}")).map_err(|_| bad("unknown unit"))?
        };
        let rate = Rate {
            count,
            per_ms: per_ms.as_millis() as u64,
            burst,
        };
        rate.validate()?;
        Ok(rate)
    }

    pub fn validate(&self) -> Result<()> {
        if self.count == 0 {
            return Err(Error::invalid(
                "rate",
                "a rate of 0 calls lets nothing through; remove the limit or deny the tool instead",
            ));
        }
        if self.per_ms == 0 || self.per_ms > 86_400_000 {
            return Err(Error::invalid(
                "rate",
                "the period must be between 1 ms and 24 h",
            ));
        }
        if self.burst == Some(0) {
            return Err(Error::invalid(
                "burst",
                "a burst of 0 lets nothing through; it must be at least 1",
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, format_duration(self.per_ms))?;
        if let Some(b) = self.burst {
            write!(f, " burst {b}")?;
        }
        Ok(())
    }
}

/// A circuit breaker: after `failures` failures (timeouts, transport errors, a child exiting mid-call) within
/// `window_ms`, the server's calls are refused at once for `cooldown_ms`; then one trial call is let through
/// (half-open), and its success closes the breaker while its failure opens it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Breaker {
    pub failures: u32,
    pub window_ms: u64,
    pub cooldown_ms: u64,
}

impl Default for Breaker {
    /// Five failures in 30 s open it for 30 s: a server that hangs or keeps crashing stops holding callers for its
    /// whole call timeout each, while a single slow or failed call never trips it.
    fn default() -> Breaker {
        Breaker {
            failures: 5,
            window_ms: 30_000,
            cooldown_ms: 30_000,
        }
    }
}

impl Breaker {
    /// Parses `N/WINDOW` (`5/30s`).
    pub fn parse(s: &str, cooldown_ms: u64) -> Result<Breaker> {
        let bad = |why: &str| {
            Error::invalid(
                "breaker",
                format!("{s:?}: {why} (expected FAILURES/WINDOW, e.g. 5/30s, or off)"),
            )
        };
        let (n, window) = s.trim().split_once('/').ok_or_else(|| bad("no `/`"))?;
        let failures: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("the count is not a whole number"))?;
        let window =
            parse_duration(window.trim()).map_err(|_| bad("the window is not a duration"))?;
        let b = Breaker {
            failures,
            window_ms: window.as_millis() as u64,
            cooldown_ms,
        };
        b.validate()?;
        Ok(b)
    }

    pub fn validate(&self) -> Result<()> {
        if self.failures == 0 {
            return Err(Error::invalid(
                "breaker",
                "it must allow at least 1 failure (or be off)",
            ));
        }
        if self.window_ms == 0 || self.window_ms > 86_400_000 {
            return Err(Error::invalid(
                "breaker",
                "the window must be between 1 ms and 24 h",
            ));
        }
        if self.cooldown_ms == 0 || self.cooldown_ms > 86_400_000 {
            return Err(Error::invalid(
                "cooldown",
                "the cool-down must be between 1 ms and 24 h",
            ));
        }
        Ok(())
    }
}

/// A server's limits. The default: no rate limit, no concurrency cap, the default breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// All calls of the server together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Each tool of the server on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_rate: Option<Rate>,
    /// Named tools, each with its own (in place of `tool_rate` for that tool).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tools: BTreeMap<String, Rate>,
    /// Each caller on its own: the authenticated user (issuer and subject) where the front knows one, else the
    /// client's session, else the local user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_rate: Option<Rate>,
    /// Calls in flight at once; `None` is no cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Calls that may wait for a slot beyond the cap (0: refused at once when the cap is reached).
    #[serde(default = "default_queue")]
    pub queue: u32,
    /// How long a queued call waits for a slot before it is refused.
    #[serde(default = "default_wait_ms")]
    pub wait_ms: u64,
    /// `None` turns the breaker off.
    #[serde(default = "default_breaker")]
    pub breaker: Option<Breaker>,
}

fn default_queue() -> u32 {
    16
}
fn default_wait_ms() -> u64 {
    5_000
}
fn default_breaker() -> Option<Breaker> {
    Some(Breaker::default())
}

impl Default for LimitSettings {
    fn default() -> LimitSettings {
        LimitSettings {
            rate: None,
            tool_rate: None,
            tools: BTreeMap::new(),
            caller_rate: None,
            concurrency: None,
            queue: default_queue(),
            wait_ms: default_wait_ms(),
            breaker: default_breaker(),
        }
    }
}

impl LimitSettings {
    pub fn validate(&self) -> Result<()> {
        for r in [&self.rate, &self.tool_rate, &self.caller_rate]
            .into_iter()
            .flatten()
        {
            r.validate()?;
        }
        for (tool, r) in &self.tools {
            if tool.is_empty() || tool.len() > 128 {
                return Err(Error::invalid("tool", "a tool name of 1 to 128 characters"));
            }
            r.validate()?;
        }
        if self.concurrency == Some(0) {
            return Err(Error::invalid(
                "concurrency",
                "at least 1 call at a time (or no cap)",
            ));
        }
        if self.concurrency.is_some_and(|c| c > 100_000) || self.queue > 100_000 {
            return Err(Error::invalid(
                "concurrency",
                "the cap and the queue are at most 100000",
            ));
        }
        if self.wait_ms > 3_600_000 {
            return Err(Error::invalid("wait", "a queued call waits at most 1 h"));
        }
        if let Some(b) = &self.breaker {
            b.validate()?;
        }
        Ok(())
    }

    /// `Ok` when these limits let through nothing that `than` refuses (every rate, the cap, queue, wait and breaker
    /// as strict or stricter); `Err` names the first looser one.
    pub fn at_least_as_strict_as(
        &self,
        than: &LimitSettings,
    ) -> std::result::Result<(), &'static str> {
        fn rate(new: Option<&Rate>, old: Option<&Rate>) -> bool {
            match (new, old) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(n), Some(o)) => {
                    n.per_milli() <= o.per_milli() && n.capacity() <= o.capacity()
                }
            }
        }
        if !rate(self.rate.as_ref(), than.rate.as_ref()) {
            return Err("rate");
        }
        if !rate(self.tool_rate.as_ref(), than.tool_rate.as_ref()) {
            return Err("tool rate");
        }
        if !rate(self.caller_rate.as_ref(), than.caller_rate.as_ref()) {
            return Err("caller rate");
        }
        for (tool, old) in &than.tools {
            if !rate(self.tools.get(tool), Some(old)) {
                return Err("rate of a tool");
            }
        }
        if than.concurrency.is_some() && self.concurrency.is_none_or(|c| Some(c) > than.concurrency)
        {
            return Err("concurrency cap");
        }
        if self.queue > than.queue {
            return Err("queue");
        }
        if self.wait_ms > than.wait_ms {
            return Err("wait limit");
        }
        if let Some(old) = &than.breaker {
            match &self.breaker {
                Some(b)
                    if b.failures <= old.failures
                        && b.window_ms >= old.window_ms
                        && b.cooldown_ms >= old.cooldown_ms => {}
                _ => return Err("circuit breaker"),
            }
        }
        Ok(())
    }

    /// Whether any rate limit is set.
    pub fn has_rates(&self) -> bool {
        self.rate.is_some()
            || self.tool_rate.is_some()
            || !self.tools.is_empty()
            || self.caller_rate.is_some()
    }
}

/// Parses `500ms`, `5s`, `2m`/`2min`, `1h`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let split = s
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().map_err(|_| {
        Error::invalid(
            "duration",
            format!("{s:?}: expected e.g. 500ms, 5s, 2m, 1h"),
        )
    })?;
    let ms = match unit.trim() {
        "ms" => n,
        "" | "s" | "sec" => n * 1_000.0,
        "m" | "min" => n * 60_000.0,
        "h" => n * 3_600_000.0,
        u => {
            return Err(Error::invalid(
                "duration",
                format!("{s:?}: unknown unit {u:?} (ms, s, m, h)"),
            ));
        }
    };
    if !ms.is_finite() || !(0.0..=86_400_000.0 * 7.0).contains(&ms) {
        return Err(Error::invalid("duration", format!("{s:?}: out of range")));
    }
    Ok(Duration::from_millis(ms.round() as u64))
}

/// `500ms`, `5s`, `2m`, `1h`: the shortest exact form.
pub fn format_duration(ms: u64) -> String {
    match ms {
        m if m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
        m if m % 60_000 == 0 => format!("{}m", m / 60_000),
        m if m % 1_000 == 0 => format!("{}s", m / 1_000),
        m => format!("{m}ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_in_their_short_forms() {
        let r = Rate::parse("10/s").unwrap();
        assert_eq!((r.count, r.per_ms, r.capacity()), (10, 1000, 10));
        assert_eq!(Rate::parse("600/min").unwrap().per_ms, 60_000);
        assert_eq!(Rate::parse("5/30s").unwrap().per_ms, 30_000);
        assert_eq!(Rate::parse("1/500ms").unwrap().per_ms, 500);
        assert!((Rate::parse("10/s").unwrap().per_milli() - 0.01).abs() < 1e-12);
        for bad in ["10", "0/s", "x/s", "10/fortnight", "10/0s"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Rate::parse("5/30s").unwrap().to_string(), "5/30s");
    }

    #[test]
    fn breakers_and_durations_parse() {
        let b = Breaker::parse("5/30s", 10_000).unwrap();
        assert_eq!(
            (b.failures, b.window_ms, b.cooldown_ms),
            (5, 30_000, 10_000)
        );
        assert!(Breaker::parse("0/30s", 1).is_err());
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(format_duration(90_000), "90s");
    }

    #[test]
    fn settings_default_to_a_breaker_only_and_refuse_nonsense() {
        let d: LimitSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(d, LimitSettings::default());
        assert!(d.breaker.is_some() && !d.has_rates() && d.concurrency.is_none());
        let zero = LimitSettings {
            concurrency: Some(0),
            ..LimitSettings::default()
        };
        assert!(zero.validate().is_err());
        assert!(serde_json::from_str::<LimitSettings>(r#"{"rat": null}"#).is_err());
    }

    #[test]
    fn stricter_is_told_from_looser() {
        let base = LimitSettings {
            rate: Some(Rate::parse("10/s").unwrap()),
            concurrency: Some(2),
            ..LimitSettings::default()
        };
        let slower = LimitSettings {
            rate: Some(Rate::parse("5/s").unwrap()),
            concurrency: Some(1),
            ..base.clone()
        };
        assert_eq!(slower.at_least_as_strict_as(&base), Ok(()));
        assert_eq!(base.at_least_as_strict_as(&slower), Err("rate"));
        let no_breaker = LimitSettings {
            breaker: None,
            ..base.clone()
        };
        assert_eq!(
            no_breaker.at_least_as_strict_as(&base),
            Err("circuit breaker")
        );
        let no_cap = LimitSettings {
            concurrency: None,
            ..base.clone()
        };
        assert_eq!(no_cap.at_least_as_strict_as(&base), Err("concurrency cap"));
    }
}
