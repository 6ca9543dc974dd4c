//! Tool search on a catalog of 1,224 real tools from 49 real MCP servers (tests/data/tool_catalog.json): keyword and
//! paraphrased queries, queries with no right answer, and hostile queries.

use serde_json::Value;

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search, bm25_sure};
use agent_discover::store::Store;

/// `q` and words no tool has: too little covered for BM25 to be sure (`bm25_sure`), so it is embedded.
fn pad(q: &str) -> String {
    format!("{q} alpha bravo charlie delta")
}

pub fn data(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A registry holding the real catalog.
pub fn catalog_store() -> Store {
    let store = Store::open_in_memory().unwrap();
    fill_catalog(&store);
    store
}

/// Registers the real catalog's servers and tools in `store`.
pub fn fill_catalog(store: &Store) {
    let registry = Registry::new(store.clone(), EventBus::default());
    for s in data("tool_catalog.json")["servers"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let server = registry
            .register(ServerSpec {
                name: name.into(),
                command: Some("npx".into()),
                ..Default::default()
            })
            .unwrap();
        let tools: Vec<ToolInfo> = s["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| ToolInfo {
                name: t["name"].as_str().unwrap().into(),
                description: t["description"].as_str().unwrap_or("").into(),
                input_schema: t["inputSchema"].clone(),
            })
            .collect();
        registry.save_tools(server.id, &tools).unwrap();
    }
}

fn call_as(hit: &agent_discover::search::Hit) -> String {
    format!("{}__{}", hit.tool.server, hit.tool.name)
}

