//! `interrupt({input, mode})` (docs/fairies.md): what an interrupt carries, how a newer interrupt merges
//! into one not handled yet, and carrying one out on a runtime: the active request is aborted
//! (its host dropped the request future, which aborts the model stream; the incomplete tentative
//! action is reverted and `on_prompt_cancel` runs), the mode is switched if one is given (exit
//! hook of the old mode, then enter hook of the new one), and the input is scheduled. An
//! interrupt always succeeds: it is delivered through [`crate::agent::host::inbox`], which never refuses one.

use super::FairyRuntime;
use crate::agent::runtime::events::EndReason;
use crate::agent::state::Interrupt;
use crate::agent::state::Request;

impl FairyRuntime {
    /// Carries out an interrupt once the active request's future (if any) was dropped: aborts
    /// the request (reverting its incomplete action; it ends `interrupted` when there is new
    /// input, keeping the fairy's mode and task, and `cancelled` otherwise, after
    /// `on_prompt_cancel`), switches mode if asked, schedules the input, and returns
    /// the request to run next (the input, merged with anything a mode hook scheduled).
    pub fn interrupt(&mut self, interrupt: Interrupt) -> Option<Request> {
        let Interrupt { input, mode } = interrupt;
        match input {
            Some(_) => self.abort(EndReason::Interrupted),
            None => self.abort(EndReason::Cancelled),
        }
        if let Some(mode) = mode {
            self.switch_mode(mode);
            // Joins the live project of a project mode, leaves its project otherwise.
            self.projects
                .after_switch(self.modes.mode(), &mut self.state);
            self.refresh_tasks();
            self.persist();
        }
        if let Some(input) = input {
            self.schedule(input);
        }
        self.scheduled.take()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::broadcast;

    use super::*;
    use crate::agent::actions::runtime::full_registry;
    use crate::agent::modes::Mode;
    use crate::agent::modes::ModeMachine;
    use crate::agent::runtime::events::AgentEvent;
    use crate::agent::state::RuntimeConfig;
    use crate::agent::state::fairy::{FairyEntity, insert_fairy};
    use crate::agent::state::memory::HistoryItem;
    use crate::agent::state::{MAX_MERGED_MESSAGES, SoloTask};
    use crate::ids::RoomName;
    use crate::room::{RoomConfig, Rooms};

    fn user(message: &str) -> Request {
        Request {
            messages: vec![message.into()],
            source: "user".into(),
            ..Request::default()
        }
    }

    #[test]
    fn later_inputs_append_a_cancel_drops_and_the_later_mode_wins() {
        let mut pending = Interrupt {
            input: Some(user("a")),
            mode: Some(Mode::Soloing),
        };
        pending.merge(Interrupt {
            input: Some(user("b")),
            mode: None,
        });
        assert_eq!(pending.mode, Some(Mode::Soloing));
        assert_eq!(pending.input.as_ref().map(|r| r.messages.len()), Some(2));
        pending.merge(Interrupt {
            input: None,
            mode: Some(Mode::StandingBy),
        });
        assert_eq!(
            pending.input, None,
            "a later cancel drops input not started"
        );
        assert_eq!(pending.mode, Some(Mode::StandingBy));
        pending.merge(Interrupt {
            input: Some(user("c")),
            mode: None,
        });
        assert_eq!(pending.input, Some(user("c")));
        assert_eq!(pending.mode, Some(Mode::StandingBy));
    }

    #[test]
    fn a_burst_keeps_the_last_messages_only() {
        let mut pending = Interrupt::default();
        for i in 0..100 {
            pending.merge(Interrupt {
                input: Some(user(&i.to_string())),
                mode: None,
            });
        }
        let messages = pending.input.map(|r| r.messages).unwrap_or_default();
        assert_eq!(messages.len(), MAX_MERGED_MESSAGES);
        assert_eq!(messages.last().map(String::as_str), Some("99"));
        assert_eq!(messages.first().map(String::as_str), Some("84"));
    }

    async fn runtime(rooms: &Rooms, mode: Mode) -> (FairyRuntime, broadcast::Receiver<AgentEvent>) {
        let name = RoomName::parse("interrupts").unwrap_or_else(|e| panic!("{e}"));
        let room = rooms.get(&name).await.unwrap_or_else(|e| panic!("{e}"));
        let entity = FairyEntity::invite(Some("Pip"), None, None, "tester")
            .unwrap_or_else(|e| panic!("{e}"));
        insert_fairy(room.doc(), &entity);
        let (events, rx) = broadcast::channel(64);
        let saver = crate::agent::state::store::StateSaver::spawn(
            room.store().clone(),
            room.name().clone(),
            entity.id.clone(),
        );
        let mut rt = FairyRuntime::new(
            room,
            entity,
            Arc::new(crate::llm::offline::OfflineModel),
            Arc::new(full_registry()),
            RuntimeConfig::default(),
            crate::agent::runtime::Hosting::new(events),
            saver,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        rt.modes = ModeMachine::new(mode);
        rt.state.mode = mode;
        (rt, rx)
    }

    fn drain(rx: &mut broadcast::Receiver<AgentEvent>) -> Vec<AgentEvent> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    fn changed(mode: Mode) -> AgentEvent {
        AgentEvent::ModeChanged {
            mode: mode.name().into(),
        }
    }

    /// The stored state's todo list.
    async fn stored_todo(rooms: &Rooms, rt: &FairyRuntime) -> usize {
        rt.state_sync().caught_up().await;
        let stored = crate::agent::state::store::load(
            rooms.store().as_ref(),
            rt.room().name(),
            &rt.entity.id,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        stored.map_or(0, |s| s.todo.len())
    }

    #[tokio::test]
    async fn a_working_fairy_stores_its_state_at_most_every_interval_and_at_once_when_idle() {
        let store = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let (mut rt, _rx) = runtime(&rooms, Mode::Soloing).await;
        let clock = crate::clock::ManualClock::new();
        rt.clock = Arc::new(clock.clone());
        let todo = |n: usize| crate::agent::work::TodoItem {
            id: n.to_string(),
            text: format!("step {n}"),
            status: crate::agent::work::TaskStatus::Todo,
        };
        rt.state.todo.push(todo(1));
        rt.persist();
        assert_eq!(
            stored_todo(&rooms, &rt).await,
            1,
            "the first change is stored"
        );
        // Within the interval: changes wait.
        for n in 2..=5 {
            rt.state.todo.push(todo(n));
            rt.persist();
        }
        assert_eq!(stored_todo(&rooms, &rt).await, 1);
        // The next change after the interval takes them along.
        clock.advance(super::super::PERSIST_EVERY);
        rt.state.todo.push(todo(6));
        rt.persist();
        assert_eq!(stored_todo(&rooms, &rt).await, 6);
        // Going idle stores what waits.
        rt.state.todo.push(todo(7));
        rt.persist();
        assert_eq!(stored_todo(&rooms, &rt).await, 6);
        rt.flush_state();
        assert_eq!(stored_todo(&rooms, &rt).await, 7);
    }

    #[tokio::test]
    async fn an_interrupt_cancels_then_switches_then_schedules() {
        let store = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let (mut rt, mut rx) = runtime(&rooms, Mode::Soloing).await;
        rt.state.working = true;
        let next = rt.interrupt(Interrupt {
            input: Some(user("now this")),
            mode: Some(Mode::StandingBy),
        });
        assert_eq!(
            drain(&mut rx),
            vec![
                AgentEvent::RequestEnded {
                    reason: EndReason::Interrupted
                },
                changed(Mode::StandingBy),
            ],
            "new input keeps the mode (no on_prompt_cancel): the request's end, then the switch"
        );
        assert_eq!(next, Some(user("now this")));
        assert_eq!(rt.state.mode, Mode::StandingBy);
        assert!(!rt.state.working);

        // Idle in working-solo with its task done: the exit hook writes the memory transition
        // before the new mode is entered; a cancel schedules nothing.
        rt.modes = ModeMachine::new(Mode::WorkingSolo);
        rt.state.tasks.push(SoloTask {
            id: "t1".into(),
            title: "t".into(),
            text: String::new(),
            status: crate::agent::work::TaskStatus::Done,
            bounds: None,
        });
        rt.state.current_task = Some("t1".into());
        let next = rt.interrupt(Interrupt {
            input: None,
            mode: Some(Mode::Soloing),
        });
        assert_eq!(next, None);
        assert_eq!(drain(&mut rx), vec![changed(Mode::Soloing)]);
        assert!(matches!(
            rt.state.history.last(),
            Some(HistoryItem::MemoryTransition { agent_facing_message, .. })
                if agent_facing_message.contains("t1")
        ));
        assert_eq!(rt.state.current_task, None);
        rooms.shutdown().await;
        drop(rt);
    }

    #[tokio::test]
    async fn a_prompt_to_a_solo_fairy_mid_task_keeps_its_mode_and_task_a_cancel_does_not() {
        let store = Arc::new(crate::store::memory::MemoryStore::default());
        let config = RoomConfig::from_serve(&crate::config::ServeConfig::for_test());
        let rooms = Rooms::new(store, config, 4);
        let (mut rt, mut rx) = runtime(&rooms, Mode::WorkingSolo).await;
        rt.state.tasks.push(SoloTask {
            id: "t1".into(),
            title: "t".into(),
            text: String::new(),
            status: crate::agent::work::TaskStatus::InProgress,
            bounds: None,
        });
        rt.state.current_task = Some("t1".into());
        rt.state.working = true;
        let next = rt.interrupt(Interrupt {
            input: Some(user("also add a door")),
            mode: None,
        });
        assert_eq!(next, Some(user("also add a door")));
        assert_eq!(rt.modes.mode(), Mode::WorkingSolo);
        assert_eq!(rt.state.current_task.as_deref(), Some("t1"));
        assert_eq!(
            drain(&mut rx),
            vec![AgentEvent::RequestEnded {
                reason: EndReason::Interrupted
            }]
        );
        rt.state.working = true;
        assert_eq!(rt.interrupt(Interrupt::default()), None);
        assert_eq!(
            rt.modes.mode(),
            Mode::Idling,
            "a plain cancel runs on_prompt_cancel"
        );
        rooms.shutdown().await;
        drop(rt);
    }
}
