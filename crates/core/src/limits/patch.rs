//! A change to a server's limits as the fronts take it (`limits set`, `PUT /api/servers/{id}/limits`, the `registry`
//! tool's `limits` action): each field present replaces that setting, absent ones stay.

use serde::Deserialize;

use super::{Breaker, LimitSettings, Rate, parse_duration};
use crate::error::{Error, Result};

/// Rates are `COUNT/PERIOD` (`10/s`, `5/30s`, optionally ` burst N`) or `off`; durations `500ms`, `5s`, `1m`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsPatch {
    /// Start from the defaults (no rate limit, no cap, the default breaker) before the other fields.
    #[serde(default)]
    pub reset: bool,
    /// The server's rate (all its calls together), or with `tool` that tool's.
    pub rate: Option<String>,
    /// The bucket size of the rate being set (or of the one already set for the same target).
    pub burst: Option<u32>,
    /// `rate` and `burst` are this tool's own.
    pub tool: Option<String>,
    /// Each tool's rate (a tool with its own keeps it).
    pub tool_rate: Option<String>,
    /// Each caller's rate (user, else session, else the local user).
    pub caller_rate: Option<String>,
    /// Calls at once: a number, or `off` (no cap).
    pub concurrency: Option<Cap>,
    /// Calls that may wait for a slot.
    pub queue: Option<u32>,
    /// How long a queued call waits.
    pub wait: Option<String>,
    /// `FAILURES/WINDOW` (`5/30s`) or `off`.
    pub breaker: Option<String>,
    /// How long an open breaker refuses before its trial call.
    pub cooldown: Option<String>,
}

/// A cap as a patch gives it: a number, or `off`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Cap {
    Calls(u32),
    Text(String),
}

fn rate_or_off(s: &str) -> Result<Option<Rate>> {
    match s.trim() {
        "off" | "none" => Ok(None),
        r => Rate::parse(r).map(Some),
    }
}

/// `rate` with its burst set to `burst` (when given); `what` names the target in the error when there is no rate.
fn with_burst(rate: Option<Rate>, burst: Option<u32>, what: &str) -> Result<Option<Rate>> {
    match (rate, burst) {
        (r, None) => Ok(r),
        (Some(mut r), Some(b)) => {
            r.burst = Some(b);
            Ok(Some(r))
        }
        (None, Some(_)) => Err(Error::invalid(
            "burst",
            format!("{what} has no rate to give a burst to; set --rate too"),
        )),
    }
}

impl LimitsPatch {
    /// Changes nothing: a show, not a set.
    pub fn is_empty(&self) -> bool {
        *self == LimitsPatch::default()
    }

    /// `current` with this patch applied, validated.
    pub fn apply(self, current: LimitSettings) -> Result<LimitSettings> {
        let mut l = if self.reset {
            LimitSettings::default()
        } else {
            current
        };
        match &self.tool {
            Some(tool) => {
                let mut slot = l.tools.remove(tool);
                if let Some(r) = &self.rate {
                    slot = rate_or_off(r)?;
                }
                if let Some(r) = with_burst(slot, self.burst, &format!("tool `{tool}`"))? {
                    l.tools.insert(tool.clone(), r);
                }
            }
            None => {
                if let Some(r) = &self.rate {
                    l.rate = rate_or_off(r)?;
                }
                l.rate = with_burst(l.rate, self.burst, "the server")?;
            }
        }
        if let Some(r) = &self.tool_rate {
            l.tool_rate = rate_or_off(r)?;
        }
        if let Some(r) = &self.caller_rate {
            l.caller_rate = rate_or_off(r)?;
        }
        match &self.concurrency {
            None => {}
            Some(Cap::Calls(n)) => l.concurrency = Some(*n),
            Some(Cap::Text(t)) if matches!(t.trim(), "off" | "none") => l.concurrency = None,
            Some(Cap::Text(t)) => {
                l.concurrency = Some(t.trim().parse().map_err(|_| {
                    Error::invalid("concurrency", format!("{t:?}: a number of calls, or off"))
                })?)
            }
        }
        if let Some(q) = self.queue {
            l.queue = q;
        }
        if let Some(w) = &self.wait {
            l.wait_ms = parse_duration(w)?.as_millis() as u64;
        }
        let cooldown = self
            .cooldown
            .as_deref()
            .map(parse_duration)
            .transpose()?
            .map(|d| d.as_millis() as u64);
        match self.breaker.as_deref().map(str::trim) {
            Some("off" | "none") => l.breaker = None,
            Some(b) => {
                let cool = cooldown
                    .or(l.breaker.map(|b| b.cooldown_ms))
                    .unwrap_or(Breaker::default().cooldown_ms);
                l.breaker = Some(Breaker::parse(b, cool)?);
            }
            None => {
                if let Some(c) = cooldown {
                    l.breaker
                        .as_mut()
                        .ok_or_else(|| {
                            Error::invalid(
                                "cooldown",
                                "the breaker is off; turn it on with --breaker first",
                            )
                        })?
                        .cooldown_ms = c;
                }
            }
        }
        l.validate()?;
        Ok(l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_changes_what_it_names() {
        let patch: LimitsPatch = serde_json::from_value(serde_json::json!({
            "rate": "10/s", "burst": 20, "concurrency": 1, "queue": 4, "wait": "2s",
            "breaker": "3/10s", "cooldown": "5s"}))
        .unwrap();
        let l = patch.apply(LimitSettings::default()).unwrap();
        assert_eq!(l.rate.unwrap().capacity(), 20);
        assert_eq!((l.concurrency, l.queue, l.wait_ms), (Some(1), 4, 2_000));
        assert_eq!(
            l.breaker,
            Some(Breaker {
                failures: 3,
                window_ms: 10_000,
                cooldown_ms: 5_000
            })
        );
        let tool = LimitsPatch {
            tool: Some("search".into()),
            rate: Some("1/s burst 2".into()),
            ..LimitsPatch::default()
        };
        let l = tool.apply(l).unwrap();
        assert_eq!(l.tools["search"].capacity(), 2);
        assert_eq!(l.rate.unwrap().capacity(), 20);
        let off = LimitsPatch {
            rate: Some("off".into()),
            concurrency: Some(Cap::Text("off".into())),
            breaker: Some("off".into()),
            ..LimitsPatch::default()
        };
        let l = off.apply(l).unwrap();
        assert!(l.rate.is_none() && l.concurrency.is_none() && l.breaker.is_none());
        let burst_alone = LimitsPatch {
            burst: Some(5),
            ..LimitsPatch::default()
        };
        assert!(burst_alone.apply(LimitSettings::default()).is_err());
        assert!(serde_json::from_value::<LimitsPatch>(serde_json::json!({"rat": "1/s"})).is_err());
    }
}