#[tokio::test]
async fn bm25_finds_keyword_queries_and_survives_hostile_input() {
    let store = catalog_store();
    assert!(store.count_tools().unwrap() >= 300);
    let search = Search::new(store, Provider::None, Provider::from_env_value("none").1);
    let queries = data("tool_queries.json");
    let (mut top1, mut top3, mut n) = (0, 0, 0);
    for q in queries["queries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|q| q["kind"] == "keyword")
    {
        let expect: Vec<&str> = q["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        let ranking = search.rank(q["query"].as_str().unwrap(), 5).await.unwrap();
        let got: Vec<String> = ranking.hits.iter().map(call_as).collect();
        n += 1;
        if got.first().is_some_and(|g| expect.contains(&g.as_str())) {
            top1 += 1;
        }
        if got.iter().take(3).any(|g| expect.contains(&g.as_str())) {
            top3 += 1;
        } else {
            eprintln!(
                "miss: {:?} -> {:?} (expected {expect:?})",
                q["query"],
                &got[..got.len().min(3)]
            );
        }
    }
    eprintln!("BM25 keyword queries: top-1 {top1}/{n}, top-3 {top3}/{n}");
    assert!(n >= 15);
    assert!(
        top3 * 10 >= n * 8,
        "BM25 top-3 recall on keyword queries below 80%: {top3}/{n}"
    );
    for h in queries["hostile"].as_array().unwrap() {
        let r = search.rank(h.as_str().unwrap(), 5).await;
        assert!(r.is_ok(), "{h} -> {r:?}");
    }
    let long = "find a tool ".repeat(850);
    assert!(search.rank(&long, 5).await.is_ok(), "10 kB query");
    assert!(
        search.rank(&"x".repeat(20_000), 5).await.is_err(),
        "over the query limit"
    );
}

/// Hybrid ranking with the real local model (installed by scripts/test.sh): paraphrases that share no word with the
/// tool find it, and queries with no right answer come back as not found.
#[tokio::test]
async fn hybrid_finds_paraphrases_and_rejects_queries_with_no_answer() {
    let (provider, status) = Provider::from_env_value("local");
    assert_eq!(
        status.provider, "local",
        "the local model is required: {:?} (scripts/test.sh installs it)",
        status.fallback_reason
    );
    let search = Search::new(catalog_store(), provider, status);
    let embedded = search.embed_pending().await.unwrap();
    assert!(embedded >= 1000, "{embedded}");
    let queries = data("tool_queries.json");
    let (mut top1, mut top3, mut n) = (0, 0, 0);
    for q in queries["queries"].as_array().unwrap() {
        let expect: Vec<&str> = q["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        let text = q["query"].as_str().unwrap();
        let ranking = search.rank(text, 5).await.unwrap();
        assert!(ranking.hybrid);
        let got: Vec<String> = ranking.hits.iter().map(call_as).collect();
        n += 1;
        if got.first().is_some_and(|g| expect.contains(&g.as_str())) {
            top1 += 1;
        }
        if got.iter().take(3).any(|g| expect.contains(&g.as_str())) {
            top3 += 1;
        } else {
            eprintln!(
                "miss: {text:?} -> {:?} (expected {expect:?})",
                &got[..got.len().min(3)]
            );
        }
        if text.contains("billing arrangement") {
            assert!(
                got.iter().take(3).any(|g| expect.contains(&g.as_str())),
                "{text:?} -> {got:?}"
            );
        }
    }
    eprintln!("hybrid: top-1 {top1}/{n}, top-3 {top3}/{n}");
    assert!(
        top3 * 10 >= n * 7,
        "hybrid top-3 recall below 70%: {top3}/{n}"
    );
    for q in queries["no_match"].as_array().unwrap() {
        let ranking = search.rank(q.as_str().unwrap(), 5).await.unwrap();
        let top = ranking.hits.first().map(|h| h.score).unwrap_or(0.0);
        assert!(
            top < agent_discover::search::NO_MATCH,
            "{q} matched {:?} with {top:.2}",
            ranking.hits.first().map(call_as)
        );
    }
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// `find_tool` and `find_tools` through a real agent-discover process, on tools of servers that are not active (their
/// tools became known at an earlier activation), with the local model that scripts/test.sh installs: a paraphrase finds
/// the tool, auto-activation puts it in the client's tool list, a query with no answer says so, hostile queries are
/// answered, and the CLI's `find` gives the same answer.
#[tokio::test]
async fn find_tool_through_the_registry_tool_and_the_cli() {
    use crate::harness::{self, text};
    use serde_json::json;

    let dir = tmp();
    let agent = harness::spawn(dir.path(), &[], None).await;
    agent
        .install_fixture(
            "billing",
            &[
                "--tool",
                "cancel_subscription=Cancel a customer's subscription at the end of the billing period",
                "--tool",
                "create_invoice=Create an invoice for a customer",
            ],
            json!({}),
        )
        .await;
    agent
        .install_fixture(
            "chat",
            &[
                "--tool",
                "send_message=Send a message to a channel",
                "--tool",
                "list_channels=List the channels of a workspace",
            ],
            json!({}),
        )
        .await;
    for name in ["billing", "chat"] {
        agent
            .registry(json!({"action": "activate", "name": name}))
            .await;
        agent
            .registry(json!({"action": "deactivate", "name": name}))
            .await;
    }
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["active_count"], 0);
    assert_eq!(
        status["search"]["provider"], "local",
        "the local model is required (scripts/test.sh installs it): {}",
        status["search"]
    );
    assert_eq!(status["search"]["hybrid"], true);

    // A paraphrase that shares no word with the tool's name, without activating anything.
    let r = agent
        .registry(json!({"action": "find_tool", "query": "stop the billing arrangement of a client", "auto_activate": false}))
        .await;
    assert_eq!(r["found"], true, "{r}");
    assert_eq!(r["call_as"], "billing__cancel_subscription", "{r}");
    assert_eq!(r["server"], "billing");
    assert_eq!(r["tool"], "cancel_subscription");
    assert!(r["description"].as_str().unwrap().contains("subscription"));
    assert_eq!(r["required_args"], json!([]));
    assert_eq!(r["optional_count"], 1);
    assert!(["high", "medium", "low"].contains(&r["confidence"].as_str().unwrap()));
    assert!(r["score"].as_f64().unwrap() >= agent_discover::search::NO_MATCH);
    assert!(r["next_step"].as_str().unwrap().contains("activate"), "{r}");
    assert!(r["other_matches"].as_array().is_some());
    assert!(
        !agent
            .tool_names()
            .await
            .contains(&"billing__cancel_subscription".to_owned())
    );

    // auto_activate (the default): the owning server starts and its tool appears in the client's list.
    let before = *agent.seen.tool_list_changed.lock().unwrap();
    let r = agent
        .registry(json!({"action": "find_tool", "query": "post a note in a channel"}))
        .await;
    assert_eq!(r["call_as"], "chat__send_message", "{r}");
    assert_eq!(r["required_args"], json!([]));
    agent.wait_list_changed(before + 1).await;
    assert!(
        agent
            .tool_names()
            .await
            .contains(&"chat__send_message".to_owned())
    );
    let out = agent
        .call("chat__send_message", json!({"input": "hello"}))
        .await;
    assert_ne!(out.is_error, Some(true), "{}", text(&out));

    // A tool nobody has.
    let r = agent
        .registry(
            json!({"action": "find_tool", "query": "bake sourdough bread with a crispy crust"}),
        )
        .await;
    assert_eq!(r["found"], false, "{r}");
    assert!(r["top_score"].as_f64().unwrap() < agent_discover::search::NO_MATCH);
    assert!(!r["hint"].as_str().unwrap().is_empty());

    // Several intents in one round trip, answered in order.
    let r = agent
        .registry(json!({"action": "find_tools", "intents": ["write an invoice for a customer", "which channels exist"], "auto_activate": false}))
        .await;
    let results = r["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{r}");
    assert_eq!(results[0]["call_as"], "billing__create_invoice", "{r}");
    assert_eq!(results[1]["call_as"], "chat__list_channels", "{r}");

    // Hostile queries get answers, not failures; an oversized one is an argument error (SEP-1303: a tool result).
    let long = "find a tool ".repeat(850);
    for q in [
        "NEAR(a b",
        "\"unbalanced",
        "col:val*",
        "a OR OR b",
        "-",
        "🙂🙂",
        "^start AND",
        long.as_str(),
    ] {
        let (is_error, v) = agent
            .try_registry(json!({"action": "find_tool", "query": q, "auto_activate": false}))
            .await
            .unwrap_or_else(|e| panic!("{q:.40} -> protocol error {e:?}"));
        assert!(!is_error, "{q:.40} -> {v}");
        assert!(v["found"].is_boolean(), "{q:.40} -> {v}");
    }
    let (is_error, v) = agent
        .try_registry(json!({"action": "find_tool", "query": "x".repeat(20_000)}))
        .await
        .expect("a 20 kB query is a tool result, not a protocol error");
    assert!(is_error, "{v}");
    assert_eq!(v["field"], "query", "{v}");
    assert_eq!(v["code"], "invalid_input", "{v}");

    // The CLI, on the same database.
    let out = harness::command(dir.path(), &["find", "cancel a subscription", "--json"])
        .output()
        .await
        .expect("run agent-discover find");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["found"], true, "{v}");
    assert_eq!(v["call_as"], "billing__cancel_subscription", "{v}");
    let out = harness::command(
        dir.path(),
        &["find", "bake sourdough bread with a crispy crust"],
    )
    .output()
    .await
    .expect("run agent-discover find");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no good match"));
    agent.stop().await;
}

/// Without model files (or with an unusable provider), search falls back to BM25 and `status` says why.
#[tokio::test]
async fn status_says_why_semantic_search_is_off_and_bm25_still_answers() {
    use crate::harness;
    use serde_json::json;

    let (dir, home, empty) = (tmp(), tmp(), tmp());
    let home_path = home.path().display().to_string();
    let isolated = |provider: &str| {
        vec![
            ("AGENT_DISCOVER_EMBEDDING_PROVIDER", provider.to_owned()),
            (
                "AGENT_DISCOVER_MODEL_DIR",
                empty.path().display().to_string(),
            ),
            ("HOME", home_path.clone()),
            ("XDG_CACHE_HOME", format!("{home_path}/cache")),
            ("HF_HOME", format!("{home_path}/hf")),
            ("HF_HUB_CACHE", format!("{home_path}/hub")),
            ("OPENAI_API_KEY", String::new()),
        ]
    };
    let agent = harness::spawn_env(dir.path(), &[], None, &isolated("local")).await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["search"]["provider"], "none", "{}", status["search"]);
    assert_eq!(status["search"]["hybrid"], false);
    let reason = status["search"]["fallback_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(
        reason.contains("no all-MiniLM-L6-v2 model files"),
        "{reason}"
    );

    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let r = agent
        .registry(json!({"action": "find_tool", "query": "echo some text back"}))
        .await;
    assert_eq!(r["found"], true, "{r}");
    assert_eq!(r["call_as"], "fx__echo", "{r}");
    assert_eq!(r["required_args"][0]["name"], "text", "{r}");
    agent.stop().await;

    let agent = harness::spawn_env(dir.path(), &[], None, &isolated("openai")).await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(status["search"]["provider"], "none");
    let reason = status["search"]["fallback_reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("OPENAI_API_KEY"), "{reason}");
    agent.stop().await;
}

/// A stand-in for the OpenAI embeddings API on 127.0.0.1, with its request and response shapes: it checks the key,
/// answers each input with a bag-of-words vector (not normalised, entries in reverse order, as the API may return
/// them), and records the size of every batch.
async fn openai_stub() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<(String, usize)>>>,
) {
    use axum::Json;
    use axum::http::{HeaderMap, StatusCode};
    let batches = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = batches.clone();
    let app = axum::Router::new().route(
        "/v1/embeddings",
        axum::routing::post(move |headers: HeaderMap, Json(body): Json<Value>| {
            let seen = seen.clone();
            async move {
                if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer test-key") {
                    return (StatusCode::UNAUTHORIZED, Json(serde_json::json!({"error": {"message": "bad key"}})));
                }
                let inputs: Vec<String> = body["input"]
                    .as_array()
                    .map(|a| a.iter().map(|v| v.as_str().unwrap_or_default().to_owned()).collect())
                    .unwrap_or_default();
                let model = body["model"].as_str().unwrap_or_default().to_owned();
                seen.lock().unwrap().push((model.clone(), inputs.len()));
                if inputs.iter().any(|i| i == "make the server fail") {
                    return (StatusCode::INTERNAL_SERVER_ERROR, Json(serde_json::json!({"error": {"message": "boom"}})));
                }
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(i, text)| serde_json::json!({"object": "embedding", "index": i, "embedding": bag_of_words(text)}))
                    .collect();
                (StatusCode::OK, Json(serde_json::json!({"object": "list", "data": data, "model": model})))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1",
        listener.local_addr().unwrap().port()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, batches)
}

/// 64 counts of hashed lowercase words (a crude but deterministic embedding).
fn bag_of_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; 64];
    for w in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = w
            .to_lowercase()
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        v[(h % 64) as usize] += 1.0;
    }
    v
}

