//! Fairies working together end to end (real server, yrs client, the mock model routing its
//! answers per fairy and mode): a three-fairy project from group prompt to `end-project`, a
//! duo, the corrections (directing oneself or a non-member, a drone editing outside its
//! bounds), the 409 protections, disbanding mid-stream, and a restart mid-project.

use crate::support;

use std::time::{Duration, Instant};

use fairyring::config::ServeConfig;
use fairyring::llm::mock::{Fault, MockResponse, MockServer};
use serde_json::{Value, json};
use support::Client;
use support::fairy_http::*;
use yrs::{Any, Map, MapPrelim, WriteTxn};

/// Every request body the mock got from the fairy `name`, as text.
fn requests_of(mock: &MockServer, name: &str) -> Vec<String> {
    mock.requests()
        .into_iter()
        .map(|r| r.body.to_string())
        .filter(|b| b.contains(&format!("You are {name},")))
        .collect()
}

fn mode_of(c: &Client, id: &str) -> Option<String> {
    fairy_presence(c, id).and_then(|p| p["fairy"]["mode"].as_str().map(str::to_owned))
}

fn all_idle(c: &Client, ids: &[&str]) -> bool {
    ids.iter()
        .all(|id| mode_of(c, id).as_deref() == Some("idling"))
}

fn project_status(c: &Client, project: &str) -> Value {
    root_json(c, "projects")[project]["status"].clone()
}

async fn group_prompt(http: &str, room: &str, body: Value) -> (u16, Value) {
    post(&format!("{http}/rooms/{room}/group-prompt"), body).await
}

/// Writes a user's rectangle.
async fn user_rect(client: &mut Client, id: &str, x: f64, y: f64) {
    client
        .edit(|txn| {
            let shapes = txn.get_or_insert_map("shapes");
            shapes.insert(
                txn,
                id,
                MapPrelim::from([
                    ("id", Any::from(id)),
                    ("type", Any::from("rectangle")),
                    ("x", Any::from(x)),
                    ("y", Any::from(y)),
                    ("w", Any::from(50.0)),
                    ("h", Any::from(50.0)),
                ]),
            );
        })
        .await;
}

