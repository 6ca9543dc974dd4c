//! Tool search on a catalog of 1,224 real tools from 49 real MCP servers (tests/data/tool_catalog.json): keyword and
//! paraphrased queries, queries with no right answer, and hostile queries.

use serde_json::Value;

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search};
use agent_discover::store::Store;

fn data(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A registry holding the real catalog.
pub fn catalog_store() -> Store {
    let store = Store::open_in_memory().unwrap();
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
    store
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