/// The `openai` provider against the stub: batches of 256, the bearer key, results put back in input order and
/// normalised, upstream failures reported; embeddings stored with the model id and recomputed when the model changes;
/// hybrid ranking on top of them.
#[tokio::test]
async fn openai_provider_batches_orders_normalises_and_reembeds_on_model_change() {
    let (url, batches) = openai_stub().await;
    let (provider, status) = Provider::openai(&url, "test-key", "stub-a");
    assert_eq!((status.provider, status.hybrid), ("openai", true));
    assert_eq!(provider.model_id().as_deref(), Some("openai:stub-a"));

    let texts: Vec<String> = (0..600)
        .map(|i| format!("tool number {i} lists item {}", i % 7))
        .collect();
    let vectors = provider.embed(texts.clone()).await.unwrap();
    assert_eq!(
        batches
            .lock()
            .unwrap()
            .iter()
            .map(|(_, n)| *n)
            .collect::<Vec<_>>(),
        [256, 256, 88]
    );
    assert_eq!(vectors.len(), 600);
    for (text, v) in texts.iter().zip(&vectors) {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "not unit length: {norm}");
        let expect = agent_discover::search::provider::normalize(bag_of_words(text));
        assert_eq!(v, &expect, "vector of {text:?} out of order");
    }

    let err = provider
        .embed(vec!["make the server fail".into()])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("500"), "{err}");
    let (wrong_key, _) = Provider::openai(&url, "other-key", "stub-a");
    let err = wrong_key.embed(vec!["x".into()]).await.unwrap_err();
    assert!(err.to_string().contains("401"), "{err}");

    // Stored with the model id; a new model re-embeds every tool, the same model nothing.
    let store = catalog_store();
    let total = store.count_tools().unwrap() as usize;
    let search = Search::new(store.clone(), provider, status);
    assert_eq!(search.embed_pending().await.unwrap(), total);
    assert_eq!(search.embed_pending().await.unwrap(), 0);
    let (provider_b, status_b) = Provider::openai(&url, "test-key", "stub-b");
    let search_b = Search::new(store, provider_b, status_b);
    batches.lock().unwrap().clear();
    assert_eq!(search_b.embed_pending().await.unwrap(), total);
    assert!(
        batches
            .lock()
            .unwrap()
            .iter()
            .all(|(m, n)| m == "stub-b" && *n <= 256)
    );

    let ranking = search_b.rank(&pad("a github issue"), 5).await.unwrap();
    assert!(ranking.hybrid && ranking.hits.iter().any(|h| h.cosine.is_some()));
}

