//! What a project member sees and may touch, on the runtime: the `currentProject` part of its
//! prompt (a leader's whole project, a working member's own task), the changes of others
//! limited to its task's bounds while it works on one (so its prompt names no shape outside
//! them), and the bounds of its task that the turn's gate checks its canvas edits against
//! ([`crate::agent::projects::guard`]).

use serde_json::Value;

use crate::agent::apply::changes::{ChangeRecord, ChangeReport};
use crate::agent::prompt::project::ProjectPart;
use crate::agent::runtime::FairyRuntime;
use crate::canvas::geometry::{Bounds, shapes_in_bounds};

impl FairyRuntime {
    /// The bounds of the task it works on, while its mode keeps it inside them.
    pub(in crate::agent::runtime) fn task_bounds(&self) -> Option<Bounds> {
        if !self.modes.mode().in_task_bounds() {
            return None;
        }
        let m = self.state.project.as_ref()?;
        self.projects()?
            .task(&m.project_id, m.task_id.as_deref()?)
            .map(|t| t.bounds())
    }

    /// How its project's canvas actions land, while it is in a live project.
    pub(crate) fn project_apply(&self) -> Option<crate::review::ApplyMode> {
        let m = self.state.project.as_ref()?;
        self.projects()?
            .project(&m.project_id)
            .filter(|p| p.status.is_live())
            .map(|p| p.apply)
    }

    /// The changes report, limited to shapes inside its task's bounds while it works on one.
    pub(crate) fn scope_changes(&self, report: ChangeReport) -> ChangeReport {
        let Some(bounds) = self.task_bounds() else {
            return report;
        };
        let shapes = self.shapes_now();
        let inside: Vec<&str> = shapes_in_bounds(&shapes, &self.state.page_id, &bounds)
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
    pub(crate) fn project_part(&self) -> Option<ProjectPart> {
        let m = self.state.project.as_ref()?;
        let projects = self.projects()?;
        let project = projects.project(&m.project_id)?;
        if self.modes.mode().in_task_bounds() || !m.role.leads() {
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
