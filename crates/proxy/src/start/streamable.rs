//! Connecting to a Streamable HTTP child: the handshake in the era asked for, with OAuth when the server has a
//! session, its progress counted as read; and the attempts to open a 2026-07-28 child's legacy session, where a
//! refusal (the child serves none) is told from a failure worth another attempt.

use std::sync::Arc;
use std::time::Duration;

use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::{RoleClient, ServiceExt};

use crate::counted::Counted;
use crate::state::{ChildClient, LegacyAttempt, ProgressSeen};

/// Connects to a Streamable HTTP child in `mode` (rmcp's default handshake when `None`) by `deadline`, with OAuth when
/// `session` is given; its progress counted as read, as a stdio child's is (`counted.rs`).
pub(super) async fn connect_http(
    handler: ChildClient,
    mode: Option<ClientLifecycleMode>,
    config: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    session: Option<Arc<ad_oauth::Session>>,
    seen: ProgressSeen,
    deadline: tokio::time::Instant,
) -> std::result::Result<
    std::result::Result<
        RunningService<RoleClient, ChildClient>,
        rmcp::service::ClientInitializeError,
    >,
    tokio::time::error::Elapsed,
> {
    use rmcp::transport::StreamableHttpClientTransport as Http;
    let legacy = handler.legacy_session;
    let run = async move {
        match (session, mode) {
            (None, None) => {
                let http =
                    Http::with_client(crate::spans::TracedHttp(reqwest::Client::new()), config);
                handler.serve(Counted::new(http, seen, legacy)).await
            }
            (None, Some(m)) => {
                let http =
                    Http::with_client(crate::spans::TracedHttp(reqwest::Client::new()), config);
                handler
                    .serve_with_lifecycle(Counted::new(http, seen, legacy), m)
                    .await
            }
            (Some(s), None) => {
                let http = Http::with_client(
                    crate::spans::TracedHttp(ad_oauth::AuthedClient::new(s)),
                    config,
                );
                handler.serve(Counted::new(http, seen, legacy)).await
            }
            (Some(s), Some(m)) => {
                let http = Http::with_client(
                    crate::spans::TracedHttp(ad_oauth::AuthedClient::new(s)),
                    config,
                );
                handler
                    .serve_with_lifecycle(Counted::new(http, seen, legacy), m)
                    .await
            }
        }
    };
    tokio::time::timeout_at(deadline, run).await
}

/// One attempt to open a child's legacy session (`era.rs`) within `timeout`: `initialize`, asked again twice (after
/// 250 ms, then 500 ms) while the child gives no answer it meant, so a child busy for a moment still gets its legacy
/// clients' requests; a refusal is final.
pub(super) async fn connect_legacy(
    handler: ChildClient,
    config: rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig,
    session: Option<Arc<ad_oauth::Session>>,
    seen: ProgressSeen,
    timeout: Duration,
) -> LegacyAttempt {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut pause = Duration::from_millis(250);
    for attempt in 1..=3 {
        let mode = Some(ClientLifecycleMode::Initialize);
        let failed = match connect_http(
            handler.clone(),
            mode,
            config.clone(),
            session.clone(),
            seen.clone(),
            deadline,
        )
        .await
        {
            Ok(Ok(service)) => return LegacyAttempt::Connected(service),
            Ok(Err(e)) if refused(&e) => return LegacyAttempt::Refused(e.to_string()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => {
                return LegacyAttempt::Failed(format!(
                    "no answer to initialize in {} ms",
                    timeout.as_millis()
                ));
            }
        };
        if attempt == 3 || tokio::time::Instant::now() + pause >= deadline {
            return LegacyAttempt::Failed(failed);
        }
        tracing::debug!(error = %failed, "initialize of a legacy session failed; asking again");
        tokio::time::sleep(pause).await;
        pause *= 2;
    }
    unreachable!("the last attempt returns")
}

/// Whether the child refused `initialize` (it serves no legacy session), rather than failing to answer: a JSON-RPC
/// error other than an internal error, an answer that is not an initialize result, or an HTTP 4xx status other than
/// 401, 403, 408 and 429.
fn refused(e: &rmcp::service::ClientInitializeError) -> bool {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::JsonRpcError(e) => e.code != rmcp::model::ErrorCode::INTERNAL_ERROR,
        E::ExpectedInitResult(_) | E::ExpectedInitResponse(_) => true,
        E::TransportError { error, .. } => client_status(&error.to_string()),
        _ => false,
    }
}

/// An HTTP 4xx status named in a transport error's text (`HTTP 404 Not Found: ...`) that refuses rather than asks
/// to wait or authorize.
fn client_status(text: &str) -> bool {
    text.match_indices("HTTP 4").any(|(at, _)| {
        let code = text.get(at + 5..at + 8).and_then(|c| c.parse::<u16>().ok());
        code.is_some_and(|c| (400..500).contains(&c) && !matches!(c, 401 | 403 | 408 | 429))
    })
}

#[cfg(test)]
mod tests {
    use super::client_status;

    #[test]
    fn a_4xx_refuses_but_authorization_waiting_and_limits_do_not() {
        assert!(client_status(
            "Transport [x] error: HTTP 404 Not Found: no such method"
        ));
        assert!(client_status(
            "unexpected server response: HTTP 405 Method Not Allowed: "
        ));
        assert!(client_status("HTTP 400 Bad Request: {\"error\":...}"));
        for text in [
            "HTTP 401 Unauthorized: ",
            "HTTP 403 Forbidden: ",
            "HTTP 408 Request Timeout: ",
            "HTTP 429 Too Many Requests: ",
            "HTTP status 503 Service Unavailable",
            "error sending request: connection refused",
            "HTTP 4",
        ] {
            assert!(!client_status(text), "{text}");
        }
    }
}
