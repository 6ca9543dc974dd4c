//! Unit tests of the client config parser and renderer over in-memory text.

use super::*;
use crate::parse::unique_name;
use ad_core::error::Result;
use ad_core::model::{ServerName, ServerSpec, Transport};
use std::collections::BTreeSet;

fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

fn parse_with(
    format: Format,
    text: &str,
    vars: &'static [(&'static str, &'static str)],
) -> Result<Imported> {
    let var = env_with(vars);
    let env = Env {
        var: &var,
        workspace: Some("/proj".into()),
        home: Some("/home/u".into()),
    };
    parse(format, "test.json", text, &env)
}

#[test]
fn claude_desktop_stdio_with_env_secret() {
    let text = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "srv", "/tmp"], "env": {"TOKEN": "${TOKEN}", "PLAIN": "1"}}}, "globalShortcut": "x"}"#;
    let got = parse_with(Format::ClaudeDesktop, text, &[("TOKEN", "s3cret")]).unwrap();
    let s = &got.servers[0];
    assert_eq!(s.spec.name, "fs");
    assert_eq!(s.spec.command.as_deref(), Some("npx"));
    assert_eq!(s.spec.args, ["-y", "srv", "/tmp"]);
    assert_eq!(s.spec.env.get("PLAIN").map(String::as_str), Some("1"));
    assert!(
        !s.spec.env.contains_key("TOKEN"),
        "a referenced value never stays in env"
    );
    assert_eq!(s.secrets.get("TOKEN").map(String::as_str), Some("s3cret"));
    assert!(got.needs_input.is_empty());
}

#[test]
fn missing_variable_is_reported_as_needs_input() {
    let text = r#"{"mcpServers": {"gh": {"type": "http", "url": "https://api.example.test/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}}}"#;
    let got = parse_with(Format::ClaudeCode, text, &[]).unwrap();
    let s = &got.servers[0];
    assert_eq!(s.spec.transport, Transport::StreamableHttp);
    assert_eq!(s.spec.headers["Authorization"], "Bearer ${GH_TOKEN}");
    assert_eq!(s.secret_keys, ["GH_TOKEN"]);
    assert!(s.secrets.is_empty());
    assert_eq!(got.needs_input.len(), 1);
    assert_eq!(got.needs_input[0].key, "GH_TOKEN");
    assert_eq!(got.needs_input[0].field, "headers.Authorization");
}

#[test]
fn vscode_inputs_comments_and_undefined_input() {
    let text = r#"{
  // comment
  "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
  "servers": {
    "x": {"type": "stdio", "command": "node", "args": ["${workspaceFolder}/s.js"], "env": {"KEY": "${input:api-key}"},},
  },
}"#;
    let got = parse_with(Format::Vscode, text, &[]).unwrap();
    assert_eq!(got.servers[0].spec.args, ["/proj/s.js"]);
    assert_eq!(got.needs_input[0].description.as_deref(), Some("API key"));
    assert!(got.needs_input[0].password);
    let bad = text.replace("${input:api-key}", "${input:nope}");
    let e = parse_with(Format::Vscode, &bad, &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("test.json")
            && e.contains("`x`")
            && e.contains("env.KEY")
            && e.contains("${input:nope}"),
        "{e}"
    );
    let empty = text.replace("${input:api-key}", "${input:}");
    let e = parse_with(Format::Vscode, &empty, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("names no input"), "{e}");
}

