//! The HTTP client of an OAuth-protected Streamable HTTP server: rmcp's reqwest client with the server's current
//! token on every request (refreshed before expiry, and once after a 401), and the last 401/403 challenge kept for
//! the proxy to start an authorization or a scope step-up. Redirects are not followed, so the token only ever goes
//! to the server it was issued for. A DPoP-bound token goes as `Authorization: DPoP` with a fresh proof per request
//! (a `use_dpop_nonce` challenge is answered once with the server's nonce); on a token-exchange server, each request
//! carries the token exchanged for its user (named in `_meta` by the proxy, see [`USER_META`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::discovery::Challenge;
use crate::dpop::{self, Dpop};
use crate::exchange::USER_META;
use crate::service::{OAuth, lock};
use ad_core::identity::Principal;
use ad_core::model::Server;
use rmcp::model::GetMeta;

/// One connection's view of a server's authorization.
pub struct Session {
    oauth: OAuth,
    server: Server,
    /// The last challenge the server answered with: 401 or 403, and its `WWW-Authenticate`.
    challenge: Mutex<Option<(u16, Challenge)>>,
    /// The same, per user, for a server each user authorizes for themselves (`peruser.rs`).
    user_challenges: Mutex<HashMap<String, (u16, Challenge)>>,
    /// `subscriptions/listen` requests about to leave for a user (`listen_as`), by their filter as JSON: rmcp's
    /// `Peer::listen` sends no `_meta` to name the user in.
    listens: Mutex<HashMap<String, String>>,
}

impl Session {
    pub fn new(oauth: OAuth, server: Server) -> Arc<Session> {
        Arc::new(Session {
            oauth,
            server,
            challenge: Mutex::new(None),
            user_challenges: Mutex::default(),
            listens: Mutex::default(),
        })
    }

    /// The next `subscriptions/listen` request with `filter` is `user`'s (a key from [`Session::user_for_request`]):
    /// it carries that user's credentials. The caller opens one such listen per filter at a time, and calls
    /// [`Session::listened`] once `Peer::listen` has returned.
    pub fn listen_as(&self, filter: &rmcp::model::SubscriptionFilter, user: &str) {
        if let Ok(key) = serde_json::to_string(filter) {
            lock(&self.listens).insert(key, user.to_owned());
        }
    }

    /// Forgets [`Session::listen_as`]'s note for `filter` if no request took it (the listen failed before leaving).
    pub fn listened(&self, filter: &rmcp::model::SubscriptionFilter) {
        if let Ok(key) = serde_json::to_string(filter) {
            lock(&self.listens).remove(&key);
        }
    }

    /// The user a `subscriptions/listen` request is for, as [`Session::listen_as`] noted it (taken).
    fn listen_user(&self, message: &ClientJsonRpcMessage) -> Option<String> {
        let ClientJsonRpcMessage::Request(r) = message else {
            return None;
        };
        let rmcp::model::ClientRequest::SubscriptionsListenRequest(q) = &r.request else {
            return None;
        };
        let key = serde_json::to_string(&q.params.notifications).ok()?;
        lock(&self.listens).remove(&key)
    }

    /// For a server that exchanges the caller's token (`OAUTH_GRANT=token_exchange`): files `principal` as its
    /// user's latest and returns the key a request names the user by, under [`USER_META`] in its `_meta` (taken out
    /// again before the request leaves). `None` for other servers: nothing is added.
    pub fn user_for_request(&self, principal: &Principal) -> Option<String> {
        let exchanges = self.oauth.uses_token_exchange(&self.server) && principal.token.is_some();
        if !exchanges && !self.per_user() {
            return None;
        }
        Some(self.oauth.remember_user(principal))
    }

    /// Whether each user authorizes this server for themselves (`OAUTH_PER_USER=on`).
    pub fn per_user(&self) -> bool {
        self.oauth.per_user(&self.server)
    }

    /// The last 401 or 403 challenge the server answered to a request of `principal`'s, cleared (a server each user
    /// authorizes for themselves).
    pub fn take_user_challenge(&self, principal: &Principal) -> Option<(u16, Challenge)> {
        lock(&self.user_challenges).remove(&principal.user_key())
    }

