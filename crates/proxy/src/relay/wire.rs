//! The fast lane's wire shapes: what it reads of a client's `tools/call` (borrowed, the arguments left as written)
//! and of a child's tool result (enough to tell a plain one and log it), what it writes to the child (rmcp's
//! `tools/call` under an id of the fast lane's own) and to the client (rmcp's response with the child's result as
//! written). The tests check each shape against rmcp's own decoding.

use std::borrow::Cow;

use rmcp::model::{JsonRpcVersion2_0, NumberOrString, ProgressToken, RequestId};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::envelope::present;

/// Fast-lane request ids and progress tokens to a child start here. rmcp numbers its own requests and tokens with a
/// `u32` counter from 0, so the two never meet on one child connection.
pub(super) const FAST_BASE: i64 = 1 << 40;

/// The fast-lane number in a request id or progress token, if it is one.
pub(super) fn fast_number(id: &NumberOrString) -> Option<i64> {
    match id {
        NumberOrString::Number(n) if *n >= FAST_BASE => Some(*n),
        _ => None,
    }
}

/// A client's message when it is a `tools/call` the fast lane can relay as written: its id and parameters.
pub(super) fn read_call(raw: &str) -> Option<(RequestId, RawCallParams<'_>)> {
    let call: RawCall<'_> = serde_json::from_str(raw).ok()?;
    // rmcp types the arguments as an object (or none): anything else is the normal path's to refuse.
    let args_fit = call
        .params
        .arguments
        .is_none_or(|a| a.get().starts_with('{'));
    (call.jsonrpc == "2.0" && call.method == "tools/call" && args_fit)
        .then_some((call.id, call.params))
}

/// A client's `tools/call` as the fast lane reads it: borrowed, its arguments left as the client wrote them. A field
/// beyond these (a task request, input responses, request state, `_meta` beyond a progress token and trace context, as 2026-07-28
/// clients send) makes the parse fail and leaves the message to the normal path. Checked against rmcp's own
/// decoding in the tests below.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall<'a> {
    /// "2.0" (checked after the parse: rmcp's own type for it reads it into a `String` first).
    #[serde(borrow)]
    jsonrpc: Cow<'a, str>,
    id: RequestId,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: RawCallParams<'a>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCallParams<'a> {
    #[serde(borrow)]
    pub(super) name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) arguments: Option<&'a RawValue>,
    #[serde(default, rename = "_meta", borrow)]
    pub(super) meta: Option<CallMeta<'a>>,
}

/// A client's request metadata as the fast lane takes it: a progress token, W3C trace context, and a 2026-07-28
/// client's envelope (protocol version, client info, capabilities). Anything else (a log level, other keys) makes
/// the parse fail and leaves the message to the normal path.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct CallMeta<'a> {
    #[serde(default, rename = "progressToken")]
    pub(super) progress_token: Option<ProgressToken>,
    #[serde(default)]
    pub(super) traceparent: Option<String>,
    #[serde(default)]
    pub(super) tracestate: Option<String>,
    #[serde(default, borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    protocol: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "io.modelcontextprotocol/clientInfo")]
    client_info: Option<&'a RawValue>,
    #[serde(default, borrow, rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: Option<&'a RawValue>,
}

/// The era of a call the fast lane takes: `None` for a legacy client's (no envelope), a 2026-07-28 client's with
/// its declared capabilities (`Some`). A call it does not take: `Err` (an envelope of another revision, or one rmcp
/// would refuse or read otherwise: the normal path answers it).
pub(super) type Era = Option<Box<rmcp::model::ClientCapabilities>>;

impl CallMeta<'_> {
    pub(super) fn era(&self) -> Result<Era, ()> {
        let Some(protocol) = self.protocol else {
            return match (self.client_info, self.capabilities) {
                (None, None) => Ok(None),
                _ => Err(()),
            };
        };
        if protocol.get() != "\"2026-07-28\"" {
            return Err(());
        }
        // As rmcp reads them: capabilities that do not parse are missing (rmcp refuses the request), client info
        // that does not parse is ignored.
        let caps = self.capabilities.ok_or(())?;
        let caps: rmcp::model::ClientCapabilities =
            serde_json::from_str(caps.get()).map_err(drop)?;
        Ok(Some(Box::new(caps)))
    }
}

