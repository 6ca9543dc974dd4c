//! Issue 10: every lifecycle transition is one atomic change. Subscribers (in this App, and in a second App on the same
//! database file, which hears of changes only through SQLite) read every snapshot while a server is reconfigured,
//! disabled, enabled and another is reauthorized in a loop: no snapshot lacks either server, and each entry's
//! (status, toolCount, tools) belongs to one state of the server, never to two.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::feed::ListedEntry;
use agent_discover::model::{ServerSpec, Transport};

use crate::harness::{BIN, fixture};

fn app_in(dir: &Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    App::open(config).expect("open the app")
}

/// The fixture in one of two configurations with different tool sets: `alpha`+`beta`, or `gamma`.
fn fx(config_b: bool) -> ServerSpec {
    let mut args = vec!["--name".into(), "fx".into()];
    let tools: &[&str] = if config_b {
        &["gamma"]
    } else {
        &["alpha", "beta"]
    };
    for t in tools {
        args.push("--tool".into());
        args.push((*t).into());
    }
    ServerSpec {
        name: "fx".into(),
        description: "fixture fx".into(),
        command: Some(fixture().into()),
        args,
        ..Default::default()
    }
}

/// An authorization server with protected resource metadata for `<base>/mcp` on 127.0.0.1: enough for `reauthorize`
/// to discover it, register a client and answer an authorization URL.
async fn stub_as() -> String {
    use axum::routing::{get, post};
    use serde_json::json;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (b1, b2) = (base.clone(), base.clone());
    let router = axum::Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || async move {
                axum::Json(json!({"resource": format!("{b1}/mcp"), "authorization_servers": [b1]}))
            }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move {
                axum::Json(json!({
                    "issuer": b2, "authorization_endpoint": format!("{b2}/authorize"),
                    "token_endpoint": format!("{b2}/token"), "registration_endpoint": format!("{b2}/register"),
                    "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
                }))
            }),
        )
        .route(
            "/register",
            post(|| async {
                (
                    axum::http::StatusCode::CREATED,
                    axum::Json(
                        json!({"client_id": "stub-client", "token_endpoint_auth_method": "none"}),
                    ),
                )
            }),
        );
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    base
}

/// Checks one snapshot; returns what is wrong with it.
fn check(servers: &[ListedEntry]) -> Result<(), String> {
    let get = |n: &str| servers.iter().find(|s| s.name == n);
    let fx = get("fx").ok_or("fx vanished")?;
    let remote = get("remote").ok_or("remote vanished")?;
    let names: BTreeSet<&str> = fx.tools.iter().map(|t| t.name.as_str()).collect();
    if fx.tool_count != fx.tools.len() {
        return Err(format!(
            "fx: toolCount {} but {} tools",
            fx.tool_count,
            fx.tools.len()
        ));
    }
    let a = names.contains("alpha") && names.contains("beta") && !names.contains("gamma");
    let b = names.contains("gamma") && !names.contains("alpha") && !names.contains("beta");
    if !(a || b) {
        return Err(format!("fx: tools of no single configuration: {names:?}"));
    }
    let status = fx.status.as_str();
    if !["ready", "connecting", "stopped", "disabled"].contains(&status) {
        return Err(format!("fx: status {status} ({:?})", fx.error));
    }
    if fx.error.is_some() || fx.auth_url.is_some() {
        return Err(format!("fx: {status} with an error or authUrl: {fx:?}"));
    }
    let authenticating = remote.status.as_str() == "authenticating";
    if !(authenticating || remote.status.as_str() == "stopped") {
        return Err(format!("remote: status {}", remote.status.as_str()));
    }
    if authenticating != remote.auth_url.is_some()
        || (authenticating && remote.auth_mode != "authorizationCode")
    {
        return Err(format!(
            "remote: status, authUrl and authMode disagree: {remote:?}"
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_never_see_a_half_updated_entry_nor_a_vanished_row() {
    let dir = tempfile::tempdir().unwrap();
    let app = app_in(dir.path());
    let other = app_in(dir.path());
    let base = stub_as().await;
    app.add_server(fx(false), "manual").await.unwrap();
    let remote = ServerSpec {
        name: "remote".into(),
        description: "an OAuth-protected remote".into(),
        transport: Transport::StreamableHttp,
        url: Some(format!("{base}/mcp")),
        ..Default::default()
    };
    app.add_server(remote, "manual").await.unwrap();
    let first = app.activate_server("fx").await.unwrap();
    assert_eq!(
        serde_json::to_value(&first).unwrap()["state"],
        "ready",
        "{first:?}"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let watcher = |app: &Arc<App>| {
        let mut sub = app.subscribe_registry();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut seen = 0usize;
            let mut last_seq = 0;
            loop {
                let next = tokio::time::timeout(Duration::from_millis(200), sub.next()).await;
                let snap = match next {
                    Ok(Some(s)) => s,
                    Ok(None) => return Err("the feed stopped".to_owned()),
                    Err(_) if stop.load(Ordering::SeqCst) => return Ok(seen),
                    Err(_) => continue,
                };
                if seen > 0 && snap.seq <= last_seq {
                    return Err(format!("seq {} after {last_seq}", snap.seq));
                }
                last_seq = snap.seq;
                seen += 1;
                check(&snap.servers).map_err(|e| format!("snapshot seq {}: {e}", snap.seq))?;
            }
        })
    };
    let here = watcher(&app);
    let there = watcher(&other);

    const ROUNDS: usize = 12;
    for round in 0..ROUNDS {
        // Reconfigure (a running server restarts once with the other tool set), pause and resume it, and start a
        // new authorization of the remote one.
        let r = app.add_server(fx(round % 2 == 0), "manual").await.unwrap();
        assert_eq!(serde_json::to_value(&r).unwrap()["state"], "ready", "{r:?}");
        assert!(app.disable("fx").await.unwrap());
        let r = app.enable("fx").await.unwrap();
        assert_eq!(serde_json::to_value(&r).unwrap()["state"], "ready", "{r:?}");
        let auth = app.reauthorize("remote").await.unwrap();
        assert_eq!(auth.state, "authenticating");
    }
    // Both feeds settle on the final state: fx ready with the last round's tools (round 11: alpha and beta).
    for a in [&app, &other] {
        a.feed().refresh();
        let mut sub = a.subscribe_registry();
        let settled = tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                let s = sub.next().await.unwrap();
                let fx = s.servers.iter().find(|e| e.name == "fx").unwrap();
                if fx.status.as_str() == "ready" && fx.tools.iter().any(|t| t.name == "alpha") {
                    return;
                }
            }
        })
        .await;
        assert!(settled.is_ok(), "a feed never showed the final state");
    }
    stop.store(true, Ordering::SeqCst);
    let here = here.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    let there = there.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("snapshots checked: {here} in this App, {there} in the other");
    // Each round changes fx at least four times: the subscribers saw many of them.
    assert!(here >= ROUNDS, "only {here} snapshots here");
    assert!(there >= 2, "only {there} snapshots in the other App");
    app.proxy.shutdown().await;
}
