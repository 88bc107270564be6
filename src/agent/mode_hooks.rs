//! The lifecycle hooks of the fairy modes and the machine that runs them: a hook looks at a
//! [`HookCtx`] and returns [`ModeEffect`]s; [`ModeMachine`] follows switches (exit hook of the
//! old mode, then enter hook of the new one, at most [`MAX_SWITCHES`] per event) and hands the
//! other effects to the runtime. Pure: no room, no model.

use super::modes::{MemoryLevel, Mode};

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

pub(super) struct Idling;
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

pub(super) struct Soloing;
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

pub(super) struct WorkingSolo;
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

pub(super) struct StandingBy;
impl ModeHooks for StandingBy {}

/// The project modes that wait (orchestrating-waiting, duo-orchestrating-waiting): woken by
/// the members who finish the awaited tasks; a cancel keeps them in the project.
pub(super) struct Waiting;
impl ModeHooks for Waiting {}

/// A project leader planning and directing (orchestrating-active, duo-orchestrating-active):
/// a request that ends without awaiting tasks or ending the project is continued.
pub(super) struct Leading;
impl ModeHooks for Leading {
    fn on_prompt_end(&self, _ctx: &HookCtx) -> Vec<ModeEffect> {
        vec![ModeEffect::Schedule(
            "Continue the project: direct the tasks that are not started, await the ones in progress, or end the project when everything is done.".into(),
        )]
    }
}

/// A member working on a project task (working-drone, working-orchestrator): continued until
/// it marks the task done (the done action itself moves it on).
pub(super) struct WorkingOnTask;
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
        let effects = hook(self.mode.hooks());
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
                    let exit = self.mode.hooks().on_exit(ctx);
                    self.mode = to;
                    out.entered.push(to);
                    let enter = to.hooks().on_enter(ctx);
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
