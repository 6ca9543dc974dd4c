//! Network allow-lists (`network: hosts:...`) from outside: a real MCP server written with the official Python SDK,
//! started confined by a real agent-discover, fetches a local test HTTP server (127.0.0.1) by host name through the
//! filtering proxy its environment names. The names are mapped to 127.0.0.1 by the proxy's resolver override
//! (`AGENT_DISCOVER_SANDBOX_RESOLVE`), so nothing touches `/etc/hosts`. An allowed name (exact and by wildcard, plain
//! HTTP and a CONNECT tunnel) is reached; a name not in the list, the same server by IP literal, an allowed name that
//! resolves to loopback without the override, and a grandchild process are refused, with the host named in the
//! server's error, its stderr (status) and the sandbox view; a direct connection that skips the proxy has no route.

use std::io::{Read, Write};
use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{self, Agent, cache_path};

const SERVER: &str = r#"
import os, socket, subprocess, sys, urllib.request
from mcp.server.mcpserver import MCPServer

mcp = MCPServer('net')

FETCH = r'''
import sys, urllib.request
try:
    print("ok: " + urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())
except Exception as e:
    print("refused: %s" % e)
'''

def fetch_url(url):
    try:
        return "ok: " + urllib.request.urlopen(url, timeout=20).read().decode()
    except Exception as e:
        return "refused: %s" % e

@mcp.tool()
def fetch(url: str) -> str:
    """Fetch a URL through the proxy the environment names."""
    return fetch_url(url)

@mcp.tool()
def grandchild(url: str) -> str:
    """Fetch a URL from a process this server starts."""
    out = subprocess.run([sys.executable, "-c", FETCH, url], capture_output=True, text=True, timeout=60)
    return (out.stdout.strip() or out.stderr.strip())

@mcp.tool()
def tunnel(host: str, port: int) -> str:
    """CONNECT host:port through the proxy, then GET / inside the tunnel."""
    proxy = os.environ["HTTPS_PROXY"].split("://", 1)[1].rstrip("/")
    ph, pp = proxy.rsplit(":", 1)
    s = socket.create_connection((ph, int(pp)), timeout=20)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n", 1)[0].decode()
    if " 200 " not in status + " ":
        return "refused: " + status
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    data = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return "ok: " + data.split(b"\r\n\r\n", 1)[1].decode()

@mcp.tool()
def direct(host: str, port: int) -> str:
    """Connect without the proxy."""
    try:
        socket.create_connection((host, port), timeout=5).close()
        return "ok: connected"
    except Exception as e:
        return "refused: %s" % e

@mcp.tool()
def env(name: str) -> str:
    """One variable of this server's environment."""
    return os.environ.get(name, "")

if __name__ == '__main__':
    if len(sys.argv) > 1:
        # Fetch at start, and stop when that fails (a server whose API is refused).
        out = fetch_url(sys.argv[1])
        if not out.startswith("ok: "):
            print(out, file=sys.stderr)
            sys.exit(1)
    mcp.run()
"#;

/// A plain HTTP server on 127.0.0.1 that answers every request with the `Host` it was asked for.
fn http_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&head).into_owned();
                let host = text
                    .lines()
                    .find_map(|l| {
                        l.split_once(':')
                            .filter(|(k, _)| k.eq_ignore_ascii_case("host"))
                            .map(|(_, v)| v.trim().to_owned())
                    })
                    .unwrap_or_default();
                let body = format!("hello {host}");
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            });
        }
    });
    port
}

async fn agent(dir: &Path) -> Agent {
    harness::spawn_env(
        dir,
        &[],
        None,
        &[(
            "AGENT_DISCOVER_SANDBOX_RESOLVE",
            "api.allowed.test=127.0.0.1,a.wild.test=127.0.0.1,evil.test=127.0.0.1".into(),
        )],
    )
    .await
}

async fn install(a: &Agent, name: &str, script: &Path, extra_args: &[String], env: Value) {
    let python = cache_path("venv/bin/python");
    let mut args = vec![script.display().to_string()];
    args.extend(extra_args.iter().cloned());
    a.registry(json!({"action": "install", "name": name, "command": python, "args": args, "env": env, "description": "network allow-list test server"}))
        .await;
}

