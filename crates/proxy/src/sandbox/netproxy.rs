//! The filtering proxy of `network: hosts`: the one way out of a confined server's network namespace.
//!
//! Design. A server with an allow-list starts in a network namespace of its own with loopback only (no route, no
//! resolver). Inside, the sandbox's bridge (`ad_sandbox`, `netns.rs`) listens on a loopback port named by the
//! server's `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` and relays each connection to a Unix socket this module listens on,
//! in agent-discover's own process (tokio), one socket per server in a private directory. A client asks with `CONNECT
//! host:port` (HTTPS, any TCP) or an absolute `http://host/...` request (plain HTTP); the host is checked against the
//! server's allow-list, resolved here (the child resolves nothing itself), and connected to; anything else is answered
//! `403` with the host in the status line and the body, recorded for `sandbox show`/`sandbox check`, and written as a
//! line to the server's stderr ring, which `status` and a failed start's error show. Every process the server starts
//! (a grandchild too) is in the same namespace, so it has the same one way out. A name the allow-list admits that
//! resolves to a loopback, unspecified or link-local address (this machine's own services, a cloud metadata endpoint) is
//! refused unless the list names that address itself, or `AGENT_DISCOVER_SANDBOX_RESOLVE` maps the name (a test or
//! development mapping `name=IP,...`, read once, like curl's `--resolve`). Only the server's own processes may use its
//! socket: a connection whose peer is not in the server's process group is dropped.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use ad_core::error::{Error, Result};
use ad_core::netallow::AllowList;
use ad_core::sandbox::Network;
use ad_core::sandbox::network_text;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::spawn::StderrRing;

/// Environment variable: `name=IP,name=IP`: names the filtering proxy resolves to these addresses (loopback allowed).
pub const ENV_RESOLVE: &str = "AGENT_DISCOVER_SANDBOX_RESOLVE";
/// The longest request head the proxy reads.
const MAX_HEAD: usize = 16 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// At most this many refused hosts are kept per server.
const MAX_REFUSED: usize = 256;

/// A host a server was refused, with how many times since its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// `host:port` as the server asked for it.
    pub host: String,
    pub count: u64,
    /// Why: not in the list, or what it resolved to.
    pub reason: String,
}

/// One server's proxy: its socket, its list, what it refused.
struct Net {
    server: String,
    socket: PathBuf,
    hosts: Mutex<Vec<String>>,
    allow: Mutex<AllowList>,
    refused: Mutex<BTreeMap<String, Refused>>,
    ring: Mutex<Option<Arc<StderrRing>>>,
    /// The process group of the server's guard: only its processes may connect. 0 until it started.
    pgid: AtomicI32,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

static NETS: LazyLock<Mutex<HashMap<String, Arc<Net>>>> = LazyLock::new(Default::default);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Readies the proxy of `server` for a start with allow-list `hosts` (its refusals start afresh) and answers the socket
/// the guard's bridge connects to. Needs a tokio runtime (starts run on one).
pub fn prepare(server: &str, hosts: &[String], ring: Arc<StderrRing>) -> Result<PathBuf> {
    let allow = AllowList::parse(hosts)?;
    let net = {
        let mut nets = lock(&NETS);
        nets.entry(server.to_owned())
            .or_insert_with(|| {
                Arc::new(Net {
                    server: server.to_owned(),
                    socket: socket_path(server),
                    hosts: Mutex::new(Vec::new()),
                    allow: Mutex::new(AllowList::default()),
                    refused: Mutex::new(BTreeMap::new()),
                    ring: Mutex::new(None),
                    pgid: AtomicI32::new(0),
                    task: Mutex::new(None),
                })
            })
            .clone()
    };
    *lock(&net.hosts) = hosts.to_vec();
    *lock(&net.allow) = allow;
    lock(&net.refused).clear();
    *lock(&net.ring) = Some(ring);
    net.pgid.store(0, Ordering::SeqCst);
    let mut task = lock(&net.task);
    if task.as_ref().is_none_or(|t| t.is_finished()) {
        let fail = |e: std::io::Error| Error::SandboxDenied {
            server: server.to_owned(),
            message: format!(
                "cannot open its network proxy at {}: {e}",
                net.socket.display()
            ),
        };
        if let Some(dir) = net.socket.parent() {
            create_private_dir(dir).map_err(fail)?;
        }
        let _ = std::fs::remove_file(&net.socket);
        let handle = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Internal("the network proxy needs the async runtime".into()))?;
        let _guard = handle.enter();
        let listener = UnixListener::bind(&net.socket).map_err(fail)?;
        *task = Some(handle.spawn(accept_loop(listener, net.clone())));
    }
    Ok(net.socket.clone())
}

