//! Search benchmark (not a test): `find_tool` ranking latency at 1k, 10k and 100k synthetic tools, BM25 only and
//! hybrid (cosine over 384-dim vectors plus BM25, excluding the query embedding), the time to embed one realistic
//! query (10-30 words, from tests/data) with the local model, and end-to-end `find_tool` through the MCP front of
//! `target/release/agent-discover mcp` (stdio, rmcp client, query embedding included) at 2k, 10k and 100k tools; the
//! encoder's f16 and int8 weights are compared interleaved (forward pass), and end to end the int8 kernels (one
//! `mcp` process per kernel).
//!
//! Run: `cargo build --release && AGENT_DISCOVER_MODEL_DIR=... cargo bench --bench search`.

use std::time::{Duration, Instant};

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search};
use agent_discover::store::Store;

mod synthetic;
use synthetic::{Rng, build_in, queries};

/// Rounds of all queries per mode and catalog size.
const ROUNDS: usize = 10;

fn build(n: usize) -> Store {
    build_in(Store::open_in_memory().unwrap(), n, "bench-vectors")
}

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    // SEARCH_BENCH_BASE_BIN=<an earlier build of agent-discover>: only the end-to-end part, that build against this
    // one, side by side in one run (issue 31).
    if let Ok(base) = std::env::var("SEARCH_BENCH_BASE_BIN") {
        if std::env::var("SEARCH_BENCH_REAL").is_ok_and(|v| v == "1") {
            return through_the_python_sdk(std::path::PathBuf::from(base));
        }
        return side_by_side(std::path::PathBuf::from(base)).await;
    }
    let queries = queries();
    println!("## Tool search (issue 4)\n");
    println!(
        "Synthetic catalogs (50 tools per server), {} realistic queries x {ROUNDS} rounds in each mode, p50 of `Search::rank`; BM25 mode \
         (provider `none`) is measured first, then hybrid with 384-dim unit vectors, excluding embedding the query.\n",
        queries.len()
    );
    println!(
        "| tools | BM25 p50 | hybrid p50 | first hybrid query (index load) |\n|---|---|---|---|"
    );
    let mut index_mb = Vec::new();
    for n in [1_000usize, 10_000, 100_000] {
        let store = build(n);
        let search = Search::new(store, Provider::None, Provider::from_env_value("none").1);
        // BM25 mode first, on its own: a BM25-only process has no vector index to scan between queries.
        let mut bm = Vec::new();
        for _ in 0..ROUNDS {
            for query in &queries {
                let t = Instant::now();
                let r = search.rank(query, 5).await.unwrap();
                bm.push(t.elapsed());
                let _ = r;
            }
        }
        let mut rng = Rng(42);
        let q = rng.unit();
        let t = Instant::now();
        search
            .rank_with(&queries[0], Some((q.clone(), "bench-vectors".into())), 5)
            .await
            .unwrap();
        let load = t.elapsed();
        let mut hy = Vec::new();
        for _ in 0..ROUNDS {
            for query in &queries {
                let t = Instant::now();
                let r = search
                    .rank_with(query, Some((q.clone(), "bench-vectors".into())), 5)
                    .await
                    .unwrap();
                hy.push(t.elapsed());
                assert!(r.hybrid);
            }
        }
        index_mb.push((n, search.index_bytes() as f64 / 1e6));
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.1} ms |",
            ms(p50(bm)),
            ms(p50(hy)),
            ms(load)
        );
    }
    for (n, mb) in &index_mb {
        println!("\nVector index in memory at {n} tools: {mb:.1} MB.");
    }
    let (provider, status) = Provider::from_env_value("local");
    if status.provider == "local" {
        let t = Instant::now();
        provider.embed(vec!["warm up".into()]).await.unwrap();
        let load = t.elapsed();
        let mut times = Vec::new();
        for q in queries.iter().cycle().take(100) {
            let t = Instant::now();
            provider.embed(vec![q.clone()]).await.unwrap();
            times.push(t.elapsed());
        }
        println!(
            "\nEmbedding one realistic query ({} of 10-30 words) through the local provider (all-MiniLM-L6-v2, {} weights; \
             first call {:.0} ms incl. model load; {} thread(s) per product): p50 {:.2} ms.",
            queries.len(),
            agent_discover::embed::weights_from_env().name(),
            load.as_secs_f64() * 1000.0,
            agent_discover::embed::product_threads(),
            p50(times).as_secs_f64() * 1000.0
        );
        forward_pass(&queries);
        end_to_end().await;
    } else {
        println!(
            "\nLocal model not available ({:?}): query embedding not measured.",
            status.fallback_reason
        );
    }
}