/// BM25 first (issue 31): a query BM25 is sure of is answered without embedding it (nothing reaches the provider),
/// while one BM25 is not sure of is embedded and ranked by the hybrid score.
#[tokio::test]
async fn a_query_bm25_is_sure_of_skips_the_embedding_and_others_use_it() {
    let (url, batches) = openai_stub().await;
    let (provider, status) = Provider::openai(&url, "test-key", "stub-a");
    let search = Search::new(catalog_store(), provider, status);
    search.embed_pending().await.unwrap();
    let (sure, unsure) = (
        "retrieve_balance",
        pad("show what is written inside a file"),
    );
    let sure_of = async |q| bm25_sure(&search.rank_with(q, None, 50).await.unwrap().hits);
    assert!(sure_of(sure).await && !sure_of(&unsure).await);
    batches.lock().unwrap().clear();
    let ranking = search.rank(sure, 5).await.unwrap();
    let hit = &ranking.hits[0];
    assert!(batches.lock().unwrap().is_empty() && !ranking.embedded && hit.cosine.is_none());
    assert!(hit.tool.name == "retrieve_balance" && hit.score >= agent_discover::search::NO_MATCH);
    let ranking = search.rank(&unsure, 5).await.unwrap();
    assert_eq!(batches.lock().unwrap().as_slice(), [("stub-a".into(), 1)]);
    assert!(ranking.embedded && ranking.hits.iter().any(|h| h.cosine.is_some()));
}

