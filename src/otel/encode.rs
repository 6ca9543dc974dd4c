//! OTLP trace export requests, encoded by hand: `ExportTraceServiceRequest` in the protobuf wire format
//! (`http/protobuf`) and in OTLP's JSON mapping (`http/json`: hex ids, integer enums, 64-bit integers as strings).
//!
//! Only what a span recorded here uses: one resource, one scope, spans with string/int/bool attributes and a status.
//! Field numbers are those of `opentelemetry/proto/trace/v1/trace.proto`, `common/v1/common.proto` and
//! `resource/v1/resource.proto`.

use serde_json::{Value as Json, json};

use crate::trace::{Kind, Span, Value, hex};

/// What every batch names: the resource's attributes and the instrumentation scope.
pub struct Resource {
    pub attributes: Vec<(String, String)>,
}

const SCOPE_NAME: &str = "agent-discover";

fn kind_number(k: Kind) -> u64 {
    // SpanKind: SERVER = 2, CLIENT = 3.
    match k {
        Kind::Server => 2,
        Kind::Client => 3,
        Kind::Internal => 1,
    }
}

// --- protobuf ---------------------------------------------------------------------------------------------------

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn message(out: &mut Vec<u8>, field: u32, build: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    build(&mut inner);
    bytes_field(out, field, &inner);
}

fn any_value(out: &mut Vec<u8>, v: &Value) {
    // AnyValue: string_value = 1, bool_value = 2, int_value = 3.
    match v {
        Value::Str(s) => bytes_field(out, 1, s.as_bytes()),
        Value::Bool(b) => {
            tag(out, 2, 0);
            varint(out, u64::from(*b));
        }
        Value::Int(n) => {
            tag(out, 3, 0);
            varint(out, *n as u64);
        }
    }
}

fn key_value(out: &mut Vec<u8>, field: u32, key: &str, v: &Value) {
    // KeyValue: key = 1, value = 2.
    message(out, field, |kv| {
        bytes_field(kv, 1, key.as_bytes());
        message(kv, 2, |a| any_value(a, v));
    });
}

fn span_pb(out: &mut Vec<u8>, s: &Span) {
    // Span: trace_id = 1, span_id = 2, trace_state = 3, parent_span_id = 4, name = 5, kind = 6,
    // start_time_unix_nano = 7 (fixed64), end_time_unix_nano = 8 (fixed64), attributes = 9, status = 15,
    // flags = 16 (fixed32).
    bytes_field(out, 1, &s.context.trace_id);
    bytes_field(out, 2, &s.context.span_id);
    if let Some(state) = &s.context.state {
        bytes_field(out, 3, state.as_bytes());
    }
    if let Some(parent) = &s.parent {
        bytes_field(out, 4, parent);
    }
    bytes_field(out, 5, s.name.as_bytes());
    tag(out, 6, 0);
    varint(out, kind_number(s.kind));
    tag(out, 7, 1);
    out.extend_from_slice(&s.start_unix_nanos.to_le_bytes());
    tag(out, 8, 1);
    out.extend_from_slice(&s.end_unix_nanos.to_le_bytes());
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v);
    }
    if let Some(message_text) = &s.error {
        // Status: message = 2, code = 3 (STATUS_CODE_ERROR = 2).
        message(out, 15, |st| {
            bytes_field(st, 2, message_text.as_bytes());
            tag(st, 3, 0);
            varint(st, 2);
        });
    }
    tag(out, 16, 5);
    out.extend_from_slice(&u32::from(s.context.flags).to_le_bytes());
}

/// `ExportTraceServiceRequest` in protobuf: resource_spans = 1 { resource = 1 { attributes = 1 }, scope_spans = 2
/// { scope = 1 { name = 1, version = 2 }, spans = 2 } }.
pub fn protobuf(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + spans.len() * 256);
    message(&mut out, 1, |rs| {
        message(rs, 1, |r| {
            for (k, v) in &resource.attributes {
                key_value(r, 1, k, &Value::Str(v.clone()));
            }
        });
        message(rs, 2, |ss| {
            message(ss, 1, |scope| {
                bytes_field(scope, 1, SCOPE_NAME.as_bytes());
                bytes_field(scope, 2, env!("CARGO_PKG_VERSION").as_bytes());
            });
            for s in spans {
                message(ss, 2, |b| span_pb(b, s));
            }
        });
    });
    out
}

