//! A2A client over reqwest: agent cards (v1.0 `supportedInterfaces`, v0.3 `url`/`preferredTransport`, the
//! `agent-card.json` and older `agent.json` locations) and the JSON-RPC binding of both protocol versions
//! (v1.0 `SendMessage`/`SendStreamingMessage`/`GetTask`/`CancelTask` with `A2A-Version: 1.0`; v0.3 `message/send`,
//! `message/stream`, `tasks/get`, `tasks/cancel`), with streamed answers read from Server-Sent Events.
//!
//! Every wire shape is normalised here into [`Update`]s and [`TaskState`]s, so nothing above knows the version.

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

/// Which JSON-RPC dialect an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Version {
    #[serde(rename = "1.0")]
    V1,
    #[serde(rename = "0.3")]
    V03,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1 => "1.0",
            Version::V03 => "0.3",
        }
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
}

/// What agent-discover keeps of an agent card.
#[derive(Debug, Clone, PartialEq)]
pub struct Card {
    pub name: String,
    pub description: String,
    /// The JSON-RPC endpoint chosen (v1.0 preferred when offered).
    pub endpoint: String,
    pub version: Version,
    pub streaming: bool,
    pub skills: Vec<Skill>,
    /// From the providers extension, each entry normalised (`kind` defaults to `llm`).
    pub providers: Option<Vec<Value>>,
    pub default_provider: Option<String>,
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn is_jsonrpc(binding: Option<&str>) -> bool {
    binding.is_none_or(|b| b.eq_ignore_ascii_case("JSONRPC"))
}

/// Parses a card of either version. `base` resolves a relative endpoint URL.
pub fn parse_card(card: &Value, base: &reqwest::Url) -> Result<Card> {
    if !card.is_object() {
        return Err(err("the agent card is not a JSON object"));
    }
    let name = str_of(card, "name");
    if name.is_empty() {
        return Err(err("the agent card has no `name`"));
    }
    let mut chosen: Option<(String, Version)> = None;
    if let Some(ifaces) = card.get("supportedInterfaces").and_then(Value::as_array) {
        let jsonrpc = |v: &Value| is_jsonrpc(v.get("protocolBinding").and_then(Value::as_str));
        let version_of = |v: &Value| {
            v.get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("1.0")
                .to_owned()
        };
        chosen = ifaces
            .iter()
            .filter(|i| jsonrpc(i) && version_of(i).starts_with("1."))
            .map(|i| (str_of(i, "url"), Version::V1))
            .chain(
                ifaces
                    .iter()
                    .filter(|i| jsonrpc(i) && version_of(i).starts_with("0."))
                    .map(|i| (str_of(i, "url"), Version::V03)),
            )
            .find(|(u, _)| !u.is_empty());
    }
    if chosen.is_none() {
        let url = str_of(card, "url");
        let preferred = card.get("preferredTransport").and_then(Value::as_str);
        if !url.is_empty() && is_jsonrpc(preferred) {
            chosen = Some((url, Version::V03));
        } else if let Some(extra) = card.get("additionalInterfaces").and_then(Value::as_array) {
            chosen = extra
                .iter()
                .find(|i| {
                    is_jsonrpc(i.get("transport").and_then(Value::as_str))
                        && !str_of(i, "url").is_empty()
                })
                .map(|i| (str_of(i, "url"), Version::V03));
        }
    }
    let Some((url, version)) = chosen else {
        return Err(err(format!(
            "agent card `{name}` offers no JSON-RPC interface (only JSON-RPC is supported)"
        )));
    };
    let endpoint = base.join(&url).map_err(|e| {
        err(format!(
            "agent card `{name}`: bad interface URL `{url}`: {e}"
        ))
    })?;
    if !matches!(endpoint.scheme(), "http" | "https") {
        return Err(err(format!(
            "agent card `{name}`: interface URL `{endpoint}` is not http(s)"
        )));
    }
    let caps = card.get("capabilities").cloned().unwrap_or(Value::Null);
    let skills = card
        .get("skills")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|s| !str_of(s, "id").is_empty())
                .map(|s| Skill {
                    id: str_of(s, "id"),
                    name: str_of(s, "name"),
                    description: str_of(s, "description"),
                    tags: s
                        .get("tags")
                        .and_then(Value::as_array)
                        .map(|t| {
                            t.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let ext = caps
        .get("extensions")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|e| e.get("uri").and_then(Value::as_str) == Some(PROVIDERS_EXTENSION))
        })
        .and_then(|e| e.get("params"));
    let providers = ext
        .and_then(|p| p.get("providers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|p| !str_of(p, "id").is_empty())
                .map(normalise_provider)
                .collect::<Vec<_>>()
        });
    let default_provider = ext
        .and_then(|p| p.get("defaultProviderId"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Card {
        name,
        description: str_of(card, "description"),
        endpoint: endpoint.to_string(),
        version,
        streaming: caps
            .get("streaming")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        skills,
        providers: providers.filter(|p| !p.is_empty()),
        default_provider,
    })
}

/// A provider entry as seed 003 shows it: `id`, `models`, `kind` (default `llm`), and `capabilities`,
/// `displayName`, `description` only when reported.
fn normalise_provider(p: &Value) -> Value {
    let mut out = json!({
        "id": str_of(p, "id"),
        "models": p.get("models").filter(|m| m.is_array()).cloned().unwrap_or_else(|| json!([])),
        "kind": p.get("kind").and_then(Value::as_str).unwrap_or("llm"),
    });
    if let Some(c) = p.get("capabilities").filter(|c| c.is_object()) {
        let flag = |k: &str| c.get(k).and_then(Value::as_bool).unwrap_or(false);
        out["capabilities"] = json!({
            "streaming": flag("streaming"), "tools": flag("tools"), "vision": flag("vision"), "jsonMode": flag("jsonMode"),
        });
    }
    for k in ["displayName", "description"] {
        if let Some(s) = p.get(k).and_then(Value::as_str) {
            out[k] = json!(s);
        }
    }
    out
}

/// A task's state, whatever the version spelled it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    Unknown,
}

impl TaskState {
    pub fn parse(s: &str) -> TaskState {
        let s = s
            .trim_start_matches("TASK_STATE_")
            .to_ascii_lowercase()
            .replace('_', "-");
        match s.as_str() {
            "submitted" => TaskState::Submitted,
            "working" => TaskState::Working,
            "input-required" => TaskState::InputRequired,
            "auth-required" => TaskState::AuthRequired,
            "completed" => TaskState::Completed,
            "canceled" | "cancelled" => TaskState::Canceled,
            "failed" | "error" => TaskState::Failed,
            "rejected" => TaskState::Rejected,
            _ => TaskState::Unknown,
        }
    }