fn history_texts(history: &Value) -> String {
    history["history"].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_fairies_plan_draw_in_their_bounds_and_end_the_project() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "project3";
    let mut client = Client::connect(&ws, room).await;
    let orla = invite(&http, room, "Orla").await;
    let dart = invite(&http, room, "Dart").await;
    let echo = invite(&http, room, "Echo").await;
    user_rect(&mut client, "porch", 100.0, 300.0).await;
    user_rect(&mut client, "faraway", 3000.0, 3000.0).await;
    house_and_tree(&mock, &dart, &echo);
    let asked = Instant::now();
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "a house and a tree", "fairyIds": [orla, dart, echo],
               "bounds": {"x": 0, "y": 0, "w": 1000, "h": 500}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["orchestratorId"], json!(orla));
    assert_eq!(started["mode"], json!("orchestrating-active"));
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    // Written before the answer: every browser sees the project at once.
    client
        .until("the project in the document", |c| {
            let p = &root_json(c, "projects")[&project];
            p["orchestratorId"] == json!(orla) && p["members"].as_array().map(Vec::len) == Some(3)
        })
        .await;
    client
        .until("the project done and everyone idle", |c| {
            project_status(c, &project) == json!("done") && all_idle(c, &[&orla, &dart, &echo])
        })
        .await;
    let elapsed = asked.elapsed();
    eprintln!("group prompt to project done (mock model, 3 fairies, 5 model calls): {elapsed:?}");

    let p = &root_json(&client, "projects")[&project];
    assert_eq!(p["title"], json!("House and tree"));
    assert!(p["color"].as_str().is_some_and(|c| !c.is_empty()), "{p}");
    let tasks = root_json(&client, "tasks");
    for (id, who) in [("t-house", &dart), ("t-tree", &echo)] {
        let t = &tasks[format!("{project}/{id}")];
        assert_eq!(t["projectId"], json!(project), "{tasks}");
        assert_eq!(t["status"], json!("done"), "{tasks}");
        assert_eq!(t["assignedTo"], json!(who), "{tasks}");
        assert_eq!(t["w"].as_f64(), Some(400.0), "{tasks}");
    }
    let s = shapes(&client);
    assert_eq!(s["walls"]["x"].as_f64(), Some(50.0), "{s}");
    assert_eq!(
        s["oak"]["x"].as_f64(),
        Some(600.0),
        "drawn in its own bounds: {s}"
    );
    assert!(
        s.get("stray").is_none(),
        "the edit outside the bounds was refused: {s}"
    );

    // The drone saw only its bounds: the user's shape inside, nothing from outside (the
    // user's far shape, the other drone's tree).
    let dart_requests = requests_of(&mock, "Dart");
    assert!(dart_requests.len() >= 2, "{}", dart_requests.len());
    assert!(dart_requests.iter().any(|r| r.contains("porch")));
    for r in &dart_requests {
        assert!(!r.contains("faraway") && !r.contains("oak"), "{r}");
    }
    assert!(
        dart_requests[1].contains("outside your task's bounds"),
        "the drone was corrected: {}",
        dart_requests[1]
    );
    // The orchestrator was woken with both tasks' names.
    let orla_requests = requests_of(&mock, "Orla");
    let woken = orla_requests
        .iter()
        .find(|r| r.contains("tasks you were waiting for are done"))
        .expect("the orchestrator was woken");
    assert!(
        woken.contains("t-house") && woken.contains("t-tree"),
        "{woken}"
    );
    assert!(woken.contains("currentProject"), "{woken}");

    // Memory transitions in every history.
    for (id, line) in [
        (&orla, "I led the"),
        (&dart, "I took part in the"),
        (&echo, "I took part in the"),
    ] {
        let h = history(&http, room, id).await;
        let text = history_texts(&h);
        assert!(
            text.contains("<Project actions filtered for brevity>"),
            "{text}"
        );
        assert!(
            text.contains(line) && text.contains("House and tree"),
            "{text}"
        );
        assert_eq!(h["mode"], json!("idling"));
    }
    let dart_history = history_texts(&history(&http, room, &dart).await);
    assert!(
        dart_history.contains("I just finished the task"),
        "{dart_history}"
    );
    assert!(dart_history.contains("t-house"), "{dart_history}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duo_leader_works_on_a_task_itself() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "duo";
    let mut client = Client::connect(&ws, room).await;
    let lead = invite(&http, room, "Lark").await;
    let pal = invite(&http, room, "Pell").await;
    mock.add_route(route(
        "Lark",
        "duo-orchestrating-active",
        vec![
            actions(vec![
                json!({"_type": "start-duo-project", "title": "Two boxes", "description": "", "plan": "one each"}),
                json!({"_type": "create-duo-task", "taskId": "a", "title": "left box", "text": "a box", "x": 0, "y": 0, "w": 300, "h": 300}),
                json!({"_type": "create-duo-task", "taskId": "b", "title": "right box", "text": "a box", "x": 400, "y": 0, "w": 300, "h": 300}),
                json!({"_type": "direct-to-start-duo-task", "taskId": "b", "fairyId": pal}),
                json!({"_type": "start-duo-task", "taskId": "a"}),
            ]),
            actions(vec![json!({"_type": "await-duo-tasks-completion", "taskIds": ["b"]})]),
            actions(vec![json!({"_type": "end-duo-project", "summary": "done"})]),
        ],
    ));
    mock.add_route(route(
        "Lark",
        "working-orchestrator",
        vec![actions(vec![
            rect("left", 20, 20, 100, 100),
            json!({"_type": "mark-duo-task-done"}),
        ])],
    ));
    mock.add_route(route(
        "Pell",
        "working-drone",
        vec![actions(vec![
            rect("right", 20, 20, 100, 100),
            json!({"_type": "mark-drone-task-done"}),
        ])],
    ));
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "two boxes", "fairyIds": [lead, pal],
               "bounds": {"x": 0, "y": 0, "w": 800, "h": 400}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    assert_eq!(started["mode"], json!("duo-orchestrating-active"));
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the duo project done and both idle", |c| {
            project_status(c, &project) == json!("done") && all_idle(c, &[&lead, &pal])
        })
        .await;
    let tasks = root_json(&client, "tasks");
    assert_eq!(
        tasks[format!("{project}/a")]["assignedTo"],
        json!(lead),
        "{tasks}"
    );
    assert_eq!(
        tasks[format!("{project}/b")]["assignedTo"],
        json!(pal),
        "{tasks}"
    );
    let s = shapes(&client);
    assert_eq!(s["left"]["x"].as_f64(), Some(20.0), "{s}");
    assert_eq!(s["right"]["x"].as_f64(), Some(420.0), "{s}");
    let lead_history = history_texts(&history(&http, room, &lead).await);
    assert!(
        lead_history.contains("I just finished the task"),
        "{lead_history}"
    );
    assert!(lead_history.contains("I led the"), "{lead_history}");
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directing_oneself_or_a_stranger_is_corrected_and_bad_group_prompts_are_refused() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "corrections";
    let mut client = Client::connect(&ws, room).await;
    let orla = invite(&http, room, "Orla").await;
    let dart = invite(&http, room, "Dart").await;
    let lone = invite(&http, room, "Lone").await;
    mock.add_route(route(
        "Orla",
        "duo-orchestrating-active",
        vec![
            // A refused direction interrupts the rest of its answer (the design's
            // error-correction interrupt): `t2` is never created.
            actions(vec![
                json!({"_type": "create-duo-task", "taskId": "t1", "title": "box", "text": "", "x": 0, "y": 0, "w": 100, "h": 100}),
                json!({"_type": "direct-to-start-duo-task", "taskId": "t1", "fairyId": orla}),
                json!({"_type": "create-duo-task", "taskId": "t2", "title": "after", "text": "", "x": 200, "y": 0, "w": 100, "h": 100}),
            ]),
            actions(vec![
                json!({"_type": "direct-to-start-duo-task", "taskId": "t1", "fairyId": lone}),
                json!({"_type": "create-duo-task", "taskId": "t2", "title": "after", "text": "", "x": 200, "y": 0, "w": 100, "h": 100}),
            ]),
            actions(vec![json!({"_type": "direct-to-start-duo-task", "taskId": "t1"})]),
            actions(vec![json!({"_type": "abort-project", "reason": "testing"})]),
        ],
    ));
    // Bad group prompts.
    let (status, body) =
        group_prompt(&http, room, json!({"message": "x", "fairyIds": [orla]})).await;
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("fairy_in_project")),
        "{body}"
    );
    let (status, body) = group_prompt(
        &http,
        room,
        json!({"message": "x", "fairyIds": [orla, "f-nobody"]}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (404, &json!("fairy_not_found")),
        "{body}"
    );
    let (status, body) = group_prompt(
        &http,
        room,
        json!({"message": "", "fairyIds": [orla, dart]}),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "a box", "fairyIds": [dart, orla], "orchestratorId": orla}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project aborted and everyone idle", |c| {
            project_status(c, &project) == json!("aborted") && all_idle(c, &[&orla, &dart])
        })
        .await;
    let orla_requests = requests_of(&mock, "Orla");
    assert!(orla_requests.len() >= 4, "one turn per correction");
    assert!(
        orla_requests[1].contains("You cannot direct yourself"),
        "{}",
        orla_requests[1]
    );
    assert!(
        orla_requests[2].contains("is not a member of this project"),
        "{}",
        orla_requests[2]
    );
    assert!(
        orla_requests[3].contains("invalid"),
        "malformed arguments corrected: {}",
        orla_requests[3]
    );
    let tasks = root_json(&client, "tasks");
    assert_eq!(
        tasks[format!("{project}/t1")]["status"],
        json!("todo"),
        "{tasks}"
    );
    assert!(
        tasks.get(format!("{project}/t2")).is_none(),
        "what followed a refused direction was not carried out: {tasks}"
    );
    client.close().await;
    server.shutdown().await;
}

