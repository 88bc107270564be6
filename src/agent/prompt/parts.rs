//! The prompt parts and sections of the design (docs/fairies.md "What the model sees") that sit
//! beside the shapes: the rules section, the soloing and working mode sections, the fairy's
//! personality as a section of its own, the room's instructions; and the context parts
//! `pages` + `currentPage`, `workingTask`, `userViewportBounds`, `modelName`, a readable `time`,
//! and the screenshot (an image part placed before the JSON of the first user turn).
//!
//! Pure: [`PromptExtras`] is what the runtime found (see `crate::agent::runtime::turn::inputs`); these
//! functions only turn it into text. [`crate::agent::prompt`] registers them in its sections and parts.

use serde_json::{Value, json};

use crate::agent::modes::Mode;
use crate::agent::prompt::screenshot::Screenshot;
use crate::agent::state::fairy::FairyEntity;
use crate::canvas::geometry::Bounds;
use crate::canvas::page::PageInfo;
use crate::canvas::transform::PromptTransform;
use crate::canvas::transform::tidy_numbers;
use crate::llm::{ChatMessage, Part};

/// The task a fairy in a working mode works on.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkingTask {
    /// Task id.
    pub id: String,
    /// Title.
    pub title: String,
    /// What to do.
    pub text: String,
    /// The area it covers (page coordinates).
    pub bounds: Option<Bounds>,
}

/// Review mode in a prompt (README "Review mode"): the fairy's pending suggestions, and
/// people's decisions on its suggestions since it was last told.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReviewPart {
    /// Its canvas actions this turn become suggestions.
    pub suggesting: bool,
    /// Its suggestions waiting for a decision.
    pub pending: Vec<crate::review::record::Suggestion>,
    /// Its suggestions decided since the last prompt that told it.
    pub decided: Vec<crate::review::record::Suggestion>,
}

/// Suggestions listed in a prompt at most (pending and decided each).
pub const MAX_REVIEW_ITEMS: usize = 100;

impl ReviewPart {
    /// Whether there is anything to say.
    pub fn is_empty(&self) -> bool {
        !self.suggesting && self.pending.is_empty() && self.decided.is_empty()
    }

    /// The `reviewMode` part: `pendingSuggestions` (`{id, op, shapeId, props}`, props in model
    /// coordinates) and `decisions` (`{id, op, shapeId, status, decidedBy}`).
    pub fn to_json(&self, t: &mut PromptTransform) -> Value {
        let pending: Vec<Value> = self
            .pending
            .iter()
            .take(MAX_REVIEW_ITEMS)
            .map(|s| {
                let mut props = match s.props_json() {
                    Value::Object(map) => map,
                    _ => serde_json::Map::new(),
                };
                props.insert("shapeId".into(), json!(s.shape_id));
                t.shape_to_model(&mut props);
                props.remove("shapeId");
                json!({"id": s.id, "op": s.op.name(), "shapeId": s.shape_id, "props": props})
            })
            .collect();
        let decisions: Vec<Value> = self
            .decided
            .iter()
            .take(MAX_REVIEW_ITEMS)
            .map(|s| {
                json!({
                    "id": s.id,
                    "op": s.op.name(),
                    "shapeId": s.shape_id,
                    "status": s.status.name(),
                    "decidedBy": s.decided_by,
                })
            })
            .collect();
        json!({"pendingSuggestions": pending, "decisions": decisions})
    }
}

/// The review-mode section of a system prompt, while the fairy's actions become suggestions.
pub const SECTION_SUGGEST: &str = "## Review mode\n\
Your canvas actions do not change the canvas now: each shape you create, change or delete \
becomes a suggestion that people accept or reject. The shapes you are shown are the canvas as \
people see it; `reviewMode.pendingSuggestions` lists your proposals still waiting for a \
decision, and your actions see the canvas with them applied, so you can refine a proposal by \
acting on its shape again. `reviewMode.decisions` tells you which of your suggestions were \
accepted or rejected, and by whom: do not propose a rejected change again unless asked.";

