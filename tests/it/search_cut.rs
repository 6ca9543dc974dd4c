//! `find_tool`'s cut (issue 31): a cosine candidate BM25 did not find is read from the store only when it makes the
//! cut, and the ranking is what reading every candidate gave (ties at the cut to the shorter name, full records).

use agent_discover::events::EventBus;
use agent_discover::model::{ServerSpec, ToolInfo};
use agent_discover::registry::Registry;
use agent_discover::search::{Provider, Search};
use agent_discover::store::Store;

const MODEL: &str = "test-model";

fn unit(i: usize) -> Vec<f32> {
    let mut v = vec![0.0; 8];
    v[i] = 1.0;
    v
}

/// Three tools BM25 cannot find for the query: two with the query's own vector (the longer name registered first, so
/// it has the lower id), one with another. Every answer carries complete records.
#[tokio::test]
async fn cosine_candidates_are_read_when_they_make_the_cut_and_ties_go_to_the_shorter_name() {
    let store = Store::open_in_memory().unwrap();
    let registry = Registry::new(store.clone(), EventBus::default());
    let server = registry
        .register(ServerSpec {
            name: "files".into(),
            command: Some("npx".into()),
            ..Default::default()
        })
        .unwrap();
    let tool = |name: &str, description: &str| ToolInfo {
        name: name.into(),
        description: description.into(),
        input_schema: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    };
    registry
        .save_tools(
            server.id,
            &[
                tool("read_text_file_contents", "Reads a text file."),
                tool("read_file", "Reads a file."),
                tool("move_file", "Moves a file."),
            ],
        )
        .unwrap();
    let ids: Vec<(String, i64)> = store
        .tools_of(server.id)
        .unwrap()
        .into_iter()
        .map(|t| (t.name, t.id))
        .collect();
    let id = |name: &str| ids.iter().find(|(n, _)| n == name).unwrap().1;
    assert!(id("read_text_file_contents") < id("read_file"));
    store
        .set_embeddings(
            MODEL,
            &[
                (id("read_text_file_contents"), unit(0)),
                (id("read_file"), unit(0)),
                (id("move_file"), unit(1)),
            ],
        )
        .unwrap();
    let (provider, status) = Provider::from_env_value("none");
    let search = Search::new(store, provider, status);
    let query = "zzqx";
    let vector = || Some((unit(0), MODEL.to_owned()));

    let one = search.rank_with(query, vector(), 1).await.unwrap();
    assert_eq!(one.hits.len(), 1);
    let best = &one.hits[0];
    assert_eq!(
        best.tool.name, "read_file",
        "a tie at the cut goes to the shorter name"
    );
    assert_eq!(
        (best.tool.server.as_str(), best.tool.description.as_str()),
        ("files", "Reads a file.")
    );
    assert_eq!(
        best.tool.input_schema["properties"]["path"]["type"],
        "string"
    );
    assert!(best.bm25 == 0.0 && best.cosine.is_some_and(|c| c > 0.99));

    let all = search.rank_with(query, vector(), 5).await.unwrap();
    let names: Vec<&str> = all.hits.iter().map(|h| h.tool.name.as_str()).collect();
    assert_eq!(names, ["read_file", "read_text_file_contents", "move_file"]);
    assert!(all.hits.iter().all(|h| h.tool.server == "files"
        && h.tool.input_schema.is_object()
        && !h.tool.description.is_empty()));
}
