//! Input-required results minted for legacy children (SEP-2322 across eras, issue 18). When a 2026-07-28 client's
//! `tools/call`, `prompts/get` or `resources/read` reaches a handshake-era child that asks the client something
//! mid-request (sampling, elicitation, roots), the child's request is held here and the client gets an
//! input-required result asking the same thing. Its `requestState` is a token this process signs (HMAC-SHA-256 with a
//! per-process key), bound to the server, method, name and arguments of the request and expiring with the call's
//! deadline. The client's retry answers the held request and waits for what the child does next: another question
//! (another round, another token) or its final result.

// Sampling and roots are deprecated by SEP-2577, but they are what legacy children ask for.
#![allow(deprecated)]

pub(crate) mod store;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, ClientCapabilities, CreateMessageResult, ElicitResult,
    GetPromptRequestParams, GetPromptResponse, InputRequest, ListRootsResult,
    ReadResourceRequestParams, ReadResourceResponse,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use ad_core::error::{Error, Result};

use crate::call::{ask_client, asks_for, can_answer};
use crate::caller::Caller;
use crate::failure::child_error;
use crate::single::complete_prompt;
use crate::state::{Child, Inner, Proxy};
use crate::sync::lock;
use store::{Asked, Binding, Claims, Outcome, Parked, Refusal, Step, now_ms};

/// How long a legacy child's requests are gathered into one input-required result: until it has been quiet this
/// long, and at most the second (its requests sent together arrive together, each through a task of its own, but a
/// loaded machine can hold one back for tens of milliseconds). A person or a model answers the result, which takes
/// seconds, so the wait costs little.
const GATHER_QUIET: std::time::Duration = std::time::Duration::from_millis(150);
const GATHER_AT_MOST: std::time::Duration = std::time::Duration::from_secs(1);

/// The key under which a minted result asks for one child request, named for what it asks.
fn key_for(request: &InputRequest) -> &'static str {
    match request {
        InputRequest::Elicitation(_) => "elicitation",
        InputRequest::CreateMessage(_) => "sampling",
        InputRequest::ListRoots(_) => "roots",
        _ => "input",
    }
}

/// The capability `what` (`elicitation`, `sampling`, `roots`) as -32021's `requiredCapabilities` names it.
#[allow(deprecated)]
fn required(what: &str) -> ClientCapabilities {
    let caps = ClientCapabilities::builder();
    match what {
        "elicitation" => caps.enable_elicitation().build(),
        "sampling" => caps.enable_sampling().build(),
        "roots" => caps.enable_roots().build(),
        _ => caps.build(),
    }
}

/// The client's answer checked against what was asked, so a malformed one is refused here rather than by the child.
fn check_answer(request: &InputRequest, answer: &Value) -> std::result::Result<(), String> {
    let res = match request {
        InputRequest::Elicitation(_) => {
            serde_json::from_value::<ElicitResult>(answer.clone()).map(drop)
        }
        InputRequest::CreateMessage(_) => {
            serde_json::from_value::<CreateMessageResult>(answer.clone()).map(drop)
        }
        InputRequest::ListRoots(_) => {
            serde_json::from_value::<ListRootsResult>(answer.clone()).map(drop)
        }
        _ => Ok(()),
    };
    res.map_err(|e| e.to_string())
}

/// Whether a call of a legacy child is held here (`Caller` is a leaf that knows no child: these ask the child's era).
impl Caller {
    /// Whether a 2026-07-28 caller's request to `child`, a legacy child, has the child's requests minted into
    /// input-required results (`held.rs`).
    pub(super) fn mints_for(&self, child: &Child) -> bool {
        self.takes_input_required() && child.protocol.has_initialize()
    }

    /// Whether a call of `child` runs as an exchange of `held.rs`, where the child's questions go to this caller
    /// alone: minted into input-required results for a 2026-07-28 caller, asked of a legacy caller's client that
    /// declared the capability, else refused with [`Error::InputRequired`].
    pub(super) fn holds_questions(&self, child: &Child) -> bool {
        child.protocol.has_initialize()
            && (self.takes_input_required() || self.questions_to_caller || self.peer.is_none())
    }
}