/// Tells the proxy of `server` the process group its connections come from (the guard's), once it started.
pub fn started(server: &str, pgid: i32) {
    if let Some(net) = lock(&NETS).get(server) {
        net.pgid.store(pgid, Ordering::SeqCst);
    }
}

/// The hosts `server` was refused since its last start, most asked first.
pub fn refused(server: &str) -> Vec<Refused> {
    let Some(net) = lock(&NETS).get(server).cloned() else {
        return Vec::new();
    };
    let mut out: Vec<Refused> = lock(&net.refused).values().cloned().collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.host.cmp(&b.host)));
    out
}

/// Where the socket of `server`'s proxy is: a directory of this process's own under the temporary directory (a Unix
/// socket path must stay under 108 bytes, so not under the data directory).
fn socket_path(server: &str) -> PathBuf {
    let dir = sockets_dir(std::process::id());
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_stale(&dir));
    let name: String = super::dir_name(server).chars().take(32).collect();
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{n}-{name}.sock"))
}

/// The private directory of process `pid`'s proxy sockets.
fn sockets_dir(pid: u32) -> PathBuf {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let dir = std::env::temp_dir().join(format!("agent-discover-net-{uid}-{pid}"));
    if dir.as_os_str().len() > 60 {
        return PathBuf::from("/tmp").join(format!("agent-discover-net-{uid}-{pid}"));
    }
    dir
}