/// What a prompt is built from beside the document's shapes.
#[derive(Debug, Clone, Default)]
pub struct PromptExtras {
    /// Every page, in page order.
    pub pages: Vec<PageInfo>,
    /// The current task, in a working mode.
    pub working_task: Option<WorkingTask>,
    /// The viewport of the person who asked, from their awareness state (page coordinates).
    pub user_viewport: Option<Bounds>,
    /// The model's name as the provider knows it (`anthropic:claude-…`).
    pub model_name: String,
    /// The room's instructions (`PUT /rooms/{room}/instructions`).
    pub instructions: Option<String>,
    /// An image of the request bounds (`--llm-vision`), when shapes are in view.
    pub screenshot: Option<Screenshot>,
    /// Why the image was left out this turn ([`crate::agent::prompt::screenshot::Skipped::note`]).
    pub screenshot_note: Option<&'static str>,
    /// Review mode: pending suggestions and people's decisions, when there are any.
    pub review: Option<ReviewPart>,
}

/// The personality, as a section of its own (empty personalities add nothing).
pub fn personality_section(fairy: &FairyEntity) -> Option<String> {
    let p = fairy.personality.trim();
    (!p.is_empty()).then(|| {
        format!(
            "## Your personality\n{p}. Let it show in how you talk and draw, never at the cost of the work."
        )
    })
}

/// The rules of drawing on this canvas (for modes that may edit it): the fairy is a
/// collaborator, not a chat assistant; the arrow bend sign; text sizes; labels; and, with a
/// screenshot, how to read the image against the JSON.
pub fn rules_section(has_screenshot: bool) -> String {
    let mut rules = String::from(
        "## Rules\n\
- You are a collaborator working on a shared canvas, not a chat assistant: people watch you \
draw. Do the work on the canvas; keep messages short and never answer with the drawing in words.\n\
- x grows to the right and y downwards. A shape's x, y is its top-left corner and `rotation` \
(radians, clockwise) turns it about that corner.\n\
- Arrows and lines: `bend` is how far, in px, the middle of the curve bows away from the \
straight line between its ends. A positive bend bows to the left of the direction from \
(x1, y1) to (x2, y2) as seen on screen — an arrow pointing right with bend 40 curves upwards, \
one pointing down curves to the right — and a negative bend to the other side; 0 is straight. \
Bind an end to a shape with `fromId`/`toId` so it follows the shape.\n\
- Text sizes: `fontSize` is in px: 24 for body text, 32 to 48 for titles, 16 to 18 for small \
print. Text wraps at `maxWidth`; without it a line is as long as its words (about 0.6 × \
fontSize per character).\n\
- Labels: put a shape's words in its own `text`, not in a text shape on top of it; label an \
arrow with its `text`. Labels on geo shapes are 22 px and wrap inside the shape: make it wide \
enough (about 13 px per character plus 16) and tall enough (about 29 px per line). Sticky notes \
are 200 × 200.",
    );
    if has_screenshot {
        rules.push_str(
            "\n- The image shows the request bounds as they look now: use it for layout, colours \
and what is written, and the JSON for exact coordinates and ids (never read coordinates off \
the picture).",
        );
    }
    rules
}

/// The section of the soloing mode or of the working modes (none for the others).
pub fn mode_section(mode: Mode, allowed: &[&str]) -> Option<String> {
    match mode {
        Mode::Soloing => Some(
            "## Working alone\n\
You work on a person's request by yourself: draw a small one directly, split a large one into \
solo tasks; check non-trivial work with `review` and end with a short `message` of what you did."
                .to_owned(),
        ),
        Mode::WorkingSolo | Mode::WorkingDrone | Mode::WorkingOrchestrator => {
            let done = allowed
                .iter()
                .find(|a| a.starts_with("mark-") && a.ends_with("-task-done"))
                .map_or(String::new(), |a| format!(" with `{a}`"));
            Some(format!(
                "## Working on a task\n\
You are working on one task: `workingTask` gives its text and bounds. Do only that task and \
stay inside its bounds; other fairies may be working next to it. When it is finished, mark it \
done{done}."
            ))
        }
        _ => None,
    }
}