impl Proxy {
    /// A `tools/call` of a legacy child whose requests go to this caller alone: minted into input-required results
    /// for a 2026-07-28 caller; asked of a legacy caller's client that declared the capability; else the call ends
    /// with [`Error::InputRequired`] (`drive`).
    pub(super) async fn call_held(
        &self,
        child: &Arc<Child>,
        tool: &str,
        args: Option<serde_json::Map<String, Value>>,
        caller: &Caller,
    ) -> Result<CallToolResponse> {
        let binding = Binding::new(
            &child.name,
            "tools/call",
            tool,
            args.clone().map(Value::Object).as_ref(),
        );
        // The child is called as a legacy client's call would be: progress to the first request, nothing to retry.
        let quiet = Caller {
            peer: caller.peer.clone(),
            progress_token: caller.progress_token.clone(),
            capabilities: caller.capabilities.clone(),
            log_level: caller.log_level,
            trace: caller.trace.clone(),
            in_exchange: true,
            principal: caller.principal.clone(),
            ..Caller::default()
        };
        let (child2, tool) = (child.clone(), tool.to_owned());
        let outcome = self
            .exchange(child, binding, caller, move |inner, cancel| async move {
                let quiet = Caller {
                    cancel: Some(cancel),
                    ..quiet
                };
                inner
                    .call(&child2, &tool, args, &quiet)
                    .await
                    .map(Outcome::Call)
            })
            .await?;
        match outcome {
            Outcome::Call(r) => Ok(r),
            _ => Err(Error::Upstream {
                server: child.name.clone(),
                message: "a tool call ended with another request's result".into(),
            }),
        }
    }

    /// A 2026-07-28 caller's `prompts/get` of a legacy child (`request.name` is the child's own prompt name).
    pub(super) async fn prompt_minting(
        &self,
        child: &Arc<Child>,
        mut request: GetPromptRequestParams,
        caller: &Caller,
    ) -> Result<GetPromptResponse> {
        let binding = Binding::new(
            &child.name,
            "prompts/get",
            &request.name,
            request.arguments.clone().map(Value::Object).as_ref(),
        );
        request.meta = None;
        request.input_responses = None;
        request.request_state = None;
        crate::call::name_user(&mut request.meta, child, caller);
        let child2 = child.clone();
        let outcome = self
            .exchange(child, binding, caller, move |_, cancel| async move {
                tokio::select! {
                    res = child2.peer.get_prompt_once(request) => res
                        .map(|r| Outcome::Prompt(complete_prompt(r)))
                        .map_err(|e| child_error(&child2.name, e)),
                    _ = cancel.cancelled() => Err(Error::Upstream {
                        server: child2.name.clone(),
                        message: "cancelled by the client".into(),
                    }),
                }
            })
            .await?;
        match outcome {
            Outcome::Prompt(r) => Ok(r),
            _ => Err(Error::Upstream {
                server: child.name.clone(),
                message: "prompts/get ended with another request's result".into(),
            }),
        }
    }

    /// A 2026-07-28 caller's `resources/read` of a legacy child (`uri` is the child's own URI); the result as the
    /// child sent it.
    pub(super) async fn read_minting(
        &self,
        child: &Arc<Child>,
        uri: &str,
        caller: &Caller,
    ) -> Result<ReadResourceResponse> {
        let binding = Binding::new(&child.name, "resources/read", uri, None);
        let mut params = ReadResourceRequestParams::new(uri);
        crate::call::name_user(&mut params.meta, child, caller);
        let child2 = child.clone();
        let outcome = self
            .exchange(child, binding, caller, move |_, cancel| async move {
                tokio::select! {
                    res = child2.peer.read_resource(params) => res
                        .map(|r| Outcome::Read(r.into()))
                        .map_err(|e| child_error(&child2.name, e)),
                    _ = cancel.cancelled() => Err(Error::Upstream {
                        server: child2.name.clone(),
                        message: "cancelled by the client".into(),
                    }),
                }
            })
            .await?;
        match outcome {
            Outcome::Read(r) => Ok(r),
            _ => Err(Error::Upstream {
                server: child.name.clone(),
                message: "resources/read ended with another request's result".into(),
            }),
        }
    }

