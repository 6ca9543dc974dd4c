//! The host side of a run, on the application's runtime: each request of the script becomes a task there. A tool call
//! takes `Proxy::call_tool_response`, the one call path every front shares, with the run's [`Caller`] (marked as a
//! script's; the calling client's peer, protocol, capabilities and session, so approvals and a child's questions go
//! to that client; no progress token; the run's cancellation). Its answer reaches the script as the tool's
//! `structuredContent`, else its text parsed as JSON, else the text; a failure as an `Error` with the `kind`, message
//! and `details` a direct call's failure has (`Proxy::failure_body`). An input-required result (an approval, a
//! 2026-07-28 child's question) is handed to the run's controller, which puts it to the caller, and the call is made
//! again with the answer.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResponse, CallToolResult, InputRequiredResult, InputResponses};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use ad_core::error::Error;
use ad_proxy::{Caller, Proxy};

use crate::answer::Thrown;
use crate::bridge::{Dispatch, Reply, Request, ToolName};
use crate::idents::ident;

/// What a script's `find_tool` and `find_tools` do: the application's use cases, answering as the `registry` actions
/// of the same names do.
pub trait Catalog: Send + Sync + 'static {
    fn find_tool(&self, query: String, caller: Caller) -> BoxFuture<'static, Result<Value, Error>>;
    fn find_tools(
        &self,
        intents: Vec<String>,
        caller: Caller,
    ) -> BoxFuture<'static, Result<Value, Error>>;
}

/// A question an inner call must put to the caller: the input-required result, under the call's key, and where its
/// answer goes (`None`: the run is over, no answer will come).
pub(crate) struct Ask {
    pub key: String,
    pub result: InputRequiredResult,
    pub answer: oneshot::Sender<InputResponses>,
}

/// How many rounds one inner call may go through input-required results before it fails.
const MAX_ROUNDS: usize = 16;

pub(crate) struct Host {
    proxy: Proxy,
    catalog: Arc<dyn Catalog>,
    runtime: tokio::runtime::Handle,
    caller: Caller,
    cancel: CancellationToken,
    asks: mpsc::UnboundedSender<Ask>,
}

impl Host {
    pub(crate) fn new(
        proxy: Proxy,
        catalog: Arc<dyn Catalog>,
        runtime: tokio::runtime::Handle,
        caller: Caller,
        cancel: CancellationToken,
        asks: mpsc::UnboundedSender<Ask>,
    ) -> Host {
        Host {
            proxy,
            catalog,
            runtime,
            caller,
            cancel,
            asks,
        }
    }

    /// One tool call, through as many input-required rounds as it takes.
    async fn call(
        proxy: Proxy,
        caller: Caller,
        asks: mpsc::UnboundedSender<Ask>,
        key: String,
        name: String,
        args: Option<serde_json::Map<String, Value>>,
    ) -> Result<String, Thrown> {
        let Some((server, tool)) = proxy.resolve(&name) else {
            return Err(Thrown {
                kind: "tool_not_found".into(),
                message: format!(
                    "unknown tool `{name}`: no server offers it (names are `server__tool`)"
                ),
                details: json!({"tool": name, "did_you_mean": proxy.did_you_mean(&name, 3)}),
            });
        };
        let mut caller = caller;
        for _ in 0..MAX_ROUNDS {
            let res = proxy
                .call_tool_boxed(server.clone(), tool.clone(), args.clone(), caller.clone())
                .await;
            match res {
                Ok(CallToolResponse::Complete(r)) => return value_of(&server, &tool, r),
                Ok(CallToolResponse::InputRequired(asked)) => {
                    caller.request_state = asked.request_state.clone();
                    caller.input_responses = None;
                    if asked.input_requests.as_ref().is_none_or(|r| r.is_empty()) {
                        // Nothing to ask: the child wants its state back only.
                        continue;
                    }
                    let (answer, answered) = oneshot::channel();
                    let ask = Ask {
                        key: key.clone(),
                        result: asked,
                        answer,
                    };
                    if asks.send(ask).is_err() {
                        break;
                    }
                    match answered.await {
                        Ok(responses) => caller.input_responses = Some(responses),
                        Err(_) => break,
                    }
                }
                Ok(CallToolResponse::Task(_)) => {
                    return Err(Thrown {
                        kind: "server_error".into(),
                        message: format!(
                            "{server}__{tool} answered with a task, which a script cannot follow"
                        ),
                        details: json!({"server": server, "tool": tool}),
                    });
                }
                Ok(_) => {
                    return Err(Thrown {
                        kind: "server_error".into(),
                        message: "an answer of a kind this version does not know".into(),
                        details: json!({"server": server, "tool": tool}),
                    });
                }
                Err(e) => {
                    return Err(Thrown {
                        kind: proxy_kind(&e).into(),
                        message: e.to_string(),
                        details: proxy.failure_body_for(
                            &server,
                            &tool,
                            &e,
                            caller.principal.as_deref(),
                        ),
                    });
                }
            }
        }
        let e = Error::InputRequired {
            server: server.clone(),
            what: "an answer the run did not get".into(),
        };
        Err(Thrown {
            kind: "input_required".into(),
            message: e.to_string(),
            details: proxy.failure_body_for(&server, &tool, &e, caller.principal.as_deref()),
        })
    }
}

