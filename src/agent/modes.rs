//! Fairy modes (docs/fairies.md): a state machine whose modes each declare a memory level, whether the
//! fairy is active (working on a request) in it, the actions the model may use, and lifecycle
//! hooks (`on_enter`, `on_exit`, `on_prompt_start`, `on_prompt_end`, `on_prompt_cancel`).
//!
//! Hooks are pure: they look at a [`HookCtx`] and return [`ModeEffect`]s that the runtime
//! carries out (switching mode, scheduling a follow-up, writing a memory transition), so the
//! machine is tested without a room or a model. The project modes' actions are carried out by
//! [`super::projects`].
//!
//! Deviation from the seed, on purpose: the seed's soloing mode may only plan (create and start
//! tasks); here soloing may also draw directly, because a single request like "draw a house"
//! (and the offline model) answers with canvas actions at once. Planning with solo tasks still
//! works as in the seed (soloing → working-solo → soloing).

use serde::{Deserialize, Serialize};

pub use super::mode_hooks::{HookCtx, MAX_SWITCHES, ModeEffect, ModeHooks, ModeMachine, Outcome};

/// How far back a mode's prompt sees the chat history (the seed's `FairyMemoryLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryLevel {
    /// Long-term: everything said outside projects and tasks.
    Fairy,
    /// A project's history, up to the last fairy-level item.
    Project,
    /// The current task's history only.
    Task,
}

/// Every mode of the seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Waiting for a prompt.
    Idling,
    /// Working alone on a user's request.
    Soloing,
    /// Working alone on one of its solo tasks.
    WorkingSolo,
    /// A project member waiting for its orchestrator.
    StandingBy,
    /// A project member working on its task.
    WorkingDrone,
    /// An orchestrator doing a task itself.
    WorkingOrchestrator,
    /// An orchestrator planning and directing.
    OrchestratingActive,
    /// An orchestrator waiting for tasks to complete.
    OrchestratingWaiting,
    /// One of a duo, planning and directing.
    DuoOrchestratingActive,
    /// One of a duo, waiting for tasks to complete.
    DuoOrchestratingWaiting,
}

/// Canvas actions (the `actions` module's registry; the list lives there).
pub use super::actions::CANVAS_ACTIONS;