/// The `openai` provider chosen by environment in a real agent-discover process: its base URL, key and model come
/// from AGENT_DISCOVER_OPENAI_BASE_URL, OPENAI_API_KEY and AGENT_DISCOVER_OPENAI_MODEL, and find_tool ranks with it.
#[tokio::test]
async fn openai_provider_from_the_environment_end_to_end() {
    use crate::harness;
    use serde_json::json;

    let (url, batches) = openai_stub().await;
    let dir = tmp();
    let agent = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[
            ("AGENT_DISCOVER_EMBEDDING_PROVIDER", "openai".into()),
            ("AGENT_DISCOVER_OPENAI_BASE_URL", url),
            ("AGENT_DISCOVER_OPENAI_MODEL", "stub-e2e".into()),
            ("OPENAI_API_KEY", "test-key".into()),
        ],
    )
    .await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(
        status["search"]["provider"], "openai",
        "{}",
        status["search"]
    );
    assert_eq!(status["search"]["model"], "stub-e2e");
    agent.install_fixture("fx", &[], json!({})).await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let r = agent
        .registry(json!({"action": "find_tool", "query": pad("echo the given text back"), "auto_activate": false}))
        .await;
    assert_eq!(r["call_as"], "fx__echo", "{r}");
    let sent = batches.lock().unwrap().clone();
    assert!(
        !sent.is_empty() && sent.iter().all(|(m, _)| m == "stub-e2e"),
        "{sent:?}"
    );
    agent.stop().await;
}