    /// The last 401 or 403 challenge, cleared.
    pub fn take_challenge(&self) -> Option<(u16, Challenge)> {
        lock(&self.challenge).take()
    }

    fn record<T>(
        &self,
        result: &Result<T, StreamableHttpError<reqwest::Error>>,
        user: Option<&Principal>,
    ) {
        let seen = match result {
            Err(StreamableHttpError::AuthRequired(e)) => {
                Some((401, Challenge::parse(&e.www_authenticate_header)))
            }
            Err(StreamableHttpError::InsufficientScope(e)) => {
                Some((403, Challenge::parse(&e.www_authenticate_header)))
            }
            _ => None,
        };
        match (seen, user) {
            (Some(seen), Some(p)) => {
                lock(&self.user_challenges).insert(p.user_key(), seen);
            }
            (Some(seen), None) => *lock(&self.challenge) = Some(seen),
            _ => {}
        }
    }
}

/// rmcp sends `MCP-Protocol-Version` only after `initialize`; servers of the 2026-07-28 revision require it on
/// every request, `initialize` included, so it is added there with the version the request proposes.
fn with_version_header(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    const NAME: HeaderName = HeaderName::from_static("mcp-protocol-version");
    if let ClientJsonRpcMessage::Request(r) = message
        && let rmcp::model::ClientRequest::InitializeRequest(init) = &r.request
        && !headers.contains_key(&NAME)
        && let Ok(v) = HeaderValue::from_str(init.params.protocol_version.as_str())
    {
        headers.insert(NAME, v);
    }
    headers
}

type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;
type Headers = HashMap<HeaderName, HeaderValue>;

/// How a request presents its token.
enum Presented {
    None,
    Bearer(String),
    /// A DPoP-bound token: `Authorization: DPoP`, and a proof per request.
    Dpop(String, Dpop),
    /// A token exchanged for the request's user.
    Exchanged(String, Principal),
}

/// Takes the proxy's note of the request's user out of the message (it never reaches the server): from the
/// request's extensions (a call's options, tasks requests) or from its params' own `_meta` (reads, prompt gets,
/// completions and subscriptions set it there); a `subscriptions/listen` request's user is noted by `listen_as`.
fn take_user(message: &mut ClientJsonRpcMessage) -> Option<String> {
    use rmcp::model::{ClientRequest as R, RequestParamsMeta};
    let ClientJsonRpcMessage::Request(r) = message else {
        return None;
    };
    let in_params = match &mut r.request {
        R::ReadResourceRequest(q) => q.params.meta_mut().as_mut(),
        R::GetPromptRequest(q) => q.params.meta_mut().as_mut(),
        R::CompleteRequest(q) => q.params.meta_mut().as_mut(),
        R::SubscribeRequest(q) => q.params.meta_mut().as_mut(),
        R::UnsubscribeRequest(q) => q.params.meta_mut().as_mut(),
        R::SubscriptionsListenRequest(q) => q.params.meta.as_mut(),
        _ => None,
    }
    .and_then(|m| m.remove(USER_META));
    let in_extensions = r.request.get_meta_mut().remove(USER_META);
    in_params
        .or(in_extensions)
        .and_then(|v| v.as_str().map(str::to_owned))
}

/// rmcp's reqwest client with a server's OAuth token.
#[derive(Clone)]
pub struct AuthedClient {
    http: reqwest::Client,
    session: Arc<Session>,
}

impl AuthedClient {
    pub fn new(session: Arc<Session>) -> AuthedClient {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_default();
        AuthedClient { http, session }
    }

