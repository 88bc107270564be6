//! The offline model: the embedded default that needs no network and no key, so the demo
//! works out of the box. It recognises a few simple requests ("draw a house", "three boxes in
//! a row", "flowchart A -> B -> C"; with shapes selected, "move them right", "paint them green",
//! "delete them"), draws them in free space near the centre of the person's view
//! ([`place`]) and says what it did; anything else it leaves on a sticky note
//! echoing the request, with a notice of what it can do.
//!
//! Its answer is rendered as Anthropic SSE bytes and parsed back by the same SSE glue and
//! decoder as a real provider's, so callers exercise exactly the streaming path they will use
//! in production. Owns: the pattern matching and the generated actions, and what both its solo
//! and its project answers draw with (the notice that opens an answer to a request it does not
//! understand, the actions of a few shapes, the reading of the context turn both answer from).
//! No I/O.
//!
//! # Layout (parent → child only: the children use this file's shapes, never a sibling)
//! - [`project`]: its answers in projects (a leader's split, a member's task).
//! - [`place`]: where a drawing goes (free space near the person's view).

pub mod place;
pub mod project;

use std::convert::Infallible;
use std::time::Duration;

use futures_util::stream;
use serde_json::{Map, Value, json};

use crate::llm::anthropic::AnthropicDecoder;
use crate::llm::mock::script::MockResponse;
use crate::llm::mock::wire::{Segment, WireFormat, chunks, render};
use crate::llm::sse::{drive, sse_events};
use crate::llm::types::{Model, ModelRequest, ModelStream, Role};
use crate::llm::usage::Usage;
use place::{Space, place_drawing};

/// Longest request text echoed on a sticky note.
const MAX_ECHO_CHARS: usize = 280;
/// Most shapes one offline answer creates in a row or a flowchart.
const MAX_ITEMS: usize = 12;
/// Bytes per simulated network read.
const READ_SIZE: usize = 48;

/// The embedded offline model.
#[derive(Debug, Clone, Copy, Default)]
pub struct OfflineModel;

impl Model for OfflineModel {
    fn name(&self) -> String {
        "offline".into()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let prompt = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.text())
            .unwrap_or_default();
        // A project member answers its part of the project (see [`project`]).
        let text =
            project::respond(&request).unwrap_or_else(|| respond_to(&prompt, &context(&request)));
        let approx_tokens = |chars: usize| (chars as u64).div_ceil(4);
        let response = MockResponse {
            usage: Usage {
                input_tokens: approx_tokens(request.system.len() + prompt.len()),
                output_tokens: approx_tokens(text.len()),
                ..Usage::default()
            },
            text,
            delta_chars: 16,
            ..MockResponse::default()
        };
        let mut reads = Vec::new();
        for seg in render(WireFormat::Anthropic, &response, "offline") {
            if let Segment::Bytes(b) = seg {
                reads.extend(chunks(&b, READ_SIZE));
            }
        }
        let bytes = stream::iter(reads.into_iter().map(Ok::<_, Infallible>));
        let idle = Duration::from_secs(60);
        drive(
            sse_events(bytes, idle),
            AnthropicDecoder::default(),
            idle,
            Vec::new(),
        )
    }
}

/// A shape the person has selected, as the prompt lists it (model coordinates).
#[derive(Debug, Clone, PartialEq)]
pub struct Selected {
    /// Its id.
    pub id: String,
    /// Its top-left.
    pub x: f64,
    /// Its top-left.
    pub y: f64,
}