/// A drone's answer that stalls in the middle of a shape: the shape stays locked (tentative).
fn stalled_shape() -> MockResponse {
    let text = r#"{"actions": [{"_type": "create", "intent": "half", "shape": {"_type": "rectangle", "shapeId": "half", "note": "", "x": 10, "y": 10, "w": 100, "h": 100, "color": "blue"}}]}"#;
    MockResponse {
        fault: Some(Fault::Stall {
            after_chars: text.find("\"color\"").unwrap_or(60),
        }),
        ..ok(text)
    }
}

fn plan_one_task(drone: &str) -> MockResponse {
    actions(vec![
        json!({"_type": "start-project", "title": "One box", "description": "", "plan": "one task"}),
        task("t1", "a box", 0),
        json!({"_type": "direct-to-start-project-task", "taskId": "t1", "fairyId": drone}),
        json!({"_type": "await-tasks-completion", "taskIds": ["t1"]}),
    ])
}

/// Three fairies (Orla, Dart, Echo) in `room` and a project where Orla plans one task for
/// Dart and waits (then answers `orla_after`), and Dart's first answer stalls mid-shape (then
/// it answers `dart_after`). Returns the ids and the project once Dart's shape is streaming
/// (locked) and Orla waits.
async fn one_box_project(
    http: &str,
    client: &mut Client,
    mock: &MockServer,
    room: &str,
    orla_after: Vec<MockResponse>,
    dart_after: Vec<MockResponse>,
) -> ([String; 3], String) {
    let orla = invite(http, room, "Orla").await;
    let dart = invite(http, room, "Dart").await;
    let echo = invite(http, room, "Echo").await;
    let mut orla_answers = vec![plan_one_task(&dart)];
    orla_answers.extend(orla_after);
    let mut dart_answers = vec![stalled_shape()];
    dart_answers.extend(dart_after);
    mock.add_route(route("Orla", "orchestrating-active", orla_answers));
    mock.add_route(route("Dart", "working-drone", dart_answers));
    let (status, started) = group_prompt(
        http,
        room,
        json!({"message": "one box", "fairyIds": [orla, dart, echo],
               "bounds": {"x": 0, "y": 0, "w": 1000, "h": 500}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until(
            "the drone's shape streaming and the orchestrator waiting",
            |c| {
                shapes(c)["half"]["locked"] == json!(true)
                    && mode_of(c, &orla).as_deref() == Some("orchestrating-waiting")
            },
        )
        .await;
    ([orla, dart, echo], project)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_are_protected_and_disbanding_mid_stream_reverts_and_idles_everyone() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "disband";
    let mut client = Client::connect(&ws, room).await;
    let ([orla, dart, echo], project) =
        one_box_project(&http, &mut client, &mock, room, Vec::new(), Vec::new()).await;
    let awareness = fairy_presence(&client, &dart).expect("drone presence");
    assert_eq!(
        awareness["fairy"]["projectId"],
        json!(project),
        "{awareness}"
    );
    assert_eq!(awareness["fairy"]["taskId"], json!("t1"), "{awareness}");
    assert_eq!(
        awareness["fairy"]["tasks"][0]["id"],
        json!("t1"),
        "{awareness}"
    );
    client
        .until("a standing-by member shows the project's tasks too", |c| {
            fairy_presence(c, &echo).is_some_and(|p| {
                p["fairy"]["projectId"] == json!(project)
                    && p["fairy"]["tasks"][0]["status"] == json!("in-progress")
            })
        })
        .await;
    // Users cannot prompt or cancel members; no fairy joins a second project.
    for (url, body) in [
        (
            format!("{http}/rooms/{room}/fairies/{orla}/prompt"),
            json!({"message": "stop"}),
        ),
        (
            format!("{http}/rooms/{room}/fairies/{dart}/cancel"),
            json!({}),
        ),
    ] {
        let (status, body) = post(&url, body).await;
        assert_eq!(
            (status, &body["error"]),
            (409, &json!("fairy_in_project")),
            "{body}"
        );
    }
    let (status, body) = group_prompt(
        &http,
        room,
        json!({"message": "x", "fairyIds": [echo, dart]}),
    )
    .await;
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("fairy_in_project")),
        "{body}"
    );

    let response = reqwest::Client::new()
        .delete(format!("{http}/rooms/{room}/projects/{project}"))
        .send()
        .await
        .expect("disband");
    assert_eq!(response.status().as_u16(), 204);
    client
        .until(
            "the tentative shape reverted, the project aborted, everyone idle",
            |c| {
                shapes(c).get("half").is_none()
                    && project_status(c, &project) == json!("aborted")
                    && all_idle(c, &[&orla, &dart, &echo])
            },
        )
        .await;
    assert!(
        mock.wait_disconnects(1, Duration::from_secs(5)).await,
        "the stream was aborted"
    );
    // Nobody works on the unfinished task any more, and the document says so.
    let tasks = root_json(&client, "tasks");
    for (key, task) in tasks.as_object().into_iter().flatten() {
        if key.starts_with(&format!("{project}/")) {
            assert_ne!(task["status"], json!("in-progress"), "{tasks}");
            if task["status"] == json!("todo") {
                assert_eq!(task["assignedTo"], json!(null), "{tasks}");
            }
        }
    }
    let unknown = reqwest::Client::new()
        .delete(format!("{http}/rooms/{room}/projects/p-none"))
        .send()
        .await
        .expect("disband");
    assert_eq!(unknown.status().as_u16(), 404);
    // Free again: a user may prompt the former orchestrator.
    prompt(&http, room, &orla, "hello").await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_project_resumes_it() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = mock_config(&mock);
    config.store = format!("sqlite:{}", dir.path().join("projects.db").display());
    let (server, ws, http) = start(config.clone()).await;
    let room = "restart";
    let mut client = Client::connect(&ws, room).await;
    let orla_after = vec![actions(vec![
        json!({"_type": "end-project", "summary": "resumed and done"}),
    ])];
    let dart_after = vec![actions(vec![
        rect("whole", 10, 10, 100, 100),
        json!({"_type": "mark-drone-task-done"}),
    ])];
    let ([orla, dart, echo], project) =
        one_box_project(&http, &mut client, &mock, room, orla_after, dart_after).await;
    client.close().await;
    server.shutdown().await;

    let (server, ws, _http) = start(config).await;
    let mut client = Client::connect(&ws, room).await;
    client
        .until("the project resumed and done, nothing half-drawn", |c| {
            project_status(c, &project) == json!("done")
                && shapes(c).get("half").is_none()
                && shapes(c)["whole"]["locked"] == json!(false)
                && all_idle(c, &[&orla, &dart, &echo])
        })
        .await;
    client.close().await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_model_plays_a_whole_project() {
    let (server, ws, http) = start(ServeConfig::for_test()).await;
    let room = "offline-project";
    let mut client = Client::connect(&ws, room).await;
    let ids = [
        invite(&http, room, "Orla").await,
        invite(&http, room, "Dart").await,
        invite(&http, room, "Echo").await,
    ];
    let asked = Instant::now();
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "a house and a tree", "fairyIds": ids,
               "bounds": {"x": 0, "y": 0, "w": 1000, "h": 600}}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    client
        .until("the offline project done and everyone idle", |c| {
            project_status(c, &project) == json!("done") && all_idle(c, &refs)
        })
        .await;
    eprintln!(
        "group prompt to project done (offline model, 3 fairies): {:?}",
        asked.elapsed()
    );
    assert!(
        chat_texts(&client, &ids[0])
            .iter()
            .any(|t| t == "Planned 2 tasks: a house, a tree."),
        "the leader says what it planned"
    );
    let tasks = root_json(&client, "tasks");
    let done: Vec<&Value> = tasks
        .as_object()
        .map(|m| {
            m.values()
                .filter(|t| t["projectId"] == json!(project))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(done.len(), 2, "{tasks}");
    assert!(done.iter().all(|t| t["status"] == json!("done")), "{tasks}");
    let s = shapes(&client);
    assert!(s["roof"].is_object() && s["trunk"].is_object(), "{s}");
    assert!(
        s["roof"]["x"].as_f64() < s["trunk"]["x"].as_f64(),
        "side by side: {s}"
    );
    client.close().await;
    server.shutdown().await;
}

fn refused() -> MockResponse {
    MockResponse {
        fault: Some(Fault::Http {
            status: 400,
            body: r#"{"error":{"message":"bad request"}}"#.into(),
            retry_after: None,
        }),
        ..MockResponse::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_member_hands_its_task_back_and_a_failing_leader_aborts_the_project() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    // A drone whose model fails: its task goes back to todo and the leader is told.
    let room = "failing-drone";
    let mut client = Client::connect(&ws, room).await;
    let orla = invite(&http, room, "Orla").await;
    let dart = invite(&http, room, "Dart").await;
    let echo = invite(&http, room, "Echo").await;
    mock.add_route(route(
        "Orla",
        "orchestrating-active",
        vec![
            plan_one_task(&dart),
            actions(vec![
                json!({"_type": "abort-project", "reason": "no drone"}),
            ]),
        ],
    ));
    mock.add_route(route("Dart", "working-drone", vec![refused()]));
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "one box", "fairyIds": [orla, dart, echo]}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project aborted by its leader and everyone idle", |c| {
            project_status(c, &project) == json!("aborted") && all_idle(c, &[&orla, &dart, &echo])
        })
        .await;
    let told = requests_of(&mock, "Orla");
    assert!(
        told.iter()
            .any(|r| r.contains("stopped before finishing task 't1'")),
        "the leader was told"
    );
    let tasks = root_json(&client, "tasks");
    let t1 = &tasks[format!("{project}/t1")];
    assert_eq!(
        (&t1["status"], &t1["assignedTo"]),
        (&json!("todo"), &Value::Null),
        "{tasks}"
    );
    client.close().await;

    // A leader whose model fails: the project is aborted and every member goes idle.
    let room = "failing-leader";
    let mut client = Client::connect(&ws, room).await;
    let lead = invite(&http, room, "Lumo").await;
    let pal = invite(&http, room, "Pell").await;
    mock.add_route(route("Lumo", "duo-orchestrating-active", vec![refused()]));
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "x", "fairyIds": [lead, pal]}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project aborted and both idle", |c| {
            project_status(c, &project) == json!("aborted") && all_idle(c, &[&lead, &pal])
        })
        .await;
    assert!(
        chat_texts(&client, &lead)
            .iter()
            .any(|t| t.contains("stopped leading the project"))
    );
    client.close().await;
    server.shutdown().await;
}