    /// The token for this request: the user's exchanged token on a token-exchange server, else the server's.
    async fn present(&self, user: Option<&str>) -> Presented {
        let s = &self.session;
        // A user's request on a server each user authorizes: that user's own token, or none yet.
        if let Some(p) = user.filter(|_| s.per_user()).and_then(|u| s.oauth.user(u)) {
            return match s.oauth.user_credential(&s.server, &p).await {
                Ok(Some(c)) if c.dpop => match s.oauth.dpop(s.server.id) {
                    Ok(d) => Presented::Dpop(c.token, d),
                    Err(_) => Presented::None,
                },
                Ok(Some(c)) => Presented::Bearer(c.token),
                Ok(None) => Presented::None,
                Err(e) => {
                    tracing::warn!(server = %s.server.name, error = %e, "no usable OAuth token for the user");
                    Presented::None
                }
            };
        }
        // A request of a user (a call) on a token-exchange server carries that user's exchanged token; requests of
        // the shared connection (initialize, lists, the event stream) carry the server's own token, if it has one.
        if let Some(p) = user.and_then(|u| s.oauth.user(u))
            && s.oauth.uses_token_exchange(&s.server)
        {
            return match s.oauth.exchanged_token(&s.server, &p).await {
                Ok(t) => Presented::Exchanged(t.token, p),
                Err(e) => {
                    tracing::warn!(server = %s.server.name, error = %e, "token exchange failed");
                    Presented::None
                }
            };
        }
        match s.oauth.credential(&s.server).await {
            Ok(Some(c)) if c.dpop => match s.oauth.dpop(s.server.id) {
                Ok(d) => Presented::Dpop(c.token, d),
                Err(e) => {
                    tracing::warn!(server = %s.server.name, error = %e, "no DPoP key");
                    Presented::None
                }
            },
            Ok(Some(c)) => Presented::Bearer(c.token),
            Ok(None) => Presented::None,
            Err(e) => {
                tracing::warn!(server = %s.server.name, error = %e, "no usable OAuth token");
                Presented::None
            }
        }
    }

    /// The bearer token for rmcp to send, and the headers (a DPoP token and its proof go as headers).
    fn apply(
        &self,
        presented: &Presented,
        method: &str,
        uri: &str,
        mut headers: Headers,
    ) -> (Option<String>, Headers) {
        match presented {
            Presented::None => (None, headers),
            Presented::Bearer(t) | Presented::Exchanged(t, _) => (Some(t.clone()), headers),
            Presented::Dpop(t, d) => {
                if let Ok(v) = HeaderValue::from_str(&format!("DPoP {t}")) {
                    headers.insert(http::header::AUTHORIZATION, v);
                }
                match d.proof(method, uri, Some(t)) {
                    Ok(p) => {
                        if let Ok(v) = HeaderValue::from_str(&p) {
                            headers.insert(HeaderName::from_static("dpop"), v);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "DPoP proof"),
                }
                (None, headers)
            }
        }
    }

    /// Learns the resource server's DPoP nonce after a `use_dpop_nonce` challenge. rmcp keeps only the
    /// `WWW-Authenticate` header of a 401, so the nonce (in `DPoP-Nonce`) is read from a `ping` sent with the same
    /// token and a fresh proof: a request the server refuses before handling it, and harmless if it does not.
    async fn learn_nonce(
        &self,
        uri: &str,
        token: &str,
        d: &Dpop,
        session_id: Option<&str>,
    ) -> bool {
        let Ok(proof) = d.proof("POST", uri, Some(token)) else {
            return false;
        };
        let mut req = self
            .http
            .post(uri)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::AUTHORIZATION, format!("DPoP {token}"))
            .header(dpop::HEADER, proof)
            .json(&serde_json::json!({"jsonrpc": "2.0", "id": "agent-discover-dpop-nonce", "method": "ping"}));
        if let Some(id) = session_id {
            req = req.header("mcp-session-id", id);
        }
        match req.send().await {
            Ok(resp) => {
                let nonce = resp
                    .headers()
                    .get(dpop::NONCE_HEADER)
                    .and_then(|v| v.to_str().ok());
                d.remember(uri, nonce)
            }
            Err(_) => false,
        }
    }