const SOLOING: &[&str] = &[
    "message",
    "think",
    "review",
    "upsert-personal-todo",
    "fly-to-bounds",
    "create-solo-task",
    "start-solo-task",
];
const WORKING_SOLO: &[&str] = &[
    "mark-solo-task-done",
    "think",
    "message",
    "upsert-personal-todo",
];
const WORKING_DRONE: &[&str] = &["mark-drone-task-done", "think", "upsert-personal-todo"];
const WORKING_ORCHESTRATOR: &[&str] = &["mark-duo-task-done", "think", "upsert-personal-todo"];
const DUO_ORCHESTRATING: &[&str] = &[
    "message",
    "think",
    "review",
    "fly-to-bounds",
    "start-duo-project",
    "create-duo-task",
    "direct-to-start-duo-task",
    "start-duo-task",
    "await-duo-tasks-completion",
    "end-duo-project",
    "abort-project",
];
const ORCHESTRATING: &[&str] = &[
    "message",
    "think",
    "review",
    "fly-to-bounds",
    "start-project",
    "create-project-task",
    "direct-to-start-project-task",
    "await-tasks-completion",
    "end-project",
    "abort-project",
];
const WAITING: &[&str] = &[];

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 10] = [
        Mode::Idling,
        Mode::Soloing,
        Mode::WorkingSolo,
        Mode::StandingBy,
        Mode::WorkingDrone,
        Mode::WorkingOrchestrator,
        Mode::OrchestratingActive,
        Mode::OrchestratingWaiting,
        Mode::DuoOrchestratingActive,
        Mode::DuoOrchestratingWaiting,
    ];

    /// The kebab-case name (as in awareness and the API).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Idling => "idling",
            Mode::Soloing => "soloing",
            Mode::WorkingSolo => "working-solo",
            Mode::StandingBy => "standing-by",
            Mode::WorkingDrone => "working-drone",
            Mode::WorkingOrchestrator => "working-orchestrator",
            Mode::OrchestratingActive => "orchestrating-active",
            Mode::OrchestratingWaiting => "orchestrating-waiting",
            Mode::DuoOrchestratingActive => "duo-orchestrating-active",
            Mode::DuoOrchestratingWaiting => "duo-orchestrating-waiting",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Its memory level (as in the seed's mode definitions).
    pub fn memory_level(self) -> MemoryLevel {
        match self {
            Mode::Idling | Mode::Soloing => MemoryLevel::Fairy,
            Mode::WorkingSolo | Mode::WorkingDrone | Mode::WorkingOrchestrator => MemoryLevel::Task,
            _ => MemoryLevel::Project,
        }
    }

    /// Whether the fairy works on requests in this mode.
    pub fn is_active(self) -> bool {
        !matches!(
            self,
            Mode::Idling
                | Mode::StandingBy
                | Mode::OrchestratingWaiting
                | Mode::DuoOrchestratingWaiting
        )
    }

    /// The runtime (non-canvas) actions the model may use.
    fn runtime_actions(self) -> &'static [&'static str] {
        match self {
            Mode::Idling | Mode::Soloing => SOLOING,
            Mode::WorkingSolo => WORKING_SOLO,
            Mode::WorkingDrone => WORKING_DRONE,
            Mode::WorkingOrchestrator => WORKING_ORCHESTRATOR,
            Mode::OrchestratingActive => ORCHESTRATING,
            Mode::DuoOrchestratingActive => DUO_ORCHESTRATING,
            Mode::StandingBy | Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => {
                WAITING
            }
        }
    }

    /// Whether the mode may change the canvas.
    fn draws(self) -> bool {
        matches!(
            self,
            Mode::Idling
                | Mode::Soloing
                | Mode::WorkingSolo
                | Mode::WorkingDrone
                | Mode::WorkingOrchestrator
        )
    }

    /// Whether the fairy works inside a project task's bounds in this mode.
    pub fn in_task_bounds(self) -> bool {
        matches!(self, Mode::WorkingDrone | Mode::WorkingOrchestrator)
    }

    /// Every action the model may write in this mode.
    pub fn allowed_actions(self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = self.runtime_actions().to_vec();
        if self.draws() {
            out.extend_from_slice(&CANVAS_ACTIONS);
        }
        out
    }

    /// Whether `action` may be used in this mode.
    pub fn allows(self, action: &str) -> bool {
        self.runtime_actions().contains(&action)
            || (self.draws() && CANVAS_ACTIONS.contains(&action))
    }

    /// The mode's hooks.
    pub fn hooks(self) -> &'static dyn ModeHooks {
        match self {
            Mode::Idling => &super::mode_hooks::Idling,
            Mode::Soloing => &super::mode_hooks::Soloing,
            Mode::WorkingSolo => &super::mode_hooks::WorkingSolo,
            Mode::StandingBy => &super::mode_hooks::StandingBy,
            Mode::WorkingDrone | Mode::WorkingOrchestrator => &super::mode_hooks::WorkingOnTask,
            Mode::OrchestratingActive | Mode::DuoOrchestratingActive => &super::mode_hooks::Leading,
            Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => {
                &super::mode_hooks::Waiting
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_levels_follow_the_seed() {
        for m in Mode::ALL {
            assert_eq!(Mode::parse(m.name()), Some(m));
            assert_eq!(
                serde_json::to_value(m).ok(),
                Some(serde_json::json!(m.name()))
            );
        }
        assert_eq!(Mode::Idling.memory_level(), MemoryLevel::Fairy);
        assert_eq!(Mode::WorkingSolo.memory_level(), MemoryLevel::Task);
        assert_eq!(Mode::StandingBy.memory_level(), MemoryLevel::Project);
        assert!(!Mode::StandingBy.is_active());
        assert!(Mode::Soloing.is_active());
    }

    #[test]
    fn allowed_actions_per_mode() {
        assert!(Mode::Soloing.allows("create"));
        assert!(Mode::Soloing.allows("create-solo-task"));
        assert!(!Mode::Soloing.allows("mark-solo-task-done"));
        assert!(Mode::WorkingSolo.allows("mark-solo-task-done"));
        assert!(!Mode::WorkingSolo.allows("fly-to-bounds"));
        assert!(!Mode::StandingBy.allows("create"));
        assert!(Mode::StandingBy.allowed_actions().is_empty());
        assert!(!Mode::OrchestratingActive.allows("create"));
        assert!(Mode::WorkingDrone.allows("mark-drone-task-done"));
        assert!(Mode::WorkingDrone.allows("create"));
        assert!(!Mode::WorkingDrone.allows("fly-to-bounds"));
        assert!(Mode::WorkingOrchestrator.allows("mark-duo-task-done"));
        assert!(!Mode::WorkingOrchestrator.allows("mark-drone-task-done"));
        assert!(Mode::DuoOrchestratingActive.allows("start-duo-task"));
        assert!(!Mode::DuoOrchestratingActive.allows("create"));
        assert!(!Mode::OrchestratingActive.allows("start-duo-task"));
        assert!(Mode::OrchestratingWaiting.allowed_actions().is_empty());
        // Every project action is allowed in some mode, and every allowed name is registered.
        let registry = crate::agent::runtime_actions::full_registry();
        for name in crate::agent::projects::actions::PROJECT_ACTIONS {
            assert!(Mode::ALL.iter().any(|m| m.allows(name)), "{name}");
        }
        for m in Mode::ALL {
            for name in m.allowed_actions() {
                assert!(registry.get(name).is_some(), "{name} in {}", m.name());
            }
        }
    }
}
