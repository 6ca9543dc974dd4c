//! The envelope of a line a child wrote, read in the codec's one pass without decoding its payload: the JSON-RPC
//! members kept as the text the child wrote ([`Parts`]), `jsonrpc` and `id` read as values ([`Scalar`]), what tells
//! the message's kind ([`Peek`]), and the result type a request's answer is decoded as ([`Expect`]). Read by the
//! child transport (`typed.rs`) and by the fast lane (`relay.rs`).

use rmcp::model::{
    CallToolResult, ClientRequest, CompleteResult, EmptyResult, GetPromptResult, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    ReadResourceResult, RequestId, ResultType, ServerResult,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The result type a request's answer is decoded as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Empty,
    Initialize,
    Complete,
    GetPrompt,
    ListPrompts,
    ListResources,
    ListResourceTemplates,
    ReadResource,
    CallTool,
    ListTools,
}

impl Expect {
    /// The result type of a request; `None` for requests whose answers can take several shapes (tasks, skills,
    /// subscriptions, custom requests), which rmcp decodes itself.
    pub(crate) fn of(request: &ClientRequest) -> Option<Self> {
        Some(match request {
            ClientRequest::PingRequest(_)
            | ClientRequest::SetLevelRequest(_)
            | ClientRequest::SubscribeRequest(_)
            | ClientRequest::UnsubscribeRequest(_) => Self::Empty,
            ClientRequest::InitializeRequest(_) => Self::Initialize,
            ClientRequest::CompleteRequest(_) => Self::Complete,
            ClientRequest::GetPromptRequest(_) => Self::GetPrompt,
            ClientRequest::ListPromptsRequest(_) => Self::ListPrompts,
            ClientRequest::ListResourcesRequest(_) => Self::ListResources,
            ClientRequest::ListResourceTemplatesRequest(_) => Self::ListResourceTemplates,
            ClientRequest::ReadResourceRequest(_) => Self::ReadResource,
            ClientRequest::CallToolRequest(_) => Self::CallTool,
            ClientRequest::ListToolsRequest(_) => Self::ListTools,
            _ => return None,
        })
    }

    /// Decodes `result` as this type. `None` when it does not fit (then rmcp's own decoder decides): a result
    /// whose `resultType` is not `complete` (input required, a task) is never forced into a complete one.
    pub(crate) fn decode(self, result: &str) -> Option<ServerResult> {
        fn complete(t: &Option<ResultType>) -> bool {
            t.as_ref().is_none_or(ResultType::is_complete)
        }
        macro_rules! typed {
            ($ty:ty, $variant:ident) => {{
                let r: $ty = serde_json::from_str(result).ok()?;
                complete(&r.result_type).then_some(ServerResult::$variant(r))
            }};
        }
        match self {
            Self::Empty => serde_json::from_str::<EmptyResult>(result)
                .ok()
                .map(ServerResult::EmptyResult),
            Self::Initialize => serde_json::from_str::<InitializeResult>(result)
                .ok()
                .map(ServerResult::InitializeResult),
            Self::Complete => typed!(CompleteResult, CompleteResult),
            Self::GetPrompt => typed!(GetPromptResult, GetPromptResult),
            Self::ListPrompts => typed!(ListPromptsResult, ListPromptsResult),
            Self::ListResources => typed!(ListResourcesResult, ListResourcesResult),
            Self::ListResourceTemplates => {
                typed!(ListResourceTemplatesResult, ListResourceTemplatesResult)
            }
            Self::ReadResource => typed!(ReadResourceResult, ReadResourceResult),
            Self::CallTool => typed!(CallToolResult, CallToolResult),
            Self::ListTools => typed!(ListToolsResult, ListToolsResult),
        }
    }
}

/// A line from the child split into its JSON-RPC members, each kept as the JSON text the child wrote: the codec's
/// one pass over the line also reads what tells the message's kind (which request it answers, and how), without
/// decoding any payload. Other members are dropped, as rmcp's decoding ignores them. Serialised back, it is the line
/// for rmcp's own decoder (requests, notifications, errors, unknown ids, unusual results).
/// `jsonrpc` and `id` are read as they are, not kept as text: no allocation and no second parse for the usual
/// `"2.0"` and integer ids ([`Scalar`]).
#[derive(Deserialize, Serialize)]
pub(crate) struct Parts {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    jsonrpc: Option<Scalar>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    id: Option<Scalar>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    method: Option<Box<RawValue>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    params: Option<Box<RawValue>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    result: Option<Box<RawValue>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    error: Option<Box<RawValue>>,
}