/// Request metadata holding at most a progress token and W3C trace context (SEP-414's `traceparent`, `tracestate`).
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct ProgressMeta {
    #[serde(
        default,
        rename = "progressToken",
        skip_serializing_if = "Option::is_none"
    )]
    pub(super) progress_token: Option<ProgressToken>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) traceparent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) tracestate: Option<String>,
}

/// The request to the child: rmcp's `tools/call` request shape (a test checks rmcp reads it back as one), with the
/// arguments copied as the client wrote them.
#[derive(Serialize)]
pub(super) struct ChildCall<'a> {
    pub(super) jsonrpc: JsonRpcVersion2_0,
    pub(super) id: i64,
    pub(super) method: &'static str,
    pub(super) params: ChildCallParams<'a>,
}

#[derive(Serialize)]
pub(super) struct ChildCallParams<'a> {
    #[serde(rename = "_meta")]
    pub(super) meta: ChildMeta,
    pub(super) name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: Option<&'a RawValue>,
}

/// The request metadata to the child: a legacy child's progress token and trace context, or a 2026-07-28 child's
/// whole envelope (`relay/crossing.rs`) with them.
#[derive(Serialize)]
#[serde(untagged)]
pub(super) enum ChildMeta {
    Legacy(ProgressMeta),
    Modern(rmcp::model::RequestMetaObject),
}

/// The answer to the client: rmcp's response shape under the client's id, with the result as the child wrote it.
#[derive(Serialize)]
pub(super) struct RawResponse<'a> {
    pub(super) jsonrpc: JsonRpcVersion2_0,
    pub(super) id: &'a RequestId,
    pub(super) result: &'a RawValue,
}

/// What the fast lane reads of a tool result: enough to tell it is a plain one and to log it.
#[derive(Deserialize)]
struct PlainResult<'a> {
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    /// Present, `null` included (a `null` is not an object either).
    #[serde(
        default,
        rename = "structuredContent",
        borrow,
        deserialize_with = "present"
    )]
    structured: Option<&'a RawValue>,
    #[serde(default, rename = "resultType")]
    result_type: Option<IgnoredAny>,
    #[serde(default)]
    task: Option<IgnoredAny>,
    #[serde(default, rename = "inputRequests")]
    input_requests: Option<IgnoredAny>,
}

/// One content block: its type, its text, and whether the fields its type requires are there.
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<IgnoredAny>,
    #[serde(default, rename = "mimeType")]
    mime_type: Option<IgnoredAny>,
    #[serde(default)]
    resource: Option<IgnoredAny>,
    #[serde(default)]
    uri: Option<IgnoredAny>,
    #[serde(default)]
    name: Option<IgnoredAny>,
}

impl Block<'_> {
    /// Whether rmcp would read this block as one of the spec's content blocks (its required fields present).
    fn is_known(&self) -> bool {
        match self.kind.as_ref() {
            "text" => self.text.is_some(),
            "image" | "audio" => self.data.is_some() && self.mime_type.is_some(),
            "resource" => self.resource.is_some(),
            "resource_link" => self.uri.is_some() && self.name.is_some(),
            _ => false,
        }
    }
}