// --- JSON -------------------------------------------------------------------------------------------------------

fn any_json(v: &Value) -> Json {
    match v {
        Value::Str(s) => json!({"stringValue": s}),
        Value::Bool(b) => json!({"boolValue": b}),
        Value::Int(n) => json!({"intValue": n.to_string()}),
    }
}

fn span_json(s: &Span) -> Json {
    let mut span = json!({
        "traceId": hex(&s.context.trace_id),
        "spanId": hex(&s.context.span_id),
        "name": s.name,
        "kind": kind_number(s.kind),
        "startTimeUnixNano": s.start_unix_nanos.to_string(),
        "endTimeUnixNano": s.end_unix_nanos.to_string(),
        "attributes": s.attributes.iter().map(|(k, v)| json!({"key": k, "value": any_json(v)})).collect::<Vec<_>>(),
        "flags": s.context.flags,
    });
    if let Some(parent) = &s.parent {
        span["parentSpanId"] = hex(parent).into();
    }
    if let Some(state) = &s.context.state {
        span["traceState"] = state.clone().into();
    }
    if let Some(m) = &s.error {
        span["status"] = json!({"code": 2, "message": m});
    }
    span
}

/// `ExportTraceServiceRequest` in OTLP's JSON mapping.
pub fn json(resource: &Resource, spans: &[Span]) -> Vec<u8> {
    let body = json!({"resourceSpans": [{
        "resource": {"attributes": resource.attributes.iter()
            .map(|(k, v)| json!({"key": k, "value": {"stringValue": v}})).collect::<Vec<_>>()},
        "scopeSpans": [{
            "scope": {"name": SCOPE_NAME, "version": env!("CARGO_PKG_VERSION")},
            "spans": spans.iter().map(span_json).collect::<Vec<_>>(),
        }],
    }]});
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::SpanContext;

    fn span() -> Span {
        Span {
            name: "tools/call echo".into(),
            kind: Kind::Client,
            context: SpanContext::parse(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                None,
            )
            .unwrap(),
            parent: Some([1, 2, 3, 4, 5, 6, 7, 8]),
            start_unix_nanos: 1,
            end_unix_nanos: 300,
            attributes: vec![("a", Value::Int(-1)), ("b", Value::Bool(true))],
            error: Some("boom".into()),
        }
    }

    #[test]
    fn varints_are_little_endian_base_128() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        v.clear();
        // A negative int64 is ten bytes.
        varint(&mut v, -1i64 as u64);
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn protobuf_starts_with_resource_spans_and_holds_the_ids() {
        let r = Resource {
            attributes: vec![("service.name".into(), "x".into())],
        };
        let b = protobuf(&r, &[span()]);
        assert_eq!(b[0], 0x0a, "field 1, length-delimited");
        let trace_id = [
            0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e,
            0x47, 0x36,
        ];
        assert!(
            b.windows(18)
                .any(|w| w[0] == 0x0a && w[1] == 16 && w[2..] == trace_id)
        );
        assert!(b.windows(4).any(|w| w == b"boom"));
    }

    #[test]
    fn json_uses_hex_ids_and_string_integers() {
        let r = Resource { attributes: vec![] };
        let v: Json = serde_json::from_slice(&json(&r, &[span()])).unwrap();
        let s = &v["resourceSpans"][0]["scopeSpans"][0]["spans"][0];
        assert_eq!(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s["parentSpanId"], "0102030405060708");
        assert_eq!(s["endTimeUnixNano"], "300");
        assert_eq!(s["attributes"][0]["value"]["intValue"], "-1");
        assert_eq!(s["status"]["code"], 2);
    }
}
