//! What rooms and fairies hand over, written to the store's outbox.
//!
//! Owns the per-room coalescing cells of `room.updated` (a room's committer adds each commit's
//! sequence numbers and actors under a short lock: nothing queues per update, so a busy room
//! costs one cell however many updates it commits), the bounded queue of the other events, and
//! the one task that turns due cells and queued events into outbox rows and wakes the delivery.
//! It must not touch rooms or documents, nor wait on anything in the callers' paths.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::events::{ActorRef, Event, EventData};
use crate::ids::RoomName;
use crate::store::Store;
use crate::store::outbox::OutboxEvent;

/// Events other than `room.updated` waiting to be written (a full queue drops and counts:
/// they are a few per fairy request, so only a store that stopped answering fills it).
const QUEUE: usize = 1024;
/// Distinct actors one `room.updated` names at most (more are left out).
pub(crate) const MAX_ACTORS: usize = 64;
/// A room edited without pause still reports after this many debounce times.
const MAX_WAIT_FACTOR: u32 = 10;
/// Delays between attempts to write an event to the outbox before it is given up (logged and
/// counted as `dropped`).
const STORE_RETRIES: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(500),
    Duration::from_secs(2),
];

/// The updates a room committed since its last `room.updated`.
struct Window {
    from_seq: u64,
    to_seq: u64,
    /// Distinct actors (`None`: the server), at most [`MAX_ACTORS`].
    actors: Vec<Option<Arc<str>>>,
    first: Instant,
    last: Instant,
}

impl Window {
    fn due(&self, debounce: Duration) -> Instant {
        (self.last + debounce).min(self.first + debounce * MAX_WAIT_FACTOR)
    }

    fn add_actor(&mut self, actor: Option<&Arc<str>>) {
        let known = self.actors.iter().any(|a| match (a, actor) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || **a == **b,
            _ => false,
        });
        if !known && self.actors.len() < MAX_ACTORS {
            self.actors.push(actor.cloned());
        }
    }

    fn into_event(self, room: &RoomName) -> Event {
        let mut actors: Vec<ActorRef> = Vec::with_capacity(self.actors.len());
        for actor in self
            .actors
            .iter()
            .map(|a| ActorRef::from_logged(a.as_ref()))
        {
            if !actors.contains(&actor) {
                actors.push(actor);
            }
        }
        Event::new(
            room.as_str(),
            crate::store::now_millis(),
            EventData::RoomUpdated {
                from_seq: self.from_seq,
                to_seq: self.to_seq,
                actors,
            },
        )
    }
}

/// The open windows, and when each may fall due: a window's entry is pushed when it opens and
/// pushed again, later, when it was not due yet at its entry's time (a commit moved it), so a
/// window costs a few heap operations in its life, never a look per commit or a scan of all.
#[derive(Default)]
struct Windows {
    open: HashMap<RoomName, Window>,
    due: BinaryHeap<Reverse<(Instant, RoomName)>>,
}

/// The coalescing cells and the queue (see the module docs).
pub(crate) struct Recorder {
    windows: Mutex<Windows>,
    /// A window opened (the task may be asleep with none).
    opened: Notify,
    queue: mpsc::Sender<Event>,
    debounce: Duration,
}

impl Recorder {
    /// A recorder and the receiving end of its queue (for [`run`]).
    pub fn new(debounce: Duration) -> (Self, mpsc::Receiver<Event>) {
        let (queue, rx) = mpsc::channel(QUEUE);
        (
            Recorder {
                windows: Mutex::new(Windows::default()),
                opened: Notify::new(),
                queue,
                debounce,
            },
            rx,
        )
    }

