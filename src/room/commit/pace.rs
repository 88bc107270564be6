//! The pace of a busy room (docs/fairies.md "People and fairies in one room"): its recent rate
//! of updates ([`Pace`]) and how long after a commit began the next may start
//! ([`coalesce_gap`]), so that what a crowd writes meanwhile goes to each peer as one frame.
//! Owns the rule only; the committer ([`super::run`]) keeps the clock.

use std::time::Duration;

use tokio::time::Instant;

use crate::room::Room;

/// Window over which a room's rate of updates is measured.
const RATE_WINDOW: Duration = Duration::from_millis(100);
/// A room holds a commit back only when, at its recent rate, at least this many updates are
/// expected within the gap: below it, holding costs latency and saves few frames.
const COALESCE_MIN_UPDATES: f64 = 3.0;

/// A room's recent rate of updates delivered, and whether it is busy enough to hold a commit
/// back (see [`coalesce_gap`]).
pub(super) struct Pace {
    since: Instant,
    updates: usize,
    per_sec: f64,
}

impl Pace {
    pub(super) fn new(now: Instant) -> Self {
        Pace {
            since: now,
            updates: 0,
            per_sec: 0.0,
        }
    }

    /// Counts a commit of `updates` ending at `now`.
    pub(super) fn committed(&mut self, updates: usize, now: Instant) {
        self.updates += updates;
        let elapsed = now.saturating_duration_since(self.since);
        if elapsed >= RATE_WINDOW {
            self.per_sec = self.updates as f64 / elapsed.as_secs_f64();
            (self.since, self.updates) = (now, 0);
        }
    }

    /// When the next commit may start, if it must wait: only while the room's rate brings at
    /// least [`COALESCE_MIN_UPDATES`] within `gap`, and until `gap` after the last commit began.
    pub(super) fn hold_until(
        &self,
        last_commit: Option<Instant>,
        gap: Duration,
        now: Instant,
    ) -> Option<Instant> {
        if self.per_sec * gap.as_secs_f64() < COALESCE_MIN_UPDATES {
            return None;
        }
        last_commit.map(|at| at + gap).filter(|due| *due > now)
    }
}

/// How long after the start of a busy room's last commit the next may start: each commit is
/// one frame to every peer, and a frame costs each peer a socket write whether it carries one
/// update or ten, so a busy room sends what arrived meanwhile together. The gap grows with the
/// peers (`--coalesce-us-per-peer`: 5 ms for 100 at the default) up to [`MAX_COALESCE`]. Busy:
/// at the rate of its last [`RATE_WINDOW`], at least [`COALESCE_MIN_UPDATES`] updates fall in
/// the gap (100 peers: 600 updates/s); a slower room holds nothing, and an update that arrives
/// after the gap has passed goes at once. Durability still comes first: a held update is
/// committed, then sent.
///
/// [`MAX_COALESCE`]: crate::room::MAX_COALESCE
pub(super) fn coalesce_gap(room: &Room) -> Duration {
    let per_peer = room.config.coalesce_per_peer;
    if per_peer.is_zero() {
        return Duration::ZERO;
    }
    let peers = u32::try_from(room.peer_count()).unwrap_or(u32::MAX);
    per_peer
        .saturating_mul(peers)
        .min(crate::room::MAX_COALESCE)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    /// The numbers in `doc`'s list "list", in order.
    fn numbers(doc: &yrs::Doc) -> Vec<f64> {
        use yrs::{Array, Transact, WriteTxn};
        let mut txn = doc.transact_mut();
        let list = txn.get_or_insert_array("list");
        list.iter(&txn)
            .filter_map(|value| match value {
                yrs::Out::Any(yrs::Any::Number(n)) => n.as_f64(),
                _ => None,
            })
            .collect()
    }

    /// Applies the update frames `rx` receives to `doc` until its list holds `want` numbers;
    /// returns how many update frames that took.
    async fn receive_until(
        rx: &mut tokio::sync::mpsc::Receiver<Bytes>,
        doc: &yrs::Doc,
        want: usize,
    ) -> usize {
        use yrs::sync::{Message, SyncMessage};
        use yrs::{Transact, Update, updates::decoder::Decode};
        let mut frames = 0;
        while numbers(doc).len() < want {
            let frame = tokio::time::timeout(Duration::from_secs(1), rx.recv())
                .await
                .expect("delivered in time")
                .expect("queue open");
            if let Ok(Message::Sync(SyncMessage::Update(update))) = crate::protocol::decode(&frame)
            {
                frames += 1;
                let update = Update::decode_v1(&update).expect("an update");
                doc.transact_mut().apply_update(update).expect("applied");
            }
        }
        frames
    }

    /// A busy room holds a peer's updates back until the coalesce gap after its last commit
    /// has passed and sends them to each peer as one frame, in order; an update after a quiet
    /// spell goes at once.
    #[tokio::test(start_paused = true)]
    async fn a_busy_room_sends_what_arrives_within_the_gap_as_one_frame() {
        use crate::config::ServeConfig;
        use crate::ids::RoomName;
        use crate::room::{PeerInfo, RoomConfig, Rooms};
        use crate::store::Store;
        use crate::store::memory::MemoryStore;
        use yrs::{Array, Doc, Transact, WriteTxn};

        let config = RoomConfig {
            coalesce_per_peer: Duration::from_millis(2),
            ..RoomConfig::from_serve(&ServeConfig::for_test())
        };
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        let rooms = Rooms::new(store, config, 4);
        let room = rooms
            .get(&RoomName::parse("busy").expect("name"))
            .await
            .expect("room");
        let info = |conn| PeerInfo {
            conn,
            name: None,
            sub: format!("u{conn}"),
            can_write: true,
        };
        let (writer, _writer_rx) = room.join(info(1)).expect("join");
        let (_reader, mut reader_rx) = room.join(info(2)).expect("join");
        room.flushed().await;
        while reader_rx.try_recv().is_ok() {}
        // Two peers: a gap of 4 ms. The writer appends 0, 1, … to a list, 0.2 ms apart.
        let source = Doc::with_client_id(77);
        let append = |i: u32| {
            let mut txn = source.transact_mut();
            let list = txn.get_or_insert_array("list");
            let len = list.len(&txn);
            list.insert(&mut txn, len, f64::from(i));
            crate::protocol::update(txn.encode_update_v1())
        };
        let seen = Doc::new();
        // 1,000 updates/s for 120 ms: at least 3 expected within the 4 ms gap of two peers.
        for i in 0..120 {
            writer.handle(&append(i)).await.expect("handled");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        receive_until(&mut reader_rx, &seen, 120).await;
        // Five updates 0.2 ms apart: held, and sent together.
        for i in 120..125 {
            writer.handle(&append(i)).await.expect("handled");
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        let frames = receive_until(&mut reader_rx, &seen, 125).await;
        let expected: Vec<f64> = (0..125).map(f64::from).collect();
        assert_eq!(numbers(&seen), expected, "every update, in order");
        assert!(frames <= 2, "{frames} frames for 5 updates of a busy room");
        // A quiet spell: the next update is not held, nor, the room's rate now low, the one
        // 0.2 ms after it.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for i in 125..127 {
            let sent = Instant::now();
            writer.handle(&append(i)).await.expect("handled");
            assert_eq!(
                receive_until(&mut reader_rx, &seen, i as usize + 1).await,
                1
            );
            assert!(
                sent.elapsed() < Duration::from_millis(1),
                "update {i} held {:?}",
                sent.elapsed()
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        rooms.shutdown().await;
    }
}