/// Removes the socket directories of this user's agent-discover processes that have ended (a process that was killed
/// could not remove its own), once per process, before the first socket is made beside them.
fn sweep_stale(own: &Path) {
    let Some(parent) = own.parent() else { return };
    let Some(own_name) = own.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    // `agent-discover-net-UID-`: the same user's directories only.
    let Some(prefix) = own_name
        .rsplit_once('-')
        .map(|(head, _)| format!("{head}-"))
    else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

async fn accept_loop(listener: UnixListener, net: Arc<Net>) {
    loop {
        match listener.accept().await {
            Ok((conn, _)) => {
                let net = net.clone();
                tokio::spawn(async move { handle(&net, conn).await });
            }
            Err(e) => {
                tracing::warn!(server = %net.server, "network proxy: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Whether the peer of `conn` belongs to the server's process group.
fn peer_allowed(net: &Net, conn: &UnixStream) -> bool {
    let want = net.pgid.load(Ordering::SeqCst);
    let Some(pid) = conn.peer_cred().ok().and_then(|c| c.pid()) else {
        return false;
    };
    want > 1 && process_group(pid) == Some(want)
}

fn process_group(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// A request's destination and how to pass it on.
struct Request {
    host: String,
    port: u16,
    /// `None` for `CONNECT`; the rewritten head (origin-form, `Connection: close`) for plain HTTP.
    forward_head: Option<Vec<u8>>,
}

async fn handle(net: &Net, mut conn: UnixStream) {
    if !peer_allowed(net, &conn) {
        return;
    }
    let (head, rest) = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut conn)).await {
        Ok(Ok(h)) => h,
        _ => return,
    };
    let req = match parse(&head) {
        Ok(r) => r,
        Err(why) => {
            let _ = answer(&mut conn, 400, "Bad Request", &why, None).await;
            return;
        }
    };
    let target = format!("{}:{}", bracket(&req.host), req.port);
    let allowed = lock(&net.allow).allows(&req.host, req.port);
    if !allowed {
        let why = format!(
            "{target} is not in the network allow-list of `{}`",
            net.server
        );
        refuse(net, &mut conn, &target, Some(&req.host), &why).await;
        return;
    }
    let addrs = match resolve(net, &req.host, req.port).await {
        Ok(a) => a,
        Err(why) => {
            refuse(net, &mut conn, &target, None, &why).await;
            return;
        }
    };
    let upstream = match connect(&addrs).await {
        Ok(s) => s,
        Err(e) => {
            let why = format!("cannot connect to {target}: {e}");
            let _ = answer(&mut conn, 502, "Bad Gateway", &why, None).await;
            return;
        }
    };
    let mut upstream = upstream;
    let _ = upstream.set_nodelay(true);
    match &req.forward_head {
        None => {
            if conn
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .is_err()
            {
                return;
            }
        }
        Some(head) => {
            if upstream.write_all(head).await.is_err() {
                return;
            }
        }
    }
    if !rest.is_empty() && upstream.write_all(&rest).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut upstream).await;
}

/// Answers 403 naming the host, records the refusal and tells the server's stderr; `add` is the host whose addition
/// to the list would allow it (none when the list has it and its address is what was refused).
async fn refuse(net: &Net, conn: &mut UnixStream, target: &str, add: Option<&str>, why: &str) {
    {
        let mut refused = lock(&net.refused);
        // Bounded: a server that tries thousands of hosts keeps its first ones listed (its stderr has every one).
        let full = refused.len() >= MAX_REFUSED && !refused.contains_key(target);
        let entry = if full {
            None
        } else {
            Some(refused.entry(target.to_owned()).or_insert_with(|| Refused {
                host: target.to_owned(),
                count: 0,
                reason: why.to_owned(),
            }))
        };
        if let Some(entry) = entry {
            entry.count += 1;
        }
    }
    let fix = match add {
        Some(host) => {
            let mut hosts = lock(&net.hosts).clone();
            hosts.push(bracket(host));
            format!(
                "; to allow it: `agent-discover sandbox set {} --network {}`",
                net.server,
                network_text(Network::Hosts, &hosts)
            )
        }
        None => String::new(),
    };
    let line = format!(
        "{} refused a connection to {target}: {why}{fix}",
        ad_core::sandbox::REFUSED_PREFIX,
    );
    tracing::warn!(server = %net.server, "{line}");
    if let Some(ring) = lock(&net.ring).as_ref() {
        ring.push(line.clone());
    }
    let _ = answer(conn, 403, "Forbidden", &line, Some(target)).await;
}

/// Writes a complete plain-text answer; a refusal names the host in the status line too (clients often show only it).
async fn answer(
    conn: &mut UnixStream,
    code: u16,
    reason: &str,
    body: &str,
    refused: Option<&str>,
) -> std::io::Result<()> {
    let status = match refused {
        Some(t) => format!("{reason} by agent-discover: {t} is not allowed for this server"),
        None => reason.to_owned(),
    };
    let body = format!("{body}\n");
    let mut text = format!(
        "HTTP/1.1 {code} {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(t) = refused {
        text.push_str(&format!("X-Agent-Discover-Refused: {t}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(&body);
    conn.write_all(text.as_bytes()).await?;
    conn.shutdown().await
}

/// Reads up to the end of the request head; answers the head and what followed it.
async fn read_head(conn: &mut UnixStream) -> std::io::Result<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(std::io::ErrorKind::InvalidData.into());
        }
    }
}

/// The destination of a proxy request: `CONNECT host:port` or an absolute `http://` URL.
fn parse(head: &[u8]) -> std::result::Result<Request, String> {
    let text = std::str::from_utf8(head).map_err(|_| "the request head is not UTF-8".to_owned())?;
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err("a malformed request line".into());
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = authority(target, None)?;
        return Ok(Request {
            host,
            port,
            forward_head: None,
        });
    }
    let Some(rest) = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
    else {
        return Err(format!(
            "this proxy takes CONNECT host:port and absolute http:// requests, not {method} {target}"
        ));
    };
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (auth, path) = rest.split_at(split);
    let auth = auth.rsplit('@').next().unwrap_or(auth);
    let (host, port) = authority(auth, Some(80))?;
    let path = if path.is_empty() {
        "/".to_owned()
    } else if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    Ok(Request {
        host,
        port,
        forward_head: Some(out.into_bytes()),
    })
}

/// `host:port`, `[v6]:port`, or a host alone when `default` gives the port.
fn authority(text: &str, default: Option<u16>) -> std::result::Result<(String, u16), String> {
    let bad = || format!("{text:?} is not host:port");
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        (h, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(bad)?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.trim_end_matches('.').to_ascii_lowercase(), port))
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// The `name=IP` mappings of [`ENV_RESOLVE`].
static OVERRIDES: LazyLock<HashMap<String, IpAddr>> = LazyLock::new(|| {
    std::env::var(ENV_RESOLVE)
        .unwrap_or_default()
        .split(',')
        .filter_map(|pair| {
            let (name, ip) = pair.split_once('=')?;
            let ip = ip.trim().parse().ok()?;
            Some((name.trim().trim_end_matches('.').to_ascii_lowercase(), ip))
        })
        .collect()
});

/// The addresses to try for an allowed `host`: a mapping of [`ENV_RESOLVE`], the literal, or the system resolver's
/// answers (without this machine's own and link-local addresses, unless the list names the address).
async fn resolve(net: &Net, host: &str, port: u16) -> std::result::Result<Vec<SocketAddr>, String> {
    if let Some(ip) = OVERRIDES.get(host) {
        return Ok(vec![SocketAddr::new(*ip, port)]);
    }
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("cannot resolve {host}: {e}"))?
            .collect(),
    };
    let allow = lock(&net.allow).clone();
    let (ok, local): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs
        .into_iter()
        .partition(|a| allow.names_ip(a.ip()) || !internal(a.ip()));
    if ok.is_empty() {
        return Err(match local.first() {
            Some(a) => format!(
                "{host} resolves to {}, an address of this machine or its link (allowed only when the list names the address itself)",
                a.ip()
            ),
            None => format!("{host} has no address"),
        });
    }
    Ok(ok)
}

/// Loopback, unspecified and link-local addresses (this machine's services, a cloud metadata endpoint).
fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| internal(IpAddr::V4(v4)))
        }
    }
}