#[test]
fn errors_name_file_server_and_field() {
    let e = parse_with(
        Format::Cursor,
        r#"{"mcpServers": {"a": {"command": "x", "bogus": 1}}}"#,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("test.json")
            && e.contains("`a`")
            && e.contains("`bogus`")
            && e.contains("unknown field"),
        "{e}"
    );
    let e = parse_with(
        Format::Cursor,
        r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("defined twice"), "{e}");
    let e = parse_with(
        Format::Cursor,
        r#"{"mcpServers": {"a": {"command": "sh -c 'rm -rf /'"}}}"#,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`a`") && e.contains("command") && e.contains("shell"),
        "{e}"
    );
    let e = parse_with(
        Format::Cursor,
        r#"{"mcpServers": {"a": {"command": "x", "args": ["--k", "${KEY}"]}}}"#,
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("args[1]"), "{e}");
    let e = parse_with(
        Format::ClaudeDesktop,
        "{\"mcpServers\": {\n\"a\": {\"command\": }}}",
        &[],
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not valid JSON") && e.contains("line 2"), "{e}");
    let e = parse_with(Format::Codex, "[mcp_servers.a\ncommand = 1", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not valid TOML"), "{e}");
    let e = parse_with(Format::Codex, "[mcp_servers.a]\ncommand = 1\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`a`") && e.contains("`command`") && e.contains("must be a string"),
        "{e}"
    );
}

#[test]
fn size_and_count_limits() {
    let big = format!(
        "{{\"mcpServers\": {{}}, \"pad\": \"{}\"}}",
        "x".repeat(5 * 1024 * 1024)
    );
    let e = parse_with(Format::ClaudeDesktop, &big, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("over the limit"), "{e}");
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("\"s{i}\": {{\"command\": \"x\"}}"))
        .collect();
    let text = format!("{{\"mcpServers\": {{{}}}}}", many.join(","));
    let e = parse_with(Format::Cursor, &text, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 2000 servers"), "{e}");
}

#[test]
fn hostile_names_are_mapped_deterministically_and_reported() {
    let text = r#"{"mcpServers": {"my server": {"command": "a"}, "my/server": {"command": "b"}, "$(rm -rf ~)": {"command": "c"}, "__x__": {"command": "d"}}}"#;
    let got = parse_with(Format::ClaudeCode, text, &[]).unwrap();
    let names: Vec<&str> = got.servers.iter().map(|s| s.spec.name.as_str()).collect();
    assert_eq!(names, ["my-server", "my-server-2", "rm-rf", "x"]);
    assert_eq!(got.renamed.len(), 4);
    assert_eq!(parse_with(Format::ClaudeCode, text, &[]).unwrap(), got);
    for n in names {
        n.parse::<ServerName>().unwrap();
    }
}

#[test]
fn claude_user_file_reads_user_and_project_scopes() {
    let text = r#"{"numStartups": 3, "mcpServers": {"u": {"type": "stdio", "command": "a"}}, "projects": {"/p": {"mcpServers": {"p": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}, "history": []}}}"#;
    let got = parse_with(Format::ClaudeUser, text, &[]).unwrap();
    let names: Vec<&str> = got.servers.iter().map(|s| s.spec.name.as_str()).collect();
    assert_eq!(names, ["u", "p"]);
    assert_eq!(got.servers[1].spec.transport, Transport::Sse);
}

#[test]
fn gemini_and_windsurf_url_fields() {
    let g = parse_with(Format::Gemini, r#"{"mcpServers": {"a": {"url": "http://h/sse"}, "b": {"httpUrl": "http://h/mcp", "timeout": 5}}}"#, &[]).unwrap();
    assert_eq!(g.servers[0].spec.transport, Transport::Sse);
    assert_eq!(g.servers[1].spec.transport, Transport::StreamableHttp);
    assert_eq!(g.warnings.len(), 1);
    let w = parse_with(
        Format::Windsurf,
        r#"{"mcpServers": {"a": {"serverUrl": "http://h/mcp"}}}"#,
        &[],
    )
    .unwrap();
    assert_eq!(w.servers[0].spec.url.as_deref(), Some("http://h/mcp"));
}

#[test]
fn codex_env_vars_and_bearer() {
    let text = "model = \"o3\"\n[mcp_servers.docs]\ncommand = \"docs-server\"\nargs = [\"--port\", \"0\"]\nenv_vars = [\"API_KEY\"]\n[mcp_servers.docs.env]\nMODE = \"ro\"\n[mcp_servers.remote]\nurl = \"http://h/mcp\"\nbearer_token_env_var = \"TOK\"\n";
    let got = parse_with(Format::Codex, text, &[("API_KEY", "k"), ("TOK", "t")]).unwrap();
    let docs = &got.servers[0];
    assert_eq!(docs.spec.env["MODE"], "ro");
    assert_eq!(docs.secrets["API_KEY"], "k");
    let remote = &got.servers[1];
    assert_eq!(remote.spec.headers["Authorization"], "Bearer ${TOK}");
    assert_eq!(remote.secrets["TOK"], "t");
}

#[test]
fn detection_by_path_and_content() {
    use std::path::Path;
    let d = |p: &str, t: &str| Format::detect(Path::new(p), t);
    assert_eq!(
        d("/h/.config/Claude/claude_desktop_config.json", ""),
        Some(Format::ClaudeDesktop)
    );
    assert_eq!(d("/h/.claude.json", ""), Some(Format::ClaudeUser));
    assert_eq!(d("/p/.mcp.json", ""), Some(Format::ClaudeCode));
    assert_eq!(d("/h/.cursor/mcp.json", ""), Some(Format::Cursor));
    assert_eq!(d("/p/.vscode/mcp.json", ""), Some(Format::Vscode));
    assert_eq!(
        d("/h/.codeium/windsurf/mcp_config.json", ""),
        Some(Format::Windsurf)
    );
    assert_eq!(d("/h/.codex/config.toml", ""), Some(Format::Codex));
    assert_eq!(d("/h/.gemini/settings.json", ""), Some(Format::Gemini));
    assert_eq!(d("/x/any.json", r#"{"servers": {}}"#), Some(Format::Vscode));
    assert_eq!(d("/x/any.json", "[]"), None);
}

fn sample() -> Vec<ExportServer> {
    let mut stdio = ServerSpec {
        name: "files".into(),
        command: Some("npx".into()),
        args: vec!["-y".into(), "@scope/server-files".into(), "/tmp".into()],
        ..ServerSpec::default()
    };
    stdio.env.insert("MODE".into(), "ro".into());
    let mut http = ServerSpec {
        name: "remote".into(),
        transport: Transport::StreamableHttp,
        url: Some("https://mcp.example.test/mcp".into()),
        ..ServerSpec::default()
    };
    http.headers
        .insert("Authorization".into(), "Bearer ${REMOTE_TOKEN}".into());
    let sse = ServerSpec {
        name: "events".into(),
        transport: Transport::Sse,
        url: Some("http://127.0.0.1:9/sse".into()),
        ..ServerSpec::default()
    };
    vec![
        ExportServer {
            spec: stdio,
            secret_keys: vec!["API_KEY".into()],
        },
        ExportServer {
            spec: http,
            secret_keys: vec!["REMOTE_TOKEN".into()],
        },
        ExportServer {
            spec: sse,
            secret_keys: vec![],
        },
    ]
}

#[test]
fn export_then_import_round_trips_for_every_format() {
    for format in Format::ALL {
        let rendered = render(format, &sample()).unwrap();
        let got = parse_with(
            format,
            &rendered.text,
            &[("API_KEY", "a"), ("REMOTE_TOKEN", "r")],
        )
        .unwrap_or_else(|e| panic!("{format}: {e}\n{}", rendered.text));
        let skipped: Vec<&str> = rendered.skipped.iter().map(|s| s.server.as_str()).collect();
        let mut want: Vec<ExportServer> = sample()
            .into_iter()
            .filter(|s| !skipped.contains(&s.spec.name.as_str()))
            .collect();
        // Rendered files list servers by name.
        want.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        assert_eq!(got.servers.len(), want.len(), "{format}");
        for (g, w) in got.servers.iter().zip(&want) {
            assert_eq!(g.spec, w.spec, "{format}\n{}", rendered.text);
            assert_eq!(g.secret_keys, w.secret_keys, "{format}");
            assert_eq!(
                g.secrets.len(),
                w.secret_keys.len(),
                "{format}: secret values found in the environment"
            );
        }
        assert!(
            got.renamed.is_empty() && got.needs_input.is_empty(),
            "{format}"
        );
        assert_eq!(
            render(format, &want).unwrap().text,
            rendered.text,
            "{format}: rendering is stable"
        );
    }
}

/// The example files under the workspace's tests/data/clientconfig, written from each client's documentation.
#[test]
fn example_files_of_every_client_parse() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/clientconfig");
    let cases: [(&str, Format, &[&str], usize); 8] = [
        (
            "claude-desktop/claude_desktop_config.json",
            Format::ClaudeDesktop,
            &["filesystem", "github"],
            1,
        ),
        (
            "claude-code/.mcp.json",
            Format::ClaudeCode,
            &["time", "api-server", "events"],
            1,
        ),
        (
            "claude-user/.claude.json",
            Format::ClaudeUser,
            &["everything", "sentry"],
            0,
        ),
        (
            "cursor/.cursor/mcp.json",
            Format::Cursor,
            &["web-search", "remote-notes"],
            2,
        ),
        (
            "vscode/.vscode/mcp.json",
            Format::Vscode,
            &["Perplexity", "local-files", "github"],
            1,
        ),
        (
            "windsurf/mcp_config.json",
            Format::Windsurf,
            &["google-maps", "figma"],
            2,
        ),
        (
            "codex/config.toml",
            Format::Codex,
            &["context7", "figma"],
            2,
        ),
        (
            "gemini/.gemini/settings.json",
            Format::Gemini,
            &["pythonTools", "httpServer", "sseServer"],
            3,
        ),
    ];
    for (rel, format, names, missing) in cases {
        let path = root.join(rel);
        let text = read(&path).unwrap();
        assert_eq!(Format::detect(&path, &text), Some(format), "{rel}");
        let got = parse_with(format, &text, &[]).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let mut got_names: Vec<&str> = got
            .servers
            .iter()
            .map(|s| s.original_name.as_str())
            .collect();
        let mut want: Vec<&str> = names.to_vec();
        if format == Format::Codex {
            want.sort();
            got_names.sort();
        }
        assert_eq!(got_names, want, "{rel}");
        assert_eq!(
            got.needs_input.len(),
            missing,
            "{rel}: {:?}",
            got.needs_input
        );
    }
}

#[test]
fn gemini_bare_dollar_references() {
    let got = parse_with(
        Format::Gemini,
        r#"{"mcpServers": {"a": {"command": "x", "env": {"DB": "$DB_URL"}}}}"#,
        &[("DB_URL", "pg://")],
    )
    .unwrap();
    assert_eq!(got.servers[0].secrets["DB"], "pg://");
}

#[test]
fn the_same_name_in_two_scopes_is_renamed_not_lost() {
    let text = r#"{"mcpServers": {"db": {"command": "a"}}, "projects": {"/p": {"mcpServers": {"db": {"command": "b"}}}}}"#;
    let got = parse_with(Format::ClaudeUser, text, &[]).unwrap();
    let names: Vec<&str> = got.servers.iter().map(|s| s.spec.name.as_str()).collect();
    assert_eq!(names, ["db", "db-2"]);
    assert_eq!(
        got.renamed,
        [Renamed {
            from: "db".into(),
            to: "db-2".into()
        }]
    );
}

/// Pseudo-random names (a fixed xorshift sequence, so failures reproduce): every mapped name is one our rules
/// accept, mapping is idempotent, and names that were already valid are kept.
#[test]
fn mapped_names_are_always_valid() {
    let alphabet: Vec<char> = "aZ9._- /$`;|&()<>'\"\\\n\té字🙂_".chars().collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..5000 {
        let len = (next() % 90) as usize;
        let raw: String = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        let mapped = map_name(&raw);
        assert!(
            mapped.parse::<ServerName>().is_ok(),
            "{raw:?} -> {mapped:?}"
        );
        assert_eq!(map_name(&mapped), mapped);
        if raw.parse::<ServerName>().is_ok() {
            assert_eq!(mapped, raw);
        }
    }
    let mut taken = BTreeSet::new();
    let long = "x".repeat(64);
    taken.insert(long.clone());
    let second = unique_name(&long, &taken);
    assert!(
        second.len() <= 64 && second.ends_with("-2") && second.parse::<ServerName>().is_ok(),
        "{second}"
    );
}

#[test]
fn a_5_mb_file_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".mcp.json");
    std::fs::write(&path, vec![b' '; 5 * 1024 * 1024]).unwrap();
    let e = read(&path).unwrap_err().to_string();
    assert!(
        e.contains(".mcp.json") && e.contains("over the limit"),
        "{e}"
    );
}
