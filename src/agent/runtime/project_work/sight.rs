//! What a project member sees and may touch, on the runtime: the `currentProject` part of its
//! prompt (a leader's whole project, a working member's own task), the changes of others
//! limited to its task's bounds while it works on one (so its prompt names no shape outside
//! them), and the bounds of its task that the turn's gate checks its canvas edits against
//! ([`crate::agent::projects::guard`]). Each reads the fairy's mode and membership as the
//! runtime hands them over.

use serde_json::Value;

use super::ProjectWork;
use crate::agent::apply::changes::{ChangeRecord, ChangeReport, ChangeTracker};
use crate::agent::modes::Mode;
use crate::agent::prompt::project::ProjectPart;
use crate::agent::work::Membership;
use crate::canvas::geometry::{Bounds, shapes_in_bounds};

impl ProjectWork {
    /// The bounds of the task it works on, while its `mode` keeps it inside them.
    pub fn task_bounds(&self, mode: Mode, membership: Option<&Membership>) -> Option<Bounds> {
        if !mode.in_task_bounds() {
            return None;
        }
        let m = membership?;
        self.book()?
            .task(&m.project_id, m.task_id.as_deref()?)
            .map(|t| t.bounds())
    }

    /// How its project's canvas actions land, while it is in a live project.
    pub fn apply_mode(&self, membership: Option<&Membership>) -> Option<crate::review::ApplyMode> {
        let m = membership?;
        self.book()?
            .project(&m.project_id)
            .filter(|p| p.status.is_live())
            .map(|p| p.apply)
    }

    /// The changes report, limited to the shapes of page `page_id` inside its task's bounds
    /// while it works on one (the room's shapes read from `tracker`'s live view only then).
    pub fn scope_changes(
        &self,
        (mode, membership): (Mode, Option<&Membership>),
        (tracker, page_id): (&ChangeTracker, &str),
        report: ChangeReport,
    ) -> ChangeReport {
        let Some(bounds) = self.task_bounds(mode, membership) else {
            return report;
        };
        let shapes = tracker.shapes();
        let inside: Vec<&str> = shapes_in_bounds(&shapes, page_id, &bounds)
            .into_iter()
            .map(|s| s.id.as_str())
            .collect();
        let keep = |r: &ChangeRecord| match r {
            ChangeRecord::Added { shape_id, .. } => inside.contains(&shape_id.as_str()),
            ChangeRecord::Removed { .. } => false,
            ChangeRecord::Updated { after, .. } => after
                .get("shapeId")
                .and_then(Value::as_str)
                .is_some_and(|id| inside.contains(&id)),
        };
        ChangeReport {
            users: report.users.into_iter().filter(keep).collect(),
            fairies: report.fairies.into_iter().filter(keep).collect(),
        }
    }

    /// The `currentProject` part of its prompt, while it is in a project.
    pub fn prompt_part(&self, mode: Mode, membership: Option<&Membership>) -> Option<ProjectPart> {
        let m = membership?;
        let projects = self.book()?;
        let project = projects.project(&m.project_id)?;
        if mode.in_task_bounds() || !m.role.leads() {
            let task = m
                .task_id
                .as_deref()
                .and_then(|id| projects.task(&m.project_id, id));
            return Some(ProjectPart::Drone {
                title: project.title,
                task,
            });
        }
        let modes: Vec<(String, String)> = self
            .room
            .presence()
            .into_values()
            .filter_map(|s| {
                let f = s.get("fairy")?;
                Some((f["id"].as_str()?.to_owned(), f["mode"].as_str()?.to_owned()))
            })
            .collect();
        let members = project
            .members
            .iter()
            .map(|member| {
                let mode = modes
                    .iter()
                    .find(|(id, _)| id == member.id.as_str())
                    .map(|(_, mode)| mode.clone())
                    .unwrap_or_default();
                let role = serde_json::to_value(member.role)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                (member.id.to_string(), role, mode)
            })
            .collect();
        Some(ProjectPart::Orchestrator {
            tasks: projects.tasks(&m.project_id),
            project,
            members,
        })
    }
}
