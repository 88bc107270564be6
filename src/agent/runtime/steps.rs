//! What a stage of the runtime asks the runtime to do once it has done its own part: a
//! runtime action or a project action changes the fairy's own data itself, and hands back the
//! [`Step`]s that reach beyond it (switching mode runs the mode's hooks, a request is
//! scheduled, the fairy says something), in the order they must happen. The runtime carries
//! them out ([`FairyRuntime::follow`]).
//!
//! Writes nothing itself: each step is one of the runtime's own calls.

use super::FairyRuntime;
use super::project_work::Notice;
use crate::agent::modes::Mode;
use crate::agent::projects::waits::Wait;
use crate::agent::state::Request;

/// One thing a stage asks the runtime to do.
#[derive(Debug)]
pub(super) enum Step {
    /// Switch mode (exit and enter hooks in order).
    Switch(Mode),
    /// Merge a follow-up into the pending request.
    Schedule(Request),
    /// Post a chat message as the fairy.
    Say(String),
    /// Tell the model next turn (a refused or malformed action).
    Correct(String),
    /// Republish its tasks, todo and project in awareness.
    RefreshTasks,
    /// The solo task in progress is this one (again after a switch, whose hooks may clear it).
    CurrentTask(String),
    /// Its project task is this one.
    TakeTask(String),
    /// Wait for these project tasks (a leader, once in its waiting mode): woken at once if
    /// they are done already.
    Await(Wait),
    /// Tell its leader (once its own mode changed).
    Notify(Notice),
    /// Leave its project.
    Leave,
}

impl FairyRuntime {
    /// Carries out `steps`, in order.
    pub(super) fn follow(&mut self, steps: Vec<Step>) {
        for step in steps {
            match step {
                Step::Switch(mode) => self.switch_mode(mode),
                Step::Schedule(request) => self.schedule(request),
                Step::Say(text) => self.say(&text),
                Step::Correct(why) => self.feedback.correct(why),
                Step::RefreshTasks => self.refresh_tasks(),
                Step::CurrentTask(id) => self.state.current_task = Some(id),
                Step::TakeTask(id) => {
                    if let Some(own) = &mut self.state.project {
                        own.task_id = Some(id);
                    }
                }
                Step::Await(wait) => {
                    if let Some((mode, request)) = self.projects.register_wait(wait) {
                        self.switch_mode(mode);
                        self.schedule(request);
                    }
                }
                Step::Notify(notice) => self.projects.notify(notice),
                Step::Leave => self.projects.leave(&mut self.state),
            }
        }
    }
}