    fn lock(&self) -> MutexGuard<'_, Windows> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a commit to its room's window (opening one if none is open).
    pub fn committed<'a>(
        &self,
        room: &RoomName,
        first_seq: u64,
        last_seq: u64,
        actors: impl IntoIterator<Item = Option<&'a Arc<str>>>,
    ) {
        let now = Instant::now();
        let opened = {
            let mut windows = self.lock();
            // The room's name is cloned only when its window opens, not for every commit.
            let opened = !windows.open.contains_key(room);
            if opened {
                windows.open.insert(
                    room.clone(),
                    Window {
                        from_seq: first_seq,
                        to_seq: last_seq,
                        actors: Vec::new(),
                        first: now,
                        last: now,
                    },
                );
                windows
                    .due
                    .push(Reverse((now + self.debounce, room.clone())));
            }
            if let Some(window) = windows.open.get_mut(room) {
                window.from_seq = window.from_seq.min(first_seq);
                window.to_seq = window.to_seq.max(last_seq);
                window.last = now;
                for actor in actors {
                    window.add_actor(actor);
                }
            }
            opened
        };
        if opened {
            self.opened.notify_one();
        }
    }

    /// Queues an event (never waits: a full queue drops it, logged and counted).
    pub fn record(&self, event: Event) {
        if let Err(error) = self.queue.try_send(event) {
            let event = match error {
                mpsc::error::TrySendError::Full(event)
                | mpsc::error::TrySendError::Closed(event) => event,
            };
            tracing::error!(id = %event.id, kind = event.data.name(), room = %event.room, "webhook event dropped: queue full or webhooks stopped");
            count("dropped");
        }
    }

    /// Takes the windows due at `now` (all with `everything`); also when the next one may be.
    fn take_due(&self, now: Instant, everything: bool) -> (Vec<Event>, Option<Instant>) {
        let mut guard = self.lock();
        let windows = &mut *guard;
        let mut events = Vec::new();
        if everything {
            windows.due.clear();
            events.extend(windows.open.drain().map(|(room, w)| w.into_event(&room)));
            return (events, None);
        }
        while let Some(Reverse((at, _))) = windows.due.peek()
            && *at <= now
        {
            let Some(Reverse((_, room))) = windows.due.pop() else {
                break;
            };
            let Some(due) = windows.open.get(&room).map(|w| w.due(self.debounce)) else {
                continue;
            };
            if due <= now {
                if let Some(window) = windows.open.remove(&room) {
                    events.push(window.into_event(&room));
                }
            } else {
                windows.due.push(Reverse((due, room)));
            }
        }
        let next = windows.due.peek().map(|Reverse((at, _))| *at);
        (events, next)
    }
}

fn count(reason: &str) {
    crate::metrics::Metrics::count(&crate::metrics::global().webhook_deliveries, reason, 1);
}