async fn tool(a: &Agent, name: &str, args: Value) -> String {
    harness::text(&a.call(name, args).await)
}

fn refused(outcome: &str, host: &str, what: &str) {
    assert!(
        outcome.starts_with("refused: ") && outcome.contains(host),
        "{what}: expected a refusal naming {host}, got: {outcome}"
    );
}

fn refused_hosts(view: &Value) -> Vec<String> {
    view["refused_hosts"]
        .as_array()
        .unwrap_or_else(|| panic!("no refused_hosts in {view}"))
        .iter()
        .map(|r| r["host"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_server_reaches_allowed_hosts_only_and_refusals_name_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let script = src.path().join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let port = http_server();
    let a = agent(dir.path()).await;
    install(
        &a,
        "net",
        &script,
        &[],
        json!({"API_URL": "https://api.suggested.test/v1"}),
    )
    .await;
    let set = a
        .registry(json!({"action": "sandbox", "name": "net", "network": "hosts:api.allowed.test,*.wild.test,localhost"}))
        .await;
    assert_eq!(set["network"], "hosts", "{set}");
    assert_eq!(
        set["hosts"],
        json!(["api.allowed.test", "*.wild.test", "localhost"]),
        "{set}"
    );
    let suggested = set["suggested_hosts"].to_string();
    assert!(
        suggested.contains("api.suggested.test") && suggested.contains("\"env\""),
        "a host the server's configuration names is suggested: {set}"
    );
    assert!(
        !set["hosts"].to_string().contains("api.suggested.test"),
        "suggestions are never applied: {set}"
    );
    a.registry(json!({"action": "activate", "name": "net"}))
        .await;

    // The proxy is the only way out, and the environment names it.
    let proxy = tool(&a, "net__env", json!({"name": "HTTPS_PROXY"})).await;
    assert!(proxy.starts_with("http://127.0.0.1:"), "{proxy}");
    assert_eq!(
        tool(&a, "net__env", json!({"name": "http_proxy"})).await,
        proxy
    );

    // Allowed: by name, by wildcard, over a CONNECT tunnel, and from a grandchild.
    let ok = tool(
        &a,
        "net__fetch",
        json!({"url": format!("http://api.allowed.test:{port}/x")}),
    )
    .await;
    assert_eq!(ok, format!("ok: hello api.allowed.test:{port}"));
    let wild = tool(
        &a,
        "net__fetch",
        json!({"url": format!("http://a.wild.test:{port}/")}),
    )
    .await;
    assert_eq!(wild, format!("ok: hello a.wild.test:{port}"));
    let tunneled = tool(
        &a,
        "net__tunnel",
        json!({"host": "api.allowed.test", "port": port}),
    )
    .await;
    assert_eq!(tunneled, "ok: hello api.allowed.test");
    let grand_ok = tool(
        &a,
        "net__grandchild",
        json!({"url": format!("http://api.allowed.test:{port}/")}),
    )
    .await;
    assert_eq!(grand_ok, format!("ok: hello api.allowed.test:{port}"));

    // Refused, with the host named: a name not in the list (plain HTTP, CONNECT, a grandchild), the same server by IP
    // literal, and an allowed name that resolves to this machine's loopback.
    let evil = format!("evil.test:{port}");
    refused(
        &tool(
            &a,
            "net__fetch",
            json!({"url": format!("http://evil.test:{port}/")}),
        )
        .await,
        &evil,
        "a host not in the list",
    );
    refused(
        &tool(
            &a,
            "net__tunnel",
            json!({"host": "evil.test", "port": port}),
        )
        .await,
        &evil,
        "CONNECT to a host not in the list",
    );
    refused(
        &tool(
            &a,
            "net__grandchild",
            json!({"url": format!("http://evil.test:{port}/")}),
        )
        .await,
        &evil,
        "a grandchild fetching a host not in the list",
    );
    let literal = format!("127.0.0.1:{port}");
    refused(
        &tool(
            &a,
            "net__fetch",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        )
        .await,
        &literal,
        "the allowed server by IP literal",
    );
    refused(
        &tool(
            &a,
            "net__tunnel",
            json!({"host": "127.0.0.1", "port": port}),
        )
        .await,
        &literal,
        "CONNECT by IP literal",
    );
    refused(
        &tool(
            &a,
            "net__grandchild",
            json!({"url": format!("http://127.0.0.1:{port}/")}),
        )
        .await,
        &literal,
        "a grandchild by IP literal",
    );
    let loopback = format!("localhost:{port}");
    refused(
        &tool(
            &a,
            "net__fetch",
            json!({"url": format!("http://localhost:{port}/")}),
        )
        .await,
        &loopback,
        "an allowed name that resolves to loopback",
    );
    // Skipping the proxy leads nowhere: the namespace has no route out, and the host's loopback is not its own.
    let direct = tool(
        &a,
        "net__direct",
        json!({"host": "127.0.0.1", "port": port}),
    )
    .await;
    assert!(
        direct.starts_with("refused: "),
        "a direct connection by IP: {direct}"
    );
    let resolved = tool(
        &a,
        "net__direct",
        json!({"host": "api.allowed.test", "port": port}),
    )
    .await;
    assert!(
        resolved.starts_with("refused: "),
        "the child resolves no name itself: {resolved}"
    );

    // The refusals are recorded: the sandbox view lists them, and the server's stderr (status) names each host with
    // the command that allows it.
    let view = a
        .registry(json!({"action": "sandbox", "name": "net"}))
        .await;
    let hosts = refused_hosts(&view);
    for h in [&evil, &literal, &loopback] {
        assert!(hosts.contains(h), "{h} not in {hosts:?}");
    }
    assert!(
        !hosts.iter().any(|h| h.starts_with("api.allowed.test")),
        "{hosts:?}"
    );
    let status = a.registry(json!({"action": "status"})).await;
    let text = status.to_string();
    assert!(
        text.contains(&format!("refused a connection to {evil}"))
            && text.contains("--network hosts:api.allowed.test,*.wild.test,localhost,evil.test"),
        "status names the refused host and the fix: {status}"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_refused_its_api_names_the_host_in_its_error_and_in_sandbox_check() {
    let dir = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let script = src.path().join("server.py");
    std::fs::write(&script, SERVER).unwrap();
    let port = http_server();
    let a = agent(dir.path()).await;
    let url = format!("http://evil.test:{port}/");
    install(&a, "api", &script, &[url], json!({})).await;
    // Set through the CLI (a bad entry is refused naming it, and nothing is stored).
    let set = |network: &'static str| {
        let mut cmd = harness::command(
            dir.path(),
            &["sandbox", "set", "api", "--network", network, "--json"],
        );
        async move { cmd.output().await.expect("run agent-discover sandbox set") }
    };
    let bad = set("hosts:api.allowed.test,bad..name").await;
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("bad..name") && err.contains("network"),
        "{err}"
    );
    let ok = set("hosts:api.allowed.test:443").await;
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let view: Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_eq!(
        view["network_setting"], "hosts:api.allowed.test:443",
        "{view}"
    );
    let (is_error, v) = a
        .try_registry(json!({"action": "activate", "name": "api"}))
        .await
        .unwrap();
    assert!(is_error, "the start should fail: {v}");
    let text = v.to_string();
    assert!(
        text.contains(&format!("evil.test:{port}"))
            && text.contains("not in the network allow-list"),
        "the start's error names the refused host: {v}"
    );
    a.stop().await;

    // `sandbox check` from the CLI (its own run of the server) lists the refused host and the command that allows it.
    let mut cmd = harness::command(dir.path(), &["sandbox", "check", "api", "--json"]);
    cmd.env("AGENT_DISCOVER_SANDBOX_RESOLVE", "evil.test=127.0.0.1");
    let out = cmd
        .output()
        .await
        .expect("run agent-discover sandbox check");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(!out.status.success(), "the server did not start: {report}");
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(
        refused_hosts(&report),
        [format!("evil.test:{port}")],
        "{report}"
    );
    assert!(
        report["advice"]
            .as_str()
            .is_some_and(|a| a.contains("--network hosts:api.allowed.test:443,evil.test")),
        "{report}"
    );
}
