//! Client side of the legacy HTTP+SSE transport (protocol 2024-11-05), which rmcp no longer ships:
//! `GET <url>` opens an event stream whose first `endpoint` event names where to POST messages;
//! responses and notifications come back as `message` events.

use std::collections::HashMap;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};

use ad_core::error::{Error, Result};

/// Connects and returns a (sink, stream) pair that rmcp accepts as a transport.
pub async fn connect(
    url: &str,
    headers: &HashMap<String, String>,
    timeout: Duration,
) -> Result<(
    futures::channel::mpsc::Sender<TxJsonRpcMessage<RoleClient>>,
    futures::channel::mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
)> {
    let upstream = |message: String| Error::Upstream {
        server: url.to_owned(),
        message,
    };
    let client = reqwest::Client::builder()
        .connect_timeout(timeout)
        .build()
        .map_err(|e| upstream(e.to_string()))?;
    let mut req = client.get(url).header("Accept", "text/event-stream");
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = tokio::time::timeout(timeout, req.send())
        .await
        .map_err(|_| upstream("SSE connect timed out".into()))?
        .map_err(|e| upstream(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(upstream(format!(
            "SSE endpoint answered HTTP {}",
            resp.status()
        )));
    }
    let mut events = sse_stream::SseStream::from_bytes_stream(resp.bytes_stream());
    // The first event must say where to post.
    let endpoint = loop {
        match tokio::time::timeout(timeout, events.next()).await {
            Ok(Some(Ok(ev))) if ev.event.as_deref() == Some("endpoint") => {
                break ev.data.unwrap_or_default();
            }
            Ok(Some(Ok(_))) => continue,
            Ok(Some(Err(e))) => return Err(upstream(format!("bad SSE stream: {e}"))),
            Ok(None) => {
                return Err(upstream(
                    "SSE stream closed before the endpoint event".into(),
                ));
            }
            Err(_) => return Err(upstream("no endpoint event from the SSE server".into())),
        }
    };
    let post_url = resolve(url, endpoint.trim())
        .ok_or_else(|| upstream(format!("bad endpoint {endpoint:?}")))?;

    let (in_tx, in_rx) = futures::channel::mpsc::channel::<RxJsonRpcMessage<RoleClient>>(64);
    let (out_tx, mut out_rx) = futures::channel::mpsc::channel::<TxJsonRpcMessage<RoleClient>>(64);
    tokio::spawn(async move {
        let mut in_tx = in_tx;
        while let Some(Ok(ev)) = events.next().await {
            if ev.event.as_deref().is_none_or(|e| e == "message")
                && let Some(msg) = ev.data.and_then(|d| serde_json::from_str(&d).ok())
                && in_tx.send(msg).await.is_err()
            {
                break;
            }
        }
    });
    let headers = headers.clone();
    tokio::spawn(async move {
        while let Some(msg) = out_rx.next().await {
            let mut req = client.post(&post_url).json(&msg);
            for (k, v) in &headers {
                req = req.header(k.as_str(), v.as_str());
            }
            // The request's trace context as headers too, as Streamable HTTP children get it (`spans.rs`).
            for (k, v) in crate::spans::trace_headers(&msg) {
                req = req.header(k, v);
            }
            if let Err(e) = req.send().await.and_then(|r| r.error_for_status()) {
                tracing::warn!(error = %e, "SSE post failed");
                break;
            }
        }
    });
    Ok((out_tx, in_rx))
}

/// Resolves the endpoint (usually a path such as `/messages?sessionId=..`) against the stream URL.
fn resolve(base: &str, endpoint: &str) -> Option<String> {
    if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        return Some(endpoint.to_owned());
    }
    let scheme_end = base.find("://")? + 3;
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    if let Some(path) = endpoint.strip_prefix('/') {
        return Some(format!("{}/{}", &base[..host_end], path));
    }
    let dir_end = base[host_end..]
        .rfind('/')
        .map(|i| host_end + i + 1)
        .unwrap_or(base.len());
    Some(format!(
        "{}{}{endpoint}",
        &base[..dir_end],
        if dir_end == base.len() && !base.ends_with('/') {
            "/"
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn resolves_endpoints() {
        assert_eq!(
            super::resolve("http://h:1/sse", "/messages?s=1").as_deref(),
            Some("http://h:1/messages?s=1")
        );
        assert_eq!(
            super::resolve("http://h:1/a/sse", "messages").as_deref(),
            Some("http://h:1/a/messages")
        );
        assert_eq!(
            super::resolve("http://h:1/sse", "http://x/y").as_deref(),
            Some("http://x/y")
        );
    }
}
