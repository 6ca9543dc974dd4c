//! What a run comes to, as the caller gets it: `{result, logs, calls}` when the script returned, or a typed error
//! (`{error, code, kind, ...}` with the same `logs` and `calls`) when it failed or was stopped; `truncated` says what
//! was cut. Also what the engine and the host tell each other about one call ([`Thrown`], [`CallRecord`]).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::limits::{Limit, Limits};

/// One call the script made, in the order it made them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CallRecord {
    /// The tool as the script named it (`server__tool`), or `find_tool` / `find_tools`.
    pub tool: String,
    pub ms: u64,
    /// False when the call failed or had not finished when the run ended.
    pub ok: bool,
}

/// A failed call as the script sees it: an `Error` with these `message`, `kind` and `details`.
#[derive(Debug, Clone, PartialEq)]
pub struct Thrown {
    pub kind: String,
    pub message: String,
    pub details: Value,
}

/// Why a run did not return a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// A limit was exceeded (`kind: limit_exceeded`, `limit` names it).
    Limit(Limit),
    /// The code does not parse.
    Syntax { message: String },
    /// The script threw (or its promise was rejected) and did not catch it.
    Thrown(Box<Uncaught>),
    /// The result cannot be written as JSON (a BigInt, a cycle).
    Unserializable { message: String },
    /// The script waits for something that can never happen (a promise nothing resolves).
    Unsettled,
    /// The caller went away, or the run was dropped while it waited for an answer.
    Cancelled,
    /// The engine could not start or failed.
    Internal { message: String },
}

/// What a script threw and did not catch.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Uncaught {
    /// The error's `name` (`TypeError`, ...); empty when the value thrown was not an error.
    pub name: String,
    pub message: String,
    pub stack: Option<String>,
    /// A failed call's `kind` and `details`, when that is what was thrown.
    pub kind: Option<String>,
    pub details: Option<Value>,
}

impl Failure {
    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Limit(_) => "limit_exceeded",
            Failure::Syntax { .. } => "syntax_error",
            Failure::Thrown { .. } | Failure::Unserializable { .. } => "script_error",
            Failure::Unsettled => "unsettled",
            Failure::Cancelled => "cancelled",
            Failure::Internal { .. } => "internal",
        }
    }

    /// The project's error code (`ad_core::error::ErrorCode` strings), for fronts that map codes to statuses.
    pub fn code(&self) -> &'static str {
        match self {
            Failure::Limit(Limit::CpuTime | Limit::WallTime) => "timeout",
            Failure::Cancelled => "unavailable",
            Failure::Internal { .. } => "internal",
            _ => "invalid_input",
        }
    }

    fn message(&self, limits: &Limits) -> String {
        match self {
            Failure::Limit(l) => l.message(limits),
            Failure::Syntax { message } => format!("the script does not parse: {message}"),
            Failure::Thrown(u) if u.name.is_empty() => format!("the script threw: {}", u.message),
            Failure::Thrown(u) => format!("the script threw {}: {}", u.name, u.message),
            Failure::Unserializable { message } => {
                format!("the script's result cannot be written as JSON: {message}")
            }
            Failure::Unsettled => {
                "the script waits for a promise that nothing will ever settle (there are no \
                                   timers, and no call is in flight)"
                    .to_owned()
            }
            Failure::Cancelled => "the run was cancelled".to_owned(),
            Failure::Internal { message } => format!("the script engine failed: {message}"),
        }
    }
}

/// What a run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub result: Result<Value, Failure>,
    pub logs: Vec<String>,
    pub calls: Vec<CallRecord>,
    /// The result's JSON length when it was cut to `limits.result_bytes`.
    pub result_cut: Option<usize>,
    /// Log lines dropped past `limits.log_bytes`.
    pub logs_dropped: usize,
    pub limits: Limits,
}

impl Outcome {
    pub fn failed(&self) -> bool {
        self.result.is_err()
    }

    /// The answer's JSON: `{result, logs, calls}` or `{error, code, kind, ..., logs, calls}`, plus `truncated`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        match &self.result {
            Ok(v) => {
                out.insert("result".into(), v.clone());
            }
            Err(f) => {
                out.insert("error".into(), f.message(&self.limits).into());
                out.insert("code".into(), f.code().into());
                out.insert("kind".into(), f.kind().into());
                match f {
                    Failure::Limit(l) => {
                        out.insert("limit".into(), l.as_str().into());
                    }
                    Failure::Thrown(u) => {
                        let mut thrown = json!({"name": u.name, "message": u.message});
                        if let Some(k) = &u.kind {
                            thrown["kind"] = k.clone().into();
                        }
                        if let Some(d) = &u.details {
                            thrown["details"] = d.clone();
                        }
                        if let Some(s) = u.stack.as_deref().filter(|s| !s.is_empty()) {
                            thrown["stack"] = s.into();
                        }
                        out.insert("thrown".into(), thrown);
                    }
                    _ => {}
                }
            }
        }
        out.insert("logs".into(), json!(self.logs));
        out.insert("calls".into(), json!(self.calls));
        let mut truncated = Map::new();
        if let Some(bytes) = self.result_cut {
            truncated.insert(
                "result".into(),
                json!({"bytes": bytes, "limit": self.limits.result_bytes, "note": "the result is the first bytes of its JSON text, as a string"}),
            );
        }
        if self.logs_dropped > 0 {
            truncated.insert(
                "logs".into(),
                json!({"dropped_lines": self.logs_dropped, "limit": self.limits.log_bytes}),
            );
        }
        if !truncated.is_empty() {
            out.insert("truncated".into(), Value::Object(truncated));
        }
        Value::Object(out)
    }
}

/// The result's JSON text within `limit` bytes: parsed when it fits, else its first bytes (on a character boundary)
/// as a string, with the full length.
pub(crate) fn bounded_result(json: &str, limit: usize) -> (Value, Option<usize>) {
    if json.len() <= limit {
        return match serde_json::from_str(json) {
            Ok(v) => (v, None),
            Err(_) => (Value::String(json.to_owned()), None),
        };
    }
    let mut end = limit;
    while !json.is_char_boundary(end) {
        end -= 1;
    }
    (Value::String(json[..end].to_owned()), Some(json.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_have_their_documented_shape() {
        let limits = Limits::default();
        let ok = Outcome {
            result: Ok(json!({"n": 1})),
            logs: vec!["hi".into()],
            calls: vec![CallRecord {
                tool: "fx__echo".into(),
                ms: 3,
                ok: true,
            }],
            result_cut: None,
            logs_dropped: 0,
            limits,
        };
        assert_eq!(
            ok.to_json(),
            json!({"result": {"n": 1}, "logs": ["hi"], "calls": [{"tool": "fx__echo", "ms": 3, "ok": true}]})
        );
        let failed = Outcome {
            result: Err(Failure::Limit(Limit::CpuTime)),
            result_cut: Some(10),
            logs_dropped: 2,
            ..ok
        };
        let v = failed.to_json();
        assert_eq!(v["kind"], "limit_exceeded");
        assert_eq!(v["limit"], "cpu_time");
        assert_eq!(v["code"], "timeout");
        assert_eq!(v["truncated"]["logs"]["dropped_lines"], 2);
        assert!(v.get("result").is_none());
    }

    #[test]
    fn a_long_result_is_cut_on_a_character_boundary() {
        let (v, cut) = bounded_result(r#""ééééé""#, 4);
        assert_eq!(cut, Some(12));
        assert_eq!(v, Value::String("\"é".into()));
        let (v, cut) = bounded_result("[1,2]", 100);
        assert_eq!((v, cut), (json!([1, 2]), None));
    }
}
