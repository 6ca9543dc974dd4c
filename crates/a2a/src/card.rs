//! Agent cards of both A2A versions read into one [`Card`]: v1.0 `supportedInterfaces`, v0.3 `url` /
//! `preferredTransport` / `additionalInterfaces`, skills, and the providers extension.

use serde_json::{Value, json};

use super::{PROVIDERS_EXTENSION, Result, err};

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
