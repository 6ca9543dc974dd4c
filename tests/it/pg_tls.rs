//! PostgreSQL over TLS: libpq's `sslmode` and `sslrootcert` against Debian's PostgreSQL with `ssl=on`, its
//! certificate issued by a certificate authority made for the test with the openssl command (and a second authority
//! that issued nothing of the server's).

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_discover::store::pg::{PgPool, SslMode, parse_url};

use crate::pg::PgServer;

/// Two certificate authorities and a server certificate for `pg.test` issued by the first.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect(
                    "the openssl command makes the test's certificates: apt-get install openssl",
                );
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let key = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let (keyout, out, subj) = (
                format!("{ca}.key"),
                format!("{ca}.crt"),
                format!("/CN=agent-discover test {ca}"),
            );
            let mut args = vec![
                "req", "-x509", "-days", "2", "-subj", &subj, "-keyout", &keyout, "-out", &out,
            ];
            args.extend(key);
            args.extend(["-addext", "basicConstraints=critical,CA:TRUE"]);
            args.extend(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
            run(&args);
        }
        let mut args = vec![
            "req",
            "-subj",
            "/CN=pg.test",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ];
        args.extend(key);
        run(&args);
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=DNS:pg.test\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ]);
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// The URL of the server's `postgres` database under host name `host`, reached at 127.0.0.1.
fn url(server: &PgServer, host: &str, options: &str) -> String {
    format!(
        "postgres://postgres@{host}:{}/postgres?hostaddr=127.0.0.1&{options}",
        server.port
    )
}

/// Whether the pool's connection is encrypted, as the server sees it.
fn encrypted(pool: &PgPool) -> bool {
    let n: i64 = pool
        .with(|c| {
            c.query_one(
                "SELECT count(*) FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl",
                &[],
            )?
            .get(0)
        })
        .unwrap();
    n == 1
}

fn connect_err(url: &str) -> String {
    match PgPool::connect(url) {
        Ok(_) => panic!("{url} connected"),
        Err(e) => e.to_string(),
    }
}

fn root(p: &Path) -> String {
    format!("sslrootcert={}", p.display())
}

#[test]
fn sslmodes_connect_check_and_refuse_as_libpq_does() {
    let pki = Pki::new();
    let server = PgServer::start_tls(&pki.path("server.crt"), &pki.path("server.key"));
    let ca = root(&pki.path("ca.crt"));
    let other_ca = root(&pki.path("other-ca.crt"));
    let absent = root(&pki.path("absent.crt"));

    // require: encrypted, nothing checked when there is no root file (any host name, any issuer).
    let pool = PgPool::connect(&url(
        &server,
        "wrong.test",
        &format!("sslmode=require&{absent}"),
    ))
    .unwrap();
    assert!(encrypted(&pool), "sslmode=require connected without TLS");
    // disable: plain TCP to a server that offers TLS.
    let pool = PgPool::connect(&url(&server, "pg.test", "sslmode=disable")).unwrap();
    assert!(!encrypted(&pool), "sslmode=disable connected with TLS");
    // prefer (the default): TLS when offered.
    let pool = PgPool::connect(&url(&server, "pg.test", &absent)).unwrap();
    assert!(
        encrypted(&pool),
        "the default sslmode did not use the server's TLS"
    );

    // verify-full: the right authority and name connect ...
    let full = PgPool::connect(&url(
        &server,
        "pg.test",
        &format!("sslmode=verify-full&{ca}"),
    ))
    .unwrap();
    assert!(encrypted(&full));
    assert_eq!(full.config().ssl_mode(), SslMode::VerifyFull);
    // ... another host name is refused ...
    let e = connect_err(&url(
        &server,
        "wrong.test",
        &format!("sslmode=verify-full&{ca}"),
    ));
    assert!(
        e.contains("not valid for name") && e.contains("wrong.test"),
        "{e}"
    );
    // ... and so is a certificate the given authority did not issue.
    let e = connect_err(&url(
        &server,
        "pg.test",
        &format!("sslmode=verify-full&{other_ca}"),
    ));
    assert!(e.contains("UnknownIssuer"), "{e}");

    // verify-ca: the chain is checked, the name is not.
    let pool = PgPool::connect(&url(
        &server,
        "wrong.test",
        &format!("sslmode=verify-ca&{ca}"),
    ))
    .unwrap();
    assert!(encrypted(&pool));
    let e = connect_err(&url(
        &server,
        "pg.test",
        &format!("sslmode=verify-ca&{other_ca}"),
    ));
    assert!(e.contains("UnknownIssuer"), "{e}");
    // As in libpq, require with a root file that exists checks the chain (as verify-ca does).
    let e = connect_err(&url(
        &server,
        "pg.test",
        &format!("sslmode=require&{other_ca}"),
    ));
    assert!(e.contains("UnknownIssuer"), "{e}");

    // The keyword form reads the same options.
    let keywords = format!(
        "host=pg.test hostaddr=127.0.0.1 port={} user=postgres dbname=postgres sslmode=verify-full sslrootcert='{}'",
        server.port,
        pki.path("ca.crt").display()
    );
    assert!(encrypted(&PgPool::connect(&keywords).unwrap()));

    // A check without its root certificates fails before connecting, saying what to give.
    let e = parse_url(&url(
        &server,
        "pg.test",
        &format!("sslmode=verify-full&{absent}"),
    ))
    .unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

#[test]
fn require_refuses_a_server_without_tls() {
    let server = crate::pg::server();
    let e = connect_err(&format!("{}?sslmode=require", server.url("postgres")));
    assert!(e.contains("TLS"), "{e}");
    // prefer falls back to plain TCP there.
    let pool = PgPool::connect(&format!("{}?sslmode=prefer", server.url("postgres"))).unwrap();
    assert!(!encrypted(&pool));
}