/// Success and the call log's excerpt of a tool result a legacy client can get exactly as the child wrote it: the
/// content blocks are the spec's, there is no `resultType` to strip (a 2026-07-28 field), no task or input request,
/// and `structuredContent`, if any, is an object (what rmcp's handler would strip for a legacy client otherwise).
/// `None` for anything else, which is decoded and shaped as before.
pub(super) fn plain_result(result: &str) -> Option<(bool, String)> {
    let r: PlainResult<'_> = serde_json::from_str(result).ok()?;
    if r.result_type.is_some()
        || r.task.is_some()
        || r.input_requests.is_some()
        || r.structured.is_some_and(|s| !s.get().starts_with('{'))
        || !r.content.iter().all(Block::is_known)
    {
        return None;
    }
    let text =
        ad_registry::calllog::excerpt(r.content.iter().filter_map(|b| match b.kind.as_ref() {
            "text" => b.text.as_deref(),
            _ => None,
        }));
    Some((r.is_error != Some(true), text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::RoleServer;
    use rmcp::model::{
        CallToolRequest, CallToolRequestParams, CallToolResult, ClientJsonRpcMessage,
        ClientRequest, GetMeta, JsonRpcMessage, ServerJsonRpcMessage,
    };
    use rmcp::service::RxJsonRpcMessage;
    use serde_json::{Value, json};

    /// What rmcp reads from a client's line, when it is a `tools/call`: id, name, arguments, progress token.
    fn rmcp_call(line: &str) -> Option<(RequestId, String, Option<Value>, Option<ProgressToken>)> {
        let JsonRpcMessage::Request(r) =
            serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(line).ok()?
        else {
            return None;
        };
        let token = r.request.get_meta().get_progress_token();
        let ClientRequest::CallToolRequest(call) = r.request else {
            return None;
        };
        let p = call.params;
        Some((
            r.id,
            p.name.to_string(),
            p.arguments.map(Value::Object),
            token,
        ))
    }

    /// Every line the fast lane takes is a `tools/call` rmcp reads the same way; the lines it leaves (other
    /// methods, fields it does not relay, metadata beyond a progress token, arguments that are not an object) go to
    /// the normal path.
    #[test]
    fn the_calls_it_takes_read_as_rmcp_reads_them() {
        let taken = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"}}}"#,
            r#"{"method":"tools/call","params":{"arguments":{"a":[1,{"b":null}]},"name":"s__t","_meta":{"progressToken":"p"}},"id":"abc","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"fx__echo","_meta":{"progressToken":9}}}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"fx__echo","arguments":null,"_meta":{}}}"#,
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"fx__\u00e9cho","arguments":{"t":"a\"b\\n"}}}"#,
            r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"fx__echo","_meta":{"progressToken":1,"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}}}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"fx__echo","arguments":{"text":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":3}}}"#,
            r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"fx__echo","_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}"#,
        ];
        for line in taken {
            assert!(takes(line), "not taken: {line}");
            let (id, params) = read_call(line).unwrap();
            // The trace context (SEP-414) is read as rmcp reads it.
            let theirs: ClientJsonRpcMessage = serde_json::from_str(line).unwrap();
            let ClientJsonRpcMessage::Request(r) = theirs else {
                panic!("{line}")
            };
            let meta = params.meta.as_ref();
            assert_eq!(
                meta.and_then(|m| m.traceparent.as_deref()),
                r.request.get_meta().get_traceparent(),
                "{line}"
            );
            assert_eq!(
                meta.and_then(|m| m.tracestate.as_deref()),
                r.request.get_meta().get_tracestate(),
                "{line}"
            );
            let (rid, name, args, token) = rmcp_call(line).expect("rmcp reads it");
            assert_eq!(id, rid, "{line}");
            assert_eq!(params.name, name, "{line}");
            assert_eq!(
                params
                    .arguments
                    .map(|a| serde_json::from_str::<Value>(a.get()).unwrap()),
                args,
                "{line}"
            );
            // A 2026-07-28 client's capabilities, as rmcp reads them (its revision decides the era).
            let era = params
                .meta
                .as_ref()
                .map(|m| m.era().unwrap())
                .unwrap_or_default();
            assert_eq!(
                era.map(|c| *c),
                r.request.get_meta().client_capabilities(),
                "{line}"
            );
            assert_eq!(
                r.request.get_meta().protocol_version().is_some(),
                line.contains("2026-07-28"),
                "{line}"
            );
            assert_eq!(params.meta.and_then(|m| m.progress_token), token, "{line}");
        }
        let left = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":1000}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":1,"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":5}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":5}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"},"extra":1}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"t"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ];
        for line in left {
            assert!(!takes(line), "taken: {line}");
        }
    }

    /// Whether the fast lane takes `line`: a `tools/call` it reads, whose envelope (if any) is of an era it relays.
    fn takes(line: &str) -> bool {
        read_call(line).is_some_and(|(_, p)| p.meta.as_ref().is_none_or(|m| m.era().is_ok()))
    }

    /// The request written to the child is rmcp's `tools/call` with the fast lane's id and progress token.
    #[test]
    fn the_request_to_the_child_is_rmcps_tools_call() {
        let args = RawValue::from_string(r#"{"text":"ping","n":[1,2]}"#.to_owned()).unwrap();
        for arguments in [Some(&*args), None] {
            let ours = ChildCall {
                jsonrpc: JsonRpcVersion2_0,
                id: FAST_BASE + 3,
                method: "tools/call",
                params: ChildCallParams {
                    meta: ChildMeta::Legacy(ProgressMeta {
                        progress_token: Some(ProgressToken(NumberOrString::Number(FAST_BASE + 3))),
                        ..Default::default()
                    }),
                    name: "echo",
                    arguments,
                },
            };
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = arguments.map(|a| serde_json::from_str(a.get()).unwrap());
            params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(
                ProgressToken(NumberOrString::Number(FAST_BASE + 3)),
            ));
            let theirs = ClientJsonRpcMessage::request(
                ClientRequest::CallToolRequest(CallToolRequest::new(params)),
                RequestId::Number(FAST_BASE + 3),
            );
            let ours = serde_json::to_string(&ours).unwrap();
            let decoded: ClientJsonRpcMessage = serde_json::from_str(&ours).unwrap();
            assert_eq!(
                serde_json::to_value(&decoded).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
            assert_eq!(
                serde_json::from_str::<Value>(&ours).unwrap(),
                serde_json::to_value(&theirs).unwrap()
            );
        }
    }

    /// The answer to the client is rmcp's response under the client's id, the result exactly as the child wrote it.
    #[test]
    fn the_answer_is_rmcps_response_with_the_childs_result() {
        let result = RawValue::from_string(
            r#"{"content":[{"type":"text","text":"a"}],"structuredContent":{"n":1},"_meta":{"x":2},"future":true}"#
                .to_owned(),
        )
        .unwrap();
        for id in [RequestId::Number(41), RequestId::String("s-1".into())] {
            let line = serde_json::to_string(&RawResponse {
                jsonrpc: JsonRpcVersion2_0,
                id: &id,
                result: &result,
            })
            .unwrap();
            let JsonRpcMessage::Response(r) =
                serde_json::from_str::<ServerJsonRpcMessage>(&line).unwrap()
            else {
                panic!("not a response: {line}");
            };
            assert_eq!(r.id, id);
            let v: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(
                v["result"],
                serde_json::from_str::<Value>(result.get()).unwrap()
            );
        }
    }

    /// Plain tool results pass as written, with success and the call log's excerpt; results a legacy client must
    /// not get as written, or that rmcp would not read as a tool result, are left to the typed path.
    #[test]
    fn plain_results_pass_others_are_decoded() {
        let plain = [
            (
                json!({"content": [{"type": "text", "text": "hi"}]}),
                true,
                "hi",
            ),
            (
                json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "isError": true}),
                false,
                "a\nb",
            ),
            (
                json!({"content": [], "structuredContent": {"k": [1]}, "_meta": {"m": 1}}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png", "annotations": {"priority": 1}}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "resource", "resource": {"uri": "file:///a", "text": "t"}}], "isError": false}),
                true,
                "",
            ),
            (
                json!({"content": [{"type": "text", "text": "x", "_meta": {"a": 1}}], "unknownField": 1}),
                true,
                "x",
            ),
        ];
        for (result, ok, text) in plain {
            let got = plain_result(&result.to_string());
            assert_eq!(got, Some((ok, text.to_owned())), "{result}");
            // rmcp reads each of them as a tool result too.
            assert!(
                serde_json::from_value::<CallToolResult>(result.clone()).is_ok(),
                "{result}"
            );
        }
        let decoded = [
            json!({"content": [{"type": "text", "text": "x"}], "resultType": "complete"}),
            json!({"content": [], "structuredContent": [1, 2]}),
            json!({"content": [], "structuredContent": null}),
            json!({"task": {"taskId": "t"}}),
            json!({"content": [], "inputRequests": {}}),
            json!({"content": [{"type": "text"}]}),
            json!({"content": [{"type": "image", "data": "AA=="}]}),
            json!({"content": [{"type": "video", "data": "x"}]}),
            json!({"content": [{"type": "resource_link", "uri": "file:///a"}]}),
            json!({"content": [{"type": "text", "text": "x"}], "isError": "yes"}),
            json!({"structuredContent": {"a": 1}}),
            json!([1]),
        ];
        for result in decoded {
            assert_eq!(plain_result(&result.to_string()), None, "{result}");
        }
    }
}
