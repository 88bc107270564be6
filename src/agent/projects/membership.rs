//! Project membership as plain functions of a fairy's state and the room's projects, for the runtime
//! (see [`crate::agent::runtime`]'s `project` folder for joining, leaving and resuming on a
//! runtime): whether a fairy found working after a restart resumes its part, and the request
//! that sends a member to work on a task.

use super::book::RoomProjects;
use super::doc::ProjectTask;
use crate::agent::state::{FairyState, Request};
use crate::agent::work::is_project_mode;

/// Whether a fairy found working after a restart keeps its mode (a member of a live project)
/// instead of going idle.
pub fn resumes_after_restart(state: &FairyState, projects: Option<&RoomProjects>) -> bool {
    is_project_mode(state.mode)
        && state
            .project
            .as_ref()
            .zip(projects)
            .and_then(|(m, projects)| projects.project(&m.project_id))
            .is_some_and(|p| p.status.is_live())
}

/// The request that sends a member to work on `task`.
pub fn task_request(task: &ProjectTask) -> Request {
    Request {
        messages: vec![format!(
            "Your task '{}': {}\n{}",
            task.id, task.title, task.text
        )],
        bounds: Some(task.bounds()),
        selected: Vec::new(),
        source: "self".into(),
        ids: Vec::new(),
        from_user: None,
        apply: None,
    }
}
