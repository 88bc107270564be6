//! Fairies working together (docs/fairies.md "Projects"): an orchestrator plans a project,
//! creates tasks with spatial bounds, directs drones to them, waits for them and ends the
//! project; in a duo the leader also works on tasks itself.
//!
//! # Layout
//! - this file: the project vocabulary ([`Role`], [`ProjectStatus`],
//!   [`TaskStatus`]) and a fairy's private membership ([`Membership`]).
//! - [`doc`]: the `projects` and `tasks` roots of the document (the shared truth every browser
//!   sees, and what a restart resumes from).
//! - [`actions`]: the project actions' typed arguments, parsed once, and their schemas.
//! - [`apply`]: carrying them out on a runtime; [`membership`]: joining and leaving a project
//!   (memory transitions, awareness), restart resumption.
//! - [`waits`]: the wait/wake mechanism (`await-tasks-completion`) and the handle a runtime
//!   uses to interrupt the other members ([`waits::Peers`]).
//! - [`guard`]: a working fairy's edits stay in its task's bounds.
//! - [`view`]: what a member sees and may touch (its prompt part, changes and edits in its
//!   task's bounds).
//! - [`prompt`]: the prompt parts `currentProject` (orchestrator and drone views) and the mode
//!   sections.
//! - [`group`]: the hub's side: starting a project from a group prompt, disbanding one, and
//!   refusing users' prompts to busy members.
//!
//! Must not touch sockets or the store: project state lives in the document and in each
//! member's private state (saved by the runtime like the rest of it).

pub mod actions;
pub mod apply;
pub mod doc;
pub mod group;
pub mod guard;
pub mod membership;
pub mod prompt;
pub mod view;
pub mod waits;

use serde::{Deserialize, Serialize};

use super::modes::Mode;

pub use crate::ids::{InvalidProjectId, ProjectId};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
