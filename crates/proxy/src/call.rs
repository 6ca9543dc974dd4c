//! Forwarding one tool call to a child: the call timeout, reset by progress; cancellation in both directions; failure
//! at once when the child dies. And the way back: a child's progress goes to the caller's token, and its requests
//! (sampling, elicitation, roots) to the calling client if it declared the capability.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotificationParam,
    ClientCapabilities, ClientRequest, DEFAULT_MRTR_MAX_ROUNDS, ErrorCode, InputRequest,
    InputRequests, InputResponses, ProgressNotificationParam, RequestMetaObject, ResultType,
    ServerResult,
};
use rmcp::service::PeerRequestOptions;
use rmcp::{Peer, RoleServer};
use serde_json::{Map, Value};

use ad_core::error::{Error, Result};

use crate::caller::Caller;
use crate::failure::exited_during_call;
use crate::state::{Child, Inner, ProgressRoute, legacy_token};
use crate::sync::lock;

impl Inner {
    /// One tool call. A 2026-07-28 child's input-required result goes back to a caller that takes it (a 2026-07-28
    /// client, or a caller without a client); for a legacy client its input requests become elicitation, sampling and
    /// roots requests to that client, and the child is called again with the answers, round after round.
    pub(super) async fn call(
        &self,
        child: &Arc<Child>,
        tool: &str,
        args: Option<Map<String, Value>>,
        caller: &Caller,
    ) -> Result<CallToolResponse> {
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = args;
        params.input_responses = caller.input_responses.clone();
        params.request_state = caller.request_state.clone();
        let response = self.call_round(child, params.clone(), caller).await?;
        self.after_round(child, params, caller, response).await
    }

    /// A tool call from its first round's `response` on (`params` that round's): the rounds that answer a 2026-07-28
    /// child's input requests for a legacy client, as [`Inner::call`] says. The fast lane, which made the first
    /// round itself, hands its call over here (`relay/crossing.rs`).
    pub(super) async fn after_round(
        &self,
        child: &Arc<Child>,
        mut params: CallToolRequestParams,
        caller: &Caller,
        mut response: CallToolResponse,
    ) -> Result<CallToolResponse> {
        let mut rounds = 0;
        loop {
            let CallToolResponse::InputRequired(asked) = response else {
                if let CallToolResponse::Task(created) = &response {
                    self.own_task_user(child, &created.task.task_id, caller);
                }
                return Ok(response);
            };
            let peer = match &caller.peer {
                Some(peer) if !caller.takes_input_required() => peer,
                _ => return Ok(CallToolResponse::InputRequired(asked)),
            };
            rounds += 1;
            if rounds > DEFAULT_MRTR_MAX_ROUNDS {
                return Err(Error::Upstream {
                    server: child.name.clone(),
                    message: format!("still asks for input after {DEFAULT_MRTR_MAX_ROUNDS} rounds"),
                });
            }
            let requests = asked.input_requests.unwrap_or_default();
            params.input_responses = Some(fulfil(peer, &child.name, requests).await?);
            params.request_state = asked.request_state;
            response = self.call_round(child, params.clone(), caller).await?;
        }
    }

