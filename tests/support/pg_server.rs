//! A PostgreSQL server of its own for tests and benchmarks: Debian's initdb and postgres in a temporary directory on
//! a free loopback port (as the `postgres` user when run as root, since initdb refuses root), ready when its log says
//! so, stopped with its whole process group. Included by tests/it/pg.rs and benches/replicas.rs (`#[path]`).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the server may take to start or stop on a loaded 2-core machine.
const PATIENCE: Duration = Duration::from_secs(30);

/// The directory of Debian's PostgreSQL binaries (the newest installed version).
fn postgres_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("postgres").is_file())
        .collect();
    dirs.sort_by_key(|d| {
        d.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    dirs.pop().expect(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): scripts/test.sh installs Debian's \
         `postgresql` package, or run `apt-get install postgresql`",
    )
}

/// The uid and gid to run PostgreSQL as: the `postgres` user when the tests run as root (initdb refuses root).
fn postgres_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let line = passwd.lines().find(|l| l.starts_with("postgres:")).expect(
        "running as root needs the `postgres` user (created by Debian's postgresql package)",
    );
    let fields: Vec<&str> = line.split(':').collect();
    Some((fields[2].parse().unwrap(), fields[3].parse().unwrap()))
}

fn as_postgres(cmd: &mut Command, user: Option<(u32, u32)>, dir: &Path) {
    cmd.current_dir(dir).stdin(Stdio::null());
    if let Some((uid, gid)) = user {
        cmd.uid(uid)
            .gid(gid)
            .env("HOME", dir)
            .env("USER", "postgres");
    }
}

/// A PostgreSQL server of its own in a temporary directory; stopped (its whole process group) when dropped.
pub struct PgServer {
    pub port: u16,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl PgServer {
    pub fn start() -> PgServer {
        PgServer::start_with(None)
    }

    /// A server with `ssl=on` presenting `cert` (PEM, its chain) with the private key `key`.
    #[allow(dead_code)]
    pub fn start_tls(cert: &Path, key: &Path) -> PgServer {
        PgServer::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> PgServer {
        let bin = postgres_bin();
        let user = postgres_user();
        let dir = tempfile::tempdir().unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).unwrap();
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .args(["--locale=C.UTF-8"]);
        as_postgres(&mut initdb, user, dir.path());
        let out = initdb.output().expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // postgres's defaults for ssl_cert_file and ssl_key_file, in the data directory; the key readable by its owner
        // alone, as postgres demands.
        if let Some((cert, key)) = tls {
            for (from, name) in [(cert, "server.crt"), (key, "server.key")] {
                let to = data.join(name);
                std::fs::copy(from, &to).unwrap();
                std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                    .unwrap();
                if let Some((uid, gid)) = user {
                    std::os::unix::fs::chown(&to, Some(uid), Some(gid)).unwrap();
                }
            }
        }
        // A port found free may be taken before postgres binds it (tests run in parallel): try another then.
        let mut log = Vec::new();
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut cmd = Command::new(bin.join("postgres"));
            cmd.arg("-D")
                .arg(&data)
                .arg("-p")
                .arg(port.to_string())
                .args(["-c", "listen_addresses=127.0.0.1"])
                .args(["-c", "unix_socket_directories="])
                .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
                .args(["-c", "full_page_writes=off", "-c", "max_connections=200"])
                .args(["-c", if tls.is_some() { "ssl=on" } else { "ssl=off" }])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .process_group(0);
            as_postgres(&mut cmd, user, dir.path());
            let mut child = cmd.spawn().expect("start postgres");
            let stderr = child.stderr.take().unwrap();
            let (tx, rx) = mpsc::channel();
            // Reads the log to its end (so postgres never blocks on a full pipe), reporting lines until ready.
            std::thread::spawn(move || {
                let mut ready = false;
                for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                    if !ready {
                        ready = line.contains("ready to accept connections");
                        let _ = tx.send((line, ready));
                    }
                }
            });
            log.clear();
            // Until the readiness line, the end of the log (postgres exited) or a silence too long.
            while let Ok((line, ready)) = rx.recv_timeout(PATIENCE) {
                if ready {
                    return PgServer {
                        port,
                        child: Some(child),
                        _dir: dir,
                    };
                }
                log.push(line);
            }
            stop(child);
            if !log.iter().any(|l| l.contains("could not bind")) {
                break;
            }
        }
        panic!("postgres did not become ready:\n{}", log.join("\n"));
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The postmaster's process id (its process group's too); the replicas bench checks nothing of it outlives it.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Creates database `name` (letters, digits, `_`) and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        let admin = agent_discover::store::pg::PgPool::with_config(
            agent_discover::store::pg::parse_url(&self.url("postgres")).unwrap(),
            1,
        )
        .unwrap();
        admin
            .with(|c| c.batch(&format!("CREATE DATABASE {name}")))
            .unwrap();
        self.url(name)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            stop(child);
        }
    }
}

/// Stops a postmaster we started: an immediate shutdown (it stops its backends, reaps them and removes its shared
/// memory), then SIGKILL to its whole process group if it did not exit in time.
pub fn stop(mut child: Child) {
    let pid = child.id() as i32;
    // SAFETY: signalling the process we started (not reaped yet, so the id is still ours).
    unsafe { libc::kill(pid, libc::SIGQUIT) };
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let _ = child.wait();
        let _ = tx.send(());
    });
    if rx.recv_timeout(PATIENCE).is_err() {
        // SAFETY: the group of the postmaster we started, which has not exited.
        unsafe { libc::killpg(pid, libc::SIGKILL) };
    }
    let _ = waiter.join();
}