/// Without AGENT_DISCOVER_MODEL_DIR, the local model is found in the Hugging Face cache layout
/// (`$HF_HUB_CACHE/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/<revision>/`, files as symlinks), and
/// hybrid search is on by default.
#[tokio::test]
async fn the_local_model_is_found_in_the_hugging_face_cache() {
    use crate::harness;
    use serde_json::json;

    let installed = agent_discover::embed::find_model_dir(None)
        .expect("the local model is required (scripts/test.sh installs it)");
    let (dir, home) = (tmp(), tmp());
    let snapshot = home
        .path()
        .join("hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/0123abcd");
    std::fs::create_dir_all(&snapshot).unwrap();
    for f in ["model.safetensors", "vocab.txt", "config.json"] {
        std::os::unix::fs::symlink(installed.join(f), snapshot.join(f)).unwrap();
    }
    let h = home.path().display().to_string();
    let agent = harness::spawn_env(
        dir.path(),
        &[],
        None,
        &[
            ("AGENT_DISCOVER_MODEL_DIR", String::new()),
            ("AGENT_DISCOVER_EMBEDDING_PROVIDER", String::new()),
            ("HOME", h.clone()),
            ("XDG_CACHE_HOME", format!("{h}/cache")),
            ("HF_HOME", format!("{h}/hf")),
            ("HF_HUB_CACHE", format!("{h}/hub")),
        ],
    )
    .await;
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(
        status["search"]["provider"], "local",
        "{}",
        status["search"]
    );
    assert_eq!(status["search"]["hybrid"], true);
    agent
        .install_fixture(
            "fx",
            &[
                "--tool",
                "cancel_subscription=Cancel a customer's subscription",
            ],
            json!({}),
        )
        .await;
    agent
        .registry(json!({"action": "activate", "name": "fx"}))
        .await;
    let r = agent
        .registry(json!({"action": "find_tool", "query": "stop the billing arrangement", "auto_activate": false}))
        .await;
    assert_eq!(r["call_as"], "fx__cancel_subscription", "{r}");
    let status = agent.registry(json!({"action": "status"})).await;
    assert_eq!(
        status["search"]["model_loaded"], true,
        "{}",
        status["search"]
    );
    agent.stop().await;
}

