//! A2A client over reqwest: agent cards (v1.0 `supportedInterfaces`, v0.3 `url`/`preferredTransport`, the
//! `agent-card.json` and older `agent.json` locations) and the JSON-RPC binding of both protocol versions
//! (v1.0 `SendMessage`/`SendStreamingMessage`/`GetTask`/`CancelTask` with `A2A-Version: 1.0`; v0.3 `message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`), with streamed answers read from Server-Sent Events.
//!
//! Every wire shape is normalised here into [`Update`]s and [`TaskState`]s, so nothing above knows the version.
//!
//! Must not know: agents' sessions and executors (`ad-agents`), storage, MCP or the composition root.
#![forbid(unsafe_code)]

mod card;
mod update;

pub use card::{Card, Skill, Version, parse_card};
pub use update::{TaskState, Update, parse_result};

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

/// The card extension through which an agent reports its AI providers (agent-discover's own convention):
/// `capabilities.extensions[{uri: PROVIDERS_EXTENSION, params: {providers: [...], defaultProviderId?}}]`.
pub const PROVIDERS_EXTENSION: &str = "urn:agent-discover:a2a:providers:v1";
pub const WELL_KNOWN_CARD: &str = "/.well-known/agent-card.json";
pub const LEGACY_CARD: &str = "/.well-known/agent.json";
const MAX_CARD_BYTES: usize = 1 << 20;

/// A failure talking to an agent (the agents layer reports it as an `upstream` error).
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError(pub String);

impl std::fmt::Display for A2aError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

type Result<T> = std::result::Result<T, A2aError>;

fn err(msg: impl Into<String>) -> A2aError {
    A2aError(msg.into())
}

/// A connection to one agent's JSON-RPC endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    pub endpoint: String,
    pub version: Version,
    headers: BTreeMap<String, String>,
}

/// A prompt as an A2A message.
#[derive(Debug, Clone, Default)]
pub struct Outgoing {
    pub text: String,
    pub context_id: Option<String>,
    /// Set to continue a task that waits for input.
    pub task_id: Option<String>,
    pub metadata: serde_json::Map<String, Value>,
}

fn new_id() -> String {
    let b = ad_registry::secrets::random_bytes();
    b[..16].iter().map(|x| format!("{x:02x}")).collect()
}

pub fn http_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::limited(3))
        .build()
        .unwrap_or_default()
}

fn apply(
    mut rb: reqwest::RequestBuilder,
    headers: &BTreeMap<String, String>,
) -> reqwest::RequestBuilder {
    for (k, v) in headers {
        rb = rb.header(k, v);
    }
    rb
}

/// Reads an agent card from `url`: a card file itself (`....json`), or a base URL whose
/// `/.well-known/agent-card.json` (then the older `/.well-known/agent.json`) is read. Returns the card, its raw JSON
/// and the URL it came from.
pub async fn fetch_card(
    http: &reqwest::Client,
    url: &str,
    headers: &BTreeMap<String, String>,
    timeout: Duration,
) -> Result<(Card, Value, String)> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| err(format!("bad agent URL `{url}`: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(err(format!("agent URL `{url}` is not http(s)")));
    }
    let candidates: Vec<reqwest::Url> = if parsed.path().ends_with(".json") {
        vec![parsed.clone()]
    } else {
        [WELL_KNOWN_CARD, LEGACY_CARD]
            .iter()
            .filter_map(|p| parsed.join(p).ok())
            .collect()
    };
    let mut last = String::new();
    for candidate in candidates {
        let resp = apply(http.get(candidate.clone()), headers)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| err(format!("cannot read the agent card at {candidate}: {e}")))?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            last = format!("no agent card at {candidate} (404)");
            continue;
        }
        if !resp.status().is_success() {
            return Err(err(format!(
                "agent card at {candidate}: HTTP {}",
                resp.status()
            )));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| err(format!("agent card at {candidate}: {e}")))?;
        if bytes.len() > MAX_CARD_BYTES {
            return Err(err(format!(
                "agent card at {candidate} is over {MAX_CARD_BYTES} bytes"
            )));
        }
        let raw: Value = serde_json::from_slice(&bytes)
            .map_err(|e| err(format!("agent card at {candidate} is not JSON: {e}")))?;
        let card = parse_card(&raw, &candidate)?;
        return Ok((card, raw, candidate.to_string()));
    }
    Err(err(last))
}

impl Client {
    pub fn new(http: reqwest::Client, card: &Card, headers: BTreeMap<String, String>) -> Client {
        Client {
            http,
            endpoint: card.endpoint.clone(),
            version: card.version,
            headers,
        }
    }

