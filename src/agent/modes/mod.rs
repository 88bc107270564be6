//! Fairy modes (docs/fairies.md): a state machine whose modes each declare a memory level, whether the
//! fairy is active (working on a request) in it, the actions the model may use, and lifecycle
//! hooks (`on_enter`, `on_exit`, `on_prompt_start`, `on_prompt_end`, `on_prompt_cancel`).
//!
//! Hooks are pure: they look at a [`HookCtx`] and return [`ModeEffect`]s that the runtime
//! carries out (switching mode, scheduling a follow-up, writing a memory transition), so the
//! machine is tested without a room or a model. This file owns the modes and the
//! [`ModeMachine`] (exit hook of the old mode, then enter hook of the new one, at most
//! [`MAX_SWITCHES`] per event); the hooks themselves are its child `modes/hooks.rs`, which
//! uses this file's enums and nothing else of it. The project modes' actions are carried out by
//! [`super::projects`].
//!
//! Deviation from the seed, on purpose: the seed's soloing mode may only plan (create and start
//! tasks); here soloing may also draw directly, because a single request like "draw a house"
//! (and the offline model) answers with canvas actions at once. Planning with solo tasks still
//! works as in the seed (soloing → working-solo → soloing).

use crate::agent::actions::CANVAS_ACTIONS;
use crate::agent::actions::kinds::{ProjectKind, RuntimeKind, SoloKind};
use serde::{Deserialize, Serialize};

pub use crate::llm::Mode;

mod hooks;

pub use hooks::{HookCtx, ModeEffect, ModeHooks};

/// How far back a mode's prompt sees the chat history (the seed's `FairyMemoryLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum MemoryLevel {
    /// Long-term: everything said outside projects and tasks.
    Fairy,
    /// A project's history, up to the last fairy-level item.
    Project,
    /// The current task's history only.
    Task,
}

// What each mode may do beside drawing: one table of typed actions (the names the model
// writes come from the kinds; a misspelt action cannot be listed).
const MESSAGE: RuntimeKind = RuntimeKind::Solo(SoloKind::Message);
const THINK: RuntimeKind = RuntimeKind::Solo(SoloKind::Think);
const REVIEW: RuntimeKind = RuntimeKind::Solo(SoloKind::Review);
const TODO: RuntimeKind = RuntimeKind::Solo(SoloKind::UpsertPersonalTodo);
const FLY: RuntimeKind = RuntimeKind::Solo(SoloKind::FlyToBounds);
const fn project(kind: ProjectKind) -> RuntimeKind {
    RuntimeKind::Project(kind)
}

const SOLOING: &[RuntimeKind] = &[
    MESSAGE,
    THINK,
    REVIEW,
    TODO,
    FLY,
    RuntimeKind::Solo(SoloKind::CreateSoloTask),
    RuntimeKind::Solo(SoloKind::StartSoloTask),
];
const WORKING_SOLO: &[RuntimeKind] = &[
    RuntimeKind::Solo(SoloKind::MarkSoloTaskDone),
    THINK,
    MESSAGE,
    TODO,
];
const WORKING_DRONE: &[RuntimeKind] = &[project(ProjectKind::MarkDroneTaskDone), THINK, TODO];
const WORKING_ORCHESTRATOR: &[RuntimeKind] = &[project(ProjectKind::MarkDuoTaskDone), THINK, TODO];
const DUO_ORCHESTRATING: &[RuntimeKind] = &[
    MESSAGE,
    THINK,
    REVIEW,
    FLY,
    project(ProjectKind::StartDuoProject),
    project(ProjectKind::CreateDuoTask),
    project(ProjectKind::DirectToStartDuoTask),
    project(ProjectKind::StartDuoTask),
    project(ProjectKind::AwaitDuoTasksCompletion),
    project(ProjectKind::EndDuoProject),
    project(ProjectKind::AbortProject),
];
const ORCHESTRATING: &[RuntimeKind] = &[
    MESSAGE,
    THINK,
    REVIEW,
    FLY,
    project(ProjectKind::StartProject),
    project(ProjectKind::CreateProjectTask),
    project(ProjectKind::DirectToStartProjectTask),
    project(ProjectKind::AwaitTasksCompletion),
    project(ProjectKind::EndProject),
    project(ProjectKind::AbortProject),
];
const WAITING: &[RuntimeKind] = &[];

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
    pub fn runtime_actions(self) -> &'static [RuntimeKind] {
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
        let mut out: Vec<&'static str> = self.runtime_actions().iter().map(|k| k.name()).collect();
        if self.draws() {
            out.extend_from_slice(&CANVAS_ACTIONS);
        }
        out
    }

    /// Whether `action` may be used in this mode.
    pub fn allows(self, action: &str) -> bool {
        match RuntimeKind::parse(action) {
            Some(kind) => self.runtime_actions().contains(&kind),
            None => self.draws() && CANVAS_ACTIONS.contains(&action),
        }
    }
}

/// Longest chain of switches one event may cause (a hook loop is a bug, not a hang).
pub const MAX_SWITCHES: usize = 8;

/// The current mode and the transitions between modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeMachine {
    mode: Mode,
}

impl Default for ModeMachine {
    fn default() -> Self {
        ModeMachine { mode: Mode::Idling }
    }
}

