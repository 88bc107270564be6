//! The lifecycle hooks of the fairy modes: a hook looks at a [`HookCtx`] and returns
//! [`ModeEffect`]s, and [`of`] says which hooks a mode has. The machine that follows the
//! effects is the parent's ([`super::ModeMachine`]). Pure: no room, no model.
//!
//! A child of `modes/`: uses only the parent's plain enums ([`Mode`], [`MemoryLevel`]), never
//! the machine, so the machine's use of the hooks is the one direction between the two files.

use super::{MemoryLevel, Mode};

/// What a hook sees.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookCtx {
    /// The personal todo list has items not done.
    pub open_todo: bool,
    /// The solo task in progress, if any, and whether it has been marked done.
    pub current_task: Option<(String, bool)>,
    /// Solo tasks not done yet (not counting the current one).
    pub pending_tasks: usize,
    /// The project task it works on, if any, and whether it is done.
    pub project_task: Option<(String, bool)>,
}

/// What a hook asks the runtime to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeEffect {
    /// Switch to another mode (running exit and enter hooks).
    SwitchTo(Mode),
    /// Schedule a follow-up request with this agent-facing message.
    Schedule(String),
    /// Write a memory-transition item at this level with this agent-facing message.
    MemoryTransition(MemoryLevel, String),
    /// Empty the personal todo list.
    ClearTodo,
}

/// A mode's lifecycle hooks; every default does nothing.
pub trait ModeHooks: Sync {
    /// The fairy entered this mode.
    fn on_enter(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        Vec::new()
    }
    /// The fairy leaves this mode.
    fn on_exit(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        Vec::new()
    }
    /// A request starts in this mode.
    fn on_prompt_start(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        Vec::new()
    }
    /// A request ended normally in this mode (no follow-up scheduled by the model).
    fn on_prompt_end(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        Vec::new()
    }
    /// A request was cancelled in this mode.
    fn on_prompt_cancel(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        Vec::new()
    }
}

/// The hooks of `mode`.
pub(super) fn of(mode: Mode) -> &'static dyn ModeHooks {
    match mode {
        Mode::Idling => &Idling,
        Mode::Soloing => &Soloing,
        Mode::WorkingSolo => &WorkingSolo,
        Mode::StandingBy => &StandingBy,
        Mode::WorkingDrone | Mode::WorkingOrchestrator => &WorkingOnTask,
        Mode::OrchestratingActive | Mode::DuoOrchestratingActive => &Leading,
        Mode::OrchestratingWaiting | Mode::DuoOrchestratingWaiting => &Waiting,
    }
}

struct Idling;
impl ModeHooks for Idling {
    /// Resting: the todo list of the work it left is dropped.
    fn on_enter(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::ClearTodo]
    }
    /// A prompt wakes an idle fairy: it works alone.
    fn on_prompt_start(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::SwitchTo(Mode::Soloing)]
    }
}

struct Soloing;
impl ModeHooks for Soloing {
    fn on_prompt_end(&self, ctx: &HookCtx) -> Vec<ModeEffect> {
        if ctx.open_todo {
            return vec![ModeEffect::Schedule(
                "Continue: your todo list still has items that are not done.".into(),
            )];
        }
        if ctx.pending_tasks > 0 {
            return vec![ModeEffect::Schedule(
                "Continue: start your next solo task.".into(),
            )];
        }
        vec![ModeEffect::SwitchTo(Mode::Idling)]
    }
    fn on_prompt_cancel(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::SwitchTo(Mode::Idling)]
    }
}

struct WorkingSolo;
impl ModeHooks for WorkingSolo {
    fn on_prompt_end(&self, ctx: &HookCtx) -> Vec<ModeEffect> {
        match &ctx.current_task {
            // Back to soloing, and one more turn there to report or start the next task.
            Some((id, true)) => vec![
                ModeEffect::SwitchTo(Mode::Soloing),
                ModeEffect::Schedule(format!(
                    "You finished the task '{id}'. Start your next task, or tell the user what you did."
                )),
            ],
            None => vec![ModeEffect::SwitchTo(Mode::Soloing)],
            Some((id, false)) => vec![ModeEffect::Schedule(format!(
                "Continue working on task '{id}', and mark it done when it is finished."
            ))],
        }
    }
    fn on_exit(&self, ctx: &HookCtx) -> Vec<ModeEffect> {
        match &ctx.current_task {
            Some((id, true)) => vec![ModeEffect::MemoryTransition(
                MemoryLevel::Fairy,
                format!("I completed the solo task '{id}'."),
            )],
            _ => Vec::new(),
        }
    }
    fn on_prompt_cancel(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::SwitchTo(Mode::Idling)]
    }
}

struct StandingBy;
impl ModeHooks for StandingBy {}

/// The project modes that wait (orchestrating-waiting, duo-orchestrating-waiting): woken by
/// the members who finish the awaited tasks; a cancel keeps them in the project.
struct Waiting;
impl ModeHooks for Waiting {}

/// A project leader planning and directing (orchestrating-active, duo-orchestrating-active):
/// a request that ends without awaiting tasks or ending the project is continued.
struct Leading;
impl ModeHooks for Leading {
    fn on_prompt_end(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::Schedule(
            "Continue the project: direct the tasks that are not started, await the ones in progress, or end the project when everything is done.".into(),
        )]
    }
}

/// A member working on a project task (working-drone, working-orchestrator): continued until
/// it marks the task done (the done action itself moves it on).
struct WorkingOnTask;
impl ModeHooks for WorkingOnTask {
    fn on_prompt_end(&self, ctx: &HookCtx) -> Vec<ModeEffect> {
        match &ctx.project_task {
            Some((id, false)) => vec![ModeEffect::Schedule(format!(
                "Continue working on task '{id}', and mark it done when it is finished."
            ))],
            _ => Vec::new(),
        }
    }
}
