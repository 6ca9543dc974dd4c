//! Reading and parsing a client file: the size limits, the JSON (with comments where the client allows them) and
//! TOML documents, duplicate names refused, names mapped onto our rules and made unique; each entry is turned into a
//! spec by `entry.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::entry::entry;
use crate::format::Format;
use crate::jsonc;
use crate::types::{Env, Imported, InputDef, Renamed, bad};
use ad_core::error::Result;
use ad_core::model::{ServerName, limits, truncate_for_message};

/// Files larger than this are refused before parsing (`~/.claude.json` keeps history, so it is not tiny).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// More servers than this in one file is refused.
pub const MAX_SERVERS: usize = 2000;

/// Reads `path` with the size limit, for [`parse`].
pub fn read(path: &Path) -> Result<String> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path)
        .map_err(|e| bad(&shown, None, None, format!("cannot read: {e}")))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(bad(
            &shown,
            None,
            None,
            format!("{} bytes is over the limit of {MAX_FILE_BYTES}", meta.len()),
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| bad(&shown, None, None, format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|_| bad(&shown, None, None, "not UTF-8 text"))
}

/// Object entries in file order; a name given twice is an error (serde_json would keep the last silently).
struct Entries<T>(Vec<(String, T)>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Entries<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Entries<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of servers by name")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Entries<T>, A::Error> {
                let mut out: Vec<(String, T)> = Vec::new();
                let mut seen = BTreeSet::new();
                while let Some(k) = map.next_key::<String>()? {
                    if out.len() >= MAX_SERVERS {
                        return Err(serde::de::Error::custom(format!(
                            "more than {MAX_SERVERS} servers in one file"
                        )));
                    }
                    if !seen.insert(k.clone()) {
                        return Err(serde::de::Error::custom(format!(
                            "server `{}` is defined twice",
                            truncate_for_message(&k)
                        )));
                    }
                    let v = map.next_value::<T>()?;
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
struct JsonDoc {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Entries<Value>>,
    servers: Option<Entries<Value>>,
    inputs: Option<Vec<Value>>,
    projects: Option<Entries<ProjectDoc>>,
}

#[derive(serde::Deserialize)]
struct ProjectDoc {
    #[serde(rename = "mcpServers")]
    mcp_servers: Option<Entries<Value>>,
}

#[derive(serde::Deserialize)]
struct CodexDoc {
    mcp_servers: Option<toml::Table>,
}

/// Parses a client file. `file` names it in errors; every error names the file, and the server and field when known.
pub fn parse(format: Format, file: &str, text: &str, env: &Env) -> Result<Imported> {
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(bad(
            file,
            None,
            None,
            format!("{} bytes is over the limit of {MAX_FILE_BYTES}", text.len()),
        ));
    }
    let mut inputs: BTreeMap<String, InputDef> = BTreeMap::new();
    let mut entries: Vec<(String, Value)> = Vec::new();
    if format == Format::Codex {
        let doc: CodexDoc = toml::from_str(text)
            .map_err(|e| bad(file, None, None, format!("not valid TOML: {e}")))?;
        let table = doc.mcp_servers.unwrap_or_default();
        if table.len() > MAX_SERVERS {
            return Err(bad(
                file,
                None,
                Some("mcp_servers"),
                format!("more than {MAX_SERVERS} servers in one file"),
            ));
        }
        for (name, v) in table {
            let v = serde_json::to_value(&v).map_err(|e| bad(file, Some(&name), None, e))?;
            entries.push((name, v));
        }
    } else {
        let cleaned;
        let json = if format.allows_comments() {
            cleaned = jsonc::strip(text);
            cleaned.as_str()
        } else {
            text
        };
        if !json.trim_start().starts_with('{') {
            return Err(bad(file, None, None, "not a JSON object"));
        }
        let doc: JsonDoc = serde_json::from_str(json).map_err(|e| {
            let hint = if !format.allows_comments() && (text.contains("//") || text.contains("/*"))
            {
                " (this client's file does not allow comments)"
            } else {
                ""
            };
            bad(file, None, None, format!("not valid JSON: {e}{hint}"))
        })?;
        let main = if format == Format::Vscode {
            doc.servers
        } else {
            doc.mcp_servers
        };
        entries.extend(main.map(|e| e.0).unwrap_or_default());
        if format == Format::ClaudeUser {
            for (_dir, project) in doc.projects.map(|p| p.0).unwrap_or_default() {
                entries.extend(project.mcp_servers.map(|e| e.0).unwrap_or_default());
            }
        }
        if entries.len() > MAX_SERVERS {
            return Err(bad(
                file,
                None,
                None,
                format!("more than {MAX_SERVERS} servers in one file"),
            ));
        }
        for (i, input) in doc.inputs.unwrap_or_default().into_iter().enumerate() {
            let field = format!("inputs[{i}]");
            let Some(id) = input.get("id").and_then(Value::as_str) else {
                return Err(bad(
                    file,
                    None,
                    Some(&field),
                    "an input needs a string `id`",
                ));
            };
            inputs.insert(
                id.to_owned(),
                InputDef {
                    description: input
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    password: input
                        .get("password")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                },
            );
        }
    }

    let mut out = Imported {
        format,
        file: file.to_owned(),
        servers: Vec::new(),
        renamed: Vec::new(),
        needs_input: Vec::new(),
        warnings: Vec::new(),
    };
    let mut taken: BTreeSet<String> = BTreeSet::new();
    // A name used in two scopes of `~/.claude.json` (user and a project) gets a suffix, like a mapped name.
    for (raw_name, value) in entries {
        let name = unique_name(&map_name(&raw_name), &taken);
        taken.insert(name.clone());
        if name != raw_name {
            out.renamed.push(Renamed {
                from: raw_name.clone(),
                to: name.clone(),
            });
        }
        let server = entry(format, file, &raw_name, name, value, env, &inputs, &mut out)?;
        out.servers.push(server);
    }
    Ok(out)
}

/// Maps a name our rules reject onto one they accept, the same way every time.
pub fn map_name(raw: &str) -> String {
    if raw.parse::<ServerName>().is_ok() {
        return raw.to_owned();
    }
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    // Runs of '-' from replaced characters read badly; keep one.
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    let mut s: String = s.chars().take(limits::NAME).collect();
    while s.ends_with('_') || s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() { "server".to_owned() } else { s }
}

pub(crate) fn unique_name(base: &str, taken: &BTreeSet<String>) -> String {
    if !taken.contains(base) {
        return base.to_owned();
    }
    for n in 2.. {
        let suffix = format!("-{n}");
        let keep = limits::NAME - suffix.len();
        let mut b: String = base.chars().take(keep).collect();
        while b.ends_with('_') {
            b.pop();
        }
        let candidate = format!("{b}{suffix}");
        if !taken.contains(&candidate) {
            return candidate;
        }
    }
    unreachable!("some suffix is free")
}