/// The room's instructions, fenced so that the model can tell them from the rules.
pub fn instructions_section(instructions: Option<&str>) -> Option<String> {
    let text = instructions?.trim();
    (!text.is_empty()).then(|| {
        format!(
            "## Room instructions\n\
The people who run this room wrote these instructions for every fairy in it. Follow them \
unless they contradict the rules above or the response format.\n<room-instructions>\n{text}\n</room-instructions>"
        )
    })
}

/// Adds the parts that rarely change to the stable block: `pages`, `currentPage` and, when
/// known, `modelName`.
pub fn add_stable_parts(parts: &mut Value, extras: &PromptExtras, page_id: &str) {
    let Some(obj) = parts.as_object_mut() else {
        return;
    };
    obj.insert("pages".into(), json!(extras.pages));
    obj.insert("currentPage".into(), json!(page_id));
    if !extras.model_name.is_empty() {
        obj.insert("modelName".into(), json!(extras.model_name));
    }
}

/// Adds, when known, `workingTask` and `userViewportBounds` (offset to the chat origin) to the
/// canvas block.
pub fn add_canvas_parts(parts: &mut Value, extras: &PromptExtras, t: &PromptTransform) {
    let Some(obj) = parts.as_object_mut() else {
        return;
    };
    if let Some(task) = &extras.working_task {
        obj.insert(
            "workingTask".into(),
            json!({
                "id": task.id,
                "title": task.title,
                "text": task.text,
                "bounds": task.bounds.map(|b| t.bounds_to_model(&b)),
            }),
        );
    }
    if let Some(viewport) = &extras.user_viewport {
        obj.insert("userViewportBounds".into(), t.bounds_to_model(viewport));
    }
}

/// The time as people read it, in UTC (`Tuesday 24 November 2026, 04:55 UTC`).
pub fn readable_time(unix_millis: u64) -> String {
    let format = time::macros::format_description!(
        "[weekday] [day padding:none] [month repr:long] [year], [hour]:[minute] UTC"
    );
    i64::try_from(unix_millis / 1000)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| format!("{unix_millis} ms since the Unix epoch"))
}

