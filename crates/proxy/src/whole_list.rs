//! A Streamable HTTP child's `tools/list` answer handed to rmcp's transport as one JSON answer when the child sent
//! it alone on an SSE stream. rmcp's client records each listed tool's `x-mcp-header` annotations (SEP-2243: the
//! `Mcp-Param-*` headers its later `tools/call` requests must carry) when it handles a JSON answer, and when its
//! worker takes a streamed message from the stream's queue; but a stream that has ended by the time the worker gets
//! to its answer is drained straight to the handler, unrecorded, and every call of an annotated tool then goes
//! without its headers (the child answers -32020). A JSON answer has no stream to end first.
//!
//! Only a stream whose first message is the answer is made one: a child's notification or request during the list
//! goes to rmcp unchanged, and so does the rest of that stream (the events read so far replayed first).

use futures::StreamExt;
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, RequestId, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{StreamableHttpError, StreamableHttpPostResponse};
use sse_stream::{Error as SseError, Sse};

/// How many events without a message (a stream's priming event, a retry hint) are held before the answer; past
/// that the stream goes to rmcp as it is.
const MAX_HELD: usize = 16;

/// The id of `message` when it is a `tools/list` request.
pub(crate) fn tool_list_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(r)
            if matches!(r.request, ClientRequest::ListToolsRequest(_)) =>
        {
            Some(r.id.clone())
        }
        _ => None,
    }
}

/// The response to a POST, with a `tools/list` answer (`list`: the request's id) made a JSON answer when the child
/// sent it first on its SSE stream.
pub(crate) async fn whole<E: std::error::Error + Send + Sync + 'static>(
    list: Option<RequestId>,
    response: Result<StreamableHttpPostResponse, StreamableHttpError<E>>,
) -> Result<StreamableHttpPostResponse, StreamableHttpError<E>> {
    let Some(id) = list else {
        return response;
    };
    let (mut stream, session) = match response? {
        StreamableHttpPostResponse::Sse(stream, session) => (stream, session),
        other => return Ok(other),
    };
    let mut held: Vec<Result<Sse, SseError>> = Vec::new();
    while held.len() < MAX_HELD {
        let Some(event) = stream.next().await else {
            break;
        };
        let message = match &event {
            Ok(sse) => message_of(sse),
            // The stream failed: rmcp reconnects (or fails the request) as it would have.
            Err(_) => {
                held.push(event);
                break;
            }
        };
        match message {
            Some(ServerJsonRpcMessage::Response(r)) if r.id == id => {
                return Ok(StreamableHttpPostResponse::Json(
                    ServerJsonRpcMessage::Response(r),
                    session,
                ));
            }
            Some(ServerJsonRpcMessage::Error(e)) if e.id.as_ref() == Some(&id) => {
                return Ok(StreamableHttpPostResponse::Json(
                    ServerJsonRpcMessage::Error(e),
                    session,
                ));
            }
            // Another message first (the child asks or tells something during the list): all of it as streamed.
            Some(_) => {
                held.push(event);
                break;
            }
            None => held.push(event),
        }
    }
    let replayed: BoxStream<'static, Result<Sse, SseError>> =
        futures::stream::iter(held).chain(stream).boxed();
    Ok(StreamableHttpPostResponse::Sse(replayed, session))
}

/// The JSON-RPC message an SSE event carries, as rmcp reads one: a `message` (or unnamed) event's data.
fn message_of(sse: &Sse) -> Option<ServerJsonRpcMessage> {
    if !matches!(sse.event.as_deref(), None | Some("") | Some("message")) {
        return None;
    }
    serde_json::from_str(sse.data.as_deref()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ListToolsRequest, NumberOrString, PaginatedRequestParams};
    use serde_json::json;

    type Response = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

    fn event(data: serde_json::Value) -> Result<Sse, SseError> {
        Ok(Sse {
            event: None,
            data: Some(data.to_string()),
            id: None,
            retry: None,
        })
    }

    /// A stream's priming event: an id and a retry hint, no data.
    fn priming() -> Result<Sse, SseError> {
        Ok(Sse {
            event: None,
            data: None,
            id: Some("0".into()),
            retry: Some(3000),
        })
    }

    fn answer(id: i64) -> serde_json::Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "t", "inputSchema": {"type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}}]}})
    }

    fn streamed(events: Vec<Result<Sse, SseError>>) -> Response {
        Ok(StreamableHttpPostResponse::Sse(
            futures::stream::iter(events).boxed(),
            Some("session".into()),
        ))
    }

    fn list_request(id: i64) -> ClientJsonRpcMessage {
        ClientJsonRpcMessage::request(
            ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params: None::<PaginatedRequestParams>,
                extensions: Default::default(),
            }),
            NumberOrString::Number(id),
        )
    }

    /// What a stream left to rmcp carries, as (data, id) per event.
    async fn events(response: Response) -> Vec<(Option<String>, Option<String>)> {
        match response.unwrap() {
            StreamableHttpPostResponse::Sse(s, _) => {
                s.map(|e| e.map(|e| (e.data, e.id)).unwrap_or_default())
                    .collect()
                    .await
            }
            other => panic!("not a stream: {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_tool_list_streamed_alone_is_one_json_answer() {
        let id = tool_list_id(&list_request(7));
        assert_eq!(id, Some(NumberOrString::Number(7)));
        let r = whole(id, streamed(vec![priming(), event(answer(7))])).await;
        match r.unwrap() {
            StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Response(r), session) => {
                assert_eq!(r.id, NumberOrString::Number(7));
                assert_eq!(session.as_deref(), Some("session"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_message_before_the_list_leaves_the_stream_to_rmcp() {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "listing"}});
        let r = whole(
            Some(NumberOrString::Number(7)),
            streamed(vec![priming(), event(note.clone()), event(answer(7))]),
        )
        .await;
        let got = events(r).await;
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].1.as_deref(), Some("0"));
        assert_eq!(got[1].0.as_deref(), Some(note.to_string().as_str()));
        assert_eq!(got[2].0.as_deref(), Some(answer(7).to_string().as_str()));
    }

    #[tokio::test]
    async fn other_requests_and_unfinished_lists_are_untouched() {
        // Not a tool list: the stream as it came.
        let call = ClientJsonRpcMessage::request(
            ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(
                rmcp::model::CallToolRequestParams::new("t"),
            )),
            NumberOrString::Number(8),
        );
        assert_eq!(tool_list_id(&call), None);
        let r = whole(None, streamed(vec![priming(), event(answer(8))])).await;
        assert_eq!(events(r).await.len(), 2);
        // A list whose stream ends before its answer: what was read is replayed (rmcp resumes or fails it).
        let r = whole(Some(NumberOrString::Number(9)), streamed(vec![priming()])).await;
        assert_eq!(events(r).await, vec![(None, Some("0".into()))]);
        // Another request's answer is not this list's.
        let r = whole(
            Some(NumberOrString::Number(9)),
            streamed(vec![event(answer(3))]),
        )
        .await;
        assert_eq!(events(r).await.len(), 1);
    }
}
