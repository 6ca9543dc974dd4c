//! Issue 26: a server's sandbox settings set and shown through the CLI, REST and the `registry` tool's `sandbox`
//! action; bad settings (relative paths, `..`, an unknown network) are typed errors; the settings outlive the process
//! that set them; listings and `status` carry each stdio server's sandbox and the kernel's support.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::http::{self, Security};
use agent_discover::model::{ServerSpec, Transport};
use axum::body::Body;
use axum::http::{Request, header};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::harness::{self, BIN};

/// Runs the CLI on `dir`'s registry from the working directory `cwd`, with extra environment variables.
async fn cli(
    dir: &Path,
    cwd: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> (bool, String, String) {
    let mut cmd = harness::command(dir, args);
    cmd.current_dir(cwd).env_remove("AGENT_DISCOVER_SANDBOX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().await.expect("run agent-discover");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The CLI's JSON answer; panics with its stderr when it failed.
async fn cli_json(dir: &Path, cwd: &Path, args: &[&str]) -> Value {
    let (ok, out, err) = cli(dir, cwd, args, &[]).await;
    assert!(ok, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn has_grant(view: &Value, path: &Path, access: &str) -> bool {
    view["grants"].as_array().is_some_and(|g| {
        g.iter().any(|g| {
            g["path"] == path.display().to_string()
                && g["access"] == access
                && g["source"] == "user"
        })
    })
}

fn in_list<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("{name} not in {list}"))
}

#[tokio::test]
async fn the_cli_sets_and_shows_a_sandbox_that_outlives_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let (ok, _, err) = cli(
        d,
        w,
        &["add", "files", "--", harness::fixture(), "--name", "files"],
        &[],
    )
    .await;
    assert!(ok, "{err}");

    // The defaults: confined, full network, no path of the user's.
    let v = cli_json(d, w, &["sandbox", "show", "files", "--json"]).await;
    assert_eq!(v["server"], "files", "{v}");
    assert_eq!(
        (&v["enabled"], &v["effective"]),
        (&json!(true), &json!(true)),
        "{v}"
    );
    assert_eq!(v["network"], "full", "{v}");
    assert_eq!((&v["read"], &v["write"]), (&json!([]), &json!([])), "{v}");
    assert!(v["grants"].as_array().is_some_and(|g| !g.is_empty()), "{v}");
    for key in ["landlock_abi", "user_namespaces", "missing"] {
        assert!(v["kernel"].get(key).is_some(), "kernel.{key} missing: {v}");
    }
    assert!(v.get("applies").is_none(), "a show changes nothing: {v}");

    // Relative paths are taken from the current directory.
    let v = cli_json(
        d,
        w,
        &[
            "sandbox",
            "set",
            "files",
            "--network",
            "none",
            "--read",
            "./data",
            "--write",
            "/srv/out",
            "--json",
        ],
    )
    .await;
    let data = w.join("data");
    assert_eq!(v["network"], "none", "{v}");
    assert_eq!(v["read"], json!([data]), "{v}");
    assert_eq!(v["write"], json!(["/srv/out"]), "{v}");
    assert_eq!(v["applies"], "at the next start of the server", "{v}");
    assert!(has_grant(&v, &data, "read"), "{v}");
    assert!(has_grant(&v, Path::new("/srv/out"), "write"), "{v}");

    // Another process reads what this one stored.
    let v = cli_json(d, w, &["sandbox", "show", "files", "--json"]).await;
    assert_eq!(
        (&v["network"], &v["read"]),
        (&json!("none"), &json!([data])),
        "{v}"
    );

    // Off for this server: kept with its paths; --on confines it again; --read replaces only the read list.
    let v = cli_json(d, w, &["sandbox", "set", "files", "--off", "--json"]).await;
    assert_eq!(
        (&v["enabled"], &v["effective"]),
        (&json!(false), &json!(false)),
        "{v}"
    );
    assert_eq!(v["read"], json!([data]), "{v}");
    let list = cli_json(d, w, &["list", "--json"]).await;
    assert_eq!(
        in_list(&list, "files")["sandbox"],
        json!({"enabled": false, "effective": false, "network": "none"}),
        "{list}"
    );
    let v = cli_json(
        d,
        w,
        &[
            "sandbox", "set", "files", "--on", "--read", "/srv/in", "--json",
        ],
    )
    .await;
    assert_eq!(v["enabled"], true, "{v}");
    assert_eq!(
        (&v["read"], &v["write"]),
        (&json!(["/srv/in"]), &json!(["/srv/out"])),
        "{v}"
    );

    // The global switch: effective is off however the server is set.
    let (ok, out, err) = cli(
        d,
        w,
        &["sandbox", "show", "files", "--json"],
        &[("AGENT_DISCOVER_SANDBOX", "off")],
    )
    .await;
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["enabled"], &v["effective"]),
        (&json!(true), &json!(false)),
        "{v}"
    );

    // The human form.
    let (ok, out, err) = cli(d, w, &["sandbox", "show", "files"], &[]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("sandbox:  confined") && out.contains("network:  none"),
        "{out}"
    );
    assert!(out.contains("/srv/in"), "{out}");

    // --clear empties both lists.
    let v = cli_json(d, w, &["sandbox", "set", "files", "--clear", "--json"]).await;
    assert_eq!((&v["read"], &v["write"]), (&json!([]), &json!([])), "{v}");
    assert_eq!(v["network"], "none", "{v}");

    // Refused: `..`, an unknown network, nothing to set, an unknown server. Nothing is stored.
    let (ok, _, err) = cli(d, w, &["sandbox", "set", "files", "--write", "../up"], &[]).await;
    assert!(!ok && err.contains(".."), "{err}");
    let (ok, _, err) = cli(d, w, &["sandbox", "set", "files", "--network", "some"], &[]).await;
    assert!(!ok && err.contains("some"), "{err}");
    let (ok, _, _) = cli(d, w, &["sandbox", "set", "files"], &[]).await;
    assert!(!ok);
    let (ok, _, err) = cli(d, w, &["sandbox", "show", "nope"], &[]).await;
    assert!(!ok && err.contains("nope"), "{err}");
    let v = cli_json(d, w, &["sandbox", "show", "files", "--json"]).await;
    assert_eq!(v["write"], json!([]), "{v}");

    // status: each server's sandbox, and the kernel's support once.
    let status = cli_json(d, w, &["status", "--json"]).await;
    assert_eq!(
        in_list(&status["servers"], "files")["sandbox"],
        json!({"enabled": true, "effective": true, "network": "none"}),
        "{status}"
    );
    assert!(
        status["sandbox_kernel"].get("landlock_abi").is_some(),
        "{status}"
    );
    let (ok, out, err) = cli(d, w, &["status"], &[]).await;
    assert!(ok && out.contains("sandbox: "), "{out}{err}");
}

