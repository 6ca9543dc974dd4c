//! Limits against real processes: `agent-discover mcp` (the stdio front, whose fast lane takes the calls) and `serve`
//! with the fixture server as the child and rmcp clients: a rate limit lets its burst through and then refuses with
//! `retry_after_ms`; a concurrency cap of 1 serialises calls and a full queue refuses; a hanging server trips its
//! breaker, is refused at once during the cool-down, and a trial call then closes it (or opens it again); the CLI,
//! REST, `/metrics`, the call log and the per-server endpoint show it; two replicas on one PostgreSQL share a limit.

use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::harness::{self, parse, spawn};

/// Runs `agent-discover ARGS` on `dir` and parses its JSON output.
async fn cli_json(dir: &std::path::Path, args: &[&str]) -> Value {
    let out = harness::command(dir, args).output().await.unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A call's refusal by a limit: (kind, retry_after_ms), or `None` when it was not refused.
fn refusal(r: &rmcp::model::CallToolResult) -> Option<(String, u64)> {
    if r.is_error != Some(true) {
        return None;
    }
    let v = parse(r);
    Some((
        v["kind"].as_str()?.to_owned(),
        v["retry_after_ms"].as_u64()?,
    ))
}

#[tokio::test]
async fn a_rate_limit_lets_the_burst_through_then_refuses_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn(dir.path(), &[], None).await;
    a.install_fixture("fx", &[], json!({})).await;
    a.registry(json!({"action": "activate", "name": "fx"}))
        .await;
    assert_eq!(
        harness::text(&a.call("fx__echo", json!({"text": "warm"})).await),
        "warm"
    );

    // The registry tool may tighten limits: 1 a minute with a burst of 3.
    let set = a
        .registry(json!({"action": "limits", "name": "fx", "rate": "1/min", "burst": 3}))
        .await;
    assert_eq!(set["settings"]["rate"]["burst"], 3, "{set}");
    for i in 0..3 {
        let r = a
            .call("fx__echo", json!({"text": format!("call {i}")}))
            .await;
        assert_eq!(
            harness::text(&r),
            format!("call {i}"),
            "call {i} of the burst"
        );
    }
    let refused = a.call("fx__echo", json!({"text": "one too many"})).await;
    let (kind, retry) = refusal(&refused).unwrap_or_else(|| panic!("not refused: {refused:?}"));
    assert_eq!(kind, "rate_limited");
    // The next token comes a minute after the first was taken.
    assert!((1..=60_000).contains(&retry), "{retry}");
    assert_eq!(parse(&refused)["server"], "fx");
    // The registry's proxy_call meets the same bucket.
    let (is_error, v) = a
        .try_registry(json!({"action": "proxy_call", "server": "fx", "tool": "echo", "arguments": {"text": "x"}}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert_eq!(v["kind"], "rate_limited", "{v}");

    // From the registry tool, loosening is refused; a person's CLI may (and the running process follows).
    let (is_error, v) = a
        .try_registry(json!({"action": "limits", "name": "fx", "rate": "100/s"}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert!(v.to_string().contains("loosen"), "{v}");
    let shown = cli_json(
        dir.path(),
        &["limits", "set", "fx", "--rate", "off", "--json"],
    )
    .await;
    assert!(shown[0]["settings"]["rate"].is_null(), "{shown}");
    let started = Instant::now();
    loop {
        let r = a.call("fx__echo", json!({"text": "again"})).await;
        if r.is_error != Some(true) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the CLI's change never reached the running process: {}",
            parse(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    a.stop().await;
}

#[tokio::test]
async fn a_concurrency_cap_of_one_serialises_calls_and_a_full_queue_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn(dir.path(), &[], None).await;
    a.install_fixture("one", &[], json!({})).await;
    a.registry(json!({"action": "activate", "name": "one"}))
        .await;
    a.registry(json!({"action": "limits", "name": "one", "concurrency": 1, "queue": 1}))
        .await;
    let sleep = |ms: u64| {
        a.client.call_tool(
            CallToolRequestParams::new("one__sleep").with_arguments(
                json!({"ms": ms, "step_ms": 60_000})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
    };
    // Three at once: one runs, one waits its turn, the third finds the queue full.
    let started = Instant::now();
    let (r1, r2, r3) = tokio::join!(sleep(600), sleep(600), sleep(600));
    let elapsed = started.elapsed();
    let results = [r1.unwrap(), r2.unwrap(), r3.unwrap()];
    let busy: Vec<_> = results.iter().filter_map(refusal).collect();
    assert_eq!(busy.len(), 1, "{results:?}");
    assert_eq!(busy[0].0, "server_busy");
    assert!(
        parse(results.iter().find(|r| r.is_error == Some(true)).unwrap())["error"]
            .as_str()
            .unwrap()
            .contains("queue is full")
    );
    // The two let through ran one after the other.
    assert!(elapsed >= Duration::from_millis(1_200), "{elapsed:?}");

    // A queued call that waits longer than its wait limit is refused.
    a.registry(json!({"action": "limits", "name": "one", "wait": "200ms"}))
        .await;
    let (long, waited) = tokio::join!(sleep(1_000), async {
        // Issued second, so it is the one that queues.
        tokio::task::yield_now().await;
        let t = Instant::now();
        (sleep(10).await, t.elapsed())
    });
    assert!(long.unwrap().is_error != Some(true));
    let (queued, waited_for) = waited;
    let (kind, _) = refusal(&queued.unwrap()).expect("the queued call was refused");
    assert_eq!(kind, "server_busy");
    assert!(
        waited_for >= Duration::from_millis(200) && waited_for < Duration::from_millis(1_000),
        "{waited_for:?}"
    );
    a.stop().await;
}

#[tokio::test]
async fn a_hanging_server_trips_its_breaker_and_a_trial_call_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = spawn(dir.path(), &[], None).await;
    a.install_fixture("hang", &[], json!({"call_timeout_ms": 300}))
        .await;
    a.registry(json!({"action": "activate", "name": "hang"}))
        .await;
    // A shorter cool-down loosens the breaker: a person's change (the CLI), which the running process reads.
    cli_json(
        dir.path(),
        &[
            "limits",
            "set",
            "hang",
            "--breaker",
            "2/30s",
            "--cooldown",
            "1s",
            "--json",
        ],
    )
    .await;
    let started = Instant::now();
    while a
        .registry(json!({"action": "limits", "name": "hang"}))
        .await["settings"]["breaker"]["failures"]
        != 2
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the change never reached the process"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let hang = json!({"ms": 60_000, "step_ms": 60_000});
    for i in 0..2 {
        let r = a.call("hang__sleep", hang.clone()).await;
        assert_eq!(parse(&r)["kind"], "timeout", "call {i}: {}", parse(&r));
    }
    // Open: refused at once, without waiting for the call timeout.
    let t = Instant::now();
    let r = a.call("hang__echo", json!({"text": "x"})).await;
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    let (kind, retry) = refusal(&r).unwrap_or_else(|| panic!("{}", parse(&r)));
    assert_eq!(kind, "server_unavailable");
    assert!((1..=1_001).contains(&retry), "{retry}");
    // `status` and `limits show` in another process see it open.
    let status = cli_json(dir.path(), &["status", "--json"]).await;
    let server = status["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "hang")
        .unwrap();
    assert_eq!(server["breaker"], "open", "{server}");

    // After the cool-down one trial goes through; it hangs too, so the breaker opens again at once.
    let mut trial = None;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let r = a.call("hang__sleep", hang.clone()).await;
        if refusal(&r).is_none_or(|(k, _)| k != "server_unavailable") {
            trial = Some(r);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let trial = trial.expect("no trial call within 5 s of a 1 s cool-down");
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(parse(&trial)["kind"], "timeout", "{}", parse(&trial));
    let r = a.call("hang__echo", json!({"text": "x"})).await;
    assert_eq!(
        refusal(&r).map(|r| r.0).as_deref(),
        Some("server_unavailable")
    );

    // The next trial succeeds and closes it.
    let started = Instant::now();
    loop {
        let r = a.call("hang__echo", json!({"text": "back"})).await;
        if r.is_error != Some(true) {
            assert_eq!(harness::text(&r), "back");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{}", parse(&r));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let shown = cli_json(dir.path(), &["limits", "show", "hang", "--json"]).await;
    assert_eq!(shown[0]["breaker"]["state"], "closed", "{shown}");
    assert_eq!(
        harness::text(&a.call("hang__echo", json!({"text": "ok"})).await),
        "ok"
    );
    a.stop().await;
}

#[tokio::test]
async fn rest_metrics_the_call_log_and_the_per_server_endpoint_show_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let served = crate::http::serve(dir.path(), &[]).await;
    let url = served.url.clone();
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{url}/api/servers"))
        .json(&json!({"name": "fx", "command": harness::fixture(), "args": ["--name", "fx"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let activated = http
        .post(format!("{url}/api/servers/fx/activate"))
        .send()
        .await
        .unwrap();
    assert!(
        activated.status().is_success(),
        "{}",
        activated.text().await.unwrap()
    );

    let set = http
        .put(format!("{url}/api/servers/fx/limits"))
        .json(&json!({"rate": "1/min", "burst": 2, "concurrency": 2}))
        .send()
        .await
        .unwrap();
    assert!(set.status().is_success(), "{}", set.text().await.unwrap());
    let bad = http
        .put(format!("{url}/api/servers/fx/limits"))
        .json(&json!({"rate": "fast"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let call = || {
        http.post(format!("{url}/api/servers/fx/call"))
            .json(&json!({"tool": "echo", "args": {"text": "hi"}}))
            .send()
    };
    for _ in 0..2 {
        assert_eq!(call().await.unwrap().status(), 200);
    }
    let refused = call().await.unwrap();
    assert_eq!(refused.status(), 429);
    assert!(refused.headers().get("retry-after").is_some());
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["kind"], "rate_limited", "{body}");
    assert!(body["retry_after_ms"].as_u64().unwrap() > 0, "{body}");

    // The per-server endpoint stands in for the server: there, the refusal is JSON-RPC error -32029.
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp/servers/fx")),
    );
    let client = rmcp::ServiceExt::serve(
        harness::TestClient {
            seen: Default::default(),
            sampling_reply: None,
        },
        transport,
    )
    .await
    .unwrap();
    let err = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "x"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap_err();
    match err {
        rmcp::ServiceError::McpError(e) => {
            assert_eq!(e.code.0, -32029, "{e:?}");
            assert_eq!(e.data.as_ref().unwrap()["kind"], "rate_limited");
        }
        e => panic!("{e}"),
    }
    let _ = client.cancel().await;

    let view: Value = http
        .get(format!("{url}/api/servers/fx/limits"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(view["refused"]["rate_limited"], 2, "{view}");
    assert_eq!(view["tokens"], 0, "{view}");
    assert_eq!(view["breaker"]["state"], "closed", "{view}");
    assert_eq!(view["concurrency"]["cap"], 2, "{view}");
    let all: Value = http
        .get(format!("{url}/api/limits"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        all.as_array().unwrap().iter().any(|v| v["server"] == "fx"),
        "{all}"
    );
    let metrics = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics
            .contains("agent_discover_limit_refusals_total{server=\"fx\",kind=\"rate_limited\"} 2"),
        "{metrics}"
    );
    let logs: Value = http
        .get(format!("{url}/api/logs?limit=50"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(logs.to_string().contains("rate_limited"), "{logs}");
    drop(served);
}

#[tokio::test]
async fn two_replicas_on_one_postgres_share_a_rate_limit() {
    let server = crate::pg::server();
    let db = server.new_database();
    let key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
    let mut replicas = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let env = [
            ("AGENT_DISCOVER_DATABASE_URL", db.clone()),
            ("AGENT_DISCOVER_MASTER_KEY", key.to_owned()),
            ("AGENT_DISCOVER_REPLICA", format!("r{i}")),
        ];
        replicas.push(crate::replicas::replica(dir.path(), &env).await);
        dirs.push(dir);
    }
    let http = reqwest::Client::new();
    crate::replicas::register_fixture(&http, &replicas[0], "fx").await;
    // Both run it (the second follows the active flag).
    for r in &replicas {
        let started = Instant::now();
        loop {
            let listed: Vec<Value> = http
                .get(format!("{}/api/servers", r.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if listed
                .iter()
                .any(|s| s["name"] == "fx" && s["running"] == true)
            {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{} never ran fx",
                r.url
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Ten calls a minute for the whole team, set through the first replica; the second reads it within a second.
    let set = http
        .put(format!("{}/api/servers/fx/limits", replicas[0].url))
        .json(&json!({"rate": "1/min", "burst": 10}))
        .send()
        .await
        .unwrap();
    assert!(set.status().is_success(), "{}", set.text().await.unwrap());
    let started = Instant::now();
    loop {
        let v: Value = http
            .get(format!("{}/api/servers/fx/limits", replicas[1].url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if v["settings"]["rate"]["burst"] == 10 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut passed = [0u32; 2];
    for i in 0..30 {
        let r = &replicas[i % 2];
        let resp = http
            .post(format!("{}/api/servers/fx/call", r.url))
            .json(&json!({"tool": "echo", "args": {"text": "t"}}))
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            200 => passed[i % 2] += 1,
            429 => {}
            s => panic!("{s}: {}", resp.text().await.unwrap()),
        }
    }
    let total = passed[0] + passed[1];
    // The burst, plus at most the one token a minute's rate adds while the calls run; alone, each replica would
    // have let ten through.
    assert!((10..=11).contains(&total), "{passed:?}");
    assert!(passed[0] > 0 && passed[1] > 0, "{passed:?}");
}

/// Team mode: a breaker opened on one replica is followed by the others as soon as PostgreSQL's notification of it
/// arrives, not on their next timed read of the limits (two `Limits` over their own connections to one database, as
/// two `serve` processes have).
#[test]
fn a_breaker_opened_on_one_replica_refuses_on_the_other_once_notified() {
    use ad_core::limits::{Breaker, LimitSettings};
    use agent_discover::error::Error;
    use agent_discover::events::EventBus;
    use agent_discover::proxy::limits::Limits;
    use agent_discover::registry::Registry;
    use agent_discover::store::Store;

    let server = crate::pg::server();
    let url = server.new_database();
    let (a_store, b_store) = (
        Store::open_url(&url).unwrap(),
        Store::open_url(&url).unwrap(),
    );
    let a_reg = Registry::new(a_store, EventBus::default());
    let spec = serde_json::from_value(json!({"name": "fx", "command": "true"})).unwrap();
    a_reg.register(spec).unwrap();
    let settings = LimitSettings {
        breaker: Some(Breaker {
            failures: 2,
            window_ms: 30_000,
            cooldown_ms: 60_000,
        }),
        ..LimitSettings::default()
    };
    a_reg.set_limit_settings("fx", Some(settings)).unwrap();
    let a = Limits::new(a_reg);
    let b = Limits::new(Registry::new(b_store.clone(), EventBus::default()));
    // B has just read the limits: with a timed re-read it would let calls through for up to a second more.
    b.admit("fx", "echo", None).unwrap().finish(false);
    let seen = b_store.limits_marker().expect("the listener is connected");
    let mut changes = b_store.remote_changes().expect("a PostgreSQL store");
    for _ in 0..2 {
        a.admit("fx", "echo", None).unwrap().finish(true);
    }
    assert!(matches!(
        a.admit("fx", "echo", None),
        Err(Error::ServerUnavailable { .. })
    ));
    // B hears of it (its listener counts the notification; no timer), then refuses at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(30),
            changes.wait_for(|s| s.limits + s.reconnects > seen),
        )
        .await
        .expect("the breaker's opening was never notified")
        .unwrap();
    });
    let started = Instant::now();
    match b.admit("fx", "echo", None) {
        Err(Error::ServerUnavailable {
            failures,
            retry_after_ms,
            ..
        }) => {
            assert_eq!(failures, 2);
            assert!(retry_after_ms > 30_000, "{retry_after_ms}");
        }
        Err(e) => panic!("refused otherwise: {e}"),
        Ok(_) => panic!("the other replica still lets calls through"),
    }
    // Followed on that call, not after a timed re-read.
    assert!(started.elapsed() < Duration::from_secs(1));
}
