//! Identity benchmark (not a test, issue 30): what the front's authentication costs per request. Two parts:
//!
//! 1. Validation of one access token in this process (`ident::Identity::validate`, what the protected front runs on
//!    each request): a JWT signed ES256 and one signed RS256 (keys from the issuer's JWKS, fetched once and cached),
//!    and an opaque token introspected at the issuer (answer cached). The first call of each (discovery, JWKS fetch,
//!    introspection) is reported apart.
//! 2. `tools/list` end to end over HTTP (Streamable HTTP, one session per mode, the request posted as is) against `agent-discover serve` in each mode:
//!    no token (loopback), the static token (`--require-token`), and identity on with each kind of token. Modes take
//!    turns in rounds so all see the same load; reported: latency (median, p99) and the server's CPU per request.
//!
//! The authorization server is the integration tests' (`tests/it/ident_as.rs`), in this process.
//!
//! Run: `cargo build --release -p agent-discover && cargo bench --bench identity`.

#[allow(dead_code)]
#[path = "../tests/it/ident_as.rs"]
mod ident_as;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::io::AsyncBufReadExt;

use agent_discover::ident::introspect::Endpoint;
use agent_discover::ident::{Identity, IdentityConfig, Rules};
use ident_as::{RS_CLIENT, TestAs, User};

const VALIDATIONS: usize = 20_000;
const ROUNDS: usize = 5;
const LISTS_PER_ROUND: usize = 1000;
const WARMUP: usize = 200;
/// Linux reports CPU time in clock ticks of 10 ms.
const US_PER_TICK: f64 = 10_000.0;