/// A failed call's `kind`, as `Proxy::failure_body` says it.
fn proxy_kind(e: &Error) -> &'static str {
    match e {
        Error::InputRequired { .. } => "input_required",
        e => e.call_kind(),
    }
}

/// A catalog action's failure as the script sees it.
fn catalog_error(e: Error) -> Thrown {
    Thrown {
        kind: e.code().as_str().into(),
        message: e.to_string(),
        details: json!({"code": e.code().as_str()}),
    }
}

/// A tool's answer as the script gets it (JSON text), or its error.
pub(crate) fn value_of(server: &str, tool: &str, r: CallToolResult) -> Result<String, Thrown> {
    let texts: Vec<&str> = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect();
    let text = texts.join("\n");
    if r.is_error == Some(true) {
        let mut details = json!({"server": server, "tool": tool});
        match (&r.structured_content, text.is_empty()) {
            (Some(s), _) => details["structuredContent"] = s.clone(),
            (None, false) => details["text"] = parsed(&text),
            (None, true) => {
                details["content"] = serde_json::to_value(&r.content).unwrap_or_default()
            }
        }
        return Err(Thrown {
            kind: "tool_error".into(),
            message: if text.is_empty() {
                format!("{server}__{tool} failed")
            } else {
                text.clone()
            },
            details,
        });
    }
    if let Some(s) = r.structured_content {
        return Ok(s.to_string());
    }
    if texts.is_empty() && !r.content.is_empty() {
        // Images, audio, resources: their blocks as MCP gives them.
        return Ok(serde_json::to_string(&r.content).unwrap_or_else(|_| "null".into()));
    }
    if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok() {
        return Ok(text);
    }
    Ok(Value::String(text).to_string())
}

/// Text as JSON when it parses, else as a string.
fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

impl Dispatch for Host {
    fn start(&self, request: Request, reply: Reply) {
        let cancel = self.cancel.clone();
        let work: BoxFuture<'static, Result<String, Thrown>> = match request {
            Request::Call { name, args } => Box::pin(Host::call(
                self.proxy.clone(),
                self.caller.clone(),
                self.asks.clone(),
                format!("c{}", reply.id()),
                name,
                args,
            )),
            Request::FindTool { query } => {
                let f = self.catalog.find_tool(query, self.caller.clone());
                Box::pin(async move { f.await.map(|v| v.to_string()).map_err(catalog_error) })
            }
            Request::FindTools { intents } => {
                let f = self.catalog.find_tools(intents, self.caller.clone());
                Box::pin(async move { f.await.map(|v| v.to_string()).map_err(catalog_error) })
            }
        };
        // The work first: a tool call sees the run's cancellation itself and tells its child; whatever still waits
        // when the run is cancelled (an approval nobody gave) is dropped, and a waiting approval is expired.
        // (`futures::future::select` polls its first future first; `tokio::select!` here cost 40 s of release build.)
        self.runtime.spawn(async move {
            let cancelled = Box::pin(cancel.cancelled_owned());
            if let futures::future::Either::Left((out, _)) =
                futures::future::select(work, cancelled).await
            {
                reply.send(out);
            }
        });
    }

    fn tools(&self) -> Vec<ToolName> {
        let mut seen = std::collections::HashSet::new();
        // Only the tools the run's caller may see (issue 30), within its profile as the profile shows them.
        self.proxy
            .exposed_tools_of(&self.caller)
            .into_iter()
            .filter_map(|(server, tool, exposed)| {
                let names = (ident(&server), ident(&tool));
                // Two names that become the same identifiers: the first keeps them; `call` reaches the other.
                seen.insert(names.clone())
                    .then_some((names.0, names.1, exposed))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    #[test]
    fn a_tool_answer_becomes_structured_content_json_or_text() {
        let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
        assert_eq!(
            value_of("s", "t", text(r#"{"a": 1}"#)),
            Ok(r#"{"a": 1}"#.into())
        );
        assert_eq!(value_of("s", "t", text("hello")), Ok(r#""hello""#.into()));
        let mut r = text("ignored");
        r.structured_content = Some(json!({"n": 2}));
        assert_eq!(value_of("s", "t", r), Ok(r#"{"n":2}"#.into()));
        let e = value_of(
            "s",
            "t",
            CallToolResult::error(vec![ContentBlock::text("no such file")]),
        )
        .unwrap_err();
        assert_eq!(e.kind, "tool_error");
        assert_eq!(e.message, "no such file");
        assert_eq!(
            e.details,
            json!({"server": "s", "tool": "t", "text": "no such file"})
        );
    }
}
