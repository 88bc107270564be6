//! What a project member's prompt shows of its project (the design's prompt parts
//! `CurrentProjectOrchestrator` and `CurrentProjectDrone`) and the mode sections that explain
//! the rules of orchestrating, leading a duo and working on a task. Task bounds are given in
//! the request's model coordinates (offset to the chat origin and rounded, like shapes).

use serde_json::{Value, json};

use crate::agent::modes::Mode;
use crate::agent::projects::doc::{Project, ProjectTask};
use crate::canvas::transform::PromptTransform;

/// The `currentProject` part.
#[derive(Debug, Clone, PartialEq)]
pub enum ProjectPart {
    /// A leader's view: the project, its plan, every task (status, bounds, assignee) and the
    /// members with their modes.
    Orchestrator {
        /// The project.
        project: Project,
        /// Its tasks.
        tasks: Vec<ProjectTask>,
        /// `(member id, role, mode)`.
        members: Vec<(String, String, String)>,
    },
    /// A working member's view: the project's title and its own task in full.
    Drone {
        /// The project's title.
        title: String,
        /// Its task.
        task: Option<ProjectTask>,
    },
}

fn task_json(task: &ProjectTask, t: &PromptTransform) -> Value {
    let (x, y) = t.point_to_model(task.x, task.y);
    json!({
        "id": task.id, "title": task.title, "text": task.text, "status": task.status,
        "assignedTo": task.assigned_to,
        "bounds": {"x": x, "y": y, "w": task.w.round(), "h": task.h.round()},
    })
}

impl ProjectPart {
    /// The part as the model sees it.
    pub fn to_json(&self, t: &PromptTransform) -> Value {
        match self {
            ProjectPart::Orchestrator {
                project,
                tasks,
                members,
            } => json!({
                "id": project.id,
                "title": project.title,
                "description": project.description,
                "plan": project.plan,
                "status": project.status,
                "tasks": tasks.iter().map(|task| task_json(task, t)).collect::<Vec<_>>(),
                "members": members.iter().map(|(id, role, mode)| json!({"id": id, "role": role, "mode": mode})).collect::<Vec<_>>(),
            }),
            ProjectPart::Drone { title, task } => json!({
                "title": title,
                "task": task.as_ref().map(|task| task_json(task, t)),
            }),
        }
    }
}

const ORCHESTRATING: &str = "## Orchestrating a project\n\
You lead a project with other fairies, listed in `currentProject.members`. You do not draw: the \
members do.\n\
- First start the project (`start-project`) with a title, a description and a brief plan: the \
tasks, where each will sit on the canvas, their order, and which can run in parallel.\n\
- Then create every task (`create-project-task`) with the bounds of the canvas area it covers. \
A member working on a task sees and edits only its bounds, so place and size tasks so that each \
can be done coherently: if the outputs of two tasks should overlap (a background and an object \
in front of it), their bounds must overlap. Do not run fully overlapping tasks at the same time; \
a moderate overlap is fine.\n\
- Direct members to tasks (`direct-to-start-project-task`) in the planned order; never yourself.\n\
- Then wait (`await-tasks-completion` with the task ids): you are woken with a message when they \
are all done. Review the canvas, add tasks to fix problems, and when everything is coherent end \
the project (`end-project` with a summary). Abort it (`abort-project`) only if it cannot be done.";

const DUO: &str = "## Leading a duo project\n\
You lead a project with one partner (see `currentProject.members`), and you may work on tasks \
yourself.\n\
- Start the project (`start-duo-project`) with a title, a description and a brief plan.\n\
- Create the tasks (`create-duo-task`) with the bounds each covers: whoever works on a task sees \
and edits only its bounds, so overlapping outputs need overlapping bounds; do not run fully \
overlapping tasks at the same time.\n\
- Direct your partner to a task (`direct-to-start-duo-task`) and start one yourself \
(`start-duo-task`): you then work inside its bounds and mark it done (`mark-duo-task-done`).\n\
- Wait for your partner's tasks (`await-duo-tasks-completion`), review, and end the project \
(`end-duo-project` with a summary).";