// ---------- REST ----------

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

async fn send(
    router: &axum::Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let b = Request::builder()
        .method(method)
        .uri(path)
        .header(header::HOST, "127.0.0.1:3424");
    let req = match body {
        Some(v) => b
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(v.to_string()))
            .unwrap(),
        None => b.body(Body::empty()).unwrap(),
    };
    let resp = router.clone().oneshot(req).await.expect("infallible");
    let status = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[track_caller]
fn invalid(answer: &(u16, Value), needle: &str) {
    assert_eq!(answer.0, 400, "{}", answer.1);
    assert_eq!(answer.1["code"], "invalid_input", "{}", answer.1);
    assert!(
        answer.1["error"]
            .as_str()
            .is_some_and(|e| e.contains(needle)),
        "{}",
        answer.1
    );
}

#[tokio::test]
async fn rest_sets_and_shows_a_sandbox_refuses_bad_settings_and_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    {
        let app = app_in(dir.path());
        let r = http::router(app.clone(), Security::loopback());
        let (st, v) = send(
            &r,
            "POST",
            "/api/servers",
            Some(json!({"name": "files", "command": harness::fixture(), "args": ["--name", "files"]})),
        )
        .await;
        assert_eq!(st, 201, "{v}");
        let id = v["id"].as_i64().unwrap();
        let (st, v) = send(
            &r,
            "POST",
            "/api/servers",
            Some(json!({"name": "remote", "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp"})),
        )
        .await;
        assert_eq!(st, 201, "{v}");

        let (st, v) = send(&r, "GET", "/api/servers/files/sandbox", None).await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            (&v["enabled"], &v["network"]),
            (&json!(true), &json!("full")),
            "{v}"
        );
        // By id as well as by name.
        let (st, by_id) = send(&r, "GET", &format!("/api/servers/{id}/sandbox"), None).await;
        assert_eq!((st, &by_id["server"]), (200, &json!("files")), "{by_id}");

        let (st, v) = send(
            &r,
            "PUT",
            "/api/servers/files/sandbox",
            Some(json!({"network": "none", "write": ["/srv/out"]})),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            (&v["network"], &v["write"], &v["read"]),
            (&json!("none"), &json!(["/srv/out"]), &json!([])),
            "{v}"
        );
        assert_eq!(v["applies"], "at the next start of the server", "{v}");
        assert!(has_grant(&v, Path::new("/srv/out"), "write"), "{v}");
        // A patch leaves what it does not name.
        let (st, v) = send(
            &r,
            "PUT",
            "/api/servers/files/sandbox",
            Some(json!({"enabled": false})),
        )
        .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(
            (&v["enabled"], &v["effective"], &v["network"]),
            (&json!(false), &json!(false), &json!("none")),
            "{v}"
        );
        assert_eq!(v["write"], json!(["/srv/out"]), "{v}");

        // Typed errors, and nothing stored by them.
        let put = |body: Value| send(&r, "PUT", "/api/servers/files/sandbox", Some(body));
        invalid(&put(json!({"read": ["relative/dir"]})).await, "absolute");
        invalid(&put(json!({"write": ["/srv/../etc"]})).await, "..");
        invalid(&put(json!({"network": "lan"})).await, "lan");
        invalid(&put(json!({"network": "none", "bogus": 1})).await, "bogus");
        invalid(&put(json!({"read": "/srv"})).await, "");
        let (st, v) = send(
            &r,
            "PUT",
            "/api/servers/nope/sandbox",
            Some(json!({"enabled": true})),
        )
        .await;
        assert_eq!((st, &v["code"]), (404, &json!("not_found")), "{v}");
        let (st, v) = send(&r, "GET", "/api/servers/nope/sandbox", None).await;
        assert_eq!((st, &v["code"]), (404, &json!("not_found")), "{v}");
        // A remote server starts no process here: shown as not confined, and not settable.
        let (st, v) = send(&r, "GET", "/api/servers/remote/sandbox", None).await;
        assert_eq!(
            (st, &v["effective"], &v["grants"]),
            (200, &json!(false), &json!([])),
            "{v}"
        );
        invalid(
            &send(
                &r,
                "PUT",
                "/api/servers/remote/sandbox",
                Some(json!({"network": "none"})),
            )
            .await,
            "stdio",
        );
        let (_, v) = send(&r, "GET", "/api/servers/files/sandbox", None).await;
        assert_eq!(
            (&v["enabled"], &v["read"]),
            (&json!(false), &json!([])),
            "{v}"
        );

        // Listings: the stdio server's sandbox; none for the remote one.
        let brief = json!({"enabled": false, "effective": false, "network": "none"});
        let (_, list) = send(&r, "GET", "/api/servers", None).await;
        assert_eq!(in_list(&list, "files")["sandbox"], brief, "{list}");
        assert!(in_list(&list, "remote").get("sandbox").is_none(), "{list}");
        let (_, one) = send(&r, "GET", "/api/servers/files", None).await;
        assert_eq!(one["sandbox"], brief, "{one}");
        let entries = app.listed_entries().unwrap();
        let entry = entries.iter().find(|e| e.name == "files").unwrap();
        assert_eq!(serde_json::to_value(entry).unwrap()["sandbox"], brief);
        assert!(
            entries
                .iter()
                .find(|e| e.name == "remote")
                .unwrap()
                .sandbox
                .is_none()
        );
        let (_, status) = send(&r, "GET", "/api/status", None).await;
        for key in ["enabled", "landlock_abi", "user_namespaces", "missing"] {
            assert!(status["sandbox_kernel"].get(key).is_some(), "{status}");
        }
        let (_, doc) = send(&r, "GET", "/api/openapi.json", None).await;
        assert!(
            doc["paths"]["/api/servers/{id}/sandbox"]["put"].is_object(),
            "{doc}"
        );
    }
    // Reopened: the settings were stored with the server.
    let app = app_in(dir.path());
    let v = app.sandbox_view("files").unwrap();
    assert_eq!(
        (&v["enabled"], &v["network"], &v["write"]),
        (&json!(false), &json!("none"), &json!(["/srv/out"])),
        "{v}"
    );
    // Removing the server removes its settings; one registered again under the name has the defaults.
    app.registry.remove("files").unwrap();
    app.registry
        .register(ServerSpec {
            name: "files".into(),
            command: Some(harness::fixture().into()),
            transport: Transport::Stdio,
            ..Default::default()
        })
        .unwrap();
    let v = app.sandbox_view("files").unwrap();
    assert_eq!(
        (&v["enabled"], &v["network"], &v["write"]),
        (&json!(true), &json!("full"), &json!([])),
        "{v}"
    );
}

