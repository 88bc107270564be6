//! A fairy's awareness state (docs/protocol.md "Awareness"): what every browser sees of it — position, pose, mode,
//! todo list, tasks, the thought and message of the moment — and its flight, a smooth path to
//! the bounds it works on sampled at [`FLIGHT_HZ`] (it never teleports).
//!
//! Owns the JSON of the state and the flight arithmetic. No I/O: the runtime publishes the
//! state through [`crate::room::Room::set_presence`] under the fairy's own awareness client id,
//! through its child [`beacon`] (the awareness peer that holds, publishes and renews it).

pub mod beacon;

use crate::agent::work::{TaskStatus, TodoItem};
use crate::ids::{FairyId, ProjectId};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Position updates per second while flying.
pub const FLIGHT_HZ: u32 = 10;
/// Pixels flown per second (a flight lasts between [`MIN_FLIGHT_STEPS`] and
/// [`MAX_FLIGHT_STEPS`] updates whatever the distance).
pub const FLIGHT_SPEED: f64 = 1500.0;
/// Fewest updates of one flight.
pub const MIN_FLIGHT_STEPS: u32 = 3;
/// Most updates of one flight.
pub const MAX_FLIGHT_STEPS: u32 = 20;

/// What the fairy looks like it is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pose {
    /// Waiting for work.
    Idle,
    /// Waiting on the model.
    Thinking,
    /// Applying actions.
    Working,
    /// Just finished a request.
    Celebrating,
}

/// A task shown in awareness (solo tasks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSummary {
    /// Task id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// `todo`, `in-progress` or `done`.
    #[serde(deserialize_with = "TaskStatus::lenient")]
    pub status: TaskStatus,
}

/// Everything the fairy publishes in awareness.
#[derive(Debug, Clone, PartialEq)]
pub struct Presence {
    /// Fairy id.
    pub id: FairyId,
    /// Display name.
    pub name: String,
    /// Page position of the fairy.
    pub x: f64,
    /// Page position of the fairy.
    pub y: f64,
    /// Current mode name (`idling`, `soloing`, …).
    pub mode: String,
    /// Current pose.
    pub pose: Pose,
    /// Facing left (flying leftwards).
    pub flip: bool,
    /// Project it works for, if any.
    pub project_id: Option<ProjectId>,
    /// Task it works on, if any.
    pub task_id: Option<String>,
    /// Personal todo list.
    pub todo: Vec<TodoItem>,
    /// Its tasks.
    pub tasks: Vec<TaskSummary>,
    /// The latest thought while thinking.
    pub thinking: Option<String>,
    /// The latest message it wrote.
    pub last_message: Option<String>,
}

impl Presence {
    /// An idle fairy at `(x, y)`.
    pub fn new(id: &FairyId, name: &str, x: f64, y: f64) -> Self {
        Presence {
            id: id.clone(),
            name: name.into(),
            x,
            y,
            mode: "idling".into(),
            pose: Pose::Idle,
            flip: false,
            project_id: None,
            task_id: None,
            todo: Vec::new(),
            tasks: Vec::new(),
            thinking: None,
            last_message: None,
        }
    }

    /// The awareness state: `{fairy: {...}}`.
    pub fn to_state(&self) -> Value {
        json!({"fairy": {
            "id": self.id,
            "name": self.name,
            "x": round2(self.x),
            "y": round2(self.y),
            "mode": self.mode,
            "pose": self.pose,
            "flip": self.flip,
            "projectId": self.project_id,
            "taskId": self.task_id,
            "todo": self.todo,
            "tasks": self.tasks,
            "thinking": self.thinking,
            "lastMessage": self.last_message,
        }})
    }
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Fairies placed around the first one of a room before the pattern repeats.
pub const SPAWN_RING: usize = 8;

/// Where the `index`-th fairy of a room (0-based: how many the room held when it was invited)
/// appears, around `anchor`, the centre of its inviter's view (or the old default spot when
/// the inviter publishes no view): the first at the anchor, the next ones on an ellipse around
/// it, a quarter of the view's size away (at most 240 × 160 px; 120 px without a view), 45°
/// apart starting from the left, and the ring after that at two thirds of that distance, turned
/// by 22.5°. So three fairies invited in a row never stand (and label themselves) on one spot.
pub fn spawn_point(anchor: (f64, f64), view: Option<(f64, f64)>, index: usize) -> (f64, f64) {
    if index == 0 {
        return anchor;
    }
    let (rx, ry) = view.map_or((120.0, 120.0), |(w, h)| {
        ((w / 4.0).clamp(40.0, 240.0), (h / 4.0).clamp(40.0, 160.0))
    });
    let slot = (index - 1) % SPAWN_RING;
    let ring = (index - 1) / SPAWN_RING % 2;
    let scale = if ring == 0 { 1.0 } else { 2.0 / 3.0 };
    let angle = std::f64::consts::PI
        + slot as f64 * std::f64::consts::TAU / SPAWN_RING as f64
        + ring as f64 * std::f64::consts::PI / SPAWN_RING as f64;
    let x = anchor.0 + rx * scale * angle.cos();
    let y = anchor.1 + ry * scale * angle.sin();
    ((x * 100.0).round() / 100.0, (y * 100.0).round() / 100.0)
}

/// A flight from one point to another, sampled once per tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Flight {
    from: (f64, f64),
    to: (f64, f64),
    step: u32,
    steps: u32,
}