    async fn with_token<T, F, Fut>(
        &self,
        method: &str,
        uri: &str,
        session_id: Option<&str>,
        user: Option<String>,
        headers: Headers,
        call: F,
    ) -> HttpResult<T>
    where
        F: Fn(Option<String>, Headers) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let s = &self.session;
        // A user's request on a token-exchange server: its refusal is that user's, never the start of a person's
        // authorization of the server (no challenge is kept for the proxy).
        let users = user.is_some() && s.oauth.uses_token_exchange(&s.server);
        // A user's request on a server each user authorizes: its challenge is that user's.
        let own = user
            .as_deref()
            .filter(|_| s.per_user())
            .and_then(|u| s.oauth.user(u));
        let record = |r: &HttpResult<T>| {
            if own.is_some() {
                s.record(r, own.as_ref());
            } else if !users {
                s.record(r, None);
            }
        };
        let presented = self.present(user.as_deref()).await;
        let (bearer, h) = self.apply(&presented, method, uri, headers.clone());
        let result = call(bearer, h).await;
        let Err(StreamableHttpError::AuthRequired(e)) = &result else {
            record(&result);
            return result;
        };
        let challenge = Challenge::parse(&e.www_authenticate_header);
        let retry = match &presented {
            // The resource server wants a nonce (RFC 9449 section 9): learn it, send again once.
            Presented::Dpop(t, d) if challenge.error.as_deref() == Some("use_dpop_nonce") => self
                .learn_nonce(uri, t, d, session_id)
                .await
                .then(|| Presented::Dpop(t.clone(), d.clone())),
            // An exchanged token refused: exchange again once.
            Presented::Exchanged(sent, p) => {
                s.oauth.forget_exchanged(s.server.id, Some(&p.user_key()));
                match s.oauth.exchanged_token(&s.server, p).await {
                    Ok(t) if &t.token != sent => Some(Presented::Exchanged(t.token, p.clone())),
                    _ => None,
                }
            }
            // Refused token: one refresh (shared with concurrent callers), one retry.
            Presented::Bearer(sent) | Presented::Dpop(sent, _) => {
                let fresh = match &own {
                    Some(p) => s.oauth.user_refresh(&s.server, p, sent).await,
                    None => s.oauth.refresh(&s.server, sent).await,
                };
                match fresh {
                    Ok(Some(fresh)) if &fresh != sent => Some(match &presented {
                        Presented::Dpop(_, d) => Presented::Dpop(fresh, d.clone()),
                        _ => Presented::Bearer(fresh),
                    }),
                    _ => None,
                }
            }
            Presented::None => None,
        };
        let Some(again) = retry else {
            record(&result);
            return result;
        };
        let (bearer, h) = self.apply(&again, method, uri, headers);
        let retried = call(bearer, h).await;
        record(&retried);
        retried
    }
}

impl StreamableHttpClient for AuthedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut message = message;
        let user = take_user(&mut message).or_else(|| self.session.listen_user(&message));
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token(
            "POST",
            &uri,
            session_id.as_deref(),
            user,
            custom_headers,
            |token, headers| {
                self.http.post_message(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    headers,
                )
            },
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        let mut message = message;
        let user = take_user(&mut message).or_else(|| self.session.listen_user(&message));
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token(
            "POST",
            &uri,
            session_id.as_deref(),
            user,
            custom_headers,
            |token, headers| {
                self.http.post_message_with_response_limits(
                    uri.clone(),
                    message.clone(),
                    session_id.clone(),
                    token,
                    headers,
                    limits,
                )
            },
        )
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.with_token(
            "DELETE",
            &uri,
            Some(&session_id),
            None,
            custom_headers,
            |token, headers| {
                self.http
                    .delete_session(uri.clone(), session_id.clone(), token, headers)
            },
        )
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>> {
        self.with_token(
            "GET",
            &uri,
            session_id.as_deref(),
            None,
            custom_headers,
            |token, headers| {
                self.http.get_stream(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    headers,
                )
            },
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>> {
        self.with_token(
            "GET",
            &uri,
            session_id.as_deref(),
            None,
            custom_headers,
            |token, headers| {
                self.http.get_stream_with_max_sse_event_size(
                    uri.clone(),
                    session_id.clone(),
                    last_event_id.clone(),
                    token,
                    headers,
                    max_sse_event_size,
                )
            },
        )
        .await
    }
}
