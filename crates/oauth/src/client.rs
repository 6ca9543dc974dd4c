//! The HTTP client of an OAuth-protected Streamable HTTP server: rmcp's reqwest client with the server's current
//! token on every request (refreshed before expiry, and once after a 401), and the last 401/403 challenge kept for
//! the proxy to start an authorization or a scope step-up. Redirects are not followed, so the token only ever goes
//! to the server it was issued for.

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
use crate::service::{OAuth, lock};
use ad_core::model::Server;

/// One connection's view of a server's authorization.
pub struct Session {
    oauth: OAuth,
    server: Server,
    /// The last challenge the server answered with: 401 or 403, and its `WWW-Authenticate`.
    challenge: Mutex<Option<(u16, Challenge)>>,
}

impl Session {
    pub fn new(oauth: OAuth, server: Server) -> Arc<Session> {
        Arc::new(Session {
            oauth,
            server,
            challenge: Mutex::new(None),
        })
    }

    /// The last 401 or 403 challenge, cleared.
    pub fn take_challenge(&self) -> Option<(u16, Challenge)> {
        lock(&self.challenge).take()
    }

    fn record<T>(&self, result: &Result<T, StreamableHttpError<reqwest::Error>>) {
        let seen = match result {
            Err(StreamableHttpError::AuthRequired(e)) => {
                Some((401, Challenge::parse(&e.www_authenticate_header)))
            }
            Err(StreamableHttpError::InsufficientScope(e)) => {
                Some((403, Challenge::parse(&e.www_authenticate_header)))
            }
            _ => None,
        };
        if let Some(seen) = seen {
            *lock(&self.challenge) = Some(seen);
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

    async fn with_token<T, F, Fut>(&self, call: F) -> HttpResult<T>
    where
        F: Fn(Option<String>) -> Fut,
        Fut: Future<Output = HttpResult<T>>,
    {
        let s = &self.session;
        let token = match s.oauth.access_token(&s.server).await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(server = %s.server.name, error = %e, "no usable OAuth token");
                None
            }
        };
        let result = call(token.clone()).await;
        if let (Err(StreamableHttpError::AuthRequired(_)), Some(sent)) = (&result, &token) {
            // Refused token: one refresh (shared with concurrent callers), one retry.
            if let Ok(Some(fresh)) = s.oauth.refresh(&s.server, sent).await
                && &fresh != sent
            {
                let retried = call(Some(fresh)).await;
                s.record(&retried);
                return retried;
            }
        }
        s.record(&result);
        result
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
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token(|token| {
            self.http.post_message(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
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
        let custom_headers = with_version_header(&message, custom_headers);
        self.with_token(|token| {
            self.http.post_message_with_response_limits(
                uri.clone(),
                message.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
                limits,
            )
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.with_token(|token| {
            self.http.delete_session(
                uri.clone(),
                session_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
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
        self.with_token(|token| {
            self.http.get_stream(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
            )
        })
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
        self.with_token(|token| {
            self.http.get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id.clone(),
                last_event_id.clone(),
                token,
                custom_headers.clone(),
                max_sse_event_size,
            )
        })
        .await
    }
}