    /// Runs one request of a 2026-07-28 caller against a legacy child as an exchange whose child requests become
    /// input-required results (`work` does the request; it gets the exchange's cancellation), or, on a retry that
    /// carries one of our tokens, answers the held child request and goes on with that exchange.
    pub(super) async fn exchange<W, F>(
        &self,
        child: &Arc<Child>,
        binding: Binding,
        caller: &Caller,
        work: W,
    ) -> Result<Outcome>
    where
        W: FnOnce(Arc<Inner>, CancellationToken) -> F,
        F: std::future::Future<Output = Result<Outcome>> + Send + 'static,
    {
        let held = &self.inner.held;
        // A legacy child has no per-request level: set it low enough for this caller (`forward.rs`).
        if let Some(level) = caller.log_level.filter(|_| caller.takes_input_required()) {
            self.inner.lower_log_level(child, level).await;
        }
        if let Some(token) = caller
            .request_state
            .as_deref()
            .filter(|_| caller.takes_input_required())
        {
            let id = held
                .open(token, &binding, now_ms())
                .map_err(|r| r.error(&child.name))?;
            let mut parked = lock(&held.parked)
                .remove(&id)
                .ok_or_else(|| Refusal::Gone.error(&child.name))?;
            let responses = caller.input_responses.clone().unwrap_or_default();
            // Every answer given is checked before any reaches the child.
            for a in &parked.asks {
                if let Some(answer) = responses.get(&a.key)
                    && let Err(why) = check_answer(&a.request, answer)
                {
                    let key = a.key.clone();
                    held.park(id, parked);
                    return Err(Error::Child {
                        server: child.name.clone(),
                        error: Box::new(McpError::invalid_params(
                            format!("inputResponses.{key} does not answer what was asked: {why}"),
                            Some(json!({"inputResponse": key})),
                        )),
                    });
                }
            }
            let (answered, missing): (Vec<Asked>, Vec<Asked>) = std::mem::take(&mut parked.asks)
                .into_iter()
                .partition(|a| responses.contains_key(&a.key));
            parked.asks = missing;
            for a in answered {
                let _ = a.reply.send(Ok(responses[&a.key].clone()));
            }
            if !parked.asks.is_empty() {
                // Not (all) answered: what is missing is asked again, same token (SEP-2322 re-requests missing
                // input); answers given went to the child, which waits for the rest.
                let again = parked.asking(&binding);
                held.park(id, parked);
                return Ok(again);
            }
            let Parked {
                steps,
                cancel,
                refused,
                ..
            } = parked;
            return self
                .drive(child, id, steps, binding, caller, cancel, refused)
                .await;
        }
        let id = held.next.fetch_add(1, Ordering::Relaxed);
        let (tx, steps) = mpsc::channel(4);
        // A user's own child's exchanges are filed apart from the shared child's (`personal.rs`).
        lock(&held.asking)
            .entry(crate::personal::route_name(child))
            .or_default()
            .push((id, tx.clone()));
        let cancel = CancellationToken::new();
        // Boxed: the call's future is large, and a task moves its future several times on the way in.
        let task = Box::pin(work(self.inner.clone(), cancel.clone()));
        let (inner, server) = (
            Arc::downgrade(&self.inner),
            crate::personal::route_name(child),
        );
        tokio::spawn(async move {
            let res = task.await;
            if let Some(inner) = inner.upgrade() {
                inner.held.forget(&server, id);
            }
            let _ = tx.send(Step::Done(res)).await;
        });
        self.drive(child, id, steps, binding, caller, cancel, None)
            .await
    }