    /// The task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Canceled | TaskState::Failed | TaskState::Rejected
        )
    }

    /// The agent stopped and waits for the caller.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// One thing an agent said, normalised from any response or stream event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Text of a status message or a direct message (shown as progress).
    pub status_text: Option<String>,
    /// Text of artifacts (the answer).
    pub artifact_text: Vec<String>,
    /// A direct `Message` answer (no task).
    pub is_message: bool,
}

fn parts_text(parts: Option<&Value>) -> Option<String> {
    let text: Vec<&str> = parts?
        .as_array()?
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// A string field of `v`, owned.
fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The state and the status message's text of a `TaskStatus`.
fn status_of(status: Option<&Value>) -> (Option<TaskState>, Option<String>) {
    let state = status
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .map(TaskState::parse);
    let text = status
        .and_then(|s| s.get("message"))
        .and_then(|m| parts_text(m.get("parts")));
    (state, text)
}

fn task_update(task: &Value) -> Update {
    let (state, status_text) = status_of(task.get("status"));
    Update {
        task_id: string(task, "id"),
        context_id: string(task, "contextId"),
        state,
        status_text,
        artifact_text: task
            .get("artifacts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| parts_text(x.get("parts")))
                    .collect()
            })
            .unwrap_or_default(),
        is_message: false,
    }
}

fn message_update(m: &Value) -> Update {
    Update {
        task_id: string(m, "taskId"),
        context_id: string(m, "contextId"),
        state: None,
        status_text: None,
        artifact_text: parts_text(m.get("parts")).into_iter().collect(),
        is_message: true,
    }
}

fn status_update(e: &Value) -> Update {
    let (state, status_text) = status_of(e.get("status"));
    Update {
        task_id: string(e, "taskId"),
        context_id: string(e, "contextId"),
        state,
        status_text,
        ..Update::default()
    }
}

fn artifact_update(e: &Value) -> Update {
    Update {
        task_id: string(e, "taskId"),
        context_id: string(e, "contextId"),
        artifact_text: parts_text(e.get("artifact").and_then(|a| a.get("parts")))
            .into_iter()
            .collect(),
        ..Update::default()
    }
}

/// Normalises a `result`: v1.0 wraps it (`{task}`, `{message}`, `{statusUpdate}`, `{artifactUpdate}`), v0.3 tags it
/// with `kind` (`task`, `message`, `status-update`, `artifact-update`); a bare v1.0 `Task` (GetTask, CancelTask)
/// has `id` and `status`.
pub fn parse_result(r: &Value) -> Result<Update> {
    if let Some(t) = r.get("task") {
        return Ok(task_update(t));
    }
    if let Some(m) = r.get("message") {
        return Ok(message_update(m));
    }
    if let Some(e) = r.get("statusUpdate") {
        return Ok(status_update(e));
    }
    if let Some(e) = r.get("artifactUpdate") {
        return Ok(artifact_update(e));
    }
    match r.get("kind").and_then(Value::as_str) {
        Some("task") => Ok(task_update(r)),
        Some("message") => Ok(message_update(r)),
        Some("status-update") => Ok(status_update(r)),
        Some("artifact-update") => Ok(artifact_update(r)),
        _ if r.get("id").is_some() && r.get("status").is_some() => Ok(task_update(r)),
        _ => Err(err(format!(
            "unexpected A2A result: {}",
            crate::model::truncate_for_message(&r.to_string())
        ))),
    }
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
    let b = crate::secrets::random_bytes();
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