/// Issue 13's quality gates on the held-out queries (tests/data/tool_queries_heldout.json: written before any tuning,
/// away from the tools' words, never used to choose weights or thresholds), hybrid mode with the local model:
/// top-1 and top-5 over the in-catalog queries, the share of them still found (score at or above NO_MATCH), and the
/// share of the no-answer intents refused. The floors are the measured figures (BENCHMARKS.md), so a change that
/// loses quality fails here; the targets (0.80 / 0.95 / 0.85) are not all met yet.
// Measured (2026-11-25, int8 index, NO_MATCH 0.25): top-1 0.57, top-5 0.87, found 0.97, refused 0.75; the floors are
// one query below (1/63 = 0.016, 1/28 = 0.036).
const GATE_TOP1: f64 = 0.55;
const GATE_TOP5: f64 = 0.85;
const GATE_FOUND: f64 = 0.95;
const GATE_REFUSED: f64 = 0.71;
#[tokio::test]
async fn held_out_quality_gates() {
    let (provider, status) = Provider::from_env_value("local");
    assert_eq!(
        status.provider, "local",
        "the local model is required (scripts/test.sh installs it)"
    );
    let search = Search::new(catalog_store(), provider, status);
    search.embed_pending().await.unwrap();
    let set = data("tool_queries_heldout.json");
    let (mut top1, mut top5, mut found, mut n) = (0, 0, 0, 0);
    for q in set["queries"].as_array().unwrap() {
        let expect: Vec<&str> = q["expect"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        let ranking = search.rank(q["query"].as_str().unwrap(), 5).await.unwrap();
        let got: Vec<String> = ranking.hits.iter().map(call_as).collect();
        n += 1;
        top1 += usize::from(got.first().is_some_and(|g| expect.contains(&g.as_str())));
        top5 += usize::from(got.iter().any(|g| expect.contains(&g.as_str())));
        found += usize::from(
            ranking
                .hits
                .first()
                .is_some_and(|h| h.score >= agent_discover::search::NO_MATCH),
        );
    }
    let no = set["no_match"].as_array().unwrap();
    let mut refused = 0;
    for q in no {
        let ranking = search.rank(q.as_str().unwrap(), 5).await.unwrap();
        refused += usize::from(
            ranking
                .hits
                .first()
                .is_none_or(|h| h.score < agent_discover::search::NO_MATCH),
        );
    }
    let r = |a: usize, b: usize| a as f64 / b as f64;
    let (t1, t5, f, rf) = (r(top1, n), r(top5, n), r(found, n), r(refused, no.len()));
    eprintln!(
        "held-out hybrid: top-1 {t1:.2} top-5 {t5:.2} found {f:.2} refused {rf:.2} ({n} queries, {} no-answer)",
        no.len()
    );
    assert!(t1 >= GATE_TOP1, "top-1 {t1:.2} < {GATE_TOP1}");
    assert!(t5 >= GATE_TOP5, "top-5 {t5:.2} < {GATE_TOP5}");
    assert!(f >= GATE_FOUND, "found {f:.2} < {GATE_FOUND}");
    assert!(rf >= GATE_REFUSED, "refused {rf:.2} < {GATE_REFUSED}");
}

/// Queries skip the scan for unembedded tools while nothing changed, yet a tool saved afterwards, by another
/// connection (another process) or in this one, is embedded before the next query and found by its meaning.
#[tokio::test]
async fn tools_saved_after_the_index_settled_are_embedded_before_the_next_query() {
    let dir = tmp();
    let db = dir.path().join("search.db");
    let (url, batches) = openai_stub().await;
    let (provider, status) = Provider::openai(&url, "test-key", "stub");
    let ours = Store::open(&db).unwrap();
    let registry = Registry::new(ours.clone(), EventBus::default());
    let server = registry
        .register(ServerSpec {
            name: "files".into(),
            command: Some("x".into()),
            ..Default::default()
        })
        .unwrap();
    let tool = |name: &str, description: &str| ToolInfo {
        name: name.into(),
        description: description.into(),
        input_schema: serde_json::json!({"type": "object"}),
    };
    registry
        .save_tools(server.id, &[tool("read_file", "Read a file from disk")])
        .unwrap();
    let search = Search::new(ours.clone(), provider, status);
    assert!(search.rank(&pad("read a file"), 5).await.unwrap().hybrid);
    // One batch for the tool, one for the query.
    assert_eq!(batches.lock().unwrap().len(), 2);
    let again = search.rank(&pad("read another file"), 5).await.unwrap();
    assert_eq!(again.hits[0].tool.name, "read_file");
    assert_eq!(
        batches.lock().unwrap().len(),
        3,
        "only the new query is embedded"
    );

    // Another process adds a server: the next query embeds its tool and ranks it by cosine.
    let theirs = Store::open(&db).unwrap();
    let other = Registry::new(theirs.clone(), EventBus::default());
    let weather = other
        .register(ServerSpec {
            name: "weather".into(),
            command: Some("x".into()),
            ..Default::default()
        })
        .unwrap();
    other
        .save_tools(weather.id, &[tool("forecast", "zyxx qwvv plokk")])
        .unwrap();
    let r = search.rank(&pad("forecast zyxx qwvv"), 5).await.unwrap();
    let hit = r
        .hits
        .iter()
        .find(|h| h.tool.name == "forecast")
        .expect("new tool found");
    assert!(hit.cosine.is_some_and(|c| c > 0.5), "{:?}", hit.cosine);

    // In this process: `tools_changed` (what the indexer calls on every tool-list event) makes the next query look.
    registry
        .save_tools(
            server.id,
            &[
                tool("read_file", "Read a file from disk"),
                tool("grep_lines", "mmrrk ttqqz"),
            ],
        )
        .unwrap();
    search.tools_changed();
    let r = search.rank(&pad("grep mmrrk ttqqz"), 5).await.unwrap();
    let hit = r
        .hits
        .iter()
        .find(|h| h.tool.name == "grep_lines")
        .expect("new tool found");
    assert!(hit.cosine.is_some_and(|c| c > 0.5), "{:?}", hit.cosine);
}
