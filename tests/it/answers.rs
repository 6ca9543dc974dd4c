//! Issue 31, part 2: `find_tool`'s answer is compact. On the real catalog (tests/data/tool_catalog.json, 1,224 tools
//! of 49 servers; every other server a catalog entry, introspected and not installed, so answers carry install
//! blocks) and every query of the tuning and held-out sets, the median 5-result answer stays within 1,500 bytes of compact
//! JSON (the largest within 2.5 KB):
//! the best match with what calling it needs, the other matches without repeated blocks (one `servers` entry per
//! server, one install block per catalog entry), long descriptions cut (`get_schema` has them whole).

use std::path::PathBuf;
use std::sync::Arc;

use agent_discover::app::App;
use agent_discover::config::Config;
use agent_discover::introspect::Record;
use agent_discover::model::{ServerSpec, ToolInfo};
use serde_json::json;

use crate::harness::BIN;
use crate::search::data;

/// An app on `dir` holding the real catalog: even-numbered servers registered (installed, inactive), odd-numbered
/// ones catalog entries made from introspection records, some needing a secret.
fn catalog_app(dir: &std::path::Path) -> Arc<App> {
    let mut config = Config::in_dir(dir);
    config.guard_exe = Some(PathBuf::from(BIN));
    let app = App::open(config).expect("open the app");
    for (i, s) in data("tool_catalog.json")["servers"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let name = s["name"].as_str().unwrap();
        let tools = s["tools"].as_array().unwrap();
        if i % 2 == 0 {
            let server = app
                .registry
                .register(ServerSpec {
                    name: name.into(),
                    command: Some("npx".into()),
                    ..Default::default()
                })
                .unwrap();
            let infos: Vec<ToolInfo> = tools
                .iter()
                .map(|t| ToolInfo {
                    name: t["name"].as_str().unwrap().into(),
                    description: t["description"].as_str().unwrap_or("").into(),
                    input_schema: t["inputSchema"].clone(),
                })
                .collect();
            app.registry.save_tools(server.id, &infos).unwrap();
        } else {
            let package = format!("@example/{name}-mcp");
            let env: Vec<String> = if i % 4 == 1 {
                vec![format!("{}_API_KEY", name.to_uppercase().replace('-', "_"))]
            } else {
                Vec::new()
            };
            let record: Record = serde_json::from_value(json!({
                "key": format!("npm:{package}"), "ecosystem": "npm", "package": package, "version": "1.4.2",
                "category": "ok", "evidence": "", "hint": "", "pass": 1, "needs": {"env": env},
                "launch": ["npx", "-y", package], "stages": [], "left_behind": 0, "duration_ms": 900,
                "tools": tools.iter().map(|t| json!({
                    "name": t["name"], "description": t["description"].as_str().unwrap_or(""),
                    "input_schema": t["inputSchema"],
                })).collect::<Vec<_>>(),
            }))
            .unwrap_or_else(|e| panic!("record for {name}: {e}"));
            agent_discover::catalog::save(&app, &record).unwrap();
        }
    }
    app
}

fn percentile(sorted: &[usize], p: f64) -> usize {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test]
async fn find_tool_answers_for_five_results_stay_within_one_and_a_half_kilobytes() {
    let dir = tempfile::tempdir().unwrap();
    let app = catalog_app(dir.path());
    app.search.embed_pending().await.unwrap();
    let mut installs = 0;
    for set in ["tool_queries.json", "tool_queries_heldout.json"] {
        let queries: Vec<String> = data(set)["queries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|q| q["query"].as_str().unwrap().to_owned())
            .collect();
        let (mut sizes, mut repeated) = (Vec::new(), Vec::new());
        for q in &queries {
            let found = app.find_tool(q, 5, false).await.unwrap();
            let v = serde_json::to_value(&found).unwrap();
            if v["found"] != true {
                continue;
            }
            let text = serde_json::to_string(&v).unwrap();
            // What calling the best match needs is there; the rest is not repeated per match.
            assert!(
                v["call_as"].is_string() && v["required_args"].is_array(),
                "{text}"
            );
            for m in v["other_matches"].as_array().unwrap() {
                let server = m["call_as"].as_str().unwrap().split("__").next().unwrap();
                let own = m.get("install").is_none() && m.get("server_status").is_none();
                if !own || (server != v["server"] && !v["servers"][server].is_object()) {
                    repeated.push(text.clone());
                }
            }
            installs += text.matches("\"install\":{").count().min(1);
            sizes.push(text.len());
        }
        sizes.sort_unstable();
        eprintln!(
            "{set}: {} answers with results, bytes p50 {} p90 {} max {}",
            sizes.len(),
            percentile(&sizes, 0.5),
            percentile(&sizes, 0.9),
            sizes[sizes.len() - 1]
        );
        assert!(
            sizes.len() > queries.len() / 2,
            "{set}: too few answers found"
        );
        assert!(
            repeated.is_empty(),
            "{set}: {} matches carry their own server blocks, e.g. {}",
            repeated.len(),
            repeated[0]
        );
        // The target is the typical answer; the largest ones carry two install blocks and long argument texts.
        let (p50, max) = (percentile(&sizes, 0.5), sizes[sizes.len() - 1]);
        assert!(p50 <= 1500, "{set}: median answer {p50} bytes");
        assert!(max <= 2560, "{set}: an answer of {max} bytes");
    }
    assert!(
        installs > 10,
        "catalog entries were expected among the answers"
    );
}