const WORKING: &str = "## Working on a project task\n\
Carry out the task you were given (`currentProject.task`). You only see the canvas inside the \
task's bounds, and you may only create or change shapes inside them: edits outside are refused. \
Other members may be working next to you. When the task is finished, mark it done \
(`mark-drone-task-done`, or `mark-duo-task-done` when you lead a duo).";

const WAITING: &str = "## Waiting\n\
You are waiting for the other members of your project; you will be given work or woken when the \
tasks you wait for are done.";

/// The mode's project section, if it is a project mode.
pub fn mode_section(mode: Mode) -> Option<&'static str> {
    match mode {
        Mode::OrchestratingActive => Some(ORCHESTRATING),
        Mode::DuoOrchestratingActive => Some(DUO),
        Mode::WorkingDrone | Mode::WorkingOrchestrator => Some(WORKING),
        Mode::StandingBy | Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => {
            Some(WAITING)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::work::{ProjectStatus, TaskStatus};
    use crate::ids::FairyId;
    use crate::ids::ProjectId;

    #[test]
    fn parts_offset_task_bounds_and_sections_follow_the_mode() {
        let project = ProjectId::random();
        let task = ProjectTask {
            id: "t1".into(),
            project_id: project.clone(),
            title: "roof".into(),
            text: "a red roof".into(),
            assigned_to: FairyId::parse("d").ok(),
            status: TaskStatus::InProgress,
            x: 1100.0,
            y: 1000.4,
            w: 200.0,
            h: 100.0,
            page_id: "page:main".into(),
        };
        let t = PromptTransform::new(1000.0, 1000.0);
        let part = ProjectPart::Drone {
            title: "house".into(),
            task: Some(task.clone()),
        };
        let v = part.to_json(&t);
        assert_eq!(v["task"]["bounds"]["x"], json!(100.0));
        assert_eq!(v["task"]["status"], json!("in-progress"));
        let lead = ProjectPart::Orchestrator {
            project: Project {
                id: Some(project),
                title: "house".into(),
                description: String::new(),
                plan: "walls then roof".into(),
                orchestrator_id: FairyId::parse("o").unwrap_or_else(|e| panic!("{e}")),
                members: Vec::new(),
                color: "blue".into(),
                status: ProjectStatus::Active,
                apply: Default::default(),
            },
            tasks: vec![task],
            members: vec![("d".into(), "drone".into(), "working-drone".into())],
        };
        let v = lead.to_json(&t);
        assert_eq!(v["plan"], json!("walls then roof"));
        assert_eq!(v["tasks"][0]["assignedTo"], json!("d"));
        assert_eq!(v["members"][0]["mode"], json!("working-drone"));
        assert!(mode_section(Mode::OrchestratingActive).is_some_and(|s| s.contains("overlap")));
        assert!(mode_section(Mode::Soloing).is_none());
    }

    #[test]
    fn the_schema_lists_exactly_the_modes_actions() {
        let registry = crate::agent::actions::runtime::full_registry();
        let fairy = crate::agent::state::fairy::FairyEntity {
            id: FairyId::random(),
            name: "Orla".into(),
            personality: "calm".into(),
            hat: "top".into(),
            created_by: "user:a".into(),
            apply: Default::default(),
        };
        let consts = |mode: Mode| -> Vec<String> {
            let s = crate::agent::prompt::system_prompt(
                &fairy,
                mode,
                &registry,
                false,
                &Default::default(),
            );
            s.split("\"const\":\"")
                .skip(1)
                .filter_map(|rest| rest.split('"').next().map(str::to_owned))
                .collect()
        };
        for mode in Mode::ALL {
            let mut want: Vec<String> = mode
                .allowed_actions()
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut got = consts(mode);
            want.sort();
            got.sort();
            assert_eq!(got, want, "{}", mode.name());
        }
        let s = crate::agent::prompt::system_prompt(
            &fairy,
            Mode::WorkingDrone,
            &registry,
            false,
            &Default::default(),
        );
        assert!(s.contains("## Working on a project task"));
        assert!(!s.contains("## Orchestrating a project"));
    }
}