    /// Waits for the exchange's next step: its result, or a child request. For a 2026-07-28 caller the request is
    /// held and asked of the client as an input-required result; for another caller it is asked of its client.
    /// A request the caller cannot answer (it did not declare the capability, or has no client) is never put to
    /// anyone else: the child is refused and decides; should the call then fail, the caller is told what it lacked:
    /// -32021 naming the capability for a 2026-07-28 caller (SEP-2575: the child relied on a capability
    /// agent-discover declared on its behalf), [`Error::InputRequired`] for others.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn drive(
        &self,
        child: &Arc<Child>,
        id: u64,
        mut steps: mpsc::Receiver<Step>,
        binding: Binding,
        caller: &Caller,
        cancel: CancellationToken,
        mut refused: Option<&'static str>,
    ) -> Result<Outcome> {
        let caps = caller.capabilities.clone().unwrap_or_default();
        let logs = self
            .inner
            .watch_logs(&crate::personal::route_name(child), caller);
        let cancelled = || async {
            match &caller.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let gone = || Error::Upstream {
            server: child.name.clone(),
            message: "cancelled by the client".into(),
        };
        loop {
            let step = tokio::select! {
                s = steps.recv() => s,
                _ = cancelled() => {
                    cancel.cancel();
                    return Err(gone());
                }
            };
            let (request, reply) = match step {
                None => {
                    return Err(Error::Upstream {
                        server: child.name.clone(),
                        message: "the request ended without a result".into(),
                    });
                }
                Some(Step::Done(res)) => {
                    return self
                        .finish(child, caller, res, refused, logs.is_some())
                        .await;
                }
                Some(Step::Ask { request, reply }) => (request, reply),
            };
            let what = asks_for(&request);
            let client = if caller.takes_input_required() {
                can_answer(&caps, &request).then_some(None)
            } else {
                caller
                    .peer
                    .as_ref()
                    .filter(|p| {
                        p.peer_info()
                            .is_some_and(|i| can_answer(&i.capabilities, &request))
                    })
                    .map(Some)
            };
            match client {
                None => {
                    refused = Some(what);
                    let _ = reply.send(Err(McpError::invalid_request(
                        format!(
                            "agent-discover cannot forward the {what} request: the calling client did not declare the {what} capability"
                        ),
                        None,
                    )));
                }
                // A legacy caller's client answers at once, and the child goes on.
                Some(Some(peer)) => {
                    let answer = tokio::select! {
                        a = ask_client(peer, &child.name, request) => a,
                        _ = cancelled() => {
                            cancel.cancel();
                            return Err(gone());
                        }
                    };
                    let _ = reply
                        .send(answer.map_err(|e| McpError::invalid_request(e.to_string(), None)));
                }
                Some(None) => {
                    // A legacy child may ask several things at once: what it asks before it goes quiet is asked of
                    // the client in one input-required result.
                    let mut asks = vec![Asked {
                        key: key_for(&request).to_owned(),
                        request,
                        reply,
                    }];
                    let until = tokio::time::Instant::now() + GATHER_AT_MOST;
                    while let Ok(Some(step)) = tokio::time::timeout_at(
                        until.min(tokio::time::Instant::now() + GATHER_QUIET),
                        steps.recv(),
                    )
                    .await
                    {
                        match step {
                            Step::Done(res) => {
                                // Its questions are moot: the replies dropped refuse them.
                                drop(asks);
                                return self
                                    .finish(child, caller, res, refused, logs.is_some())
                                    .await;
                            }
                            Step::Ask { request, reply } => {
                                if !can_answer(&caps, &request) {
                                    let what = asks_for(&request);
                                    refused = Some(what);
                                    let _ = reply.send(Err(McpError::invalid_request(
                                        format!(
                                            "agent-discover cannot forward the {what} request: the calling client did not declare the {what} capability"
                                        ),
                                        None,
                                    )));
                                    continue;
                                }
                                let base = key_for(&request);
                                let n = asks.iter().filter(|a| a.key.starts_with(base)).count();
                                let key = if n == 0 {
                                    base.to_owned()
                                } else {
                                    format!("{base}_{}", n + 1)
                                };
                                asks.push(Asked {
                                    key,
                                    request,
                                    reply,
                                });
                            }
                        }
                    }
                    let expires = now_ms() + child.call_timeout.as_millis() as u64;
                    let token = self.inner.held.seal(&Claims {
                        p: self.inner.held.process.clone(),
                        i: id,
                        e: expires,
                        b: binding.clone(),
                    });
                    let parked = Parked {
                        steps,
                        asks,
                        token,
                        expires,
                        cancel,
                        refused,
                    };
                    let asked = parked.asking(&binding);
                    self.inner.held.park(id, parked);
                    return Ok(asked);
                }
            }
        }
    }

    /// The end of an exchange: log messages of the call delivered first; a failure after a refusal says what the
    /// caller lacked.
    async fn finish(
        &self,
        child: &Child,
        caller: &Caller,
        res: Result<Outcome>,
        refused: Option<&'static str>,
        logs: bool,
    ) -> Result<Outcome> {
        if logs {
            self.inner.flush_logs().await;
        }
        match refused {
            Some(what) if failed(&res) => Err(self.lacking(child, caller, what)),
            _ => res,
        }
    }

    /// What the caller is told when the child failed after asking for `what`, which the caller could not give.
    fn lacking(&self, child: &Child, caller: &Caller, what: &str) -> Error {
        if caller.takes_input_required() {
            Error::Child {
                server: child.name.clone(),
                error: Box::new(McpError::missing_required_client_capability(required(what))),
            }
        } else {
            Error::InputRequired {
                server: child.name.clone(),
                what: what.to_owned(),
            }
        }
    }
}

/// Whether an exchange ended in failure: an error, or a tool result flagged `isError`.
fn failed(res: &Result<Outcome>) -> bool {
    match res {
        Err(_) => true,
        Ok(Outcome::Call(CallToolResponse::Complete(r))) => r.is_error == Some(true),
        Ok(_) => false,
    }
}
