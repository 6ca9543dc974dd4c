//! Rendering servers into a client's config file format, secrets written as references to environment variables.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::format::Format;
use crate::vars::{Ref, scan};
use ad_core::error::{Error, Result};
use ad_core::model::{ServerSpec, Transport};

/// A server to write into a client file: its spec and the secret keys it has (written as references, never values).
#[derive(Debug, Clone)]
pub struct ExportServer {
    pub spec: ServerSpec,
    pub secret_keys: Vec<String>,
}

/// A rendered file and the servers the format cannot express.
#[derive(Debug, Clone, Serialize)]
pub struct Rendered {
    pub text: String,
    pub skipped: Vec<Skipped>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub server: String,
    pub reason: String,
}

/// The reference syntax a format reads for environment variable `k`.
fn reference(format: Format, k: &str) -> String {
    match format {
        Format::Vscode | Format::Cursor => format!("${{env:{k}}}"),
        _ => format!("${{{k}}}"),
    }
}

/// `${KEY}` placeholders in headers/URLs, in this format's syntax.
fn placeholders(format: Format, s: &str) -> String {
    match format {
        Format::Vscode | Format::Cursor => match scan(s) {
            Ok(parts) => parts
                .into_iter()
                .map(|p| match p {
                    Ok(t) => t,
                    Err((
                        Ref::Env {
                            name,
                            default: None,
                        },
                        _,
                    )) => reference(format, &name),
                    Err((_, whole)) => whole,
                })
                .collect(),
            Err(_) => s.to_owned(),
        },
        _ => s.to_owned(),
    }
}

/// Renders servers in a client's format (a complete file).
pub fn render(format: Format, servers: &[ExportServer]) -> Result<Rendered> {
    // Servers by name, whatever order maps keep (serde_json's preserves insertion order in this build).
    let mut sorted: Vec<&ExportServer> = servers.iter().collect();
    sorted.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
    let servers = sorted;
    let mut skipped = Vec::new();
    if format == Format::Codex {
        let mut root = toml::Table::new();
        let mut all = toml::Table::new();
        for s in servers {
            let spec = &s.spec;
            let mut t = toml::Table::new();
            match spec.transport {
                Transport::Sse => {
                    skipped.push(Skipped {
                        server: spec.name.clone(),
                        reason: "Codex connects to stdio and streamable HTTP servers only, not SSE"
                            .into(),
                    });
                    continue;
                }
                Transport::StreamableHttp => {
                    t.insert("url".into(), spec.url.clone().unwrap_or_default().into());
                    if !spec.headers.is_empty() {
                        let mut h = toml::Table::new();
                        for (k, v) in &spec.headers {
                            h.insert(k.clone(), v.clone().into());
                        }
                        t.insert("http_headers".into(), h.into());
                    }
                }
                Transport::Stdio => {
                    t.insert(
                        "command".into(),
                        spec.command.clone().unwrap_or_default().into(),
                    );
                    if !spec.args.is_empty() {
                        t.insert(
                            "args".into(),
                            spec.args
                                .iter()
                                .cloned()
                                .map(toml::Value::from)
                                .collect::<Vec<_>>()
                                .into(),
                        );
                    }
                }
            }
            if !spec.env.is_empty() {
                let mut e = toml::Table::new();
                for (k, v) in &spec.env {
                    e.insert(k.clone(), v.clone().into());
                }
                t.insert("env".into(), e.into());
            }
            let env_secrets: Vec<toml::Value> = s
                .secret_keys
                .iter()
                .filter(|k| !uses_placeholder(spec, k))
                .map(|k| toml::Value::from(k.clone()))
                .collect();
            if !env_secrets.is_empty() {
                t.insert("env_vars".into(), env_secrets.into());
            }
            all.insert(spec.name.clone(), t.into());
        }
        root.insert("mcp_servers".into(), all.into());
        let text =
            toml::to_string(&root).map_err(|e| Error::Internal(format!("rendering TOML: {e}")))?;
        return Ok(Rendered { text, skipped });
    }
    let mut all = Map::new();
    for s in servers {
        let spec = &s.spec;
        let mut o = Map::new();
        match spec.transport {
            Transport::Stdio => {
                if matches!(
                    format,
                    Format::Vscode | Format::ClaudeCode | Format::ClaudeUser
                ) {
                    o.insert("type".into(), "stdio".into());
                }
                o.insert(
                    "command".into(),
                    spec.command.clone().unwrap_or_default().into(),
                );
                if !spec.args.is_empty() {
                    o.insert("args".into(), spec.args.clone().into());
                }
            }
            Transport::StreamableHttp | Transport::Sse => {
                let url = placeholders(format, spec.url.as_deref().unwrap_or_default());
                let sse = spec.transport == Transport::Sse;
                match format {
                    Format::Gemini => {
                        o.insert(if sse { "url" } else { "httpUrl" }.into(), url.into());
                    }
                    Format::Windsurf => {
                        if sse {
                            o.insert("type".into(), "sse".into());
                        }
                        o.insert("serverUrl".into(), url.into());
                    }
                    Format::Cursor => {
                        if sse {
                            o.insert("type".into(), "sse".into());
                        }
                        o.insert("url".into(), url.into());
                    }
                    _ => {
                        o.insert("type".into(), if sse { "sse" } else { "http" }.into());
                        o.insert("url".into(), url.into());
                    }
                }
                if !spec.headers.is_empty() {
                    let h: Map<String, Value> = spec
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), placeholders(format, v).into()))
                        .collect();
                    o.insert("headers".into(), h.into());
                }
            }
        }
        let mut env: Map<String, Value> = spec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().into()))
            .collect();
        for k in &s.secret_keys {
            if !uses_placeholder(spec, k) {
                env.insert(k.clone(), reference(format, k).into());
            }
        }
        if !env.is_empty() {
            o.insert("env".into(), env.into());
        }
        if format == Format::Gemini && !spec.description.is_empty() {
            o.insert("description".into(), spec.description.clone().into());
        }
        all.insert(spec.name.clone(), o.into());
    }
    let key = if format == Format::Vscode {
        "servers"
    } else {
        "mcpServers"
    };
    let mut root = Map::new();
    root.insert(key.into(), all.into());
    let mut text = serde_json::to_string_pretty(&Value::Object(root))
        .map_err(|e| Error::Internal(e.to_string()))?;
    text.push('\n');
    Ok(Rendered { text, skipped })
}

/// Whether secret `k` is used through a `${k}` placeholder in the URL or a header (rather than as an env value).
fn uses_placeholder(spec: &ServerSpec, k: &str) -> bool {
    let p = format!("${{{k}}}");
    spec.url.as_deref().is_some_and(|u| u.contains(&p))
        || spec.headers.values().any(|v| v.contains(&p))
}
