//! The offline model: the embedded default that needs no network and no key, so the demo
//! works out of the box. It recognises a few simple requests ("draw a house", "three boxes in
//! a row", "flowchart A -> B -> C"; with shapes selected, "move them right", "paint them green",
//! "delete them") and otherwise leaves a sticky note echoing the request.
//!
//! Its answer is rendered as Anthropic SSE bytes and parsed back by the same SSE glue and
//! decoder as a real provider's, so callers exercise exactly the streaming path they will use
//! in production. Owns: the pattern matching and the generated actions. No I/O.

use std::convert::Infallible;
use std::time::Duration;

use futures_util::stream;
use serde_json::{Value, json};

use super::anthropic::AnthropicDecoder;
use super::mock::script::MockResponse;
use super::mock::wire::{Segment, WireFormat, chunks, render};
use super::offline_draw::{OFFLINE_NOTICE, create, geo, house};
use super::sse::{drive, sse_events};
use super::types::{Model, ModelRequest, ModelStream, Role};
use super::usage::Usage;

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
        // A project member answers its part of the project (see `offline_project`).
        let text = super::offline_project::respond(&request)
            .unwrap_or_else(|| respond_with(&prompt, &selected_shapes(&request)));
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

/// The shapes the prompt says are selected: `selectedShapes` of the JSON in its first user
/// message (the canvas state); none when it cannot be read.
fn selected_shapes(request: &ModelRequest) -> Vec<Selected> {
    let parts = super::offline_draw::context(request);
    parts["selectedShapes"]
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

/// Edits of the selected shapes for "delete the selection", "move it right" (left, up, down:
/// 240 px) or "paint them green" (any colour of the schema); `None` when nothing is selected or
/// the request is none of these.
fn edit_selection(lower: &str, selected: &[Selected]) -> Option<Vec<Value>> {
    if selected.is_empty() {
        return None;
    }
    if lower.contains("delete") || lower.contains("remove") {
        return Some(
            selected
                .iter()
                .map(|s| json!({"_type": "delete", "intent": "Remove it", "shapeId": s.id}))
                .collect(),
        );
    }
    if lower.contains("move") {
        let (dx, dy) = if lower.contains("left") {
            (-240.0, 0.0)
        } else if lower.contains("up") {
            (0.0, -240.0)
        } else if lower.contains("down") {
            (0.0, 240.0)
        } else {
            (240.0, 0.0)
        };
        return Some(
            selected
                .iter()
                .map(|s| {
                    json!({"_type": "move", "intent": "Move it", "shapeId": s.id,
                        "x": s.x + dx, "y": s.y + dy})
                })
                .collect(),
        );
    }
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '-')
        .collect();
    let color = crate::canvas::schema::COLORS
        .iter()
        .find(|c| words.contains(c))?;
    Some(
        selected
            .iter()
            .map(|s| {
                json!({"_type": "update", "intent": "Recolour it",
                    "update": {"shapeId": s.id, "color": color}})
            })
            .collect(),
    )
}

/// The offline model's whole answer to `prompt`, with nothing selected: `{"actions": [...]}`.
pub fn respond(prompt: &str) -> String {
    respond_with(prompt, &[])
}

/// The offline model's whole answer to `prompt` with `selected` shapes.
pub fn respond_with(prompt: &str, selected: &[Selected]) -> String {
    let mut actions = vec![json!({"_type": "message", "text": OFFLINE_NOTICE})];
    let lower = prompt.to_ascii_lowercase();
    if let Some(edits) = edit_selection(&lower, selected) {
        actions.extend(edits);
    } else if let Some(labels) = flowchart_labels(prompt) {
        actions.extend(flowchart(&labels));
    } else if lower.contains("house") {
        actions.extend(house());
    } else if let Some((n, kind)) = row_request(&lower) {
        actions.extend(row(n, kind));
    } else {
        actions.push(sticky(prompt));
    }
    json!({"actions": actions}).to_string()
}

/// `(count, geo kind)` for requests like "three boxes in a row" or "a row of 4 circles".
fn row_request(lower: &str) -> Option<(usize, &'static str)> {
    let kinds: &[(&str, &str)] = &[
        ("circle", "ellipse"),
        ("ellipse", "ellipse"),
        ("star", "star"),
        ("triangle", "triangle"),
        ("diamond", "diamond"),
        ("heart", "heart"),
        ("box", "rectangle"),
        ("square", "rectangle"),
        ("rectangle", "rectangle"),
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
    Some((n, kind.unwrap_or("rectangle")))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn actions(prompt: &str) -> Vec<Value> {
        let v: Value = serde_json::from_str(&respond(prompt)).unwrap();
        v["actions"].as_array().unwrap().clone()
    }

    #[test]
    fn first_action_says_offline() {
        for p in ["draw a house", "", "hello", "flowchart a -> b"] {
            let a = actions(p);
            assert_eq!(a[0]["_type"], "message");
            assert!(a[0]["text"].as_str().unwrap().contains("offline model"));
        }
    }

    #[test]
    fn row_counts_and_kinds() {
        let a = actions("three boxes in a row");
        assert_eq!(a.len(), 4);
        assert_eq!(a[3]["shape"]["_type"], "rectangle");
        let a = actions("a row of 5 circles");
        assert_eq!(a.len(), 6);
        assert_eq!(a[1]["shape"]["_type"], "ellipse");
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
        let texts: Vec<&str> = a[1..4]
            .iter()
            .map(|x| x["shape"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["Idea", "Build", "Ship"]);
        assert_eq!(a[4]["shape"]["fromId"], "step1");
        assert_eq!(a[5]["shape"]["toId"], "step3");
    }

    #[test]
    fn selected_shapes_are_moved_recoloured_or_deleted() {
        let sel = [Selected {
            id: "box1".into(),
            x: 10.0,
            y: 20.0,
        }];
        let parse = |p: &str| -> Vec<Value> {
            let v: Value = serde_json::from_str(&respond_with(p, &sel)).unwrap_or_default();
            v["actions"].as_array().cloned().unwrap_or_default()[1..].to_vec()
        };
        assert_eq!(
            parse("move the selection right"),
            vec![
                json!({"_type": "move", "intent": "Move it", "shapeId": "box1", "x": 250.0, "y": 20.0})
            ]
        );
        assert_eq!(parse("Delete them")[0]["_type"], json!("delete"));
        assert_eq!(
            parse("paint it light-blue")[0]["update"],
            json!({"shapeId": "box1", "color": "light-blue"})
        );
        // Without a selection, or a request it does not know, it draws as before.
        assert_eq!(parse("hello there")[0]["_type"], json!("create"));
        let none: Value = serde_json::from_str(&respond("move it right")).unwrap_or_default();
        assert_eq!(none["actions"][1]["_type"], json!("create"));
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