/// Writes due windows and queued events to the outbox until `stop`, then everything left.
pub(crate) async fn run(
    recorder: Arc<Recorder>,
    mut queue: mpsc::Receiver<Event>,
    store: Arc<dyn Store>,
    delivery: Arc<Notify>,
    stop: CancellationToken,
) {
    let mut next: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(event) = queue.recv() => {
                write(store.as_ref(), &event).await;
                delivery.notify_one();
            }
            _ = recorder.opened.notified() => {
                // A new window is due a debounce time from now at the earliest.
                let earliest = Instant::now() + recorder.debounce;
                next = Some(next.map_or(earliest, |n| n.min(earliest)));
                continue;
            }
            _ = sleep_until(next) => {}
        }
        let (events, due) = recorder.take_due(Instant::now(), false);
        next = due;
        if !events.is_empty() {
            for event in &events {
                write(store.as_ref(), event).await;
            }
            delivery.notify_one();
        }
    }
    // Shutdown (the rooms have flushed): whatever is open or queued is written now.
    queue.close();
    while let Ok(event) = queue.try_recv() {
        write(store.as_ref(), &event).await;
    }
    let (events, _) = recorder.take_due(Instant::now(), true);
    for event in &events {
        write(store.as_ref(), event).await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Writes one event to the outbox, retrying a store that fails a few times.
async fn write(store: &dyn Store, event: &Event) {
    let body = match serde_json::to_vec(event) {
        Ok(body) => Bytes::from(body),
        Err(error) => {
            tracing::error!(id = %event.id, %error, "webhook event not encoded");
            return;
        }
    };
    let row = OutboxEvent {
        id: event.id.clone(),
        body,
        created_at: event.at,
    };
    let mut retries = STORE_RETRIES.iter();
    loop {
        match store.outbox().push(row.clone()).await {
            Ok(()) => {
                tracing::debug!(id = %event.id, kind = event.data.name(), room = %event.room, "webhook event recorded");
                return;
            }
            Err(error) => match retries.next() {
                Some(delay) => {
                    tracing::warn!(id = %event.id, %error, "webhook event not recorded; retrying");
                    tokio::time::sleep(*delay).await;
                }
                None => {
                    tracing::error!(id = %event.id, kind = event.data.name(), room = %event.room, %error, "webhook event lost: the store did not take it");
                    count("dropped");
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(name: &str) -> RoomName {
        RoomName::parse(name).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_covers_every_commit_until_the_room_is_quiet() {
        let (recorder, _rx) = Recorder::new(Duration::from_millis(100));
        let ana: Arc<str> = Arc::from(r#"{"kind":"user","id":"ana"}"#);
        let bob: Arc<str> = Arc::from(r#"{"kind":"user","id":"bob"}"#);
        for seq in 1..=100u64 {
            let actor = if seq % 2 == 0 { &ana } else { &bob };
            recorder.committed(&room("r"), seq, seq, [Some(actor)]);
            tokio::time::advance(Duration::from_millis(50)).await;
        }
        recorder.committed(&room("s"), 1, 2, [None, None]);
        // 5 s of updates 50 ms apart: the max wait (1 s) made it due.
        let (events, next) = recorder.take_due(Instant::now(), false);
        assert_eq!(events.len(), 1);
        match &events[0].data {
            EventData::RoomUpdated {
                from_seq,
                to_seq,
                actors,
            } => {
                assert_eq!((*from_seq, *to_seq), (1, 100));
                assert_eq!(actors.len(), 2);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(next.is_some(), "room s is still open");
        tokio::time::advance(Duration::from_millis(100)).await;
        let (events, next) = recorder.take_due(Instant::now(), false);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].room, "s");
        assert!(
            matches!(&events[0].data, EventData::RoomUpdated { actors, .. } if actors == &vec![ActorRef::server()])
        );
        assert_eq!(next, None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_room_reports_after_the_debounce() {
        let (recorder, _rx) = Recorder::new(Duration::from_millis(100));
        recorder.committed(&room("r"), 1, 1, [None]);
        tokio::time::advance(Duration::from_millis(60)).await;
        recorder.committed(&room("r"), 2, 3, [None]);
        tokio::time::advance(Duration::from_millis(60)).await;
        assert!(
            recorder.take_due(Instant::now(), false).0.is_empty(),
            "an update 60 ms ago"
        );
        tokio::time::advance(Duration::from_millis(40)).await;
        let (events, _) = recorder.take_due(Instant::now(), false);
        assert!(matches!(
            events[0].data,
            EventData::RoomUpdated {
                from_seq: 1,
                to_seq: 3,
                ..
            }
        ));
    }

    #[test]
    fn a_window_names_at_most_max_actors() {
        let now = Instant::now();
        let mut window = Window {
            from_seq: 1,
            to_seq: 1,
            actors: Vec::new(),
            first: now,
            last: now,
        };
        let actors: Vec<Arc<str>> = (0..200)
            .map(|i| Arc::from(format!(r#"{{"kind":"user","id":"u{i}"}}"#)))
            .collect();
        for actor in &actors {
            window.add_actor(Some(actor));
            window.add_actor(Some(actor));
        }
        assert_eq!(window.actors.len(), MAX_ACTORS);
    }
}