    /// One round of a call. A Streamable HTTP child that refuses the request's `Mcp-Param-*` headers (-32020: one is
    /// missing, or says something else than the arguments; SEP-2243) is treated as the specification tells a client
    /// to: its tools are listed again, for the annotations it has now, and the request is sent once more with the
    /// headers they give.
    async fn call_round(
        &self,
        child: &Arc<Child>,
        params: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<CallToolResponse> {
        match self.call_once(child, params.clone(), caller).await {
            Err(Error::Child { error, .. })
                if error.code == ErrorCode::HEADER_MISMATCH
                    && child.transport == ad_core::model::Transport::StreamableHttp =>
            {
                tracing::debug!(server = %child.name, tool = %params.name, message = %error.message,
                    "the server refused the call's headers: listing its tools again and retrying once");
                let session = child.session_for(caller).await;
                // A list rmcp answers from its response cache (SEP-2549) would not reach its transport, which takes
                // the annotations from the list it reads.
                session.peer.clear_response_cache().await;
                if session.legacy_session {
                    if let Err(e) = session.peer.list_all_tools().await {
                        tracing::warn!(server = %child.name, error = %e, "re-listing tools failed");
                    }
                } else {
                    self.refresh_tools(&child.name).await;
                    // The list may show the tool changed (its annotations are part of its definition): withheld until
                    // approved, it is not called again.
                    let inbound = self.registry.inbound(child.server_id);
                    let shown = inbound
                        .as_ref()
                        .and_then(|i| i.shown_of(&params.name))
                        .unwrap_or(&params.name);
                    if !lock(&child.tools).iter().any(|t| t.name == shown) {
                        return Err(Error::ToolChanged {
                            server: child.name.clone(),
                            tool: params.name.to_string(),
                        });
                    }
                }
                self.call_once(child, params, caller).await
            }
            res => res,
        }
    }

    async fn call_once(
        &self,
        child: &Arc<Child>,
        params: CallToolRequestParams,
        caller: &Caller,
    ) -> Result<CallToolResponse> {
        let upstream = |message: String| Error::Upstream {
            server: child.name.clone(),
            message,
        };
        // A legacy client's call of a child that speaks both eras goes to its legacy session (`era.rs`).
        let session = child.session_for(caller).await;
        // A 2026-07-28 child learns from each request what the calling client can do (nothing, without a client).
        let mut options = PeerRequestOptions::no_options();
        if !session.protocol.has_initialize() {
            options.meta = Some(caller_meta(caller));
        }
        // The proxied call's span is the child's parent (SEP-414 keys in `_meta`; an HTTP child also gets them as
        // headers, `spans.rs`). Only while tracing is on.
        if let Some(trace) = &caller.trace {
            let meta = options.meta.get_or_insert_with(RequestMetaObject::default);
            meta.set_traceparent(trace.traceparent());
            if let Some(state) = &trace.state {
                meta.set_tracestate(state.clone());
            }
        }
        // A remote server that exchanges the caller's token (issue 30): the request names its user.
        name_user(&mut options.meta, child, caller);
        // A 2026-07-28 caller's log messages: registered before the child can log anything about this call.
        let logs = self.watch_logs(&crate::personal::route_name(child), caller);
        // rmcp assigns the outgoing progress token itself; we learn it from the handle and route by it. The child may
        // answer with progress (or a request of its own) as soon as rmcp writes the request, which can be before
        // this task runs again: the routes are registered under `registering`, which those wait for.
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let registering = self.registering.write().await;
        let handle = match session
            .peer
            .send_request_with_option(request, options)
            .await
        {
            Ok(h) => h,
            Err(e) => {
                drop(registering);
                return Err(child.explain_failure(e.to_string()).await);
            }
        };
        let token = if session.legacy_session {
            legacy_token(&handle.progress_token)
        } else {
            handle.progress_token.clone()
        };
        let request_id = handle.id.clone();
        if caller.trace.is_some() {
            crate::spans::sent(&request_id);
        }
        let last_progress = Arc::new(Mutex::new(Instant::now()));
        let forwarding = Arc::new(tokio::sync::Mutex::new(()));
        let forwarded = Arc::new(tokio::sync::watch::Sender::new(0u64));
        let route = ProgressRoute {
            caller: caller.peer.clone().zip(caller.progress_token.clone()),
            last_progress: last_progress.clone(),
            forwarding: forwarding.clone(),
            forwarded: forwarded.clone(),
            seen: child.progress_seen.clone(),
        };
        // A child started with a user's own keys has routes of its own (`personal.rs`).
        let (route_name, route_token) = crate::personal::route_of(child, &token);
        let key = (child.name.clone(), route_token);
        lock(&self.progress).insert(key.clone(), route);
        if let Some(peer) = &caller.peer {
            let mut callers = lock(&self.callers);
            callers.entry(route_name.clone()).or_default().push((
                token.clone(),
                peer.clone(),
                caller.in_exchange,
            ));
        }
        drop(registering);
        let _cleanup = scopeguard(|| {
            lock(&self.progress).remove(&key);
            lock(&child.progress_seen).remove(&token);
            if caller.peer.is_some()
                && let Some(v) = lock(&self.callers).get_mut(&route_name)
            {
                // This call's own entry: calls of one server overlap and end in any order.
                v.retain(|(t, _, _)| *t != token);
            }
        });
        let response = handle.await_response();
        tokio::pin!(response);
        let mut exited = child.exited.clone();
        let cancelled = async {
            match &caller.cancel {
                Some(c) => c.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(cancelled);
        let timeout = child.call_timeout;
        // Progress moves the deadline lazily: when the timer fires, it is re-armed from the last progress if any came.
        let mut deadline = Instant::now() + timeout;
        let cancel_child = |reason: &str| {
            let peer = session.peer.clone();
            let param =
                CancelledNotificationParam::new(Some(request_id.clone()), Some(reason.to_owned()));
            tokio::spawn(async move { peer.notify_cancelled(param).await });
        };
        let res = loop {
            tokio::select! {
                res = &mut response => break res,
                // Not a tokio timer, which would be pending while the call runs: see `clock.rs`.
                _ = ad_core::clock::sleep_until(deadline.into_std()) => {
                    let extended = *lock(&last_progress) + timeout;
                    if extended > Instant::now() {
                        deadline = extended;
                        continue;
                    }
                    cancel_child("timed out in agent-discover");
                    return Err(Error::Timeout { server: child.name.clone(), what: "tool call", ms: timeout.as_millis() as u64 });
                }
                Ok(_) = exited.wait_for(|c| c.is_some()) => {
                    let cause = child.exited.borrow().clone().unwrap_or_default();
                    return Err(exited_during_call(&child.name, &cause, &child.stderr));
                }
                _ = &mut cancelled => {
                    cancel_child("cancelled by the client");
                    return Err(upstream("cancelled by the client".into()));
                }
            }
        };
        // rmcp hands each child notification to its own task, so progress sent just before the result may still be
        // on its way to the caller, who must get it before the result (as it would from the child directly). A stdio
        // or Streamable HTTP child's transport counted the progress it read before this result (`typed.rs`,
        // `counted.rs`): wait until as many are forwarded (bounded, should a forward be stuck on a dead client).
        // Legacy SSE children's count nothing: there,
        // let those tasks run and wait for a forward in flight.
        let seen = lock(&child.progress_seen)
            .get(&token)
            .map(|s| s.count)
            .unwrap_or(0);
        if seen > 0 {
            let mut done = forwarded.subscribe();
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(2),
                done.wait_for(|n| *n >= seen),
            )
            .await;
        } else if caller.progress_token.is_some() {
            for _ in 0..4 {
                tokio::task::yield_now().await;
            }
            drop(forwarding.lock().await);
        }
        if logs.is_some() {
            self.flush_logs().await;
        }
        drop(logs);
        match res {
            // A legacy child's result has no resultType; a 2026-07-28 client requires one.
            Ok(ServerResult::CallToolResult(mut r)) => {
                r.result_type.get_or_insert(ResultType::COMPLETE);
                Ok(r.into())
            }
            Ok(ServerResult::InputRequiredResult(r)) => Ok(r.into()),
            // SEP-2663: the child made a task; its id stays the child's here (the aggregated front prefixes it).
            Ok(ServerResult::CreateTaskResult(r)) => Ok(CallToolResponse::Task(r)),
            Ok(_) => Err(upstream(
                "the server answered a tool call with something else than its result".into(),
            )),
            // The child's own JSON-RPC error, kept so the fronts can pass its code and message on.
            Err(rmcp::ServiceError::McpError(error)) => Err(Error::Child {
                server: child.name.clone(),
                error: Box::new(error),
            }),
            Err(e) => Err(child.explain_failure(e.to_string()).await),
        }
    }

    /// Waits until no call is registering its routes (`call_once`): a child's message about a request it has
    /// read finds that request's routes after this.
    pub(super) async fn registered(&self) {
        drop(self.registering.read().await);
    }

    /// A progress notification of `server` (its token as the call's route is keyed: `legacy_token` for a child's
    /// legacy session) goes to the caller's token, in the child's order.
    pub(super) async fn route_progress(&self, server: &str, params: ProgressNotificationParam) {
        self.registered().await;
        let target = {
            let routes = lock(&self.progress);
            let Some(route) = routes.get(&(server.to_owned(), params.progress_token.clone()))
            else {
                tracing::debug!(server, token = ?params.progress_token, "progress of no call in flight, dropped");
                return;
            };
            *lock(&route.last_progress) = Instant::now();
            (
                route.caller.clone(),
                route.forwarding.clone(),
                route.forwarded.clone(),
                route.seen.clone(),
            )
        };
        let (target, forwarding, count, seen) = target;
        let _forwarding = forwarding.lock_owned().await;
        // In the child's order: this notification, and any held ones, once the values before them went out.
        let ready = {
            let mut seen = lock(&seen);
            match seen.get_mut(&params.progress_token) {
                Some(s) if !s.order.is_empty() => {
                    s.held.push(params);
                    let mut ready = Vec::new();
                    while let Some(next) = s.order.front()
                        && let Some(i) = s.held.iter().position(|p| p.progress == *next)
                    {
                        ready.push(s.held.swap_remove(i));
                        s.order.pop_front();
                    }
                    ready
                }
                _ => vec![params],
            }
        };
        for params in ready {
            if let Some((peer, token)) = &target {
                let mut forwarded = params;
                forwarded.progress_token = token.clone();
                let _ = peer.notify_progress(forwarded).await;
            }
            count.send_modify(|n| *n += 1);
        }
    }

    /// The client to forward a child's request to: the one calling that child now, else the newest connected one,
    /// provided it declared the capability.
    /// Whether a call of `server` is in flight that is not one of a held exchange (`held.rs`).
    pub(super) fn plain_call_in_flight(&self, server: &str) -> bool {
        lock(&self.callers)
            .get(server)
            .is_some_and(|v| v.iter().any(|(_, _, exchange)| !exchange))
    }

    pub(super) fn client_for(
        &self,
        server: &str,
        has: impl Fn(&ClientCapabilities) -> bool,
    ) -> Option<Peer<RoleServer>> {
        let declared = |p: &Peer<RoleServer>| p.peer_info().is_some_and(|i| has(&i.capabilities));
        if let Some(p) = lock(&self.callers)
            .get(server)
            .and_then(|v| v.last().map(|(_, p, _)| p.clone()))
        {
            return declared(&p).then_some(p);
        }
        lock(&self.clients)
            .iter()
            .rev()
            .filter(|(id, _)| self.sees(*id, server))
            .map(|(_, p)| p.clone())
            .find(|p| !p.is_transport_closed() && declared(p))
    }
}

/// Asks a legacy client what a 2026-07-28 child's input requests need, each only if the client declared the
/// capability (else [`Error::InputRequired`]); the answers keyed as the requests were.
async fn fulfil(
    peer: &Peer<RoleServer>,
    server: &str,
    requests: InputRequests,
) -> Result<InputResponses> {
    let mut answers = InputResponses::new();
    for (key, request) in requests {
        answers.insert(key, ask_client(peer, server, request).await?);
    }
    Ok(answers)
}

/// What an input request asks for, as its capability is named.
pub(super) fn asks_for(request: &InputRequest) -> &'static str {
    match request {
        InputRequest::Elicitation(_) => "elicitation",
        InputRequest::CreateMessage(_) => "sampling",
        InputRequest::ListRoots(_) => "roots",
        _ => "input",
    }
}

/// Whether a client that declared `caps` can be asked `request`.
#[allow(deprecated)] // sampling and roots are deprecated by SEP-2577 but are how legacy clients answer.
pub(super) fn can_answer(caps: &ClientCapabilities, request: &InputRequest) -> bool {
    match request {
        InputRequest::Elicitation(_) => caps.elicitation.is_some(),
        InputRequest::CreateMessage(_) => caps.sampling.is_some(),
        InputRequest::ListRoots(_) => caps.roots.is_some(),
        _ => false,
    }
}

/// Asks a legacy client one request of a child, if it declared the capability; its answer as JSON.
#[allow(deprecated)] // sampling and roots are deprecated by SEP-2577 but are how legacy clients answer.
pub(super) async fn ask_client(
    peer: &Peer<RoleServer>,
    server: &str,
    request: InputRequest,
) -> Result<Value> {
    let caps = peer
        .peer_info()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    let what = asks_for(&request);
    if !can_answer(&caps, &request) {
        return Err(Error::InputRequired {
            server: server.to_owned(),
            what: what.to_owned(),
        });
    }
    let refused = |why: String| Error::Upstream {
        server: server.to_owned(),
        message: format!("the tool asks the client for {what}, but {why}"),
    };
    let answer = match request {
        InputRequest::Elicitation(r) => peer
            .create_elicitation(r.params)
            .await
            .map_err(|e| refused(e.to_string()))
            .map(serde_json::to_value)?,
        InputRequest::CreateMessage(r) => peer
            .create_message(r.params)
            .await
            .map_err(|e| refused(e.to_string()))
            .map(serde_json::to_value)?,
        InputRequest::ListRoots(_) => peer
            .list_roots()
            .await
            .map_err(|e| refused(e.to_string()))
            .map(serde_json::to_value)?,
        _ => return Err(refused("agent-discover does not know that request".into())),
    };
    answer.map_err(|e| refused(e.to_string()))
}

/// What a 2026-07-28 child learns from each request of the calling client (rmcp adds the rest of the envelope, the
/// revision and our client info; the fast lane adds them as rmcp does, `relay/crossing.rs`).
pub(super) fn caller_meta(caller: &Caller) -> RequestMetaObject {
    let mut meta = RequestMetaObject::default();
    meta.set_client_capabilities(caller.capabilities.clone().unwrap_or_default());
    if let Some(level) = caller.log_level {
        meta.set_log_level(level);
    }
    meta
}

struct ScopeGuard<F: FnMut()>(F);
impl<F: FnMut()> Drop for ScopeGuard<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}
fn scopeguard<F: FnMut()>(f: F) -> ScopeGuard<F> {
    ScopeGuard(f)
}

/// For a remote child that exchanges the caller's token (issue 30): names the caller's user in the request's `_meta`,
/// and the OAuth client sends that user's exchanged token with the request (it takes the name out before the request
/// leaves). Nothing for other children or a caller without a user.
pub(crate) fn name_user(meta: &mut Option<RequestMetaObject>, child: &Child, caller: &Caller) {
    if let Some(user) = user_of(child, caller) {
        name_in(meta, &user);
    }
}

/// The user whose own credentials a request of `caller` to `child` carries (a token-exchange or per-user server and
/// a caller with a validated token), else `None`.
pub(crate) fn user_of(child: &Child, caller: &Caller) -> Option<String> {
    let (auth, principal) = (child.auth.as_ref()?, caller.principal.as_ref()?);
    auth.user_for_request(principal)
}

/// Names `user` in `meta` for the OAuth client (`name_user`).
pub(crate) fn name_in(meta: &mut Option<RequestMetaObject>, user: &str) {
    meta.get_or_insert_with(RequestMetaObject::default)
        .insert(ad_oauth::USER_META.to_owned(), user.into());
}
