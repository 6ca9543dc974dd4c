//! The inside of a `network: hosts` sandbox: the server's network namespace has only loopback, and its one way out
//! is a bridge from a loopback TCP port to agent-discover's filtering proxy, which listens on a Unix socket outside.
//!
//! `B` (the namespace's init) brings `lo` up (it holds `CAP_NET_ADMIN` in the user namespace that owns the network
//! namespace, so no root is needed), binds `127.0.0.1:0`, and forks the bridge `D` before it restricts itself. `D`
//! accepts each connection and relays its bytes to a fresh connection to the proxy's socket (a path in the filesystem,
//! which a network namespace does not cut off). `D` is outside the server's Landlock domain, so the server cannot
//! signal it, and seccomp forbids `ptrace`; when the server ends, `B` exits and the kernel ends `D` with the namespace.
//! The server's environment names the bridge in `HTTPS_PROXY`, `HTTP_PROXY` and `ALL_PROXY` (and lowercase); there
//! is no resolver and no route, so a name the server resolves itself or an address it dials leads nowhere.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// The variables that point HTTP clients at the bridge (curl, Python, Go, npm, pip, uv read them; Node's own `fetch`
/// reads them from Node 24 with `NODE_USE_ENV_PROXY=1`, also set).
pub const PROXY_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
];

/// Brings loopback up, starts the bridge to `socket`, and answers the proxy URL the server's environment gets.
/// Called by `B` before Landlock and seccomp.
pub fn open(socket: &Path) -> Result<String, String> {
    loopback_up()?;
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("cannot open the network bridge inside the namespace: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read the network bridge's port: {e}"))?
        .port();
    // SAFETY: B is single-threaded; the child only runs the bridge (it starts threads of its own) and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!(
            "cannot start the network bridge: {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        bridge(listener, socket.to_path_buf());
    }
    Ok(format!("http://127.0.0.1:{port}"))
}

fn loopback_up() -> Result<(), String> {
    let fail = |what: &str| {
        format!(
            "cannot bring loopback up in the server's network namespace ({what}): {}",
            std::io::Error::last_os_error()
        )
    };
    // SAFETY: a socket for the ioctl, a zeroed ifreq we own naming `lo`, closed after use.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(fail("socket"));
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        // `as _`: the request is a `c_ulong` in glibc's `ioctl` and a `c_int` in musl's (the static builds).
        let ok = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) == 0 && {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req) == 0
        };
        libc::close(fd);
        if !ok {
            return Err(fail("SIOCSIFFLAGS"));
        }
    }
    Ok(())
}

/// `D`: relays every connection to the proxy's socket, until the namespace ends.
fn bridge(listener: TcpListener, socket: PathBuf) -> ! {
    // SAFETY: plain system calls in this freshly forked process: die with B, and hold none of the server's pipes
    // (stdin and stdout carry MCP; stderr stays for the bridge's own rare complaint).
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    loop {
        let Ok((tcp, _)) = listener.accept() else {
            continue;
        };
        let socket = socket.clone();
        let _ = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || relay(tcp, &socket));
    }
}

fn relay(mut tcp: TcpStream, socket: &Path) {
    let mut unix = match UnixStream::connect(socket) {
        Ok(u) => u,
        Err(e) => {
            let body = format!("agent-discover's network proxy is not reachable: {e}\n");
            let _ = write!(
                tcp,
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            return;
        }
    };
    let (Ok(mut tcp_in), Ok(mut unix_out)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let up = std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            copy(&mut tcp_in, &mut unix_out);
            let _ = unix_out.shutdown(Shutdown::Write);
        });
    copy(&mut unix, &mut tcp);
    let _ = tcp.shutdown(Shutdown::Write);
    if let Ok(up) = up {
        let _ = up.join();
    }
}

fn copy(from: &mut impl Read, to: &mut impl Write) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