impl Flight {
    /// A flight whose length in updates follows the distance.
    pub fn new(from: (f64, f64), to: (f64, f64)) -> Self {
        let distance = (to.0 - from.0).hypot(to.1 - from.1);
        let seconds = if distance.is_finite() {
            distance / FLIGHT_SPEED
        } else {
            0.0
        };
        let steps = (seconds * f64::from(FLIGHT_HZ)).ceil();
        let steps = if steps.is_finite() {
            (steps as u32).clamp(MIN_FLIGHT_STEPS, MAX_FLIGHT_STEPS)
        } else {
            MAX_FLIGHT_STEPS
        };
        Flight {
            from,
            to,
            step: 0,
            steps,
        }
    }

    /// Whether the destination is left of the start (the fairy faces left).
    pub fn flips(&self) -> bool {
        self.to.0 < self.from.0
    }

    /// The next position (eased in and out), or `None` once arrived.
    pub fn next_position(&mut self) -> Option<(f64, f64)> {
        if self.step >= self.steps {
            return None;
        }
        self.step += 1;
        let t = f64::from(self.step) / f64::from(self.steps);
        let eased = t * t * (3.0 - 2.0 * t);
        Some((
            self.from.0 + (self.to.0 - self.from.0) * eased,
            self.from.1 + (self.to.1 - self.from.1) * eased,
        ))
    }

    /// The destination.
    pub fn destination(&self) -> (f64, f64) {
        self.to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_has_every_spec_key() {
        let id = FairyId::parse("f1").unwrap_or_else(|e| panic!("{e}"));
        let mut p = Presence::new(&id, "Pip", 1.234, 5.0);
        p.todo.push(TodoItem {
            id: "1".into(),
            text: "walls".into(),
            status: TaskStatus::Todo,
        });
        let s = p.to_state();
        for key in [
            "id",
            "name",
            "x",
            "y",
            "mode",
            "pose",
            "flip",
            "projectId",
            "taskId",
            "todo",
            "tasks",
            "thinking",
            "lastMessage",
        ] {
            assert!(s["fairy"].get(key).is_some(), "{key}");
        }
        assert_eq!(s["fairy"]["x"], json!(1.23));
        assert_eq!(s["fairy"]["pose"], json!("idle"));
        assert_eq!(s["fairy"]["todo"][0]["status"], json!("todo"));
    }

    #[test]
    fn spawn_points_spread_around_the_view_and_repeat_deterministically() {
        let centre = (1000.0, 500.0);
        let view = Some((1400.0, 900.0));
        let points: Vec<(f64, f64)> = (0..3).map(|i| spawn_point(centre, view, i)).collect();
        assert_eq!(points[0], centre);
        assert_eq!(points[1], (760.0, 500.0), "the second to the left");
        for (i, a) in points.iter().enumerate() {
            // Inside the view, and far enough apart for their name labels.
            assert!((a.0 - centre.0).abs() <= 700.0 && (a.1 - centre.1).abs() <= 450.0);
            for b in &points[i + 1..] {
                assert!((a.0 - b.0).hypot(a.1 - b.1) >= 100.0, "{a:?} {b:?}");
            }
        }
        let many: Vec<(f64, f64)> = (0..17).map(|i| spawn_point(centre, view, i)).collect();
        for (i, a) in many.iter().enumerate() {
            assert!(!many[i + 1..].contains(a), "{i}: {a:?} repeats");
        }
        assert_eq!(spawn_point((100.0, 100.0), None, 0), (100.0, 100.0));
        assert_eq!(spawn_point((100.0, 100.0), None, 1), (-20.0, 100.0));
    }

    #[test]
    fn flights_are_smooth_and_end_at_the_destination() {
        let mut f = Flight::new((0.0, 0.0), (-3000.0, 0.0));
        assert!(f.flips());
        let mut last = 0.0_f64;
        let mut n = 0;
        while let Some((x, _)) = f.next_position() {
            assert!(x <= last, "monotonic");
            assert!(last - x <= 3000.0 / 2.0, "no jump");
            last = x;
            n += 1;
        }
        assert_eq!(n, 20);
        assert_eq!(last, -3000.0);
        let mut short = Flight::new((0.0, 0.0), (1.0, 1.0));
        assert_eq!(std::iter::from_fn(|| short.next_position()).count(), 3);
        let mut bad = Flight::new((0.0, 0.0), (f64::NAN, 0.0));
        assert!(bad.next_position().is_some());
    }
}