/// A short member of the envelope read as a value: `"2.0"` without allocating, integers and strings typed, anything
/// else (rare: floats, `null`, objects) as a [`serde_json::Value`]. Serialised back, it is the same JSON value.
#[derive(Debug, PartialEq)]
pub(crate) enum Scalar {
    V2,
    Int(i64),
    Str(String),
    Other(serde_json::Value),
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
        use serde_json::Value;
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(if v == "2.0" {
                    Scalar::V2
                } else {
                    Scalar::Str(v.to_owned())
                })
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(i64::try_from(v).map_or(Scalar::Other(Value::from(v)), Scalar::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Other(Value::from(v)))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Other(Value::Bool(v)))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Other(Value::Null))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<Scalar, A::Error> {
                Value::deserialize(MapAccessDeserializer::new(m)).map(Scalar::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, q: A) -> Result<Scalar, A::Error> {
                Value::deserialize(SeqAccessDeserializer::new(q)).map(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for Scalar {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Scalar::V2 => s.serialize_str("2.0"),
            Scalar::Int(n) => s.serialize_i64(*n),
            Scalar::Str(v) => s.serialize_str(v),
            Scalar::Other(v) => v.serialize(s),
        }
    }
}

/// A member that is there, whatever its value: `Option` alone reads a `null` as absent (for `deserialize_with`).
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// What tells a message's kind, from its [`Parts`].
pub(crate) struct Peek<'a> {
    pub(crate) id: Option<RequestId>,
    pub(crate) method: bool,
    pub(crate) result: Option<&'a RawValue>,
    pub(crate) error: bool,
}

impl Parts {
    /// The message's kind, when its envelope is well formed (`jsonrpc` is "2.0", the id a number or a string).
    pub(crate) fn peek(&self) -> Option<Peek<'_>> {
        if self.jsonrpc != Some(Scalar::V2) {
            return None;
        }
        let id = match &self.id {
            None | Some(Scalar::Other(serde_json::Value::Null)) => None,
            Some(Scalar::Int(n)) => Some(RequestId::Number(*n)),
            Some(Scalar::Str(s)) => Some(RequestId::String(s.as_str().into())),
            // What rmcp reads as an id besides (`1.0`, `1e2`), read as rmcp reads it.
            Some(Scalar::V2) => Some(RequestId::String("2.0".into())),
            Some(Scalar::Other(v)) => Some(RequestId::deserialize(v).ok()?),
        };
        Some(Peek {
            id,
            method: self.method.as_deref().is_some_and(|m| m.get() != "null"),
            result: self.result.as_deref().filter(|r| r.get() != "null"),
            error: self.error.as_deref().is_some_and(|e| e.get() != "null"),
        })
    }

    /// The line again, for rmcp's decoder.
    pub(crate) fn text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// The envelope read without keeping its text: the id a line answers is the one rmcp reads from it (integers,
    /// strings, integers in float form), a line is typed only with `jsonrpc` "2.0", and the line rebuilt for rmcp's
    /// decoder is the same JSON.
    #[test]
    fn the_envelope_reads_as_rmcp_reads_it() {
        let ids = [
            json!(7),
            json!(-5),
            json!(1099511627776_i64),
            json!("abc"),
            json!("2.0"),
            json!(1.0),
            json!(1e2),
            json!(1.5),
            json!(9223372036854775808_u64),
            json!(null),
            json!(true),
            json!({"a": 1}),
            json!([1]),
        ];
        for id in ids {
            let line = json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}}).to_string();
            let parts: Parts = serde_json::from_str(&line).unwrap();
            let rmcp_id = match &id {
                Value::Null => None,
                v => RequestId::deserialize(v).ok(),
            };
            let peeked = parts.peek();
            let readable = id.is_null() || rmcp_id.is_some();
            assert_eq!(peeked.is_some(), readable, "{line}");
            if let Some(p) = peeked {
                assert_eq!(p.id, rmcp_id, "{line}");
            }
            assert_eq!(
                serde_json::from_str::<Value>(&parts.text()).unwrap(),
                serde_json::from_str::<Value>(&line).unwrap(),
                "{line}"
            );
        }
        for (jsonrpc, typed) in [
            (r#""2.0""#, true),
            (r#""2\u002e0""#, true),
            (r#""1.0""#, false),
            ("2", false),
            ("null", false),
        ] {
            let line = format!(r#"{{"jsonrpc":{jsonrpc},"id":1,"result":{{}}}}"#);
            let parts: Parts = serde_json::from_str(&line).unwrap();
            assert_eq!(parts.peek().is_some(), typed, "{line}");
            assert_eq!(
                serde_json::from_str::<Value>(&parts.text()).unwrap(),
                serde_json::from_str::<Value>(&line).unwrap(),
                "{line}"
            );
        }
        let parts: Parts = serde_json::from_str(r#"{"id":1,"result":{}}"#).unwrap();
        assert!(parts.peek().is_none(), "no jsonrpc member");
    }
}
