//! The offline model's part in projects, so a group prompt works without a key: a leader
//! splits the request ("a house and a tree") into side-by-side tasks and says so, directs the
//! members to them (a duo leader starts one itself), waits, and ends the project once every
//! task is done; a member draws its task's subject (a house, a tree, else a labelled box)
//! inside its task's bounds and marks the task done.
//!
//! Reads the fairy's mode from the request's typed [`ModelRequest::mode`] (never from the system
//! prompt's prose, which may be reworded), and otherwise only what a real model would: the
//! context part (`bounds`, `currentProject`) and the request's message. Owns no I/O.

use serde_json::{Value, json};

use super::{context, create, geo, house};
use crate::llm::types::{Mode, ModelRequest, Role};

/// Most tasks the offline leader plans.
const MAX_TASKS: usize = 4;

fn last_message(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.text())
        .unwrap_or_default()
}

/// `[x, y, w, h]` of a JSON bounds object, rounded.
fn bounds(v: &Value) -> [i64; 4] {
    let n = |k: &str| v[k].as_f64().unwrap_or(0.0).round() as i64;
    [n("x"), n("y"), n("w").max(1), n("h").max(1)]
}

/// A project member's part: leading (alone or as a duo) or working a task (marked done with
/// the named action).
enum Part {
    Lead { duo: bool },
    Work { done: &'static str },
}

/// The project answer for this request, or `None` when the fairy is in no project mode.
pub fn respond(request: &ModelRequest) -> Option<String> {
    let part = match request.mode? {
        Mode::OrchestratingActive => Part::Lead { duo: false },
        Mode::DuoOrchestratingActive => Part::Lead { duo: true },
        Mode::WorkingDrone => Part::Work {
            done: "mark-drone-task-done",
        },
        Mode::WorkingOrchestrator => Part::Work {
            done: "mark-duo-task-done",
        },
        Mode::Idling
        | Mode::Soloing
        | Mode::WorkingSolo
        | Mode::StandingBy
        | Mode::OrchestratingWaiting
        | Mode::DuoOrchestratingWaiting => return None,
    };
    // Read only in a project mode: parsing it was most of a solo answer's cost.
    let (ctx, message) = (context(request), last_message(request));
    let actions = match part {
        Part::Lead { duo } => lead(&ctx, &message, duo),
        Part::Work { done } => work(&ctx, &message, done),
    };
    Some(json!({ "actions": actions }).to_string())
}

/// The subjects of a request: "a house and a tree" → ["a house", "a tree"].
fn subjects(message: &str) -> Vec<String> {
    let mut out: Vec<String> = message
        .replace(", and ", ",")
        .replace(" and ", ",")
        .split(',')
        .map(|s| s.trim().trim_end_matches('.').to_owned())
        .filter(|s| !s.is_empty())
        .take(MAX_TASKS)
        .collect();
    if out.is_empty() {
        out.push(message.trim().to_owned());
    }
    out
}

fn lead(ctx: &Value, message: &str, duo: bool) -> Vec<Value> {
    let project = &ctx["currentProject"];
    let tasks = project["tasks"].as_array().cloned().unwrap_or_default();
    let (create_task, direct, wait, end) = if duo {
        (
            "create-duo-task",
            "direct-to-start-duo-task",
            "await-duo-tasks-completion",
            "end-duo-project",
        )
    } else {
        (
            "create-project-task",
            "direct-to-start-project-task",
            "await-tasks-completion",
            "end-project",
        )
    };
    if !tasks.is_empty() {
        let open: Vec<Value> = tasks
            .iter()
            .filter(|t| t["status"] != json!("done"))
            .map(|t| t["id"].clone())
            .collect();
        if open.is_empty() {
            let titles: Vec<&str> = tasks.iter().filter_map(|t| t["title"].as_str()).collect();
            return vec![json!({"_type": end, "summary": format!("Done: {}.", titles.join(", "))})];
        }
        return vec![json!({"_type": wait, "taskIds": open})];
    }
    let drones: Vec<Value> = project["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == json!("drone"))
        .map(|m| m["id"].clone())
        .collect();
    let request = project["description"].as_str().unwrap_or(message);
    let mut subjects = subjects(request);
    // Each member (and a duo's leader) gets one task at most.
    subjects.truncate(drones.len() + usize::from(duo));
    let [x, y, w, h] = bounds(&ctx["bounds"]);
    let width = w / i64::try_from(subjects.len().max(1)).unwrap_or(1);
    let start = if duo {
        "start-duo-project"
    } else {
        "start-project"
    };
    let tasks = if subjects.len() == 1 { "task" } else { "tasks" };
    let planned = format!(
        "Planned {} {tasks}: {}.",
        subjects.len(),
        subjects.join(", ")
    );
    let mut actions = vec![
        json!({"_type": "message", "text": planned}),
        json!({"_type": start, "title": request, "description": request,
        "plan": format!("{} side by side, one task each, in parallel.", subjects.join(", "))}),
    ];
    let ids: Vec<String> = (1..=subjects.len()).map(|i| format!("t{i}")).collect();
    for (i, (subject, id)) in subjects.iter().zip(&ids).enumerate() {
        let tx = x + width * i64::try_from(i).unwrap_or(0);
        actions.push(json!({"_type": create_task, "taskId": id, "title": subject,
            "text": format!("Draw {subject} inside the task's bounds."),
            "x": tx, "y": y, "w": width, "h": h}));
    }
    // A duo's leader keeps the first task for itself; the members take the others in order.
    let directed = if duo {
        &ids[1.min(ids.len())..]
    } else {
        &ids[..]
    };
    for (id, drone) in directed.iter().zip(&drones) {
        actions.push(json!({"_type": direct, "taskId": id, "fairyId": drone}));
    }
    if duo && let Some(first) = ids.first() {
        actions.push(json!({"_type": "start-duo-task", "taskId": first}));
    } else {
        actions.push(json!({"_type": wait, "taskIds": ids}));
    }
    actions
}

/// Moves created shapes by `(dx, dy)`.
fn shifted(actions: Vec<Value>, dx: i64, dy: i64) -> Vec<Value> {
    actions
        .into_iter()
        .map(|mut a| {
            for (key, d) in [("x", dx), ("y", dy)] {
                if let Some(v) = a["shape"][key].as_i64() {
                    a["shape"][key] = json!(v + d);
                }
            }
            a
        })
        .collect()
}

fn tree() -> Vec<Value> {
    vec![
        create(
            "Draw the trunk",
            geo("rectangle", "trunk", [80, 110, 40, 140], "orange", ""),
        ),
        create(
            "Add the crown",
            geo("ellipse", "crown", [20, 0, 160, 130], "green", ""),
        ),
    ]
}

fn work(ctx: &Value, message: &str, done: &str) -> Vec<Value> {
    let [x, y, w, _] = bounds(&ctx["bounds"]);
    let lower = message.to_ascii_lowercase();
    let title = message
        .lines()
        .next()
        .and_then(|l| l.split_once(": "))
        .map(|(_, t)| t.to_owned())
        .unwrap_or_else(|| message.chars().take(60).collect());
    let drawing = if lower.contains("house") {
        shifted(house(), x + 40, y + 40)
    } else if lower.contains("tree") {
        shifted(tree(), x + 40, y + 40)
    } else {
        vec![create(
            "Draw the task",
            geo(
                "rectangle",
                "task-box",
                [x + 20, y + 20, (w - 40).max(40), 120],
                "violet",
                &title,
            ),
        )]
    };
    let mut actions = drawing;
    actions.push(json!({"_type": done}));
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;

    /// A request of a fairy in `mode`, whose system prompt names no mode at all.
    fn request(mode: Mode, context: Value, message: &str) -> ModelRequest {
        ModelRequest {
            system: "## Rules\nAnswer with actions.".into(),
            messages: vec![
                ChatMessage::user(format!("Here is the state:\n{context}")),
                ChatMessage::user(message.to_owned()),
            ],
            max_tokens: 100,
            mode: Some(mode),
            ..ModelRequest::default()
        }
    }

    fn parse(text: Option<String>) -> Vec<Value> {
        text.and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v["actions"].as_array().cloned())
            .unwrap_or_default()
    }

    #[test]
    fn a_leader_plans_side_by_side_tasks_then_waits_then_ends() {
        let ctx = json!({"bounds": {"x": 0, "y": 0, "w": 1000, "h": 600},
            "currentProject": {"description": "a house and a tree", "tasks": [],
                "members": [{"id": "o", "role": "orchestrator"}, {"id": "d1", "role": "drone"}, {"id": "d2", "role": "drone"}]}});
        let plan = parse(respond(&request(
            Mode::OrchestratingActive,
            ctx,
            "a house and a tree",
        )));
        let types: Vec<&str> = plan.iter().filter_map(|a| a["_type"].as_str()).collect();
        assert_eq!(
            types,
            [
                "message",
                "start-project",
                "create-project-task",
                "create-project-task",
                "direct-to-start-project-task",
                "direct-to-start-project-task",
                "await-tasks-completion"
            ]
        );
        assert_eq!(plan[3]["x"], json!(500));
        assert_eq!(plan[5]["fairyId"], json!("d2"));
        let ctx = json!({"currentProject": {"tasks": [{"id": "t1", "title": "a house", "status": "done"}]}});
        let end = parse(respond(&request(Mode::OrchestratingActive, ctx, "woken")));
        assert_eq!(end[0]["_type"], json!("end-project"));
        assert!(respond(&request(Mode::Soloing, Value::Null, "hi")).is_none());
    }

    #[test]
    fn a_member_draws_its_subject_in_its_bounds() {
        let ctx = json!({"bounds": {"x": 500, "y": 0, "w": 500, "h": 600}});
        let work = parse(respond(&request(
            Mode::WorkingDrone,
            ctx,
            "Your task 't2': a tree\nDraw a tree",
        )));
        assert_eq!(work[0]["shape"]["shapeId"], json!("trunk"));
        assert_eq!(work[0]["shape"]["x"], json!(620));
        assert_eq!(
            work.last().map(|a| a["_type"].clone()),
            Some(json!("mark-drone-task-done"))
        );
    }

    #[test]
    fn the_typed_mode_decides_not_the_system_prompts_prose() {
        let ctx = json!({"bounds": {"x": 0, "y": 0, "w": 1000, "h": 600},
            "currentProject": {"description": "a house", "tasks": [],
                "members": [{"id": "o", "role": "orchestrator"}, {"id": "d1", "role": "drone"}]}});
        let lead = |system: &str, mode: Option<Mode>| {
            let mut r = request(Mode::Soloing, ctx.clone(), "a house");
            r.system = system.into();
            r.mode = mode;
            parse(respond(&r))
        };
        let first_type = |actions: &[Value]| actions.get(1).map(|a| a["_type"].clone());
        // The prompt builder's sentence, reworded or absent, changes nothing: the field decides.
        for system in [
            "## Mode\nYou are in mode `orchestrating-active`. Only these actions are allowed",
            "## Mode\nYour current mode is orchestrating-active.",
            "",
        ] {
            let duo = lead(system, Some(Mode::DuoOrchestratingActive));
            assert_eq!(
                first_type(&duo),
                Some(json!("start-duo-project")),
                "{system}"
            );
            let solo = lead(system, Some(Mode::OrchestratingActive));
            assert_eq!(first_type(&solo), Some(json!("start-project")), "{system}");
            // A prompt naming a project mode does not make a request without one a project's.
            assert!(lead(system, None).is_empty(), "{system}");
            assert!(lead(system, Some(Mode::Soloing)).is_empty(), "{system}");
        }
        let done = |mode| {
            let r = request(
                mode,
                json!({"bounds": {"x": 0, "y": 0, "w": 400, "h": 400}}),
                "a box",
            );
            parse(respond(&r)).last().map(|a| a["_type"].clone())
        };
        assert_eq!(
            done(Mode::WorkingOrchestrator),
            Some(json!("mark-duo-task-done"))
        );
        assert_eq!(
            done(Mode::WorkingDrone),
            Some(json!("mark-drone-task-done"))
        );
    }
}