/// A refused direction that is the last action of its answer triggers the correction, and the
/// interrupt does not leak into the correction turn: that answer (several deltas, three actions)
/// is carried out whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_ending_an_answer_does_not_cut_the_next_answer() {
    let mock = mock_server(vec![ok(r#"{"actions": []}"#)]).await;
    let (server, ws, http) = start(mock_config(&mock)).await;
    let room = "late-refusal";
    let mut client = Client::connect(&ws, room).await;
    let orla = invite(&http, room, "Orla").await;
    let dart = invite(&http, room, "Dart").await;
    let create_t1 = json!({"_type": "create-duo-task", "taskId": "t1", "title": "box", "text": "",
        "x": 0, "y": 0, "w": 100, "h": 100});
    let direct_self = json!({"_type": "direct-to-start-duo-task", "taskId": "t1", "fairyId": orla});
    mock.add_route(route(
        "Orla",
        "duo-orchestrating-active",
        vec![
            actions(vec![create_t1, direct_self]),
            actions(vec![
                json!({"_type": "create-duo-task", "taskId": "t2", "title": "two", "text": "", "x": 200, "y": 0, "w": 100, "h": 100}),
                json!({"_type": "create-duo-task", "taskId": "t3", "title": "three", "text": "", "x": 400, "y": 0, "w": 100, "h": 100}),
                json!({"_type": "abort-project", "reason": "testing"}),
            ]),
        ],
    ));
    let (status, started) = group_prompt(
        &http,
        room,
        json!({"message": "a box", "fairyIds": [dart, orla], "orchestratorId": orla}),
    )
    .await;
    assert_eq!(status, 202, "{started}");
    let project = started["projectId"].as_str().expect("projectId").to_owned();
    client
        .until("the project aborted and everyone idle", |c| {
            project_status(c, &project) == json!("aborted") && all_idle(c, &[&orla, &dart])
        })
        .await;
    let orla_requests = requests_of(&mock, "Orla");
    assert!(
        orla_requests
            .get(1)
            .is_some_and(|r| r.contains("You cannot direct yourself")),
        "the refusal ending the answer was corrected ({} requests)",
        orla_requests.len()
    );
    let tasks = root_json(&client, "tasks");
    for id in ["t1", "t2", "t3"] {
        assert!(
            tasks.get(format!("{project}/{id}")).is_some(),
            "{id} missing: the correction turn was carried out whole: {tasks}"
        );
    }
    assert_eq!(
        orla_requests.len(),
        2,
        "one correction turn, then the abort ended the project"
    );
    client.close().await;
    server.shutdown().await;
}
