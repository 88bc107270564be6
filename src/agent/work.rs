//! The vocabulary of a fairy's work, as plain data shared by its private state, its awareness,
//! its actions, the runtime and projects (docs/fairies.md "Projects"): where a task stands (solo
//! and project tasks alike), an item of its personal todo list, a member's role and a project's
//! status, a fairy's membership of a project, and which modes belong to a project. Below every
//! folder of [`crate::agent`]: it imports only [`crate::llm::Mode`] and [`crate::ids`]. No I/O.

use serde::{Deserialize, Serialize};

use crate::ids::ProjectId;
use crate::llm::Mode;

/// A member's part in a project (the design's `FairyProjectRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Plans and directs; does not draw.
    Orchestrator,
    /// Leads a duo: plans, directs its partner, and works on tasks itself.
    DuoOrchestrator,
    /// Works on the tasks it is directed to.
    Drone,
}

impl Role {
    /// The mode a member with this role is in while it plans (leaders) or waits (drones).
    pub fn active_mode(self) -> Mode {
        match self {
            Role::Orchestrator => Mode::OrchestratingActive,
            Role::DuoOrchestrator => Mode::DuoOrchestratingActive,
            Role::Drone => Mode::StandingBy,
        }
    }

    /// The mode a leader waits in.
    pub fn waiting_mode(self) -> Mode {
        match self {
            Role::Orchestrator => Mode::OrchestratingWaiting,
            Role::DuoOrchestrator => Mode::DuoOrchestratingWaiting,
            Role::Drone => Mode::StandingBy,
        }
    }

    /// Whether it leads the project.
    pub fn leads(self) -> bool {
        !matches!(self, Role::Drone)
    }
}

/// Where a project stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProjectStatus {
    /// Started by a group prompt; the orchestrator has not named it yet.
    Planning,
    /// The orchestrator started it.
    Active,
    /// Ended by its orchestrator.
    Done,
    /// Aborted by its orchestrator or disbanded by a user.
    Aborted,
}

impl ProjectStatus {
    /// Planning or active.
    pub fn is_live(self) -> bool {
        matches!(self, ProjectStatus::Planning | ProjectStatus::Active)
    }
}

/// Where a project task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum TaskStatus {
    /// Created, not started.
    Todo,
    /// A member works on it.
    InProgress,
    /// Finished.
    Done,
}

impl TaskStatus {
    /// Reads a status leniently: anything but `in-progress` or `done` (a typo, a number, a
    /// value written by an older build) is `todo`, as the solo actions always read it.
    pub fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(serde_json::from_value(serde_json::Value::deserialize(d)?).unwrap_or(TaskStatus::Todo))
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            TaskStatus::Todo => "todo",
            TaskStatus::InProgress => "in-progress",
            TaskStatus::Done => "done",
        }
    }
}

/// One item of the fairy's personal todo list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TodoItem {
    /// Stable id (the model's, or a generated one).
    pub id: String,
    /// What to do.
    pub text: String,
    /// `todo`, `in-progress` or `done`.
    #[serde(deserialize_with = "TaskStatus::lenient")]
    pub status: TaskStatus,
}

impl TodoItem {
    /// Whether the item still needs work.
    pub fn is_open(&self) -> bool {
        self.status != TaskStatus::Done
    }
}

/// A fairy's membership of a project, in its private state (survives a restart).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Membership {
    /// The project.
    pub project_id: ProjectId,
    /// Its role there.
    pub role: Role,
    /// The project task it works on, if any.
    #[serde(default)]
    pub task_id: Option<String>,
    /// The tasks it waits for (leaders in a waiting mode).
    #[serde(default)]
    pub waiting_for: Vec<String>,
}

/// Whether `mode` belongs to a project.
pub fn is_project_mode(mode: Mode) -> bool {
    matches!(
        mode,
        Mode::StandingBy
            | Mode::WorkingDrone
            | Mode::WorkingOrchestrator
            | Mode::OrchestratingActive
            | Mode::OrchestratingWaiting
            | Mode::DuoOrchestratingActive
            | Mode::DuoOrchestratingWaiting
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_roles() {
        assert!(ProjectStatus::Planning.is_live());
        assert!(!ProjectStatus::Aborted.is_live());
        assert_eq!(
            serde_json::to_value(TaskStatus::InProgress).ok(),
            Some(serde_json::json!("in-progress"))
        );
        assert_eq!(
            Role::DuoOrchestrator.waiting_mode(),
            Mode::DuoOrchestratingWaiting
        );
        assert!(!Role::Drone.leads());
        assert!(is_project_mode(Mode::WorkingDrone));
        assert!(!is_project_mode(Mode::WorkingSolo));
    }
}