/// What one event did: the modes passed through and the other effects, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Every mode entered, in order.
    pub entered: Vec<Mode>,
    /// Effects other than switches, in order.
    pub effects: Vec<ModeEffect>,
}

impl ModeMachine {
    /// A machine in `mode` (restored state).
    pub fn new(mode: Mode) -> Self {
        ModeMachine { mode }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches to `to` (exit hook of the old mode, then enter hook of the new one), following
    /// any switches the hooks ask for. Switching to the current mode does nothing.
    pub fn switch(&mut self, to: Mode, ctx: &HookCtx) -> Outcome {
        let mut out = Outcome::default();
        self.follow(vec![ModeEffect::SwitchTo(to)], ctx, &mut out);
        out
    }

    /// Runs a hook of the current mode and follows its effects.
    pub fn prompt_start(&mut self, ctx: &HookCtx) -> Outcome {
        self.run(|h| h.on_prompt_start(ctx), ctx)
    }

    /// See [`ModeHooks::on_prompt_end`].
    pub fn prompt_end(&mut self, ctx: &HookCtx) -> Outcome {
        self.run(|h| h.on_prompt_end(ctx), ctx)
    }

    /// See [`ModeHooks::on_prompt_cancel`].
    pub fn prompt_cancel(&mut self, ctx: &HookCtx) -> Outcome {
        self.run(|h| h.on_prompt_cancel(ctx), ctx)
    }

    fn run(
        &mut self,
        hook: impl FnOnce(&dyn ModeHooks) -> Vec<ModeEffect>,
        ctx: &HookCtx,
    ) -> Outcome {
        let mut out = Outcome::default();
        let effects = hook(hooks::of(self.mode));
        self.follow(effects, ctx, &mut out);
        out
    }

    fn follow(&mut self, effects: Vec<ModeEffect>, ctx: &HookCtx, out: &mut Outcome) {
        let mut queue: std::collections::VecDeque<ModeEffect> = effects.into();
        let mut switches = 0;
        while let Some(effect) = queue.pop_front() {
            match effect {
                ModeEffect::SwitchTo(to) if to != self.mode && switches < MAX_SWITCHES => {
                    switches += 1;
                    let exit = hooks::of(self.mode).on_exit(ctx);
                    self.mode = to;
                    out.entered.push(to);
                    let enter = hooks::of(to).on_enter(ctx);
                    for e in exit.into_iter().chain(enter).rev() {
                        queue.push_front(e);
                    }
                }
                ModeEffect::SwitchTo(_) => {}
                other => out.effects.push(other),
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
        let registry = crate::agent::actions::runtime::full_registry();
        for kind in ProjectKind::ALL {
            assert!(
                Mode::ALL.iter().any(|m| m.allows(kind.name())),
                "{}",
                kind.name()
            );
        }
        // A canvas action's name is never a runtime action's.
        for name in CANVAS_ACTIONS.iter() {
            assert_eq!(RuntimeKind::parse(name), None, "{name}");
        }
        for m in Mode::ALL {
            for name in m.allowed_actions() {
                assert!(registry.get(name).is_some(), "{name} in {}", m.name());
            }
        }
    }

    #[test]
    fn a_prompt_wakes_an_idle_fairy_and_it_rests_when_done() {
        let mut m = ModeMachine::default();
        let ctx = HookCtx::default();
        let out = m.prompt_start(&ctx);
        assert_eq!(out.entered, vec![Mode::Soloing]);
        assert_eq!(m.mode(), Mode::Soloing);
        let busy = HookCtx {
            open_todo: true,
            ..HookCtx::default()
        };
        let out = m.prompt_end(&busy);
        assert!(matches!(out.effects.as_slice(), [ModeEffect::Schedule(_)]));
        assert_eq!(m.mode(), Mode::Soloing);
        let out = m.prompt_end(&ctx);
        assert_eq!(out.entered, vec![Mode::Idling]);
    }

    #[test]
    fn solo_tasks_go_back_to_soloing_with_a_memory_transition() {
        let mut m = ModeMachine::new(Mode::WorkingSolo);
        let unfinished = HookCtx {
            current_task: Some(("t1".into(), false)),
            ..HookCtx::default()
        };
        let out = m.prompt_end(&unfinished);
        assert!(out.entered.is_empty());
        assert!(matches!(out.effects.as_slice(), [ModeEffect::Schedule(s)] if s.contains("t1")));
        let done = HookCtx {
            current_task: Some(("t1".into(), true)),
            ..HookCtx::default()
        };
        let out = m.prompt_end(&done);
        assert_eq!(out.entered, vec![Mode::Soloing]);
        assert_eq!(
            out.effects[0],
            ModeEffect::MemoryTransition(
                MemoryLevel::Fairy,
                "I completed the solo task 't1'.".into()
            )
        );
        assert!(matches!(&out.effects[1], ModeEffect::Schedule(s) if s.contains("t1")));
    }

    #[test]
    fn cancel_goes_idle_and_self_switches_are_no_ops() {
        let mut m = ModeMachine::new(Mode::WorkingSolo);
        let out = m.prompt_cancel(&HookCtx::default());
        assert_eq!(out.entered, vec![Mode::Idling]);
        let out = m.switch(Mode::Idling, &HookCtx::default());
        assert!(out.entered.is_empty());
        let mut s = ModeMachine::new(Mode::StandingBy);
        assert_eq!(s.prompt_end(&HookCtx::default()), Outcome::default());
    }
}