fn release(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("target/release")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release -p agent-discover` first",
        p.display()
    );
    p
}

/// CPU time (user + system) of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `agent-discover serve --port 0` on `dir` with `args` and `env`; the child and its URL.
async fn serve(
    dir: &Path,
    args: &[&str],
    env: &[(&str, String)],
) -> (tokio::process::Child, String) {
    let mut cmd = tokio::process::Command::new(release("agent-discover"));
    cmd.arg("--data-dir")
        .arg(dir)
        .args(["serve", "--port", "0"])
        .args(args)
        .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
        .env("AGENT_DISCOVER_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut child = cmd.spawn().unwrap();
    let mut out = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), out.next_line())
        .await
        .expect("serve printed no URL")
        .unwrap()
        .expect("serve exited");
    (child, url.trim_end_matches('/').to_owned())
}

/// A session on `url`'s `/mcp` as `token`: initialized, then `tools/list` posted as is, so that what is timed is the
/// front's work and the HTTP round trip, not a client library's.
struct Session {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    id: String,
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;

impl Session {
    fn post(&self, body: &'static str, session: bool) -> reqwest::RequestBuilder {
        let mut req = self
            .http
            .post(format!("{}/mcp", self.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if session {
            req = req
                .header("mcp-session-id", &self.id)
                .header("mcp-protocol-version", "2025-11-25");
        }
        req
    }

    /// One `tools/list`; the length of the answer.
    async fn list(&self) -> usize {
        let resp = self.post(LIST, true).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = resp.text().await.unwrap();
        assert!(body.contains("\"tools\""), "{body}");
        body.len()
    }
}

async fn client(url: &str, token: Option<&str>) -> Session {
    let mut s = Session {
        http: reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .unwrap(),
        url: url.to_owned(),
        token: token.map(str::to_owned),
        id: String::new(),
    };
    let resp = s.post(INIT, false).send().await.unwrap();
    assert_eq!(resp.status(), 200, "initialize");
    s.id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = resp.text().await;
    let done = s
        .post(
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            true,
        )
        .send()
        .await
        .unwrap();
    assert!(done.status().is_success());
    s
}

/// Part 1: validation in this process.
async fn validation(auth: &TestAs) {
    let aud = "http://127.0.0.1:9/mcp".to_owned();
    let identity = Identity::new(IdentityConfig {
        issuer: auth.issuer.clone(),
        audience: vec![aud.clone()],
        groups_claim: "groups".into(),
        required_scopes: vec!["mcp".into()],
        jwks_uri: None,
        introspection: Some(Endpoint {
            url: format!("{}/introspect", auth.issuer),
            client_id: Some(RS_CLIENT.0.into()),
            client_secret: Some(RS_CLIENT.1.into()),
        }),
        rules: Rules::default(),
        file: None,
    });
    let es = auth.sign(&auth.mint_for("alice", &aud));
    let mut m = auth.mint_for("alice", &aud);
    m.alg = "RS256";
    let rs = auth.sign(&m);
    let opaque = auth.opaque(&auth.mint_for("alice", &aud));
    let audiences = [aud];
    println!(
        "validation of one token ({VALIDATIONS} after the first), load {}",
        load()
    );
    println!("| token | first call us | median us | mean us | p99 us |");
    println!("|---|---:|---:|---:|---:|");
    for (label, token) in [
        ("JWT ES256 (cached JWKS)", &es),
        ("JWT RS256 (cached JWKS)", &rs),
        ("opaque, introspection (cached)", &opaque),
    ] {
        let t = Instant::now();
        let p = identity.validate(token, &audiences).await.expect(label);
        let first = t.elapsed().as_secs_f64() * 1e6;
        assert_eq!(p.sub, "alice");
        let mut us = Vec::with_capacity(VALIDATIONS);
        for _ in 0..VALIDATIONS {
            let t = Instant::now();
            let p = identity.validate(token, &audiences).await;
            us.push(t.elapsed().as_secs_f64() * 1e6);
            assert!(p.is_ok());
        }
        let mean = us.iter().sum::<f64>() / us.len() as f64;
        us.sort_by(f64::total_cmp);
        println!(
            "| {label} | {first:.0} | {:.1} | {mean:.1} | {:.1} |",
            pct(&us, 0.5),
            pct(&us, 0.99)
        );
    }
}

struct Mode {
    label: &'static str,
    client: Session,
    pid: u32,
    us: Vec<f64>,
    ticks: u64,
}

/// Part 2: `tools/list` over HTTP per mode.
async fn end_to_end(auth: &TestAs) {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let (open, open_url) = serve(dirs[0].path(), &[], &[]).await;
    let (token, _, _) =
        agent_discover::http::security::load_or_create_token(dirs[1].path()).unwrap();
    let (guarded, guarded_url) = serve(dirs[1].path(), &["--require-token"], &[]).await;
    let rules = dirs[2].path().join("identity-rules.toml");
    std::fs::write(
        &rules,
        "default_group = \"all\"\n[groups.all]\nservers = [\"*\"]\n",
    )
    .unwrap();
    let env = [
        ("AGENT_DISCOVER_AUTH_ISSUER", auth.issuer.clone()),
        ("AGENT_DISCOVER_AUTH_CONFIG", rules.display().to_string()),
        ("AGENT_DISCOVER_AUTH_REQUIRED_SCOPES", "mcp".into()),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_URL",
            format!("{}/introspect", auth.issuer),
        ),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_ID",
            RS_CLIENT.0.into(),
        ),
        (
            "AGENT_DISCOVER_AUTH_INTROSPECTION_CLIENT_SECRET",
            RS_CLIENT.1.into(),
        ),
    ];
    let (ident, ident_url) = serve(dirs[2].path(), &[], &env).await;
    let aud = format!("{ident_url}/mcp");
    let es = auth.sign(&auth.mint_for("alice", &aud));
    let mut m = auth.mint_for("alice", &aud);
    m.alg = "RS256";
    let rs = auth.sign(&m);
    let opaque = auth.opaque(&auth.mint_for("alice", &aud));
    let (p_open, p_guarded, p_ident) = (
        open.id().unwrap(),
        guarded.id().unwrap(),
        ident.id().unwrap(),
    );
    let mut modes = vec![
        Mode {
            label: "no token (loopback)",
            client: client(&open_url, None).await,
            pid: p_open,
            us: vec![],
            ticks: 0,
        },
        Mode {
            label: "static token",
            client: client(&guarded_url, Some(&token)).await,
            pid: p_guarded,
            us: vec![],
            ticks: 0,
        },
        Mode {
            label: "JWT ES256 (cached JWKS)",
            client: client(&ident_url, Some(&es)).await,
            pid: p_ident,
            us: vec![],
            ticks: 0,
        },
        Mode {
            label: "JWT RS256 (cached JWKS)",
            client: client(&ident_url, Some(&rs)).await,
            pid: p_ident,
            us: vec![],
            ticks: 0,
        },
        Mode {
            label: "opaque, introspection (cached)",
            client: client(&ident_url, Some(&opaque)).await,
            pid: p_ident,
            us: vec![],
            ticks: 0,
        },
    ];
    for m in &modes {
        for _ in 0..WARMUP {
            m.client.list().await;
        }
    }
    for _ in 0..ROUNDS {
        for m in &mut modes {
            let before = cpu_ticks(m.pid);
            for _ in 0..LISTS_PER_ROUND {
                let t = Instant::now();
                m.client.list().await;
                m.us.push(t.elapsed().as_secs_f64() * 1e6);
            }
            m.ticks += cpu_ticks(m.pid) - before;
        }
    }
    println!(
        "\ntools/list over HTTP ({ROUNDS} rounds of {LISTS_PER_ROUND} per mode after {WARMUP} warm-up), load {}",
        load()
    );
    println!("| mode | median us | p99 us | server CPU us per request |");
    println!("|---|---:|---:|---:|");
    for m in &mut modes {
        m.us.sort_by(f64::total_cmp);
        let cpu = m.ticks as f64 * US_PER_TICK / m.us.len() as f64;
        println!(
            "| {} | {:.1} | {:.1} | {cpu:.0} |",
            m.label,
            pct(&m.us, 0.5),
            pct(&m.us, 0.99)
        );
    }
    drop((open, guarded, ident));
}

fn main() {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let users = vec![User {
                sub: "alice",
                groups: &["dev"],
            }];
            let auth = TestAs::start(users, "mcp").await;
            validation(&auth).await;
            end_to_end(&auth).await;
        });
}