// ---------- the registry tool ----------

#[tokio::test]
async fn the_registry_tool_shows_and_sets_a_sandbox_with_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent.install_fixture("files", &[], json!({})).await;

    let v = agent
        .registry(json!({"action": "sandbox", "name": "files"}))
        .await;
    assert_eq!(
        (&v["server"], &v["enabled"], &v["network"]),
        (&json!("files"), &json!(true), &json!("full")),
        "{v}"
    );
    assert!(v.get("applies").is_none(), "{v}");

    let v = agent
        .registry(
            json!({"action": "sandbox", "name": "files", "network": "none", "read": ["/srv/in"]}),
        )
        .await;
    assert_eq!(
        (&v["network"], &v["read"]),
        (&json!("none"), &json!(["/srv/in"])),
        "{v}"
    );
    assert_eq!(v["applies"], "at the next start of the server", "{v}");
    assert!(has_grant(&v, Path::new("/srv/in"), "read"), "{v}");
    let v = agent
        .registry(json!({"action": "sandbox", "name": "files", "enabled": false}))
        .await;
    assert_eq!(
        (&v["enabled"], &v["effective"], &v["read"]),
        (&json!(false), &json!(false), &json!(["/srv/in"])),
        "{v}"
    );

    // Each problem names its argument.
    for (args, field) in [
        (json!({"read": ["relative"]}), "read"),
        (json!({"write": ["/a/../b"]}), "write"),
        (json!({"network": "lan"}), "network"),
        (json!({"enabled": "yes"}), "enabled"),
        (json!({"read": "/srv"}), "read"),
    ] {
        let mut call = json!({"action": "sandbox", "name": "files"});
        call.as_object_mut()
            .unwrap()
            .extend(args.as_object().unwrap().clone());
        let (is_error, v) = agent.try_registry(call.clone()).await.unwrap();
        assert!(is_error, "{call} -> {v}");
        assert_eq!(
            (&v["code"], &v["field"]),
            (&json!("invalid_input"), &json!(field)),
            "{call} -> {v}"
        );
    }
    let (is_error, v) = agent
        .try_registry(json!({"action": "sandbox", "name": "nope", "network": "none"}))
        .await
        .unwrap();
    assert!(is_error && v["code"] == "not_found", "{v}");
    let v = agent
        .registry(json!({"action": "sandbox", "name": "files"}))
        .await;
    assert_eq!(
        (&v["network"], &v["read"]),
        (&json!("none"), &json!(["/srv/in"])),
        "{v}"
    );

    // The tool's schema names the action and its arguments; `list` and `status` carry the sandbox.
    let tools = agent.client.list_all_tools().await.unwrap();
    let registry = tools.iter().find(|t| t.name == "registry").unwrap();
    let props = &registry.input_schema["properties"];
    assert!(
        props["action"]["enum"]
            .as_array()
            .unwrap()
            .contains(&json!("sandbox"))
    );
    for arg in ["network", "read", "write", "enabled"] {
        assert!(
            props.get(arg).is_some(),
            "{arg} missing from the registry schema"
        );
    }
    let list = agent.registry(json!({"action": "list"})).await;
    assert_eq!(
        in_list(&list, "files")["sandbox"],
        json!({"enabled": false, "effective": false, "network": "none"}),
        "{list}"
    );
    let status = agent.registry(json!({"action": "status"})).await;
    assert!(status["sandbox_kernel"].is_object(), "{status}");
    agent.stop().await;
}