/// The encoder's forward pass for one query (tokenising included), f16 against int8 weights, interleaved query by
/// query with the order alternating, so both see the same machine load.
fn forward_pass(queries: &[String]) {
    use agent_discover::embed::{MiniLm, WeightFormat};
    let dir = agent_discover::embed::find_model_dir(None).unwrap();
    let formats = [WeightFormat::F16, WeightFormat::Int8];
    let models: Vec<MiniLm> = formats
        .iter()
        .map(|f| MiniLm::load_with(&dir, *f).unwrap())
        .collect();
    let mut times = vec![Vec::new(); models.len()];
    for round in 0..3 {
        for (n, q) in queries.iter().enumerate() {
            for j in 0..models.len() {
                let m = if n % 2 == 0 { j } else { models.len() - 1 - j };
                let t = Instant::now();
                std::hint::black_box(models[m].embed(q));
                if round > 0 {
                    times[m].push(t.elapsed());
                }
            }
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p50s: Vec<String> = formats
        .iter()
        .zip(times)
        .map(|(f, t)| format!("{} {:.2} ms", f.name(), ms(p50(t))))
        .collect();
    println!(
        "\nForward pass of one realistic query (MiniLm::embed, {} thread(s) per product), interleaved, p50: {}.",
        agent_discover::embed::product_threads(),
        p50s.join(", ")
    );
}

/// `find_tool` through `agent-discover mcp` over stdio with rmcp's client, in BM25 and hybrid mode, at 2k and 10k
/// tools (synthetic, with random vectors stored under the local model's id so nothing is re-embedded); every query is
/// new to the process (no cached embedding) unless said otherwise.
async fn end_to_end() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let bin =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    if !bin.exists() {
        println!(
            "\n{} is missing: end-to-end find_tool not measured.",
            bin.display()
        );
        return;
    }
    let queries = queries();
    println!(
        "\nEnd-to-end `find_tool` through the MCP front (`agent-discover mcp`, stdio, rmcp client), {} realistic queries \
         each new to the process, p50; one process per column, queries interleaved across them ({} thread(s) per \
         product; int8 weights; kernel {:?}, against the AVX2 kernel of issue 13 via {}=avx2):\n\n| tools | BM25 | \
         hybrid, AVX2 kernel (query embedding included) | hybrid, {:?} kernel | hybrid AVX2, repeated query | \
         hybrid {:?}, repeated query |\n|---|---|---|---|---|---|",
        queries.len(),
        agent_discover::embed::product_threads(),
        agent_discover::embed::kernel(),
        agent_discover::embed::ENV_KERNEL,
        agent_discover::embed::kernel(),
        agent_discover::embed::kernel(),
    );
    let find = |q: &str| {
        CallToolRequestParams::new("registry").with_arguments(
            serde_json::json!({"action": "find_tool", "query": q, "auto_activate": false})
                .as_object()
                .unwrap()
                .clone(),
        )
    };
    for n in [2_000usize, 10_000, 100_000] {
        let dir = std::env::temp_dir().join(format!("ad-search-bench-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = agent_discover::config::Config::resolve(Some(&dir), None).unwrap();
        drop(build_in(
            Store::open(&cfg.db_path).unwrap(),
            n,
            &agent_discover::search::local_model_id(),
        ));
        // (provider, int8 kernel) per process; "" = the best this CPU has.
        let modes = [("none", ""), ("local", "avx2"), ("local", "")];
        let mut clients = Vec::new();
        for (provider, kernel) in modes {
            let mut cmd = tokio::process::Command::new(&bin);
            cmd.arg("--data-dir").arg(&dir).arg("mcp");
            cmd.env("AGENT_DISCOVER_DASHBOARD", "off")
                .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
                .env("AGENT_DISCOVER_EMBEDDING_PROVIDER", provider)
                .env(agent_discover::embed::ENV_WEIGHTS, "int8");
            if !kernel.is_empty() {
                cmd.env(agent_discover::embed::ENV_KERNEL, kernel);
            }
            let (t, _) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let client = ().serve(t).await.unwrap();
            // Warm up: the model and the vector index load on first use.
            client
                .call_tool(find("warm up the search index"))
                .await
                .unwrap();
            clients.push(client);
        }
        let mut times = vec![Vec::new(); clients.len()];
        for (i, q) in queries.iter().enumerate() {
            for j in 0..clients.len() {
                let c = if i % 2 == 0 { j } else { clients.len() - 1 - j };
                let t = Instant::now();
                let r = clients[c].call_tool(find(q)).await.unwrap();
                times[c].push(t.elapsed());
                assert_ne!(r.is_error, Some(true));
            }
        }
        let mut again = vec![Vec::new(); clients.len()];
        for (i, q) in queries.iter().take(20).cycle().take(100).enumerate() {
            for j in 1..clients.len() {
                let c = if i % 2 == 0 { j } else { clients.len() - j };
                let t = Instant::now();
                clients[c].call_tool(find(q)).await.unwrap();
                again[c].push(t.elapsed());
            }
        }
        for client in clients {
            client.cancel().await.unwrap();
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut times = times.into_iter();
        let mut again = again.into_iter().skip(1);
        println!(
            "| {n} | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms | {:.2} ms |",
            ms(p50(times.next().unwrap())),
            ms(p50(times.next().unwrap())),
            ms(p50(times.next().unwrap())),
            ms(p50(again.next().unwrap())),
            ms(p50(again.next().unwrap())),
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// End-to-end `find_tool` of two builds side by side: BM25 only (this build), hybrid with `base`, hybrid with this
/// build, one `agent-discover mcp` process each, every query sent to all three in turn (order alternating), in
/// `SEARCH_BENCH_ROUNDS` (default 3) rounds whose p50s are printed (each query new to its process in round 1 only
/// counts as new: later rounds use fresh processes). Tool counts: `SEARCH_BENCH_TOOLS` (default 2000,10000,100000).
async fn side_by_side(base: std::path::PathBuf) {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;
    let this =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/agent-discover");
    let queries = queries();
    let rounds: usize = std::env::var("SEARCH_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let sizes: Vec<usize> = std::env::var("SEARCH_BENCH_TOOLS")
        .unwrap_or_else(|_| "2000,10000,100000".into())
        .split(',')
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    println!(
        "End-to-end `find_tool` (stdio, rmcp client), {} realistic queries each new to its process, p50 per round; \
         base = {}\n\n| tools | round | BM25 only (this build) | hybrid, base | hybrid, this build | answer bytes p50, \
         base / this |\n|---|---|---|---|---|---|",
        queries.len(),
        base.display()
    );
    let find = |q: &str| {
        CallToolRequestParams::new("registry").with_arguments(
            serde_json::json!({"action": "find_tool", "query": q, "auto_activate": false})
                .as_object()
                .unwrap()
                .clone(),
        )
    };
    for n in sizes {
        let dir = std::env::temp_dir().join(format!("ad-search-sbs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = agent_discover::config::Config::resolve(Some(&dir), None).unwrap();
        drop(build_in(
            Store::open(&cfg.db_path).unwrap(),
            n,
            agent_discover::embed::MODEL_ID,
        ));
        // This build stores the local model's vectors under its own id when it differs from the base's (8-bit
        // activations): the same synthetic vectors in a second directory, so neither process re-embeds the catalog.
        let this_id = agent_discover::search::local_model_id();
        let dir_this = if this_id == agent_discover::embed::MODEL_ID {
            dir.clone()
        } else {
            let d =
                std::env::temp_dir().join(format!("ad-search-sbs-{}-{n}-this", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            let cfg = agent_discover::config::Config::resolve(Some(&d), None).unwrap();
            drop(build_in(Store::open(&cfg.db_path).unwrap(), n, &this_id));
            d
        };
        for round in 1..=rounds {
            let modes = [
                ("none", &this, &dir),
                ("local", &base, &dir),
                ("local", &this, &dir_this),
            ];
            let mut clients = Vec::new();
            for (provider, bin, dir) in modes {
                let mut cmd = tokio::process::Command::new(bin);
                cmd.arg("--data-dir").arg(dir).arg("mcp");
                cmd.env("AGENT_DISCOVER_DASHBOARD", "off")
                    .env("AGENT_DISCOVER_MODEL_SOURCE", "off")
                    .env("AGENT_DISCOVER_EMBEDDING_PROVIDER", provider)
                    .env(agent_discover::embed::ENV_WEIGHTS, "int8");
                let (t, _) = rmcp::transport::TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                let client = ().serve(t).await.unwrap();
                client
                    .call_tool(find("warm up the search index"))
                    .await
                    .unwrap();
                clients.push(client);
            }
            let mut times = vec![Vec::new(); clients.len()];
            let mut bytes = vec![Vec::new(); clients.len()];
            for (i, q) in queries.iter().enumerate() {
                for j in 0..clients.len() {
                    let c = if (i + round) % 2 == 0 {
                        j
                    } else {
                        clients.len() - 1 - j
                    };
                    let t = Instant::now();
                    let r = clients[c].call_tool(find(q)).await.unwrap();
                    times[c].push(t.elapsed());
                    assert_ne!(r.is_error, Some(true));
                    let text = r.content[0].as_text().map(|t| t.text.len()).unwrap_or(0);
                    bytes[c].push(Duration::from_nanos(text as u64));
                }
            }
            for client in clients {
                client.cancel().await.unwrap();
            }
            let ms = |d: Duration| d.as_secs_f64() * 1000.0;
            let mut t = times.into_iter().map(p50);
            let mut b = bytes.into_iter().map(|v| p50(v).as_nanos());
            let _ = b.next();
            println!(
                "| {n} | {round} | {:.2} ms | {:.2} ms | {:.2} ms | {} / {} |",
                ms(t.next().unwrap()),
                ms(t.next().unwrap()),
                ms(t.next().unwrap()),
                b.next().unwrap(),
                b.next().unwrap(),
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&dir_this);
    }
}

/// The real catalog (tests/data/tool_catalog.json: 1,224 tools of 49 servers) repeated under renamed servers
/// (`name`, `name-2`, ...) until it holds at least `n` tools, in `dir`'s database; no vectors (each process embeds the
/// tools with its own encoder on its first query).
fn real_catalog(dir: &std::path::Path, n: usize) -> usize {
    let cfg = agent_discover::config::Config::resolve(Some(dir), None).unwrap();
    let store = Store::open(&cfg.db_path).unwrap();
    let registry = Registry::new(store, EventBus::default());
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/tool_catalog.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut total = 0;
    for copy in 1.. {
        for s in doc["servers"].as_array().unwrap() {
            if total >= n {
                return total;
            }
            let name = s["name"].as_str().unwrap();
            let server = registry
                .register(ServerSpec {
                    name: if copy == 1 {
                        name.to_owned()
                    } else {
                        format!("{name}-{copy}")
                    },
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
            total += tools.len();
            registry.save_tools(server.id, &tools).unwrap();
        }
    }
    total
}

/// `SEARCH_BENCH_REAL=1`: issue 31's own measure, `find_tool` end to end through the official Python SDK
/// (`benches/find_tool_sdk.py`, with SEARCH_BENCH_PYTHON, default .ci/cache/venv/bin/python) on the real catalog
/// repeated to SEARCH_BENCH_TOOLS tools (default 2800): BM25 only (this build), hybrid for the base and this build,
/// each hybrid process in its own copy of the catalog (their encoders store vectors under different ids).
fn through_the_python_sdk(base: std::path::PathBuf) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let this = root.join("target/release/agent-discover");
    let python = std::env::var("SEARCH_BENCH_PYTHON")
        .unwrap_or_else(|_| root.join(".ci/cache/venv/bin/python").display().to_string());
    let rounds = std::env::var("SEARCH_BENCH_ROUNDS").unwrap_or_else(|_| "3".into());
    let n: usize = std::env::var("SEARCH_BENCH_TOOLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2800);
    let tmp = std::env::temp_dir().join(format!("ad-search-sdk-{}", std::process::id()));
    let dirs: Vec<std::path::PathBuf> = (0..3).map(|i| tmp.join(format!("d{i}"))).collect();
    let mut tools = 0;
    for d in &dirs {
        std::fs::create_dir_all(d).unwrap();
        tools = real_catalog(d, n);
    }
    println!(
        "Real catalog repeated to {tools} tools; base = {}\n",
        base.display()
    );
    let config = serde_json::json!([
        {"label": "BM25 only (this build)", "bin": this, "dir": dirs[0], "provider": "none"},
        {"label": "hybrid, base", "bin": base, "dir": dirs[1], "provider": "local"},
        {"label": "hybrid, this build", "bin": this, "dir": dirs[2], "provider": "local"},
    ]);
    let status = std::process::Command::new(python)
        .arg(root.join("benches/find_tool_sdk.py"))
        .arg(config.to_string())
        .arg(rounds)
        .status()
        .expect("running benches/find_tool_sdk.py");
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(status.success(), "benches/find_tool_sdk.py failed");
}
