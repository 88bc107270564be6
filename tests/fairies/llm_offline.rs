//! The offline model streams `{"actions": [...]}` through the same SSE path as a real
//! provider, says what it drew (or, to a request it does not know, that it is the offline
//! model), and is what the default config gives.
//! Also: every fixture script loads and the `fairyring mock-model` subcommand serves one.

use std::path::Path;
use std::time::Duration;

use crate::support::llm::*;
use fairyring::config::ServeConfig;
use fairyring::llm::mock::MockScript;
use fairyring::llm::{ChatMessage, OfflineModel, model_from_config};
use serde_json::Value;

async fn actions(prompt: &str) -> (Vec<Value>, Outcome) {
    let mut req = request();
    req.messages = vec![ChatMessage::user(prompt)];
    let out = collect(&OfflineModel, req).await;
    assert!(out.done(), "{:?}", out.items);
    let doc: Value = serde_json::from_str(&out.all_text()).expect("a JSON document");
    let actions = doc["actions"]
        .as_array()
        .cloned()
        .expect("an actions array");
    (actions, out)
}

fn created(actions: &[Value]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter(|a| a["_type"] == "create")
        .map(|a| {
            (
                a["shape"]["_type"].as_str().unwrap_or_default().to_owned(),
                a["shape"]["shapeId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn house_is_streamed_in_many_deltas() {
    let (a, out) = actions("Please draw a house").await;
    // It says what it drew, after drawing it (the notice is for requests it does not know).
    let last = a.last().cloned().unwrap_or_default();
    assert_eq!(last["_type"], "message");
    assert_eq!(last["text"], "Drew a house: walls, roof, door and window.");
    let kinds: Vec<String> = created(&a).into_iter().map(|c| c.0).collect();
    assert_eq!(kinds, ["rectangle", "triangle", "rectangle", "rectangle"]);
    assert!(out.deltas() > 10, "streamed in pieces, not at once");
    assert!(out.last_usage().is_some_and(|u| u.output_tokens > 0));
}

#[tokio::test]
async fn boxes_in_a_row_and_flowchart() {
    let (a, _) = actions("three boxes in a row").await;
    let boxes = created(&a);
    assert_eq!(boxes.len(), 3);
    let xs: Vec<i64> = a[..3]
        .iter()
        .map(|x| x["shape"]["x"].as_i64().unwrap_or(-1))
        .collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "left to right: {xs:?}");

    let (a, _) = actions("flowchart A -> B -> C").await;
    let c = created(&a);
    assert_eq!(c.iter().filter(|c| c.0 == "rectangle").count(), 3);
    let arrows: Vec<&Value> = a
        .iter()
        .filter(|x| x["shape"]["_type"] == "arrow")
        .collect();
    assert_eq!(arrows.len(), 2);
    assert_eq!(arrows[1]["shape"]["fromId"], "step2");
    assert_eq!(arrows[1]["shape"]["toId"], "step3");
}

#[tokio::test]
async fn anything_else_becomes_an_echoing_note() {
    let (a, _) = actions("remember to buy \"milk\" \\ eggs").await;
    assert_eq!(a.len(), 2);
    assert!(
        a[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("offline model"),
        "a request it does not know gets the notice: {a:?}"
    );
    assert_eq!(a[1]["shape"]["_type"], "note");
    assert_eq!(a[1]["shape"]["text"], "remember to buy \"milk\" \\ eggs");
}

#[tokio::test]
async fn default_config_is_the_offline_model() {
    let model = model_from_config(&ServeConfig::for_test()).expect("offline needs nothing");
    assert_eq!(model.name(), "offline");
    let out = collect(model.as_ref(), request()).await;
    assert!(out.done());
}

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_fixture_script_loads() {
    let files = fixtures();
    assert!(files.len() >= 3);
    for f in files {
        MockScript::load(&f).unwrap_or_else(|e| panic!("{e}"));
    }
    assert!(MockScript::from_json(r#"{"responses": []}"#, "x").is_err());
    assert!(MockScript::from_json(r#"{"responses": [{"txt": "typo"}]}"#, "x").is_err());
}

#[tokio::test]
async fn mock_model_subcommand_serves_a_fixture() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("addr").port()
    };
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models/house.json");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fairyring"))
        .args([
            "mock-model",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--script",
        ])
        .arg(&fixture)
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn fairyring mock-model");
    let base = format!("http://127.0.0.1:{port}");
    let up = tokio::time::timeout(Duration::from_secs(20), async {
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await; // polling a child process: no event to await
        }
    })
    .await;
    assert!(up.is_ok(), "mock-model listens");
    let provider = std::sync::Arc::new(fairyring::llm::openai::OpenAiProvider::new(
        reqwest::Client::new(),
        "m",
        Duration::from_secs(5),
    ));
    let model = fairyring::llm::FailoverModel::new(
        provider,
        vec![fairyring::llm::Profile::new("p", &base, None)],
        std::sync::Arc::new(fairyring::clock::ManualClock::new()),
        fairyring::llm::FailoverConfig::default(),
    )
    .expect("a profile");
    let out = collect(&model, request()).await;
    assert!(out.done(), "{:?}", out.items);
    let doc: Value = serde_json::from_str(&out.kept_text()).expect("fixture text is JSON");
    assert!(doc["actions"].as_array().is_some_and(|a| !a.is_empty()));
    let stats: Value = reqwest::get(format!("{base}/_mock/stats"))
        .await
        .expect("stats answer")
        .json()
        .await
        .expect("stats are JSON");
    assert_eq!(stats["requests"], 1);
    assert_eq!(stats["disconnects"], 0);
    let _ = child.start_kill();
    let _ = child.wait().await;
}