// ---------- PostgreSQL ----------

/// On a team registry the settings are stored the same way, and `migrate`'s copy carries them from a personal one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_live_in_postgres_and_migrate_copies_them() {
    use agent_discover::sandbox::{Network, SandboxSettings};
    use agent_discover::store::Store;
    let pg = crate::pg::server();
    let url = pg.new_database();
    let team = Store::open_url(&url).unwrap();
    let personal = Store::open_in_memory().unwrap();
    let spec = |name: &str| ServerSpec {
        name: name.into(),
        command: Some("true".into()),
        ..Default::default()
    };
    let settings = SandboxSettings {
        network: Network::None,
        read: vec![PathBuf::from("/srv/in")],
        ..SandboxSettings::default()
    };
    let id = personal.insert_server(&spec("files")).unwrap().id;
    personal.set_sandbox_settings(id, &settings).unwrap();
    let report = personal
        .copy_into(&team, false, &|_, blob| Ok(blob.to_vec()))
        .unwrap();
    assert_eq!(report.rows.get("server_sandbox"), Some(&1), "{report:?}");
    let copied = team.server_by_name("files").unwrap().unwrap().id;
    assert_eq!(team.sandbox_settings(copied).unwrap(), Some(settings));
    let other = team.insert_server(&spec("other")).unwrap().id;
    assert_eq!(team.sandbox_settings(other).unwrap(), None);
    let off = SandboxSettings {
        enabled: false,
        ..SandboxSettings::default()
    };
    team.set_sandbox_settings(other, &off).unwrap();
    team.set_sandbox_settings(other, &off).unwrap();
    assert_eq!(team.sandbox_settings(other).unwrap(), Some(off));
}