async fn connect(addrs: &[SocketAddr]) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e,
            Err(_) => last = std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_directories_of_ended_processes_are_swept_and_live_ones_kept() {
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let ended_pid = ended.id();
        ended.wait().unwrap();
        let stale = sockets_dir(ended_pid);
        let own = sockets_dir(std::process::id());
        let mut alive = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let live = sockets_dir(alive.id());
        for dir in [&stale, &own, &live] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(stale.join("0-x.sock"), b"").unwrap();
        sweep_stale(&own);
        assert!(!stale.exists(), "{} left behind", stale.display());
        assert!(own.exists() && live.exists());
        alive.kill().unwrap();
        alive.wait().unwrap();
        let _ = std::fs::remove_dir_all(&live);
    }

    #[test]
    fn requests_name_their_destination() {
        let r = parse(b"CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443\r\n\r\n")
            .unwrap();
        assert_eq!((r.host.as_str(), r.port), ("api.github.com", 443));
        assert!(r.forward_head.is_none());
        let r = parse(b"CONNECT [::1]:8080 HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!((r.host.as_str(), r.port), ("::1", 8080));
        let r = parse(
            b"GET http://Example.test/a?b=1 HTTP/1.1\r\nHost: example.test\r\nProxy-Connection: keep-alive\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.host.as_str(), r.port), ("example.test", 80));
        let head = String::from_utf8(r.forward_head.unwrap()).unwrap();
        assert!(head.starts_with("GET /a?b=1 HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Host: example.test\r\n"));
        assert!(!head.to_ascii_lowercase().contains("proxy-connection"));
        assert!(head.ends_with("Connection: close\r\n\r\n"));
        assert!(parse(b"GET /relative HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"CONNECT nohost HTTP/1.1\r\n\r\n").is_err());
        assert!(parse(b"CONNECT h:0 HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn internal_addresses_are_told_apart() {
        for ip in [
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "169.254.169.254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["10.0.0.5", "93.184.216.34", "2001:db8::1"] {
            assert!(!internal(ip.parse().unwrap()), "{ip}");
        }
    }
}