/// The shapes the context says are selected (`selectedShapes`); none when it cannot be read.
fn selected_shapes(ctx: &Value) -> Vec<Selected> {
    ctx["selectedShapes"]
        .as_array()
        .map(|shapes| {
            shapes
                .iter()
                .filter_map(|s| {
                    Some(Selected {
                        id: s["shapeId"].as_str()?.to_owned(),
                        x: s["x"].as_f64()?,
                        y: s["y"].as_f64()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// "the shape" or "N shapes".
fn shapes_word(n: usize) -> String {
    if n == 1 {
        "the shape".into()
    } else {
        format!("{n} shapes")
    }
}

/// Edits of the selected shapes for "delete the selection", "move it right" (left, up, down:
/// 240 px) or "paint them green" (any colour of the schema), with what they do in words;
/// `None` when nothing is selected or the request is none of these.
fn edit_selection(lower: &str, selected: &[Selected]) -> Option<(Vec<Value>, String)> {
    if selected.is_empty() {
        return None;
    }
    let what = shapes_word(selected.len());
    if lower.contains("delete") || lower.contains("remove") {
        let actions = selected
            .iter()
            .map(|s| json!({"_type": "delete", "intent": "Remove it", "shapeId": s.id}))
            .collect();
        return Some((actions, format!("Deleted {what}.")));
    }
    if lower.contains("move") {
        let (dx, dy, way) = if lower.contains("left") {
            (-240.0, 0.0, "left")
        } else if lower.contains("up") {
            (0.0, -240.0, "up")
        } else if lower.contains("down") {
            (0.0, 240.0, "down")
        } else {
            (240.0, 0.0, "right")
        };
        let actions = selected
            .iter()
            .map(|s| {
                json!({"_type": "move", "intent": "Move it", "shapeId": s.id,
                    "x": s.x + dx, "y": s.y + dy})
            })
            .collect();
        return Some((actions, format!("Moved {what} {way}.")));
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .collect();
    let color = crate::canvas::schema::COLORS
        .iter()
        .find(|c| words.contains(c))?;
    let actions = selected
        .iter()
        .map(|s| {
            json!({"_type": "update", "intent": "Recolour it",
                "update": {"shapeId": s.id, "color": color}})
        })
        .collect();
    Some((actions, format!("Painted {what} {color}.")))
}

/// The offline model's whole answer to `prompt` with an empty context: `{"actions": [...]}`.
pub fn respond(prompt: &str) -> String {
    respond_to(prompt, &Value::Null)
}

/// The offline model's whole answer to `prompt` given the request's context (see
/// [`context`]): the selected shapes it may edit, and the bounds, the
/// person's view and the shapes around, which decide where it draws ([`Space`]). A request it
/// understands is drawn (or the selection edited) and answered with what it did; anything else
/// is left on a sticky note, with the notice of what it can do.
pub fn respond_to(prompt: &str, ctx: &Value) -> String {
    let lower = prompt.to_ascii_lowercase();
    let mut space = Space::from_context(ctx);
    let (mut actions, said) =
        if let Some((edits, said)) = edit_selection(&lower, &selected_shapes(ctx)) {
            (edits, said)
        } else if let Some(labels) = flowchart_labels(prompt) {
            let said = format!("Drew a flowchart: {}.", labels.join(" → "));
            (place_drawing(&mut space, flowchart(&labels)), said)
        } else if lower.contains("house") {
            let said = "Drew a house: walls, roof, door and window.".to_owned();
            (place_drawing(&mut space, house()), said)
        } else if let Some((n, kind)) = row_request(&lower) {
            (place_drawing(&mut space, row(n, kind.kind)), kind.said(n))
        } else {
            let note = place_drawing(&mut space, vec![sticky(prompt)]);
            let mut actions = vec![json!({"_type": "message", "text": OFFLINE_NOTICE})];
            actions.extend(note);
            return json!({ "actions": actions }).to_string();
        };
    actions.push(json!({"_type": "message", "text": said}));
    json!({ "actions": actions }).to_string()
}

/// A shape a row is made of: its geo kind and the words for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowKind {
    kind: &'static str,
    one: &'static str,
    many: &'static str,
}

impl RowKind {
    /// What drawing `n` of them says ("Drew a star.", "Drew 3 boxes in a row.").
    fn said(self, n: usize) -> String {
        if n == 1 {
            format!("Drew a {}.", self.one)
        } else {
            format!("Drew {n} {} in a row.", self.many)
        }
    }
}

/// `(count, kind)` for requests like "three boxes in a row" or "a row of 4 circles".
fn row_request(lower: &str) -> Option<(usize, RowKind)> {
    let k = |kind, one, many| RowKind { kind, one, many };
    let kinds: &[(&str, RowKind)] = &[
        ("circle", k("ellipse", "circle", "circles")),
        ("ellipse", k("ellipse", "circle", "circles")),
        ("star", k("star", "star", "stars")),
        ("triangle", k("triangle", "triangle", "triangles")),
        ("diamond", k("diamond", "diamond", "diamonds")),
        ("heart", k("heart", "heart", "hearts")),
        ("box", k("rectangle", "box", "boxes")),
        ("square", k("rectangle", "square", "squares")),
        ("rectangle", k("rectangle", "rectangle", "rectangles")),
    ];
    let tokens: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    let names = |t: &str, w: &str| {
        t == w
            || t.strip_prefix(w)
                .is_some_and(|rest| rest == "s" || rest == "es")
    };
    let kind = kinds
        .iter()
        .find(|(w, _)| tokens.iter().any(|t| names(t, w)))
        .map(|(_, k)| *k);
    let in_row = tokens.contains(&"row");
    if kind.is_none() && !in_row {
        return None;
    }
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve",
    ];
    let n = tokens
        .iter()
        .find_map(|w| {
            w.parse::<usize>()
                .ok()
                .or_else(|| words.iter().position(|x| x == w).map(|i| i + 1))
        })
        .unwrap_or(if in_row { 3 } else { 1 })
        .clamp(1, MAX_ITEMS);
    Some((n, kind.unwrap_or(k("rectangle", "box", "boxes"))))
}

fn row(n: usize, kind: &str) -> Vec<Value> {
    let colors = ["blue", "green", "orange", "violet", "red", "yellow"];
    (0..n)
        .map(|i| {
            let id = format!("{kind}{}", i + 1);
            let color = colors.get(i % colors.len()).copied().unwrap_or("blue");
            let x = i64::try_from(i).unwrap_or(0) * 140;
            create(
                &format!("Add {kind} {} of the row", i + 1),
                geo(kind, &id, [x, 0, 100, 100], color, ""),
            )
        })
        .collect()
}

/// The step labels of "flowchart A -> B -> C" (or any "A -> B"), in the prompt's own case.
fn flowchart_labels(prompt: &str) -> Option<Vec<String>> {
    let normalized = prompt.replace('→', "->");
    if !normalized.contains("->") {
        return None;
    }
    let lower = normalized.to_ascii_lowercase();
    let start = lower
        .find("flowchart")
        .map(|i| i + "flowchart".len())
        .unwrap_or(0);
    let rest = normalized.get(start..).unwrap_or(&normalized);
    let rest = rest.trim_start_matches([':', ' ', '\t']);
    let labels: Vec<String> = rest
        .split("->")
        .map(|l| l.trim().trim_end_matches(['.', '!', '?']).trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.chars().take(60).collect())
        .take(MAX_ITEMS)
        .collect();
    (labels.len() >= 2).then_some(labels)
}

fn flowchart(labels: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    let (w, h, gap) = (160i64, 80i64, 80i64);
    for (i, label) in labels.iter().enumerate() {
        let x = i64::try_from(i).unwrap_or(0) * (w + gap);
        let shape = geo(
            "rectangle",
            &format!("step{}", i + 1),
            [x, 0, w, h],
            "blue",
            label,
        );
        out.push(create(&format!("Add the step \"{label}\""), shape));
    }
    for i in 1..labels.len() {
        let x1 = i64::try_from(i).unwrap_or(0) * (w + gap) - gap;
        let arrow = json!({"_type": "arrow", "shapeId": format!("arrow{i}"), "note": "",
            "x1": x1, "y1": h / 2, "x2": x1 + gap, "y2": h / 2,
            "fromId": format!("step{i}"), "toId": format!("step{}", i + 1),
            "bend": 0, "text": "", "color": "black"});
        out.push(create(
            &format!("Connect step {i} to step {}", i + 1),
            arrow,
        ));
    }
    out
}

fn sticky(prompt: &str) -> Value {
    let mut text: String = prompt.trim().chars().take(MAX_ECHO_CHARS).collect();
    if text.is_empty() {
        text = "(empty request)".into();
    }
    let note = json!({"_type": "note", "shapeId": "note1", "note": "", "x": 0, "y": 0,
        "text": text, "color": "yellow"});
    create("Leave a note with your request", note)
}

/// The context of a request as one object: every line of its first user turn that is a JSON
/// object, merged (the prompt writes its blocks one per line; other lines are prose).
fn context(request: &ModelRequest) -> Value {
    let Some(state) = request.messages.iter().find(|m| m.role == Role::User) else {
        return Value::Null;
    };
    let mut all = Map::new();
    for line in state.text().lines() {
        if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(line) {
            all.extend(map);
        }
    }
    if all.is_empty() {
        Value::Null
    } else {
        Value::Object(all)
    }
}

/// The first words of the offline model's answer to a request it does not understand, so users
/// know no real model is thinking and what it can do.
pub const OFFLINE_NOTICE: &str = "I am the offline model: no language model is configured, so I can only draw simple things (try \"draw a house\", \"three boxes in a row\" or \"flowchart A -> B -> C\", or select shapes and say \"move them right\", \"paint them green\" or \"delete them\").";

/// A geo shape at `[x, y, w, h]`.
fn geo(kind: &str, id: &str, [x, y, w, h]: [i64; 4], color: &str, text: &str) -> Value {
    json!({"_type": kind, "shapeId": id, "note": "", "x": x, "y": y, "w": w, "h": h,
        "color": color, "fill": "semi", "text": text, "textAlign": "middle"})
}

/// A `create` action of `shape`.
fn create(intent: &str, shape: Value) -> Value {
    json!({"_type": "create", "intent": intent, "shape": shape})
}

/// A house: walls, roof, door and window.
fn house() -> Vec<Value> {
    vec![
        create(
            "Draw the walls",
            geo("rectangle", "walls", [0, 100, 200, 150], "light-red", ""),
        ),
        create(
            "Put a roof on top",
            geo("triangle", "roof", [-20, 0, 240, 100], "red", ""),
        ),
        create(
            "Add a door",
            geo("rectangle", "door", [80, 170, 40, 80], "orange", ""),
        ),
        create(
            "Add a window",
            geo("rectangle", "window", [25, 130, 40, 40], "light-blue", ""),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn actions(prompt: &str) -> Vec<Value> {
        actions_in(prompt, &Value::Null)
    }

    fn actions_in(prompt: &str, ctx: &Value) -> Vec<Value> {
        let v: Value = serde_json::from_str(&respond_to(prompt, ctx)).unwrap();
        v["actions"].as_array().unwrap().clone()
    }

    fn said(actions: &[Value]) -> Vec<&str> {
        actions
            .iter()
            .filter(|a| a["_type"] == "message")
            .filter_map(|a| a["text"].as_str())
            .collect()
    }

    /// Every created shape's `[x, y, w, h]` (a note is 200 × 200; an arrow spans its ends).
    fn boxes(actions: &[Value]) -> Vec<[f64; 4]> {
        actions
            .iter()
            .filter(|a| a["_type"] == "create")
            .map(|a| {
                let s = &a["shape"];
                let n = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
                if s["_type"] == "arrow" {
                    let (x1, y1, x2, y2) = (n("x1"), n("y1"), n("x2"), n("y2"));
                    [x1.min(x2), y1.min(y2), (x2 - x1).abs(), (y2 - y1).abs()]
                } else if s["_type"] == "note" {
                    [n("x"), n("y"), 200.0, 200.0]
                } else {
                    [n("x"), n("y"), n("w"), n("h")]
                }
            })
            .collect()
    }

    fn overlaps(a: &[f64; 4], b: &[f64; 4]) -> bool {
        a[0] < b[0] + b[2] && b[0] < a[0] + a[2] && a[1] < b[1] + b[3] && b[1] < a[1] + a[3]
    }

    fn inside(b: &[f64; 4], a: &[f64; 4]) -> bool {
        a[0] >= b[0] && a[1] >= b[1] && a[0] + a[2] <= b[0] + b[2] && a[1] + a[3] <= b[1] + b[3]
    }

    /// A context with `bounds` and the shapes listed in `blurryShapes`.
    fn ctx(bounds: [f64; 4], shapes: &[[f64; 4]]) -> Value {
        let rows: Vec<Value> = shapes
            .iter()
            .enumerate()
            .map(|(i, [x, y, w, h])| json!([format!("s{i}"), "rectangle", x, y, w, h]))
            .collect();
        json!({"bounds": {"x": bounds[0], "y": bounds[1], "w": bounds[2], "h": bounds[3]},
            "blurryShapes": {"columns": ["shapeId", "type", "x", "y", "w", "h", "text"], "rows": rows}})
    }

    #[test]
    fn drawings_answer_with_what_was_drawn_and_only_the_unknown_gets_the_notice() {
        let house = actions("draw a house");
        assert_eq!(
            said(&house),
            ["Drew a house: walls, roof, door and window."]
        );
        assert_eq!(
            house.last().unwrap()["_type"],
            "message",
            "said after drawing"
        );
        assert_eq!(
            said(&actions("three boxes in a row")),
            ["Drew 3 boxes in a row."]
        );
        assert_eq!(said(&actions("draw a star")), ["Drew a star."]);
        assert_eq!(
            said(&actions("Flowchart: Idea -> Build -> Ship!")),
            ["Drew a flowchart: Idea → Build → Ship."]
        );
        for p in ["", "hello", "draw a cat"] {
            let a = actions(p);
            assert_eq!(a[0]["_type"], "message");
            assert!(
                a[0]["text"].as_str().unwrap().contains("offline model"),
                "{p}"
            );
            assert_eq!(a[1]["shape"]["_type"], "note", "{p}");
        }
    }

    #[test]
    fn a_drawing_lands_inside_the_bounds_at_the_views_centre() {
        let bounds = [3000.0, -500.0, 1400.0, 900.0];
        let house = boxes(&actions_in("draw a house", &ctx(bounds, &[])));
        assert_eq!(house.len(), 4);
        for b in &house {
            assert!(inside(&bounds, b), "{b:?} in {bounds:?}");
        }
        // The roof (240 × 100 over walls 200 × 150: 240 × 250 in all) is centred.
        assert_eq!(house[1], [3580.0, -175.0, 240.0, 100.0]);
    }

    #[test]
    fn a_drawing_covers_no_listed_shape() {
        let bounds = [0.0, 0.0, 1400.0, 900.0];
        // A person's rectangle across the centre of the view.
        let person = [450.0, 300.0, 500.0, 300.0];
        for p in [
            "draw a house",
            "draw a cat",
            "flowchart a -> b -> c",
            "5 circles in a row",
        ] {
            let drawn = boxes(&actions_in(p, &ctx(bounds, &[person])));
            assert!(!drawn.is_empty(), "{p}");
            for b in &drawn {
                assert!(!overlaps(b, &person), "{p}: {b:?} covers {person:?}");
                assert!(inside(&bounds, b), "{p}: {b:?} leaves {bounds:?}");
            }
        }
    }

    #[test]
    fn a_repeat_is_offset_from_what_the_first_drew() {
        let bounds = [0.0, 0.0, 1400.0, 900.0];
        let first = boxes(&actions_in("draw a house", &ctx(bounds, &[])));
        // The second request's context lists the first house (as the server would).
        let second = boxes(&actions_in("draw a house", &ctx(bounds, &first)));
        let cat = boxes(&actions_in(
            "draw a cat",
            &ctx(bounds, &[first.clone(), second.clone()].concat()),
        ));
        for (name, drawn, before) in [
            ("second house", &second, first.clone()),
            ("cat note", &cat, [first.clone(), second.clone()].concat()),
        ] {
            for b in drawn {
                assert!(inside(&bounds, b), "{name}: {b:?}");
                for old in &before {
                    assert!(!overlaps(b, old), "{name}: {b:?} over {old:?}");
                }
            }
        }
        // Same context, same answer.
        assert_eq!(
            respond_to("draw a house", &ctx(bounds, &first)),
            respond_to("draw a house", &ctx(bounds, &first))
        );
    }

    #[test]
    fn row_counts_and_kinds() {
        let a = actions("three boxes in a row");
        assert_eq!(a.len(), 4);
        assert_eq!(a[2]["shape"]["_type"], "rectangle");
        let a = actions("a row of 5 circles");
        assert_eq!(a.len(), 6);
        assert_eq!(a[0]["shape"]["_type"], "ellipse");
        assert_eq!(actions("1000 stars in a row").len(), 1 + MAX_ITEMS);
        assert_eq!(actions("draw an arrow").len(), 2, "arrow is not a row");
        assert_eq!(
            actions("start now")[1]["shape"]["_type"],
            "note",
            "start is not a star"
        );
        assert_eq!(actions("draw a star").len(), 2);
    }

    #[test]
    fn flowchart_keeps_case_and_links_steps() {
        let a = actions("Flowchart: Idea -> Build -> Ship!");
        let texts: Vec<&str> = a[0..3]
            .iter()
            .map(|x| x["shape"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["Idea", "Build", "Ship"]);
        assert_eq!(a[3]["shape"]["fromId"], "step1");
        assert_eq!(a[4]["shape"]["toId"], "step3");
        // The arrows still join the boxes once the drawing is moved into place.
        let b = boxes(&a);
        assert_eq!(b[3][0], b[0][0] + b[0][2]);
        assert_eq!(b[3][0] + b[3][2], b[1][0]);
    }

    #[test]
    fn selected_shapes_are_moved_recoloured_or_deleted() {
        let sel = json!({"selectedShapes": [{"_type": "rectangle", "shapeId": "box1",
            "x": 10.0, "y": 20.0, "w": 10, "h": 10}]});
        assert_eq!(
            actions_in("move the selection right", &sel),
            vec![
                json!({"_type": "move", "intent": "Move it", "shapeId": "box1", "x": 250.0, "y": 20.0}),
                json!({"_type": "message", "text": "Moved the shape right."}),
            ]
        );
        assert_eq!(actions_in("Delete them", &sel)[0]["_type"], json!("delete"));
        let paint = actions_in("paint it light-blue", &sel);
        assert_eq!(
            paint[0]["update"],
            json!({"shapeId": "box1", "color": "light-blue"})
        );
        assert_eq!(said(&paint), ["Painted the shape light-blue."]);
        // Without a selection, or a request it does not know, it draws as before.
        assert_eq!(actions_in("hello there", &sel)[1]["_type"], json!("create"));
        assert_eq!(actions("move it right")[1]["_type"], json!("create"));
    }

    #[test]
    fn anything_else_is_echoed_on_a_note() {
        let a = actions("what's the weather \"today\"?");
        assert_eq!(a[1]["shape"]["_type"], "note");
        assert_eq!(a[1]["shape"]["text"], "what's the weather \"today\"?");
    }

    proptest! {
        #[test]
        fn any_prompt_gives_valid_actions(p in ".{0,400}") {
            let v: Value = serde_json::from_str(&respond(&p)).unwrap();
            let a = v["actions"].as_array().unwrap();
            prop_assert!(a.len() >= 2);
            prop_assert!(a.len() <= 2 * MAX_ITEMS);
        }
    }
}