/// Puts the screenshot, with a caption, at the start of `message` (the first user turn).
pub fn attach_screenshot(message: &mut ChatMessage, extras: &PromptExtras, t: &PromptTransform) {
    let Some(shot) = &extras.screenshot else {
        if let Some(note) = extras.screenshot_note {
            message.parts.insert(0, Part::Text { text: note.into() });
        }
        return;
    };
    let mut area = t.bounds_to_model(&shot.area);
    tidy_numbers(&mut area);
    let caption = format!(
        "This image is your view: the request bounds {area} as they look now, {}×{} px.",
        shot.width, shot.height
    );
    message.parts.splice(
        0..0,
        [
            Part::Text { text: caption },
            Part::Image {
                media_type: shot.media_type.to_owned(),
                data: shot.base64.clone(),
            },
        ],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::FairyId;

    fn fairy(personality: &str) -> FairyEntity {
        FairyEntity {
            id: FairyId::random(),
            name: "Pip".into(),
            personality: personality.into(),
            hat: "top".into(),
            created_by: "user:a".into(),
            apply: Default::default(),
        }
    }

    #[test]
    fn personality_is_its_own_section() {
        assert_eq!(
            personality_section(&fairy("tidy and curious")).as_deref(),
            Some(
                "## Your personality\ntidy and curious. Let it show in how you talk and draw, never at the cost of the work."
            )
        );
        assert_eq!(personality_section(&fairy("  ")), None);
    }

    #[test]
    fn rules_state_the_bend_sign_sizes_labels_and_role() {
        let r = rules_section(false);
        assert!(r.contains("not a chat assistant"), "{r}");
        assert!(r.contains("A positive bend bows to the left"), "{r}");
        assert!(
            r.contains("an arrow pointing right with bend 40 curves upwards"),
            "{r}"
        );
        assert!(r.contains("24 for body text"), "{r}");
        assert!(r.contains("Labels on geo shapes are 22 px"), "{r}");
        assert!(!r.contains("image"), "no screenshot, no word of one: {r}");
        assert!(rules_section(true).contains("The image shows the request bounds"));
    }

    #[test]
    fn mode_sections_for_soloing_and_working() {
        let solo = mode_section(Mode::Soloing, &[]).unwrap();
        assert!(solo.starts_with("## Working alone\n"), "{solo}");
        let work = mode_section(Mode::WorkingSolo, &["think", "mark-solo-task-done"]).unwrap();
        assert!(work.starts_with("## Working on a task\n"), "{work}");
        assert!(
            work.ends_with("mark it done with `mark-solo-task-done`."),
            "{work}"
        );
        let drone = mode_section(Mode::WorkingDrone, &["mark-drone-task-done"]).unwrap();
        assert!(drone.ends_with("with `mark-drone-task-done`."), "{drone}");
        assert_eq!(mode_section(Mode::Idling, &[]), None);
        assert_eq!(mode_section(Mode::StandingBy, &[]), None);
    }

    #[test]
    fn instructions_are_fenced_and_blank_ones_dropped() {
        let s = instructions_section(Some("  Use only blue.\n")).unwrap();
        assert!(s.starts_with("## Room instructions\n"), "{s}");
        assert!(
            s.ends_with("<room-instructions>\nUse only blue.\n</room-instructions>"),
            "{s}"
        );
        assert_eq!(instructions_section(Some(" \n")), None);
        assert_eq!(instructions_section(None), None);
    }

    #[test]
    fn context_parts_are_offset_to_the_chat_origin() {
        let extras = PromptExtras {
            pages: vec![
                PageInfo {
                    id: "page:main".into(),
                    name: "Page 1".into(),
                },
                PageInfo {
                    id: "page:2".into(),
                    name: "Ideas".into(),
                },
            ],
            working_task: Some(WorkingTask {
                id: "t1".into(),
                title: "Roof".into(),
                text: "Draw the roof".into(),
                bounds: Some(Bounds::new(1100.0, 2000.0, 300.0, 200.0)),
            }),
            user_viewport: Some(Bounds::new(900.0, 1900.0, 1280.4, 720.0)),
            model_name: "anthropic:claude-sonnet-4-5".into(),
            ..PromptExtras::default()
        };
        let mut parts = json!({});
        let t = PromptTransform::new(1000.0, 2000.0);
        add_stable_parts(&mut parts, &extras, "page:2");
        add_canvas_parts(&mut parts, &extras, &t);
        assert_eq!(
            parts,
            json!({
                "pages": [{"id": "page:main", "name": "Page 1"}, {"id": "page:2", "name": "Ideas"}],
                "currentPage": "page:2",
                "modelName": "anthropic:claude-sonnet-4-5",
                "workingTask": {"id": "t1", "title": "Roof", "text": "Draw the roof",
                                "bounds": {"x": 100.0, "y": 0.0, "w": 300.0, "h": 200.0}},
                "userViewportBounds": {"x": -100.0, "y": -100.0, "w": 1280.0, "h": 720.0},
            })
        );
        let mut bare = json!({});
        add_stable_parts(&mut bare, &PromptExtras::default(), "page:main");
        add_canvas_parts(&mut bare, &PromptExtras::default(), &t);
        assert_eq!(bare, json!({"pages": [], "currentPage": "page:main"}));
    }

    #[test]
    fn time_reads_like_a_date() {
        assert_eq!(
            readable_time(1_795_496_100_000),
            "Tuesday 24 November 2026, 04:55 UTC"
        );
        assert_eq!(readable_time(0), "Thursday 1 January 1970, 00:00 UTC");
    }

    #[test]
    fn the_system_prompt_places_the_sections_in_order() {
        let r = crate::agent::actions::runtime::full_registry();
        let extras = PromptExtras {
            instructions: Some("Use blue.".into()),
            screenshot: Some(Screenshot {
                area: Bounds::new(0.0, 0.0, 10.0, 10.0),
                width: 10,
                height: 10,
                media_type: "image/png",
                base64: String::new(),
                bytes: 0,
            }),
            ..PromptExtras::default()
        };
        let s =
            crate::agent::prompt::system_prompt(&fairy("tidy"), Mode::Soloing, &r, false, &extras);
        let pos = |needle: &str| {
            s.find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} in {s}"))
        };
        let order = [
            "You are Pip",
            "## Your personality\ntidy.",
            "## The canvas",
            "## Rules",
            "The image shows the request bounds",
            "## Working alone",
            "## Mode\n",
            "## Room instructions",
            "## Response schema",
        ];
        for pair in order.windows(2) {
            assert!(
                pos(pair[0]) < pos(pair[1]),
                "{:?} before {:?}",
                pair[0],
                pair[1]
            );
        }
        // A mode that cannot edit the canvas gets no rules; no instructions, no section.
        let s = crate::agent::prompt::system_prompt(
            &fairy("tidy"),
            Mode::StandingBy,
            &r,
            false,
            &PromptExtras::default(),
        );
        assert!(
            !s.contains("## Rules") && !s.contains("## Room instructions"),
            "{s}"
        );
    }

    #[test]
    fn blurry_shapes_include_those_straddling_the_bounds() {
        use crate::agent::apply::changes::ChangeReport;
        use crate::agent::prompt::{PromptInput, context_parts};
        let shapes: Vec<_> = [
            json!({"_type": "rectangle", "shapeId": "inside", "x": 10, "y": 10, "w": 10, "h": 10}),
            json!({"_type": "rectangle", "shapeId": "edge", "x": 90, "y": 10, "w": 50, "h": 10}),
            json!({"_type": "rectangle", "shapeId": "away", "x": 900, "y": 900, "w": 10, "h": 10}),
        ]
        .iter()
        .filter_map(|v| crate::canvas::format::from_simple(v, &Default::default()).ok())
        .map(std::sync::Arc::new)
        .collect();
        let f = fairy("tidy");
        let input = PromptInput {
            fairy: &f,
            mode: Mode::Soloing,
            history: &[],
            messages: &[],
            bounds: Bounds::new(0.0, 0.0, 100.0, 100.0),
            page_id: crate::canvas::schema::MAIN_PAGE,
            shapes: &shapes,
            selected: &[],
            changes: &ChangeReport::default(),
            todo: &[],
            tasks: &[],
            other_fairies: vec![],
            corrections: &[],
            time: readable_time(0),
            history_budget: 10_000,
            history_marks: &[],
            extras: &PromptExtras::default(),
            project: None,
        };
        let parts = context_parts(&input, &mut PromptTransform::new(0.0, 0.0)).merged();
        assert_eq!(parts["blurryShapes"]["columns"][0], json!("shapeId"));
        let ids: Vec<&str> = parts["blurryShapes"]["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s[0].as_str())
            .collect();
        // In z-order: equal keys here, so by id.
        assert_eq!(ids, ["edge", "inside"]);
        assert_eq!(
            parts["peripheralClusters"]["columns"][4],
            json!("numberOfShapes")
        );
        assert_eq!(parts["peripheralClusters"]["rows"][0][4], json!(1));
        assert_eq!(parts["time"], json!("Thursday 1 January 1970, 00:00 UTC"));
    }
}