    fn method(&self, v1: &'static str, v03: &'static str) -> &'static str {
        match self.version {
            Version::V1 => v1,
            Version::V03 => v03,
        }
    }

    fn request(&self, method: &str, params: Value) -> reqwest::RequestBuilder {
        let mut rb = self.http.post(&self.endpoint).json(&json!({
            "jsonrpc": "2.0", "id": new_id(), "method": method, "params": params,
        }));
        if self.version == Version::V1 {
            rb = rb.header("A2A-Version", "1.0");
        }
        apply(rb, &self.headers)
    }

    fn message_params(&self, m: &Outgoing) -> Value {
        let mut msg = match self.version {
            Version::V1 => {
                json!({"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": m.text}]})
            }
            Version::V03 => json!({
                "kind": "message", "messageId": new_id(), "role": "user", "parts": [{"kind": "text", "text": m.text}],
            }),
        };
        if let Some(c) = &m.context_id {
            msg["contextId"] = json!(c);
        }
        if let Some(t) = &m.task_id {
            msg["taskId"] = json!(t);
        }
        if !m.metadata.is_empty() {
            msg["metadata"] = Value::Object(m.metadata.clone());
        }
        json!({"message": msg})
    }

    async fn call(&self, method: &str, params: Value, timeout: Duration) -> Result<Value> {
        let resp = self
            .request(method, params)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| err(format!("{method}: {e}")))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| err(format!("{method}: HTTP {status}, unreadable answer: {e}")))?;
        rpc_result(method, body)
    }

    /// Sends one message and waits for the answer (non-streaming).
    pub async fn send(&self, m: &Outgoing, timeout: Duration) -> Result<Update> {
        let v = self
            .call(
                self.method("SendMessage", "message/send"),
                self.message_params(m),
                timeout,
            )
            .await?;
        parse_result(&v)
    }

    /// Sends one message as a stream; `on_update` sees each event as it arrives. Returns when the stream ends.
    pub async fn stream(
        &self,
        m: &Outgoing,
        idle: Duration,
        mut on_update: impl FnMut(Update),
    ) -> Result<()> {
        let method = self.method("SendStreamingMessage", "message/stream");
        let resp = self
            .request(method, self.message_params(m))
            .header("Accept", "text/event-stream")
            .send()
            .await
            .map_err(|e| err(format!("{method}: {e}")))?;
        let status = resp.status();
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            // An error (or a server that answered without streaming): one JSON-RPC response.
            let body: Value = resp
                .json()
                .await
                .map_err(|e| err(format!("{method}: HTTP {status}, unreadable answer: {e}")))?;
            on_update(parse_result(&rpc_result(method, body)?)?);
            return Ok(());
        }
        let mut bytes = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut data = String::new();
        loop {
            let chunk = match tokio::time::timeout(idle, bytes.next()).await {
                Err(_) => return Err(err(format!("{method}: no event for {} s", idle.as_secs()))),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => return Err(err(format!("{method}: stream broken: {e}"))),
                Ok(Some(Ok(c))) => c,
            };
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let line = String::from_utf8_lossy(&line);
                let line = line.trim_end_matches(['\n', '\r']);
                if line.is_empty() {
                    if !data.is_empty() {
                        let event: Value = serde_json::from_str(&data)
                            .map_err(|e| err(format!("{method}: bad event: {e}")))?;
                        data.clear();
                        let update = parse_result(&rpc_result(method, event)?)?;
                        let done = update.is_message
                            || update
                                .state
                                .is_some_and(|s| s.is_terminal() || s.is_interrupted());
                        on_update(update);
                        if done {
                            return Ok(());
                        }
                    }
                } else if let Some(d) = line.strip_prefix("data:") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(d.strip_prefix(' ').unwrap_or(d));
                }
            }
        }
    }

    pub async fn get_task(&self, id: &str, timeout: Duration) -> Result<Update> {
        let v = self
            .call(
                self.method("GetTask", "tasks/get"),
                json!({"id": id}),
                timeout,
            )
            .await?;
        parse_result(&v)
    }

    pub async fn cancel_task(&self, id: &str, timeout: Duration) -> Result<Update> {
        let v = self
            .call(
                self.method("CancelTask", "tasks/cancel"),
                json!({"id": id}),
                timeout,
            )
            .await?;
        parse_result(&v)
    }
}

fn rpc_result(method: &str, body: Value) -> Result<Value> {
    if let Some(e) = body.get("error") {
        let code = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("error");
        return Err(err(format!(
            "{method}: the agent answered error {code}: {msg}"
        )));
    }
    body.get("result")
        .cloned()
        .ok_or_else(|| err(format!("{method}: the answer has neither result nor error")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> reqwest::Url {
        reqwest::Url::parse("http://127.0.0.1:9/.well-known/agent-card.json").unwrap()
    }

    #[test]
    fn v1_interface_is_preferred_and_v03_url_is_the_fallback() {
        let card = json!({"name": "a", "supportedInterfaces": [
            {"url": "http://127.0.0.1:9/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://127.0.0.1:9/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://127.0.0.1:9/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "url": "http://127.0.0.1:9/legacy"});
        let c = parse_card(&card, &base()).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.version),
            ("http://127.0.0.1:9/v1", Version::V1)
        );
        let legacy = json!({"name": "a", "url": "/rpc", "preferredTransport": "JSONRPC", "protocolVersion": "0.3",
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}]});
        let c = parse_card(&legacy, &base()).unwrap();
        assert_eq!(
            (c.endpoint.as_str(), c.version),
            ("http://127.0.0.1:9/rpc", Version::V03)
        );
        assert_eq!(c.skills[0].tags, vec!["t"]);
        let grpc_only = json!({"name": "a", "url": "http://x", "preferredTransport": "GRPC"});
        assert!(
            parse_card(&grpc_only, &base())
                .unwrap_err()
                .0
                .contains("no JSON-RPC")
        );
    }

    #[test]
    fn states_and_results_of_both_versions_are_normalised() {
        assert_eq!(
            TaskState::parse("TASK_STATE_INPUT_REQUIRED"),
            TaskState::InputRequired
        );
        assert_eq!(TaskState::parse("input-required"), TaskState::InputRequired);
        assert_eq!(TaskState::parse("cancelled"), TaskState::Canceled);
        let v1 = json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING",
            "message": {"parts": [{"text": "hi"}]}}}});
        let u = parse_result(&v1).unwrap();
        assert_eq!(
            (u.state, u.status_text.as_deref()),
            (Some(TaskState::Working), Some("hi"))
        );
        let v03 = json!({"kind": "artifact-update", "taskId": "t", "artifact": {"parts": [{"kind": "text", "text": "a"}]}});
        assert_eq!(parse_result(&v03).unwrap().artifact_text, vec!["a"]);
        assert!(parse_result(&json!({"x": 1})).is_err());
    }
}
